"""A Kubernetes StorageClass as a place (target/storage.py): a PVC of the class, pods
mounting it, fio exec'd in the pods test after test, everything deleted at the end. Its
storage is files in the volume (FilesStorage, volume mode Filesystem) or the volume itself
(DeviceStorage, ``--volume-mode Block``: each pod's raw volume at DEVICE_PATH, looked at
once the pods run, facts.look_volumes).

With ``--pods``, the storage is outside the cluster (an S3 bucket, target/objects.py):
the pods mount no volume, fio's http engine in them reaches the endpoint, the secret key
is in their environment from a Secret of the run's (owned by its ConfigMap: whatever
deletes that deletes it), and what the run put at the endpoint is deleted from this
machine as it ends (target/storage.Outside), and by a later run after a crash.

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

import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError
from storbench.execute import Executor, FioBinary, FioJob, SignalGuard
from storbench.execute.kubecleanup import Created
from storbench.execute.kubepods import PodExecutor
from storbench.execute.kubernetes import DELETE_WAIT_S, Kube
from storbench.execute.kubestatus import KubeError
from storbench.execute.kubewait import wait_bound, wait_running
from storbench.result.environment import Environment
from storbench.target.base import (
    Deadline,
    Quiet,
)
from storbench.target.device import Seen
from storbench.target.files import remove_script
from storbench.target.kubernetes import podplan
from storbench.target.kubernetes.facts import class_facts, look_volumes, pod_facts, pods_facts
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    DEVICE_PATH,
    JOBS_DIR,
    OUTSIDE_VERBS,
    RUN_VERBS,
    WORK_DIR,
    KubeOptions,
    name_of,
    pod_names,
    quantity_bytes,
)
from storbench.target.kubernetes.podplan import START_S, TEST_GRACE_S, KubePlan, test_s
from storbench.target.sharedlayout import lay_out
from storbench.target.storage import OnStorage, ReachesOutside, Room, Storage, Worker
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

PUT_CHUNK = 96 * 1024  # characters of a file put in the pod per exec (an argument: < 128 KiB)
PUT_REFUSED = ("a replay's iolog goes to one pod on a Filesystem volume: leave out"
               " --volume-mode Block and --clients")


class KubeTarget(ReachesOutside, OnStorage, Quiet):
    """A StorageClass: PVC(s) of it and pod(s) that mount them, in one namespace. What a
    crashed run left is found by its label (`storbench k8s cleanup`), not as leftovers
    of the loop's (Quiet)."""

    kind = "kubernetes"
    worker_noun = "pod"
    needs_local_fio = False  # the pods' fio runs the I/O; a local one checks job files
    # what this place is to a storage (target/storage.Place)
    every = "pod"
    looks_early = False  # a volume is seen once its pod runs
    refused_after = ""
    keeps_until_end = False  # the volumes go: what a pod's job keeps goes with them

    def __init__(self, options: KubeOptions, storage: Storage) -> None:
        self.o = options
        self.storage = storage
        self.series_logs = options.clients == 1  # several pods: no per-second series
        self.kube: Kube | None = None
        self.sc: Any = None
        self.layout: KubePlan | None = None
        self.created = Created()
        self.environment: Environment = {}
        self.started = 0.0
        self.first_test = True
        self.namespace = ""
        self.plan: Plan | None = None
        self.uid = ""
        self.note: Callable[[str], None] = lambda text: None
        self.guard: SignalGuard | None = None
        self.workdir = Path()

    # -- what it is ------------------------------------------------------------------

    @property
    def name(self) -> str:
        where = (f"{self.storage.path} from pods" if self.outside is not None
                 else f"storageclass/{self.o.storage_class}")
        return where + (f" x{self.o.clients} pods" if self.o.clients > 1 else "")

    @property
    def short_name(self) -> str:
        return f"{self.storage.path}@pods" if self.outside is not None else self.o.storage_class

    def settings(self) -> dict[str, Any]:
        return {"kubernetes": self.o.describe(), **self.storage.settings(self)}

    def check_options(self) -> None:
        """ConfigError for options that cannot work; no cluster needed."""
        self.o.check()
        shared_file = self.storage.settings(self).get("shared_file")
        if shared_file and (self.o.clients == 1 or not self.o.shared_volume):
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
        return podplan.plan_layout(self.o, self.storage, uid, plan, invocations, namespace)

    def capacity(self, plan: Plan) -> str:
        return podplan.capacity(self.o, self.storage, plan)

    # -- the Target contract -----------------------------------------------------------

    def preflight(self) -> None:
        self.check_options()
        self.kube = Kube(self.o.kubeconfig, self.o.context)
        if self.o.volume:
            self.sc = self.kube.storage_class(self.o.storage_class)
        else:
            self.storage.preflight(self)

    def scratch_path(self, uid: str) -> Path:
        self.uid = uid
        return Path(self.storage.scratch(self, uid))

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.check_options()
        self.capacity(plan)
        if self.kube is None:  # preflight() not called yet
            self.preflight()
        kube = self._kube()
        namespace = self.o.namespace or kube.namespace
        missing = kube.missing_permissions(namespace, RUN_VERBS if self.o.volume
                                           else OUTSIDE_VERBS)
        if missing:
            raise KubeError(
                f"in namespace {namespace}, the user of context {kube.context!r} may not:"
                f" {', '.join(missing)}. Nothing was created. Ask for a Role that grants"
                " them (docs/cli.md lists what storbench needs), or choose --namespace.")
        self.namespace = namespace
        self.plan = plan
        self.workdir = workdir  # before_test's layouts: their pod logs go there
        if self.outside is not None:
            self.storage.approve(plan, self)
            self.storage.check(plan, self)

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        workers = self.workers()
        return [self.storage.job(jobfile, self, w, f"t{index:03d}.fio" if len(workers) == 1
                                 else f"t{index:03d}-{w.tag}.fio", uid) for w in workers]

    def describe(self, fio: FioBinary | None) -> Environment:
        if self.environment:
            found = self.environment
        elif self.outside is not None:
            found = pods_facts(self._kube(), self.o, self.namespace)
        else:
            assert self.plan is not None
            found = class_facts(self._kube(), self.sc, self.o, self.namespace,
                                self.capacity(self.plan))
        # the storage's own (a Block volume: as its guard saw it, once the pods ran)
        return {**found, "target": {**found["target"], **self.storage.facts(self, None)}}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        kube = self._kube()
        assert self.plan is not None
        self.note = note
        self.guard = guard  # before_test's layouts stop with the run
        kube.interrupted = lambda: guard.signum  # and every exec in the pods
        self.layout = kp = self.plan_layout(uid, self.plan, invocations, self.namespace)
        environment = self.describe(None)
        pods = f"{self.o.clients} pods, " if self.o.clients > 1 else ""
        if self.outside is not None:
            net = ", on the node's network" if self.o.host_network else ""
            note(f"fio in pods of namespace {kp.namespace}{net}, {pods}time limit"
                 f" {kp.budget_s:.0f} s")
        else:
            note(f"StorageClass {self.o.storage_class} ({self.sc.provisioner},"
                 f" {self.sc.volume_binding_mode}), namespace {kp.namespace}, {pods}PVC"
                 f" {kp.capacity}, time limit {kp.budget_s:.0f} s")
        self.started = time.monotonic()
        ready_by = self.started + (kp.budget_s if self.o.timeout_s
                                   else min(START_S, kp.budget_s))
        # an Immediate class binds its claims without pods: their pods are made once they
        # are bound, so that the scheduler's first try places them (wait_bound)
        claims = [c for _, c in kp.pods if c]
        first = bool(claims) and self.outside is None and self.sc.volume_binding_mode in (
            None, "Immediate")
        owner: dict[str, Any] = {}
        since = None
        for manifest in kp.manifests:
            if manifest["kind"] == "Pod" and first and since is None:
                since = wait_bound(kube, kp.namespace, claims, guard, note, ready_by)
            if manifest["kind"] == "Secret":  # goes with the ConfigMap, however that goes
                manifest = {**manifest, "metadata": {**manifest["metadata"],
                                                     "ownerReferences": [owner]}}
            made = self.created.create(kube, kp.namespace, manifest)
            if manifest["kind"] == "ConfigMap":
                owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": name_of(uid),
                         "uid": made.metadata.uid}
        running = wait_running(kube, kp.namespace, kp.pods, guard, note, ready_by, since)
        # where fio's files are in the pods: their file system's facts are read there
        files = str(kp.scratch) if self.storage.in_files else ""
        self.environment = pod_facts(kube, kp.namespace, running, kp.pods[0][1], self.o,
                                     environment, files)
        if self.outside is not None:
            self._engines(running[0].metadata.name)
        self.storage.ready(self.plan, self, note)

    def _engines(self, pod: str) -> None:
        """The pods' fio has the engine the outside storage needs (one image: one look)."""
        assert self.outside is not None
        engine = self.outside.engine
        res = self._kube().exec(self.namespace, pod, ["fio", f"--enghelp={engine}"],
                                deadline_s=60)
        if res.returncode != 0 or res.timed_out:
            said = (res.stderr or res.stdout).strip().splitlines()
            raise KubeError(f"the image {self.o.image}'s fio has no {engine} engine, which"
                            f" {self.storage.path} needs ({said[-1] if said else res.returncode})."
                            f" {self.outside.engine_hint} Give an image with one: --image"
                            " (`storbench k8s image build` builds one)")

    # -- what the pods give a storage (target/storage.Place) ----------------------------

    def workers(self) -> list[Worker]:
        pods = pod_names(self.uid, self.o.clients)
        return [Worker(pod, None if len(pods) == 1 else f"p{i}", f"pod {pod}")
                for i, pod in enumerate(pods)]

    def files_dir(self, uid: str) -> str:
        return f"{DATA_DIR}/storbench-{uid}"

    def files_words(self, path: str) -> tuple[str, str]:
        return self.name, "give more, or a smaller --size"

    def rooms(self) -> list[Room]:
        return []  # the volume is made to hold the tests (capacity)

    def sharing(self) -> list[list[str]]:
        return []  # counted in the volume's capacity

    def apart(self, path: str) -> str | None:
        return None  # a shared volume is one file system (check_options)

    def clean(self, keep: set[str], before: str) -> tuple[int, Room] | None:
        """Between tests: the previous test's files go, those a later test names stay."""
        if self.first_test:
            self.first_test = False
        elif self.o.volume:
            self._remove_files(keep)
        return None

    def lay_out(self, test: PlannedTest, jobfile: JobFile, deadline: Deadline | None) -> None:
        """The test's file laid out from the first pod alone (every pod's fio laying it
        out at once unlinked the others' copies: sharedlayout)."""
        assert self.layout is not None and self.guard is not None
        lay_out(self.executor(None, self.workdir, self.guard), self.layout.pods[0][0],
                test.name, jobfile, deadline, "check that the pods can write their volume",
                every="pod")

    def look(self, path: str, writes: bool, destructive: str | None) -> list[Seen]:
        """Each pod's volume, once the pods run (facts.look_volumes)."""
        assert self.layout is not None
        return look_volumes(self._kube(), self.layout.namespace, self.layout.pods, writes)

    def device(self, worker: Worker, path: str) -> str:
        return DEVICE_PATH

    def own_dir(self, worker: Worker, uid: str) -> str | None:
        return None

    def volume_size(self) -> int | None:
        return quantity_bytes(self.o.capacity)

    def check_putting(self) -> None:
        if self.o.clients != 1 or self.o.block:
            raise ConfigError(PUT_REFUSED)

    def put(self, files: list[tuple[Worker, str, str]]) -> None:
        """Each file written in its pod from arguments of PUT_CHUNK characters each (exec
        has no stdin here; an argument is at most 128 KiB)."""
        for worker, path, text in files:
            self._put_one(worker.key, path, text)

    def _put_one(self, pod: str, path: str, text: str) -> None:
        name = path.rsplit("/", 1)[-1]
        chunk = PUT_CHUNK if text.isascii() else PUT_CHUNK // 4  # UTF-8: up to 4 bytes each
        for start in range(0, max(len(text), 1), chunk):
            into = ">" if start == 0 else ">>"
            res = self._kube().exec(self.namespace, pod, [
                "sh", "-c", f'printf "%s" "$1" {into} {shlex.quote(path)}', "sh",
                text[start:start + chunk]], deadline_s=120)
            if res.timed_out or res.returncode != 0:
                raise KubeError(f"writing {name} in pod {self.namespace}/{pod} failed (exit"
                                f" code {res.returncode}): {res.stderr.strip()[-300:]}")

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        shipped = set(self.layout.jobs) if self.layout is not None else None
        return PodExecutor(self._kube(), self.namespace, JOBS_DIR, WORK_DIR,
                           dict(self.o.limits).get("memory"), workdir / "pod-logs", shipped)

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        self.storage.between(self, test, keep, self.deadline(test), self.uid)

    def _remove_files(self, keep: set[str]) -> None:
        assert self.layout is not None
        script = remove_script(str(self.layout.scratch), keep)
        pods = [p for p, _ in self.layout.pods]
        for pod in dict.fromkeys(pods if not self.o.shared_volume else pods[:1]):
            res = self._kube().exec(self.namespace, pod, ["sh", "-c", script], deadline_s=120)
            if res.timed_out or res.returncode != 0:
                raise KubeError(f"removing the previous test's files in pod"
                                f" {self.namespace}/{pod} failed (exit code {res.returncode}):"
                                f" {res.stderr.strip()}")

    def deadline(self, test: PlannedTest) -> Deadline | None:
        assert self.layout is not None
        limit = test_s(test) + TEST_GRACE_S
        left = self.started + self.layout.budget_s - time.monotonic()
        return Deadline(min(limit, max(1.0, left)),
                        f"its runtime (a size-bound test: its I/O at 256 KiB/s) +"
                        f" {TEST_GRACE_S:.0f} s, or the run's time limit")

    def cleanup(self, hurry: bool = False) -> None:
        """Delete everything created, waiting until the pods, the PVCs and (reclaim
        policy Delete) their PVs are gone (after a signal: until a second one). Raises
        KubeError naming what is left."""
        try:
            if not self.created.objects:
                return
            self.created.delete(self._kube(), self.namespace, DELETE_WAIT_S, self.note,
                                self.guard)
        finally:
            if self.outside is not None:  # the pods are stopped: nothing puts any more
                self.outside.end(hurry)

    def _kube(self) -> Kube:
        if self.kube is None:
            self.kube = Kube(self.o.kubeconfig, self.o.context)
        return self.kube
