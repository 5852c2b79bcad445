"""Run a suite on a Kubernetes StorageClass: a PVC of the class, a pod mounting it,
fio exec'd in the pod test after test, everything deleted at the end.

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

import functools
import secrets
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storbench import __version__
from storbench.analysis import warnings
from storbench.errors import ConfigError, FioError, StorbenchError
from storbench.execute import LocalExecutor, SignalGuard, find_fio
from storbench.execute.kubepods import (
    class_facts,
    events,
    fetch_logs,
    oom_killed,
    pod_facts,
    pod_problem,
    read_file,
    wait_running,
)
from storbench.execute.kubernetes import DELETE_WAIT_S, LOST, ExecResult, Kube, KubeError
from storbench.execute.local import Execution, status_feeder
from storbench.result import TestResult, parse_fio_json
from storbench.result.fio_json import combine_outputs, parse_per_host
from storbench.result.fio_logs import read_series
from storbench.runner import (
    Plan,
    Reporter,
    RunSpec,
    make_plan,
    number_results,
    raise_for_fio,
    record_failure,
)
from storbench.store import Invocation, Store
from storbench.target.kubernetes import (
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

START_S = 300.0  # bind the volume, schedule, pull the image, start the pods
TEST_GRACE_S = 60.0  # beyond a test's runtime (laying out files, fio's start and end)
UNTIMED_TEST_S = 3600.0  # a size-bound test: fio's options do not say how long it takes


@dataclass(frozen=True)
class KubePlan:
    """What one class's run will create and run, computed before touching the cluster."""

    uid: str
    namespace: str
    plan: Plan
    pods: list[tuple[str, str]]  # (pod, the PVC it mounts)
    jobs: dict[str, str]  # ConfigMap key -> job text, per scheduled invocation and pod
    log_prefixes: list[dict[str, str]]  # per invocation: job name -> series log prefix
    capacity: str
    budget_s: float  # the whole run, start included
    manifests: list[dict[str, Any]]

    @property
    def scratch(self) -> Path:
        return Path(DATA_DIR) / f"storbench-{self.uid}"

    @staticmethod
    def job_key(index: int, client: int, clients: int) -> str:
        return f"t{index:03d}.fio" if clients == 1 else f"t{index:03d}-p{client}.fio"


def plan_kube(spec: RunSpec, o: KubeOptions, namespace: str) -> KubePlan:
    """The job files, volume size, time budget and manifests of a run (no cluster needed)."""
    o.check()
    if spec.shared_file and (o.clients == 1 or not o.shared_volume):
        raise ConfigError("--shared-file needs --clients N with a shared volume"
                          " (--access-mode RWX)")
    uid = secrets.token_hex(6)
    scratch = Path(DATA_DIR) / f"storbench-{uid}"
    plan = make_plan(spec, scratch)
    schedule = plan.schedule()
    jobs: dict[str, str] = {}
    prefixes: list[dict[str, str]] = []
    for index, (_, _, test) in enumerate(schedule):
        if o.clients == 1:
            jobfile, pref = test.jobfile.with_series_logs(f"sb{index:03d}")
            jobs[KubePlan.job_key(index, 0, 1)] = jobfile.render()
            prefixes.append(pref)
            continue
        prefixes.append({})  # no per-second series with several clients (as with --hosts)
        for i in range(o.clients):
            jobs[KubePlan.job_key(index, i, o.clients)] = test.jobfile.for_host(
                f"storbench-{uid}", f"p{i}", shared=spec.shared_file).render()
    per_client = max((t.jobfile.estimated_bytes() or 0) for t in plan.tests)
    shared = o.clients > 1 and o.shared_volume
    needed = per_client * (o.clients if shared and not spec.shared_file else 1)
    capacity = o.capacity or capacity_for(needed)
    have = quantity_bytes(capacity)
    if have is not None and needed > have:
        raise ConfigError(f"--capacity {capacity} is smaller than the {needed / 2**30:.1f} GiB"
                          " the suite writes; give more, or a smaller --size")
    budget = o.timeout_s or START_S + sum((t.expected_s or UNTIMED_TEST_S) + TEST_GRACE_S
                                          for _, _, t in schedule)
    pods = list(zip(pod_names(uid, o.clients), claim_names(uid, o), strict=True))
    deadline = int(budget + TEST_GRACE_S)
    manifests = [configmap_manifest(uid, namespace, o, jobs)]
    manifests += [pvc_manifest(uid, namespace, o, capacity, claim)
                  for claim in dict.fromkeys(c for _, c in pods)]
    manifests += [pod_manifest(uid, namespace, o, deadline, pod, claim) for pod, claim in pods]
    return KubePlan(uid, namespace, plan, pods, jobs, prefixes, capacity, budget, manifests)


