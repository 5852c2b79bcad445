"""Run a suite on a Kubernetes StorageClass: a PVC of the class, one pod mounting it,
fio exec'd in the pod test after test, everything deleted at the end.

The run's objects (a ConfigMap with the job files, the PVC, the pod) are created in
that order and deleted in reverse on success, on failure, on Ctrl-C and on SIGTERM;
each carries the managed-by label and the run's id, so that `storbench k8s cleanup`
finds what a SIGKILLed run left (its pod also stops by itself at the run's deadline,
activeDeadlineSeconds). Timeouts follow from the suite: the time to bind the volume
and start the pod, then each test's runtime plus a grace period; --timeout replaces
the whole budget.
"""

from __future__ import annotations

import functools
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storbench import __version__
from storbench.analysis import warnings
from storbench.errors import ConfigError, FioError, StorbenchError
from storbench.execute import LocalExecutor, Progress, SignalGuard, find_fio
from storbench.execute.kubernetes import ExecResult, Kube, KubeError
from storbench.execute.local import Execution, parse_status_line
from storbench.result import parse_fio_json
from storbench.result.fio_logs import read_series
from storbench.runner import Plan, Reporter, RunSpec, make_plan, raise_for_fio, record_failure
from storbench.store import Invocation, Store
from storbench.target.kubernetes import (
    DATA_DIR,
    JOBS_DIR,
    WORK_DIR,
    KubeOptions,
    capacity_bytes,
    capacity_for,
    configmap_manifest,
    name_of,
    pod_manifest,
    pvc_manifest,
)
from storbench.workload.sizes import parse_size

START_S = 300.0  # bind the volume, schedule, pull the image, start the pod
TEST_GRACE_S = 60.0  # beyond a test's runtime (laying out files, fio's start and end)
UNTIMED_TEST_S = 3600.0  # a size-bound test: fio's options do not say how long it takes
DELETE_WAIT_S = 120.0  # for the pod, PVC and PV to be gone after deletion
_CAUSES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
           "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
           "CrashLoopBackOff")


@dataclass(frozen=True)
class KubePlan:
    """What one class's run will create and run, computed before touching the cluster."""

    uid: str
    namespace: str
    plan: Plan
    jobs: dict[str, str]  # t000.fio -> job text, one per scheduled invocation
    log_prefixes: list[dict[str, str]]  # per invocation: job name -> series log prefix
    capacity: str
    budget_s: float  # the whole run, start included
    manifests: list[dict[str, Any]]

    @property
    def scratch(self) -> Path:
        return Path(DATA_DIR) / f"storbench-{self.uid}"


def plan_kube(spec: RunSpec, o: KubeOptions, namespace: str) -> KubePlan:
    """The job files, volume size, time budget and manifests of a run (no cluster needed)."""
    o.check()
    uid = secrets.token_hex(6)
    scratch = Path(DATA_DIR) / f"storbench-{uid}"
    plan = make_plan(spec, scratch)
    schedule = plan.schedule()
    jobs: dict[str, str] = {}
    prefixes: list[dict[str, str]] = []
    for index, (_, _, test) in enumerate(schedule):
        jobfile, pref = test.jobfile.with_series_logs(f"sb{index:03d}")
        jobs[f"t{index:03d}.fio"] = jobfile.render()
        prefixes.append(pref)
    needed = max((t.jobfile.estimated_bytes() or 0) for t in plan.tests)
    capacity = o.capacity or capacity_for(needed)
    have = capacity_bytes(capacity)
    if have is not None and needed > have:
        raise ConfigError(f"--capacity {capacity} is smaller than the {needed / 2**30:.1f} GiB"
                          " the suite writes; give more, or a smaller --size")
    budget = o.timeout_s or START_S + sum((t.expected_s or UNTIMED_TEST_S) + TEST_GRACE_S
                                          for _, _, t in schedule)
    manifests = [configmap_manifest(uid, namespace, o, jobs),
                 pvc_manifest(uid, namespace, o, capacity),
                 pod_manifest(uid, namespace, o, int(budget + TEST_GRACE_S))]
    return KubePlan(uid, namespace, plan, jobs, prefixes, capacity, budget, manifests)


