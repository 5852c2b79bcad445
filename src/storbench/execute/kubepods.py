"""The pods of a Kubernetes run once they run (execute/kubewait.py waits for them):
reading files and fio's logs out of them, and the Executor that runs fio in them
through the exec API."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from storbench.execute.base import Execution, FioJob, Progress, parse_status_line
from storbench.execute.kubelabels import SELECTOR
from storbench.execute.kubernetes import ExecResult, Kube
from storbench.execute.kubestatus import LOST, KubeError
from storbench.execute.kubewait import events, pod_problem
from storbench.result.fio_json import combine_outputs


def oom_killed(kube: Kube, namespace: str, pod: str) -> bool:
    """Did the kernel's OOM killer kill a process in the pod's container (cgroup v1/v2)?"""
    try:
        res = kube.exec(namespace, pod, [
            "sh", "-c", "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control"
                        " 2>/dev/null"], deadline_s=30)
    except KubeError:
        return False
    m = re.search(r"oom_kill (\d+)", res.stdout)
    return m is not None and int(m.group(1)) > 0


def read_file(kube: Kube, namespace: str, pod: str, path: str) -> str:
    """A text file in the pod ('' when it cannot be read: fio wrote none)."""
    res = kube.exec(namespace, pod, ["cat", path], deadline_s=120)
    return res.stdout if res.returncode == 0 else ""


_FILE_MARK = "@@storbench-file "
WATCH_S = 2.0  # how often the pods of a running test are asked whether they are going
QUIET_S = 10.0  # fio silent this long, once it spoke: its connection, not its storage


class Heard:
    """What fio in one pod said as it ran (its stdout, in any pieces): when it last said
    anything, and when a status line last showed I/O. Once its jobs run, fio prints a
    status line every second (--eta=always --eta-newline=1), with a rate only when it
    did I/O that second; nothing while it lays out its files. Each status line is given
    to ``on_progress`` as a Progress, when given."""

    def __init__(self, on_progress: Callable[[Progress], None] | None = None) -> None:
        self.on_progress = on_progress
        self.pending = ""
        self.word: float | None = None  # time.monotonic() of its last output
        self.io: float | None = None  # and of its last status line with a rate

    def feed(self, data: str) -> None:
        self.word = now = time.monotonic()
        *lines, self.pending = re.split(r"[\r\n]", self.pending + data)
        for line in lines:
            p = parse_status_line(line)
            if p is not None and p.did_io:
                self.io = now
            if p is not None and self.on_progress is not None:
                self.on_progress(p)

    def quiet_s(self, now: float) -> float | None:
        """How long it has said nothing, where that is QUIET_S or more after it spoke
        (None: it spoke lately, or never did)."""
        return now - self.word if self.word is not None and now - self.word >= QUIET_S \
            else None


def _going(found: Any) -> str:
    """Why a pod as read (None: not found) is going away; '' where it is not."""
    if found is None:
        return "the pod is gone"
    if found.metadata.deletion_timestamp is not None:
        return "the pod is being deleted (by someone else, or its node is going away)"
    return ""


def fetch_logs(kube: Kube, namespace: str, pod: str, workdir: str, prefix: str,
               into: Path) -> None:
    """Copy fio's logs named ``prefix*.log`` from the pod's ``workdir`` into ``into``,
    removing them in the pod."""
    res = kube.exec(namespace, pod, [
        "sh", "-c", f"cd {workdir} && for f in {prefix}*.log; do [ -f \"$f\" ] || continue;"
                    f" echo \"{_FILE_MARK}$f\"; cat \"$f\"; rm -f \"$f\"; done"],
        deadline_s=120)
    if res.timed_out or res.returncode != 0:
        raise KubeError(f"reading fio's logs in pod {namespace}/{pod} failed (exit code"
                        f" {res.returncode}): {res.stderr.strip()}")
    current: list[str] | None = None
    files: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        if line.startswith(_FILE_MARK):
            current = files.setdefault(Path(line[len(_FILE_MARK):]).name, [])
        elif current is not None:
            current.append(line)
    for name, lines in files.items():
        (into / name).write_text("\n".join(lines) + "\n")


class PodExecutor:
    """The Executor for pods: fio started in each job's pod through the exec API, its
    json+ output and per-second logs read back the same way.

    ``jobs_dir`` is where the pods see the job files (a ConfigMap: a job's text is
    there already, under its key), ``work_dir`` a writable directory in each pod
    (fio's working directory: its output and logs). When one pod's fio fails, the
    others are not waited for; a pod that dies with its fio is reported with what
    Kubernetes says about it. A signal ends every exec through ``kube.interrupted``
    (the run's SignalGuard, set as its pods were prepared).
    """

    def __init__(self, kube: Kube, namespace: str, jobs_dir: str,
                 work_dir: str, memory_limit: str | None, logs: Path,
                 shipped: set[str] | None = None) -> None:
        self.shipped = shipped  # the ConfigMap's keys (None: every job is there)
        self.kube = kube
        self.namespace = namespace
        self.jobs_dir = jobs_dir
        self.work_dir = work_dir
        self.memory_limit = memory_limit
        self.logs = logs  # where the pods' logs are copied (in storbench's work directory)
        logs.mkdir(exist_ok=True)

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        heard = {j.worker: Heard(on_progress if i == 0 else None) for i, j in enumerate(jobs)}
        runs = self._start_all(jobs, heard, deadline_s)
        pods = [j.worker for j in jobs]
        wall = max(r.wall_s for r in runs)
        late = [p for p, r in zip(pods, runs, strict=True) if r.timed_out]
        if late and all(r.timed_out or r.returncode == 0 for r in runs):
            now = time.monotonic()
            ios = [h.io for h in heard.values() if h.io is not None]
            quiet = tuple((p, s) for p in late if (s := heard[p].quiet_s(now)) is not None)
            return Execution("", "", -1, wall, timed_out=True, quiet=quiet,
                             idle_s=now - max(ios) if ios else None)
        for pod, res in zip(pods, runs, strict=True):
            self._raise_if_pod_failed(pod, res)
        raws = [read_file(self.kube, self.namespace, j.worker,
                          f"{self.work_dir}/{Path(j.key).stem}.json") for j in jobs]
        raw = raws[0] if len(raws) == 1 else combine_outputs(pods, raws)
        # pods stopped because another one failed give no returncode of their own
        returncode = max((r.returncode for r in runs if not r.timed_out), key=abs, default=-1)
        stderr = "".join(f"[{p}] {r.stderr}" if len(runs) > 1 else r.stderr
                         for p, r in zip(pods, runs, strict=True) if r.stderr)
        log_dir = None
        if len(jobs) == 1:
            fetch_logs(self.kube, self.namespace, pods[0], self.work_dir, "", self.logs)
            log_dir = self.logs
        return Execution(raw, stderr, returncode, wall, log_dir=log_dir)

    def _start_all(self, jobs: list[FioJob], heard: dict[str, Heard],
                   deadline_s: float | None) -> list[ExecResult]:
        """fio in every pod at once, what each says given to ``heard``.
        A pod deleted under its test (the API says so) ends every pod's wait at once:
        its exec stays open until the kubelet has killed fio in it, which on a busy node
        took the test's whole length (60 s, in a full test run beside the other lanes)."""
        failed = threading.Event()
        gone: dict[str, str] = {}
        watched = threading.Event()

        def watch() -> None:
            while not watched.wait(WATCH_S):
                for pod, problem in self._going([j.worker for j in jobs]).items():
                    if pod not in gone:
                        gone[pod] = problem
                        failed.set()

        def one(job: FioJob) -> ExecResult:
            # a job made after the ConfigMap (a curve's next step) is written in the pod
            # first, from an argument (no shell quoting of its text)
            inline = self.shipped is not None and job.key not in self.shipped
            path = f"{self.work_dir if inline else self.jobs_dir}/{job.key}"
            argv = ["fio", "--output-format=json+",
                    f"--output={self.work_dir}/{Path(job.key).stem}.json",
                    "--eta=always", "--eta-newline=1", path]
            write = f'printf "%s" "$1" > {path} && ' if inline else ""
            res = self.kube.exec(
                self.namespace, job.worker,
                ["sh", "-c", f"{write}cd {self.work_dir} && exec " + " ".join(argv), "sh",
                 job.text],
                on_stdout=heard[job.worker].feed, deadline_s=deadline_s,
                should_stop=failed.is_set)  # (a signal: Kube.interrupted ends it)
            if res.returncode != 0 and not res.timed_out:
                failed.set()
            return res

        watcher = threading.Thread(target=watch, name="storbench-pods", daemon=True)
        watcher.start()
        try:
            if len(jobs) == 1:
                runs = [one(jobs[0])]
            else:
                with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
                    runs = list(pool.map(one, jobs))
        finally:
            watched.set()
            watcher.join()
        if gone:
            pod, problem = next(iter(gone.items()))
            raise KubeError(f"pod {self.namespace}/{pod} stopped during the test: {problem}"
                            + events(self.kube, self.namespace, "Pod", pod))
        return runs

    def _going(self, pods: list[str]) -> dict[str, str]:
        """Why each of ``pods`` that is going away is ({} while none is, or the API cannot
        say): one LIST of storbench's pods in the namespace, where a GET of each pod every
        WATCH_S was 25 requests a second with --clients 50 (a pod the LIST lacks is read
        to be sure: its labels are what the LIST selects by)."""
        try:
            with self.kube.call(f"listing the pods in namespace {self.namespace}"):
                items: list[Any] = self.kube.core.list_namespaced_pod(
                    self.namespace, label_selector=SELECTOR).items
        except KubeError:
            return {}
        found = {p.metadata.name: p for p in items}
        return {pod: why for pod in pods if (why := _going(found[pod]) if pod in found
                                             else self._going_alone(pod))}

    def _going_alone(self, pod: str) -> str:
        """Why the pod is going away, read alone ('' while it is not, or the API cannot
        say)."""
        try:
            return _going(self.kube.read("Pod", pod, self.namespace))
        except KubeError:
            return ""

    def _raise_if_pod_failed(self, pod: str, res: ExecResult) -> None:
        """When fio died with its pod (evicted, OOM-killed, deadline), say so."""
        if res.returncode in (0, 1) or res.timed_out:
            return
        try:
            found = self.kube.read("Pod", pod, self.namespace)
        except KubeError:
            found = None
        problem = _going(found) or pod_problem(found)
        if not problem and res.returncode == LOST:
            problem = "the connection to fio ended without an exit status"
        if problem:
            raise KubeError(f"pod {self.namespace}/{pod} stopped during the test: {problem}"
                            + events(self.kube, self.namespace, "Pod", pod))
        if res.returncode == 137 and oom_killed(self.kube, self.namespace, pod):
            raise KubeError(f"fio was OOM-killed in pod {self.namespace}/{pod}: the job needs"
                            f" more memory than the pod's limit ({self.memory_limit or 'none'});"
                            " raise it with --limits memory=2Gi")