def run_on_kubernetes(spec: RunSpec, store: Store, rep: Reporter) -> int:
    """Run spec's suite in pods on PVCs of spec.kube's class; returns the run id."""
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
        environment = {**class_facts(kube, sc, o, namespace, kp.capacity),
                       "storbench_version": __version__}
        run_id = store.begin_run(
            uid=kp.uid, suite=kp.plan.suite_name,
            target=f"storageclass/{o.storage_class}"
                   + (f" x{o.clients} pods" if o.clients > 1 else ""),
            environment=environment, settings=spec.settings(kp.plan.suite_name),
            storbench_version=__version__, fio_version=None, label=spec.label,
            tags=spec.tags)
        objects = _Objects(kube, namespace, rep)
        try:
            try:
                pods = f"{o.clients} pods, " if o.clients > 1 else ""
                rep.note(f"StorageClass {o.storage_class} ({sc.provisioner},"
                         f" {sc.volume_binding_mode}), namespace {namespace}, {pods}PVC"
                         f" {kp.capacity}, time limit {kp.budget_s:.0f} s")
                start = time.monotonic()
                for manifest in kp.manifests:
                    objects.create(manifest)
                ready_by = start + (kp.budget_s if o.timeout_s else min(START_S, kp.budget_s))
                running = wait_running(kube, namespace, kp.pods, guard, rep.note, ready_by)
                environment = pod_facts(kube, namespace, running, kp.pods[0][1], o,
                                        environment, str(kp.scratch))
                store.update_environment(run_id, environment, environment.get("fio_version"))
                rep.run_started(run_id, kp.plan, kp.scratch)
                _execute(_Context(kube, kp, o, store, run_id, rep, guard, environment,
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
        """Delete everything created, waiting until the pods, the PVCs and (reclaim
        policy Delete) their PVs are gone. Raises KubeError naming what is left."""
        problems, retained = self.kube.delete_and_wait(self.created[::-1], DELETE_WAIT_S)
        for pv in retained:
            self.rep.note(f"PersistentVolume {pv} stays, by its reclaim policy")
        if problems:
            raise KubeError("cleaning up: " + "; ".join(problems)
                            + f". Run `storbench k8s cleanup --namespace {self.namespace}`")


@dataclass
class _Context:
    kube: Kube
    kp: KubePlan
    o: KubeOptions
    store: Store
    run_id: int
    rep: Reporter
    guard: SignalGuard
    environment: dict[str, Any]
    deadline: float  # the run's end, monotonic
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="storbench-k8s-")))

    @property
    def pods(self) -> list[str]:
        return [p for p, _ in self.kp.pods]


def _execute(c: _Context) -> None:
    ordinal = 0
    schedule = c.kp.plan.schedule()
    try:
        for index, (_, repeat, test) in enumerate(schedule):
            c.guard.check()
            c.rep.test_started(index, test)
            if index > 0:
                later = {n for _, _, t in schedule[index:] for n in t.jobfile.named_files()}
                _remove_files_except(c, later)
            limit = (test.expected_s or UNTIMED_TEST_S) + TEST_GRACE_S
            limit = min(limit, max(1.0, c.deadline - time.monotonic()))
            runs = _run_fio(c, index, limit)
            c.guard.check()  # an interrupted test's partial numbers are not stored
            late = [p for p, r in zip(c.pods, runs, strict=True) if r.timed_out]
            if late and all(r.timed_out or r.returncode == 0 for r in runs):
                raise FioError(f"test {test.name!r}: no result from {', '.join(late)} within"
                               f" {limit:.0f} s (its runtime + {TEST_GRACE_S:.0f} s, or the"
                               " run's time limit); the run was stopped")
            for pod, res in zip(c.pods, runs, strict=True):
                _raise_if_pod_failed(c, pod, res)
            raws = [read_file(c.kube, c.kp.namespace, pod, f"{WORK_DIR}/t{index:03d}.json")
                    for pod in c.pods]
            raw = raws[0] if len(raws) == 1 else combine_outputs(c.pods, raws)
            # pods stopped because another one failed give no returncode of their own
            returncode = max((r.returncode for r in runs if not r.timed_out), key=abs,
                             default=-1)
            stderr = "".join(f"[{p}] {r.stderr}" if len(runs) > 1 else r.stderr
                             for p, r in zip(c.pods, runs, strict=True) if r.stderr)
            wall = max(r.wall_s for r in runs)
            try:
                _, parsed = parse_fio_json(raw)
                per_pod = parse_per_host(raw)
            except FioError:
                if returncode == 0:
                    raise
                parsed, per_pod = [], {}
            prefixes = c.kp.log_prefixes[index]
            if prefixes:
                fetch_logs(c.kube, c.kp.namespace, c.pods[0], WORK_DIR, f"sb{index:03d}",
                           c.workdir)
            results = [replace(r, series=read_series(c.workdir, prefixes[r.name]))
                       if r.name in prefixes else r for r in parsed]
            numbered, pod_rows, ordinal = number_results(ordinal, results, per_pod)
            found = [w.to_dict() for r in results for w in warnings.compute(r, c.environment)]
            text = "\n".join(
                (f"# pod {p}\n" if len(c.pods) > 1 else "")
                + c.kp.jobs[KubePlan.job_key(index, i, len(c.pods))]
                for i, p in enumerate(c.pods))
            c.store.add_invocation(
                c.run_id, Invocation(index, text, raw, returncode, stderr, wall),
                numbered, found, repeat=repeat, per_host=pod_rows)
            c.rep.test_finished(index, results)
            checked: list[tuple[str, TestResult]] = (
                [("", r) for r in results] if len(c.pods) == 1
                else [(p, r) for p, rs in per_pod.items() for r in rs])
            missing = [p for p in c.pods if len(c.pods) > 1 and p not in per_pod]
            raise_for_fio(Execution(raw, stderr, returncode, wall), checked,
                          f"; no result from {', '.join(missing)}" if missing else "")
    finally:
        shutil.rmtree(c.workdir, ignore_errors=True)