def run_on_kubernetes(spec: RunSpec, store: Store, rep: Reporter) -> int:
    """Run spec's suite in a pod on a PVC of spec.kube's class; returns the run id."""
    o = spec.kube
    assert o is not None
    kube = Kube(o.kubeconfig, o.context)
    namespace = o.namespace or kube.namespace
    kp = plan_kube(spec, o, namespace)
    _validate_locally(spec, kp)
    with SignalGuard() as guard:
        sc = kube.storage_class(o.storage_class)
        missing = kube.missing_permissions(namespace)
        if missing:
            raise KubeError(
                f"in namespace {namespace}, the user of context {kube.context!r} may not:"
                f" {', '.join(missing)}. Nothing was created. Ask for a Role that grants"
                " them (docs/cli.md lists what storbench needs), or choose --namespace.")
        guard.check()
        environment = _class_facts(kube, sc, o, kp)
        run_id = store.begin_run(
            uid=kp.uid, suite=kp.plan.suite_name,
            target=f"storageclass/{o.storage_class}", environment=environment,
            settings=spec.settings(kp.plan.suite_name),
            storbench_version=__version__, fio_version=None, label=spec.label,
            tags=spec.tags)
        objects = _Objects(kube, namespace, rep)
        try:
            try:
                rep.note(f"StorageClass {o.storage_class}"
                         f" ({sc.provisioner}, {sc.volume_binding_mode}), namespace"
                         f" {namespace}, PVC {kp.capacity}, time limit {kp.budget_s:.0f} s")
                start = time.monotonic()
                for manifest in kp.manifests:
                    objects.create(manifest)
                pod = _wait_ready(kube, kp, guard, rep, start + min(START_S, kp.budget_s)
                                  if o.timeout_s is None else start + kp.budget_s)
                environment = _pod_facts(kube, kp, pod, environment, o)
                store.update_environment(run_id, environment, environment.get("fio_version"))
                rep.run_started(run_id, kp.plan, kp.scratch)
                _execute(_Context(kube, kp, store, run_id, rep, guard, environment,
                                  start + kp.budget_s))
            finally:
                objects.delete_all()
        except BaseException as exc:
            record_failure(store, run_id, exc)
        stored = store.get_run(run_id)
        run_warnings = [w.to_dict() for name, results in stored.results_by_test().items()
                        for w in warnings.across_repeats(name, results)]
        store.finish_run(run_id, "completed", warnings=run_warnings)
        guard.check()
        return run_id


