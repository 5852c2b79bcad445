"""A Kubernetes StorageClass as a target: a PVC of the class, pods mounting it, fio
exec'd in the pods test after test, everything deleted at the end.

With ``--clients N``, N pods run each test at the same moment: on one volume when
the access mode is shared (RWX), else each on its own; results per pod and merged
(IOPS and bandwidth summed, percentiles from the merged json+ bins), as for
``--hosts``. Pods are coordinated through the API only (exec), never pod-to-pod.

The run's objects (a ConfigMap with the job files, the PVCs, the pods) are created
in that order and deleted in reverse on success, on failure, on Ctrl-C and on
SIGTERM; each carries the managed-by label and the run's id, so that `storbench k8s
cleanup` finds what a SIGKILLed run left (its pods also stop by themselves at the
run's deadline, activeDeadlineSeconds). Timeouts follow from the suite: the time to
bind the volume and start the pods, then each test's runtime plus a grace period;
--timeout replaces the whole budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError
from storbench.execute import Executor, FioBinary, FioJob, SignalGuard
from storbench.execute.kubecleanup import Created
from storbench.execute.kubepods import PodExecutor, wait_running
from storbench.execute.kubernetes import DELETE_WAIT_S, Kube
from storbench.execute.kubestatus import KubeError
from storbench.target.base import (
    MARGIN_S,
    Deadline,
    InRunDirs,
    Placed,
    Quiet,
    default_deadline,
)
from storbench.target.files import Files, run_file_name
from storbench.target.kubernetes.facts import class_facts, pod_facts
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    JOBS_DIR,
    WORK_DIR,
    KubeOptions,
    capacity_for,
    claim_names,
    configmap_manifest,
    pod_manifest,
    pod_names,
    pvc_manifest,
    quantity_bytes,
)
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec

START_S = 300.0  # bind the volume, schedule, pull the image, start the pods
TEST_GRACE_S = 60.0  # beyond a test's runtime (laying out files, fio's start and end)
PUT_CHUNK = 96 * 1024  # characters of a file put in the pod per exec (an argument: < 128 KiB)
PUT_REFUSED = ("a replay's iolog goes to one pod on a Filesystem volume: leave out"
               " --volume-mode Block and --clients")


def _test_s(t: PlannedTest) -> float:
    """How long a test may take: its runtime and ramp; a size-bound one (etcd's 22 MiB),
    its bytes at 256 KiB/s and its layout, as on any target (an hour only when its
    options say neither runtime nor size)."""
    if t.expected_s:
        return t.expected_s
    return default_deadline(t).seconds - MARGIN_S


@dataclass(frozen=True)
class KubePlan:
    """What one class's run will create, computed before touching the cluster."""

    uid: str
    namespace: str
    plan: Plan
    pods: list[tuple[str, str]]  # (pod, the PVC it mounts)
    jobs: dict[str, str]  # ConfigMap key -> job text, per scheduled invocation and pod
    capacity: str
    budget_s: float  # the whole run, start included
    manifests: list[dict[str, Any]]

    @property
    def scratch(self) -> Path:
        return Path(DATA_DIR) / f"storbench-{self.uid}"


class KubeTarget(Quiet, InRunDirs):
    """A StorageClass: PVC(s) of it and pod(s) that mount them, in one namespace. What a
    crashed run left is found by its label (`storbench k8s cleanup`), not as leftovers
    of the loop's (Quiet)."""

    kind = "kubernetes"
    worker_noun = "pod"
    needs_local_fio = False  # the pods' fio runs the I/O; a local one checks job files

    def __init__(self, options: KubeOptions, shared_file: bool = False,
                 size_given: bool = False) -> None:
        self.o = options
        self.shared_file = shared_file
        self.size_given = size_given  # --size given (a Block volume: else --capacity)
        self.series_logs = options.clients == 1  # several pods: no per-second series
        self.kube: Kube | None = None
        self.sc: Any = None
        self.layout: KubePlan | None = None
        self.created = Created()
        self.environment: dict[str, Any] = {}
        self.started = 0.0
        self.first_test = True
        self.namespace = ""
        self.plan: Plan | None = None
        self.note: Callable[[str], None] = lambda text: None
        self.guard: SignalGuard | None = None
        self.workdir = Path()
        # the storage: fio's files in the run's scratch directory on the volume(s)
        self.files = Files(f"storageclass/{options.storage_class}", shared_file, every="pod",
                           hint="give more, or a smaller --size")

    # -- what it is ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return (f"storageclass/{self.o.storage_class}"
                + (f" x{self.o.clients} pods" if self.o.clients > 1 else ""))

    @property
    def short_name(self) -> str:
        return self.o.storage_class

    def settings(self) -> dict[str, Any]:
        return {"kubernetes": self.o.describe(), "shared_file": self.shared_file}

    def check_options(self) -> None:
        """ConfigError for options that cannot work; no cluster needed."""
        self.o.check()
        if self.shared_file and (self.o.clients == 1 or not self.o.shared_volume):
            raise ConfigError("--shared-file needs --clients N with a shared volume"
                              " (--access-mode RWX)")

    def namespace_offline(self) -> str:
        """--namespace, else the kubeconfig context's, else default (no cluster contact)."""
        if self.o.namespace:
            return self.o.namespace
        try:
            return Kube(self.o.kubeconfig, self.o.context).namespace
        except ConfigError:
            return "default"

    def plan_layout(self, uid: str, plan: Plan, invocations: list[list[FioJob]],
                    namespace: str) -> KubePlan:
        """The volume size, time budget and manifests of a run (no cluster needed)."""
        self.check_options()
        o = self.o
        jobs = {job.key: job.text for jobs in invocations for job in jobs}
        capacity = self.capacity(plan)
        budget = o.timeout_s or START_S + self.before_tests_s(capacity) + sum(
            _test_s(t) + TEST_GRACE_S for _, _, t in plan.schedule())
        pods = list(zip(pod_names(uid, o.clients), claim_names(uid, o), strict=True))
        deadline = int(budget + TEST_GRACE_S)
        manifests = [configmap_manifest(uid, namespace, o, jobs)]
        manifests += [pvc_manifest(uid, namespace, o, capacity, claim)
                      for claim in dict.fromkeys(c for _, c in pods)]
        manifests += [pod_manifest(uid, namespace, o, deadline, pod, claim)
                      for pod, claim in pods]
        return KubePlan(uid, namespace, plan, pods, jobs, capacity, budget, manifests)

    def before_tests_s(self, capacity: str) -> float:
        """How long the run may take before its first test, beyond starting the pods."""
        return 0.0

    def capacity(self, plan: Plan) -> str:
        """The PVC's size: --capacity, else what the suite writes + 25 %."""
        o = self.o
        sharing = o.clients if o.clients > 1 and o.shared_volume else 1  # pods on one volume
        needed, name = self.files.needed(plan, sharing)
        files = self.files.at_once(sharing)  # copies of the test's files on the volume
        capacity = o.capacity or capacity_for(needed)
        have = quantity_bytes(capacity)
        if have is not None and needed > have:
            raise ConfigError(f"--capacity {capacity} is smaller than the"
                              f" {format_bytes_iec(needed)} test {name!r} writes"
                              f"{f' (in its {files} pods)' if files > 1 else ''}; give more, or"
                              " a smaller --size")
        return capacity

    # -- the Target contract -----------------------------------------------------------

    def preflight(self) -> None:
        self.check_options()
        self.kube = Kube(self.o.kubeconfig, self.o.context)
        self.sc = self.kube.storage_class(self.o.storage_class)

    def scratch_path(self, uid: str) -> Path:
        return Path(DATA_DIR) / f"storbench-{uid}"

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.check_options()
        self.capacity(plan)
        if self.sc is None:
            self.preflight()
        kube = self._kube()
        namespace = self.o.namespace or kube.namespace
        missing = kube.missing_permissions(namespace)
        if missing:
            raise KubeError(
                f"in namespace {namespace}, the user of context {kube.context!r} may not:"
                f" {', '.join(missing)}. Nothing was created. Ask for a Role that grants"
                " them (docs/cli.md lists what storbench needs), or choose --namespace.")
        self.namespace = namespace
        self.plan = plan
        self.workdir = workdir  # before_test's layouts: their pod logs go there

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        pods = pod_names(uid, self.o.clients)
        if len(pods) == 1:
            return [FioJob(pods[0], f"t{index:03d}.fio", self._for_pod(jobfile, uid, None)
                           .render())]
        return [FioJob(pod, f"t{index:03d}-p{i}.fio", self._for_pod(jobfile, uid, i).render())
                for i, pod in enumerate(pods)]

    def _for_pod(self, jobfile: JobFile, uid: str, i: int | None) -> JobFile:
        """Pod ``i``'s job file, of several pods (that may share one volume): its own file
        names, or the one shared file; the only pod (None): fio's own names."""
        return self.files.for_worker(jobfile, f"storbench-{uid}",
                                     None if i is None else f"p{i}")

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        if self.environment:
            return self.environment
        assert self.plan is not None
        return class_facts(self._kube(), self.sc, self.o, self.namespace,
                           self.capacity(self.plan))

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        kube = self._kube()
        assert self.plan is not None
        self.note = note
        self.guard = guard  # before_test's layouts stop with the run
        self.layout = kp = self.plan_layout(uid, self.plan, invocations, self.namespace)
        environment = self.describe(None)
        pods = f"{self.o.clients} pods, " if self.o.clients > 1 else ""
        note(f"StorageClass {self.o.storage_class} ({self.sc.provisioner},"
             f" {self.sc.volume_binding_mode}), namespace {kp.namespace}, {pods}PVC"
             f" {kp.capacity}, time limit {kp.budget_s:.0f} s")
        self.started = time.monotonic()
        for manifest in kp.manifests:
            self.created.create(kube, kp.namespace, manifest)
        ready_by = self.started + (kp.budget_s if self.o.timeout_s
                                   else min(START_S, kp.budget_s))
        running = wait_running(kube, kp.namespace, kp.pods, guard, note, ready_by)
        self.environment = pod_facts(kube, kp.namespace, running, kp.pods[0][1], self.o,
                                     environment, self.files_in(kp))
        self.files.say(note, f"pod {kp.pods[0][0]}")

    def files_in(self, kp: KubePlan) -> str:
        """Where fio's files are in the pods (their file system's facts are read there)."""
        return str(kp.scratch)

    def check_put(self) -> None:
        if self.o.clients != 1:
            raise ConfigError(PUT_REFUSED)

    def put_file(self, uid: str, name: str, made: Placed) -> None:
        """Write ``text`` as ``name`` in the run's scratch directory in the pod, from
        arguments of PUT_CHUNK characters each (exec has no stdin here; an argument is at
        most 128 KiB): a replay's iolog. One pod on a Filesystem volume only."""
        self.check_put()
        assert self.layout is not None
        scratch = self.layout.scratch
        pod, path = self.layout.pods[0][0], f"{scratch}/{run_file_name(name)}"
        text = made(lambda n: f"{scratch}/{n}")
        chunk = PUT_CHUNK if text.isascii() else PUT_CHUNK // 4  # UTF-8: up to 4 bytes each
        for start in range(0, max(len(text), 1), chunk):
            into = ">" if start == 0 else ">>"
            res = self._kube().exec(self.namespace, pod, [
                "sh", "-c", f'printf "%s" "$1" {into} {path}', "sh",
                text[start:start + chunk]], deadline_s=120)
            if res.timed_out or res.returncode != 0:
                raise KubeError(f"writing {name} in pod {self.namespace}/{pod} failed (exit"
                                f" code {res.returncode}): {res.stderr.strip()[-300:]}")

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        shipped = set(self.layout.jobs) if self.layout is not None else None
        return PodExecutor(self._kube(), self.namespace, guard, JOBS_DIR, WORK_DIR,
                           dict(self.o.limits).get("memory"), workdir / "pod-logs", shipped)

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        """Between tests: the previous test's files go, those a later test names stay.
        --shared-file: the test's file is then laid out from the first pod alone (every
        pod's fio laying it out at once unlinked the others' copies: sharedlayout)."""
        if self.first_test:
            self.first_test = False
        else:
            self._remove_files(keep)
        if not self.shared_file:
            return
        assert self.layout is not None and self.guard is not None
        guard = self.guard
        self.files.lay_out_first(lambda: self.executor(None, self.workdir, guard),
                                 self.layout.pods[0][0], test,
                                 self._for_pod(test.jobfile, self.layout.uid, 0),
                                 self.deadline(test), "check that the pods can write their"
                                 " volume")

    def _remove_files(self, keep: set[str]) -> None:
        assert self.layout is not None
        script = self.files.remove_script(str(self.layout.scratch), keep)
        pods = [p for p, _ in self.layout.pods]
        for pod in dict.fromkeys(pods if not self.o.shared_volume else pods[:1]):
            res = self._kube().exec(self.namespace, pod, ["sh", "-c", script], deadline_s=120)
            if res.timed_out or res.returncode != 0:
                raise KubeError(f"removing the previous test's files in pod"
                                f" {self.namespace}/{pod} failed (exit code {res.returncode}):"
                                f" {res.stderr.strip()}")

    def deadline(self, test: PlannedTest) -> Deadline | None:
        assert self.layout is not None
        limit = _test_s(test) + TEST_GRACE_S
        left = self.started + self.layout.budget_s - time.monotonic()
        return Deadline(min(limit, max(1.0, left)),
                        f"its runtime (a size-bound test: its I/O at 256 KiB/s) +"
                        f" {TEST_GRACE_S:.0f} s, or the run's time limit")

    def cleanup(self, hurry: bool = False) -> None:
        """Delete everything created, waiting until the pods, the PVCs and (reclaim
        policy Delete) their PVs are gone. Raises KubeError naming what is left."""
        if not self.created.objects:
            return
        problems = self.created.delete(self._kube(), DELETE_WAIT_S, self.note)
        if problems:
            raise KubeError("cleaning up: " + "; ".join(problems)
                            + f". Run `storbench k8s cleanup --namespace {self.namespace}`")

    def _kube(self) -> Kube:
        if self.kube is None:
            self.kube = Kube(self.o.kubeconfig, self.o.context)
        return self.kube