def _run_fio(c: _Context, index: int, limit: float) -> list[ExecResult]:
    """fio in every pod at once; the first pod's output drives the progress display.
    When one pod's fio fails, the others are not waited for."""
    failed = threading.Event()

    def one(i: int, pod: str) -> ExecResult:
        key = KubePlan.job_key(index, i, len(c.pods))
        argv = ["fio", "--output-format=json+", f"--output={WORK_DIR}/t{index:03d}.json",
                "--eta=always", "--eta-newline=1", f"{JOBS_DIR}/{key}"]
        progress = status_feeder(functools.partial(c.rep.progress, index)) if i == 0 else None
        res = c.kube.exec(c.kp.namespace, pod, ["sh", "-c", f"cd {WORK_DIR} && exec "
                                                + " ".join(argv)],
                          on_stdout=progress, deadline_s=limit,
                          should_stop=lambda: c.guard.signum is not None or failed.is_set())
        if res.returncode != 0 and not res.timed_out:
            failed.set()
        return res

    if len(c.pods) == 1:
        return [one(0, c.pods[0])]
    with ThreadPoolExecutor(max_workers=len(c.pods)) as pool:
        return list(pool.map(one, range(len(c.pods)), c.pods))


def _sh(c: _Context, pod: str, script: str, what: str) -> ExecResult:
    res = c.kube.exec(c.kp.namespace, pod, ["sh", "-c", script], deadline_s=120)
    if res.timed_out or res.returncode != 0:
        raise KubeError(f"{what} in pod {c.kp.namespace}/{pod} failed (exit code"
                        f" {res.returncode}): {res.stderr.strip()}")
    return res


def _remove_files_except(c: _Context, keep: set[str]) -> None:
    """Between tests: the previous test's files go, those a later test names stay."""
    names = " ".join(f"'{n}'" for n in sorted(keep) if "'" not in n)
    script = (f"cd {c.kp.scratch} && for f in * .[!.]*; do [ -e \"$f\" ] || continue;"
              f" case \" {names} \" in *\" '$f' \"*) ;; *) rm -rf -- \"$f\";; esac; done")
    for pod in dict.fromkeys(c.pods if not c.o.shared_volume else c.pods[:1]):
        _sh(c, pod, script, "removing the previous test's files")


def _raise_if_pod_failed(c: _Context, pod: str, res: ExecResult) -> None:
    """When fio died with its pod (evicted, OOM-killed, deadline), say so."""
    if res.returncode in (0, 1) or res.timed_out:
        return
    try:
        found = c.kube.read("Pod", pod, c.kp.namespace)
    except KubeError:
        found = None
    if found is None:
        problem = "the pod is gone"
    elif found.metadata.deletion_timestamp is not None:
        problem = "the pod is being deleted (by someone else, or its node is going away)"
    else:
        problem = pod_problem(found)
    if not problem and res.returncode == LOST:
        problem = "the connection to fio ended without an exit status"
    if problem:
        raise KubeError(f"pod {c.kp.namespace}/{pod} stopped during the test: {problem}"
                        + events(c.kube, c.kp.namespace, "Pod", pod))
    if res.returncode == 137 and oom_killed(c.kube, c.kp.namespace, pod):
        limit = dict(c.o.limits).get("memory", "none")
        raise KubeError(f"fio was OOM-killed in pod {c.kp.namespace}/{pod}: the job needs"
                        f" more memory than the pod's limit ({limit}); raise it with"
                        " --limits memory=2Gi")