def _validate_locally(spec: RunSpec, kp: KubePlan) -> None:
    """fio --parse-only here, when this machine has fio: bad job files fail before any
    object exists. Without a local fio the pod's fio judges them."""
    try:
        fio = find_fio(spec.fio)
    except StorbenchError:
        return
    workdir = Path(tempfile.mkdtemp(prefix="storbench-fio-"))
    try:
        with SignalGuard() as guard:
            executor = LocalExecutor(fio, workdir, guard)
            for t in kp.plan.tests:
                executor.validate(t.jobfile.render(), f"for test {t.name!r}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class _Objects:
    """The run's objects: created one by one, deleted in reverse and waited for."""

    def __init__(self, kube: Kube, namespace: str, rep: Reporter) -> None:
        self.kube = kube
        self.namespace = namespace
        self.rep = rep
        self.created: list[tuple[str, str, str]] = []

    def create(self, manifest: dict[str, Any]) -> None:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        self.kube.create(manifest)
        self.created.append((kind, self.namespace, name))

    def delete_all(self) -> None:
        """Delete everything created, waiting until the pod, the PVC and (reclaim policy
        Delete) its PV are gone. Raises KubeError naming what is left."""
        problems, retained = self.kube.delete_and_wait(self.created[::-1], DELETE_WAIT_S)
        for pv in retained:
            self.rep.note(f"PersistentVolume {pv} stays, by its reclaim policy")
        if problems:
            raise KubeError("cleaning up: " + "; ".join(problems)
                            + f". Run `storbench k8s cleanup --namespace {self.namespace}`")


def _quiet(read: Callable[[], Any], failed: Any = None) -> Any:
    try:
        return read()
    except KubeError:
        return failed


def _wait_ready(kube: Kube, kp: KubePlan, guard: SignalGuard, rep: Reporter,
                deadline: float) -> Any:
    """The pod once its container runs; KubeError quoting events when it cannot start."""
    name = name_of(kp.uid)
    start = time.monotonic()
    said: set[str] = set()
    while True:
        pod = kube.read("Pod", name, kp.namespace)
        pvc = kube.read("PersistentVolumeClaim", name, kp.namespace)
        if pod is None or pvc is None:
            raise KubeError(f"{'pod' if pod is None else 'PVC'} {kp.namespace}/{name} was"
                            " deleted by someone else while starting")
        state = _container_state(pod)
        if pod.status.phase == "Running" and state == "running":
            return pod
        problem = _pod_problem(pod)
        if problem:
            raise KubeError(f"pod {kp.namespace}/{name} cannot start: {problem}"
                            + _events(kube, kp.namespace, "Pod", name))
        step = "waiting for the volume to bind" if pvc.status.phase != "Bound" else (
            "starting the pod" if not pod.spec.node_name else f"starting the pod on"
            f" {pod.spec.node_name}")
        if step not in said:
            said.add(step)
            rep.note(f"{step} ({time.monotonic() - start:.0f} s)")
        if time.monotonic() > deadline:
            waited = time.monotonic() - start
            if pvc.status.phase != "Bound":
                raise KubeError(
                    f"PersistentVolumeClaim {kp.namespace}/{name} (StorageClass"
                    f" {pvc.spec.storage_class_name}) not bound after {waited:.0f} s;"
                    f" phase {pvc.status.phase}"
                    + _events(kube, kp.namespace, "PersistentVolumeClaim", name)
                    + _events(kube, kp.namespace, "Pod", name))
            raise KubeError(f"pod {kp.namespace}/{name} not running after {waited:.0f} s:"
                            f" {_pod_summary(pod)}" + _events(kube, kp.namespace, "Pod", name))
        guard.sleep(1.0)


def _container_state(pod: Any) -> str:
    for cs in pod.status.container_statuses or []:
        if cs.state.running is not None:
            return "running"
        if cs.state.terminated is not None:
            return "terminated"
    return "waiting"


def _pod_problem(pod: Any) -> str:
    """Why the pod will not run (image, eviction, OOM, ...), or ''."""
    for cs in pod.status.container_statuses or []:
        waiting, term = cs.state.waiting, cs.state.terminated
        if waiting is not None and waiting.reason in _CAUSES:
            return f"container {cs.name}: {waiting.reason}: {waiting.message or ''}".strip()
        if term is not None:
            return (f"container {cs.name} terminated: {term.reason} (exit code"
                    f" {term.exit_code}) {term.message or ''}").strip()
    if pod.status.phase in ("Failed", "Succeeded"):
        return f"pod {pod.status.phase}: {pod.status.reason or ''} {pod.status.message or ''}"
    return ""


def _pod_summary(pod: Any) -> str:
    parts = [f"phase {pod.status.phase}"]
    for c in pod.status.conditions or []:
        if c.status != "True" and c.message:
            parts.append(f"{c.type}: {c.reason}: {c.message}")
    for cs in pod.status.container_statuses or []:
        if cs.state.waiting is not None:
            parts.append(f"container {cs.name} waiting: {cs.state.waiting.reason}"
                         f" {cs.state.waiting.message or ''}".rstrip())
    return "; ".join(parts)


def _events(kube: Kube, namespace: str, kind: str, name: str) -> str:
    lines = kube.events(namespace, kind, name)[-5:]
    if not lines:
        return ""
    return f". Events of the {kind}: " + " | ".join(lines)


def _class_facts(kube: Kube, sc: Any, o: KubeOptions, kp: KubePlan) -> dict[str, Any]:
    return {
        "target": {
            "kind": "kubernetes",
            "storage_class": sc.metadata.name,
            "provisioner": sc.provisioner,
            "parameters": dict(sc.parameters or {}),
            "reclaim_policy": sc.reclaim_policy,
            "binding_mode": sc.volume_binding_mode,
            "allow_volume_expansion": bool(sc.allow_volume_expansion),
            "mount_options": list(sc.mount_options or []),
            "namespace": kp.namespace,
            "requested_capacity": kp.capacity,
            "access_mode": o.access_mode,
            "volume_mode": o.volume_mode,
        },
        "kubernetes": {"context": kube.context, "server": kube.server,
                       "server_version": kube.server_version(), "image": o.image},
        "storbench_version": __version__,
    }


_MOUNT = re.compile(rf"^(\S+) {DATA_DIR} (\S+) (\S+)", re.M)


def _pod_facts(kube: Kube, kp: KubePlan, pod: Any, env: dict[str, Any],
               o: KubeOptions) -> dict[str, Any]:
    """The volume, the node and the pod's fio, once the pod runs; makes the scratch dir."""
    name = name_of(kp.uid)
    res = kube.exec(kp.namespace, name, [
        "sh", "-c", f"fio --version && mkdir -p {kp.scratch} && cat /proc/mounts"],
        deadline_s=60)
    if res.returncode != 0 or res.timed_out:
        raise KubeError(f"the image {o.image} cannot run fio in pod {kp.namespace}/{name}"
                        f" (exit code {res.returncode}): {(res.stderr or res.stdout).strip()}")
    fio_version = res.stdout.splitlines()[0].strip()
    pvc = kube.read("PersistentVolumeClaim", name, kp.namespace)
    target = dict(env["target"])
    k8s = dict(env["kubernetes"])
    m = _MOUNT.search(res.stdout)
    if m is not None:
        target.update(fs_type=m.group(2), mount_source=m.group(1),
                      fs_mount_options=m.group(3))
    if pvc is not None:
        target["capacity"] = (pvc.status.capacity or {}).get("storage")
        k8s["pvc"] = f"{kp.namespace}/{name}"
        k8s["pv"] = pvc.spec.volume_name
        pv = kube.read_pv(pvc.spec.volume_name) if pvc.spec.volume_name else None
        if pv is not None:
            source = {k: v for k, v in pv.spec.to_dict().items()
                      if v is not None and k in ("csi", "host_path", "local", "nfs",
                                                 "aws_elastic_block_store", "gce_persistent_disk",
                                                 "azure_disk", "rbd", "cephfs")}
            k8s["pv_source"] = source
    k8s["node"] = pod.spec.node_name
    for cs in pod.status.container_statuses or []:
        k8s["image_id"] = cs.image_id
    facts: dict[str, Any] = {"hostname": pod.spec.node_name}
    node = kube.read_node(pod.spec.node_name) if pod.spec.node_name else None
    if node is not None:
        info = node.status.node_info
        labels = node.metadata.labels or {}
        k8s.update(kernel=info.kernel_version, os_image=info.os_image,
                   container_runtime=info.container_runtime_version,
                   kubelet=info.kubelet_version,
                   zone=labels.get("topology.kubernetes.io/zone"),
                   instance_type=labels.get("node.kubernetes.io/instance-type"))
        facts.update(kernel=info.kernel_version, os=info.os_image,
                     cpu_count=_int(node.status.capacity.get("cpu")),
                     ram_bytes=_bytes(node.status.capacity.get("memory")))
    limit = _bytes(dict(o.limits).get("memory"))
    if limit is not None:  # the page cache a pod may use is charged to its memory limit
        facts["ram_bytes"] = min(limit, facts.get("ram_bytes") or limit)
    return {**env, **facts, "target": target, "kubernetes": k8s, "fio_version": fio_version}


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _bytes(quantity: str | None) -> int | None:
    if not quantity:
        return None
    q = quantity.strip()
    if q.endswith("i"):
        return parse_size(q[:-1])
    if q[-1:] in "kMGTPE":
        return int(float(q[:-1]) * 1000 ** ("kMGTPE".index(q[-1]) + 1))
    return _int(q)


@dataclass
class _Context:
    kube: Kube
    kp: KubePlan
    store: Store
    run_id: int
    rep: Reporter
    guard: SignalGuard
    environment: dict[str, Any]
    deadline: float  # the run's end, monotonic
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="storbench-k8s-")))


def _execute(c: _Context) -> None:
    name = name_of(c.kp.uid)
    ordinal = 0
    schedule = c.kp.plan.schedule()
    try:
        for index, (_, repeat, test) in enumerate(schedule):
            c.guard.check()
            c.rep.test_started(index, test)
            if index > 0:
                later = {n for _, _, t in schedule[index:] for n in t.jobfile.named_files()}
                _remove_files_except(c, later)
            key = f"t{index:03d}"
            argv = ["fio", "--output-format=json+", f"--output={WORK_DIR}/{key}.json",
                    "--eta=always", "--eta-newline=1", f"{JOBS_DIR}/{key}.fio"]
            limit = (test.expected_s or UNTIMED_TEST_S) + TEST_GRACE_S
            limit = min(limit, max(1.0, c.deadline - time.monotonic()))
            res = c.kube.exec(c.kp.namespace, name, ["sh", "-c", f"cd {WORK_DIR} && exec "
                                                     + " ".join(argv)],
                              on_stdout=_lines(functools.partial(c.rep.progress, index)),
                              deadline_s=limit, should_stop=lambda: c.guard.signum is not None)
            c.guard.check()  # an interrupted test's partial numbers are not stored
            if res.timed_out:
                raise FioError(f"test {test.name!r}: no result within {limit:.0f} s (its"
                               f" runtime + {TEST_GRACE_S:.0f} s, or the run's time limit);"
                               " the run was stopped")
            _raise_if_pod_failed(c, res)
            raw = _cat(c, f"{WORK_DIR}/{key}.json")
            execution = Execution(raw, res.stderr, res.returncode, res.wall_s)
            try:
                _, parsed = parse_fio_json(raw)
            except FioError:
                if res.returncode == 0:
                    raise
                parsed = []
            prefixes = c.kp.log_prefixes[index]
            if prefixes:
                _fetch_logs(c, key)
            results = [replace(r, series=read_series(c.workdir, prefixes[r.name]))
                       if r.name in prefixes else r for r in parsed]
            numbered = list(enumerate(results, start=ordinal))
            ordinal += len(results)
            found = [w.to_dict() for r in results for w in warnings.compute(r, c.environment)]
            c.store.add_invocation(
                c.run_id, Invocation(index, c.kp.jobs[f"{key}.fio"], raw, res.returncode,
                                     res.stderr, res.wall_s),
                numbered, found, repeat=repeat)
            c.rep.test_finished(index, results)
            raise_for_fio(execution, [("", r) for r in results])
    finally:
        shutil.rmtree(c.workdir, ignore_errors=True)


def _lines(on_progress: Callable[[Progress], None]) -> Callable[[str], None]:
    pending = [""]

    def feed(data: str) -> None:
        *lines, pending[0] = re.split(r"[\r\n]", pending[0] + data)
        for line in lines:
            p = parse_status_line(line)
            if p is not None:
                on_progress(p)
    return feed


def _run(c: _Context, script: str, what: str) -> ExecResult:
    res = c.kube.exec(c.kp.namespace, name_of(c.kp.uid), ["sh", "-c", script], deadline_s=120)
    if res.timed_out or res.returncode != 0:
        raise KubeError(f"{what} in pod {c.kp.namespace}/{name_of(c.kp.uid)} failed (exit"
                        f" code {res.returncode}): {res.stderr.strip()}")
    return res


def _cat(c: _Context, path: str) -> str:
    res = c.kube.exec(c.kp.namespace, name_of(c.kp.uid), ["cat", path], deadline_s=120)
    return res.stdout if res.returncode == 0 else ""


_FILE_MARK = "@@storbench-file "


def _fetch_logs(c: _Context, key: str) -> None:
    """Copy the test's per-second logs from the pod into c.workdir."""
    prefix = f"sb{key[1:]}"
    res = _run(c, f"cd {WORK_DIR} && for f in {prefix}*.log; do [ -f \"$f\" ] || continue;"
                  f" echo \"{_FILE_MARK}$f\"; cat \"$f\"; rm -f \"$f\"; done",
               "reading fio's logs")
    current: list[str] | None = None
    files: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        if line.startswith(_FILE_MARK):
            current = files.setdefault(Path(line[len(_FILE_MARK):]).name, [])
        elif current is not None:
            current.append(line)
    for fname, lines in files.items():
        (c.workdir / fname).write_text("\n".join(lines) + "\n")


def _remove_files_except(c: _Context, keep: set[str]) -> None:
    names = " ".join(f"'{n}'" for n in sorted(keep) if "'" not in n)
    _run(c, f"cd {c.kp.scratch} && for f in * .[!.]*; do [ -e \"$f\" ] || continue;"
            f" case \" {names} \" in *\" '$f' \"*) ;; *) rm -rf -- \"$f\";; esac; done",
         "removing the previous test's files")


def _raise_if_pod_failed(c: _Context, res: ExecResult) -> None:
    """When fio died with the pod (evicted, OOM-killed, deadline), say so."""
    if res.returncode in (0, 1):
        return
    name = name_of(c.kp.uid)
    pod = _quiet(lambda: c.kube.read("Pod", name, c.kp.namespace))
    problem = _pod_problem(pod) if pod is not None else "the pod is gone"
    if problem:
        raise KubeError(f"pod {c.kp.namespace}/{name} stopped during the test: {problem}"
                        + _events(c.kube, c.kp.namespace, "Pod", name))
    if res.returncode == 137 and _oom_killed(c):
        limit = dict(c.kp.manifests[2]["spec"]["containers"][0]["resources"]
                     .get("limits", {})).get("memory", "none")
        raise KubeError(f"fio was OOM-killed in pod {c.kp.namespace}/{name}: the job needs"
                        f" more memory than the pod's limit ({limit}); raise it with"
                        " --limits memory=2Gi")


def _oom_killed(c: _Context) -> bool:
    res = _quiet(lambda: c.kube.exec(c.kp.namespace, name_of(c.kp.uid), [
        "sh", "-c", "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control"
                    " 2>/dev/null"], deadline_s=30))
    if res is None:
        return False
    m = re.search(r"oom_kill (\d+)", res.stdout)
    return m is not None and int(m.group(1)) > 0

