"""A StorageClass's lifecycle, timed (`storbench k8s lifecycle`): volumes created,
``parallel`` at a time, each as a PVC and a pod that mounts it (as a StatefulSet
would); the PVC's and pod's states polled every POLL_S until the pod runs; one
durable 4 KiB write in the pod; then pod and PVC deleted and the PersistentVolume
watched until it is gone. analysis/lifecycle.py says what each phase is.

Between the first write and the deletion, on DATA_MIB of random data whose checksum is
taken first and verified on every copy: the pod moved (deleted, a new one on the same
claim: detach and attach again); and what the class's driver can do: a VolumeSnapshot
(→ readyToUse), a restore of it (a PVC from the snapshot and a pod: → Bound, → the first
4 KiB read back, then the whole file read once with direct I/O: lazily loaded restores
show there), a clone (a PVC from the PVC), and an online expansion to twice the size
(→ the claim's capacity is the new size; polled every EXPAND_POLL_S). A copy the driver
turns down (no object says so beforehand: a CSI driver without the CLONE_VOLUME
capability, as AWS EBS's) is known by its provisioner's ProvisioningFailed event: that
copy is then not supported (``Lifecycle.refused``), not a failure after --timeout.

Every object carries the managed-by label and the run's id (`storbench k8s cleanup`
finds what a killed run left); all are deleted on success, on errors, on Ctrl-C and
on SIGTERM.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from storbench.execute.kubecleanup import Created, delete_saying, heeding
from storbench.execute.kubernetes import DELETE_WAIT_S, Kube
from storbench.execute.kubestatus import KubeError
from storbench.execute.kubewait import Warned, container_state, events, pod_problem
from storbench.execute.signals import SignalGuard
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    KubeOptions,
    name_of,
    pod_manifest,
    pvc_manifest,
    quantity_bytes,
    snapshot_manifest,
)

POLL_S = 0.1  # how often the PVC's and the pod's states are read: the times' resolution
EXPAND_POLL_S = 0.5  # an expansion takes up to the kubelet's pod sync (about a minute)
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# one 4 KiB write opened O_SYNC: it returns once durable. (With --fsync=1 fio issues the
# sync before the next write, and a job of one write has none: it timed the write alone.)
FIRST_WRITE = ["fio", "--name=first-write", f"--filename={DATA_DIR}/storbench-first-write",
               "--rw=write", "--bs=4k", "--size=4k", "--sync=1", "--ioengine=psync",
               "--output-format=json"]
DATA_MIB = 16
DATA_FILE = f"{DATA_DIR}/storbench-data"
WRITE_DATA = ["sh", "-c", f"dd if=/dev/urandom of={DATA_FILE} bs=1M count={DATA_MIB}"
              f" 2>/dev/null && sync && md5sum {DATA_FILE}"]
CHECKSUM = ["md5sum", DATA_FILE]
FIRST_READ = ["dd", f"if={DATA_FILE}", "of=/dev/null", "bs=4k", "count=1"]
READ_BACK = ["fio", "--name=restored-read", f"--filename={DATA_FILE}", "--rw=read",
             "--bs=1m", f"--size={DATA_MIB}m", "--direct=1", "--ioengine=psync",
             "--output-format=json"]
# What external-provisioner says (event ProvisioningFailed) of a copy the driver cannot
# make (its checkDriverCapabilities); the claim's events are read every REFUSAL_POLL_S.
REFUSALS = {"clone": "does not support clone operations",
            "restore": "does not support snapshot restore"}
REFUSAL_POLL_S = 1.0


class Refused(KubeError):
    """The provisioner turned a copy down for good; ``said``: its words. Where it is not
    caught (a restore: its driver took the snapshot), the volume fails saying so."""

    def __init__(self, said: str) -> None:
        super().__init__(f"the provisioner refuses: {said}")
        self.said = said


@dataclass(frozen=True)
class Abilities:
    """What the class's driver can do beyond provision and delete (from the cluster's
    objects): the VolumeSnapshotClass to snapshot with, clones, online expansion."""

    snapshot_class: str | None = None
    clone: bool = False
    expand: bool = False


@dataclass
class OnClass:
    """What a measurement on one StorageClass's volumes works with (Lifecycle, Failover)."""

    kube: Kube
    o: KubeOptions
    uid: str
    namespace: str
    capacity: str
    timeout_s: float
    guard: SignalGuard
    note: Callable[[str], None]

    def __post_init__(self) -> None:
        # every exec in its pods ends on the run's signal (a node that does not answer
        # keeps an exec open and silent: the failover's read-back waited up to 10 min, a
        # lifecycle's commands 2, deaf to Ctrl-C)
        self.kube.interrupted = lambda: self.guard.signum


@dataclass
class Lifecycle(OnClass):
    """One class's measurement: its volumes' phases, and what was created."""

    wait_for_consumer: bool = False
    can: Abilities = field(default_factory=Abilities)
    refused: dict[str, str] = field(default_factory=dict)  # copy -> the provisioner's words
    created: Created = field(default_factory=Created)
    lock: threading.Lock = field(default_factory=threading.Lock)  # refused, from threads
    warned: Warned = field(init=False)  # what claims and pods warned of while waited for

    def __post_init__(self) -> None:
        super().__post_init__()
        self.warned = Warned(self.kube, self.namespace, self.note)

    def measure(self, volumes: int, parallel: int) -> list[dict[str, Any]]:
        """Every volume's record, in order; objects left are deleted by cleanup()."""
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            return list(pool.map(self._volume, range(volumes)))

    def cleanup(self) -> None:
        """Delete what is left (a volume that failed half-way, Ctrl-C); raise naming what
        stays."""
        self.created.delete(self.kube, self.namespace, DELETE_WAIT_S, self.note, self.guard)

    # -- one volume ---------------------------------------------------------------------

    def _create(self, manifest: dict[str, Any]) -> None:
        self.created.create(self.kube, self.namespace, manifest)

    def _forget(self, kind: str, name: str) -> None:
        self.created.forget(kind, self.namespace, name)

    def _volume(self, i: int) -> dict[str, Any]:
        name = f"{name_of(self.uid)}-v{i}"
        record: dict[str, Any] = {"volume": name, "bind": None, "running": None,
                                  "first_write": None, "delete": None, "error": None,
                                  "timeline": {}}
        record.update(snapshot=None, restore=None, restore_first_read=None,
                      restore_read_mibs=None, clone=None, reattach=None, expand=None,
                      verified=[])
        try:
            self._lifecycle(name, record)
        except KubeError as exc:
            record["error"] = str(exc)
            self.note(f"{name}: {exc}")
        return record

    def _lifecycle(self, name: str, record: dict[str, Any]) -> None:
        t0 = time.monotonic()
        mark = record["timeline"]

        def at(event: str) -> float:
            mark[event] = round(time.monotonic() - t0, 3)
            return float(mark[event])

        self.guard.check()
        self._create(pvc_manifest(self.uid, self.namespace, self.o, self.capacity, name))
        created = at("pvc_created")
        self._create(pod_for(self.uid, self.namespace, self.o, name, name,
                             int(self.timeout_s) + 120))
        pod_created = at("pod_created")
        selected: list[float] = [] if self.wait_for_consumer else [created]

        def node_chosen(pvc: Any) -> None:
            if not selected and SELECTED_NODE in (pvc.metadata.annotations or {}):
                selected.append(at("node_selected"))

        bound_at, running_at, pvc, pod = self._wait_running(name, t0, node_chosen)
        bound = mark["bound"] = round(bound_at - t0, 3)
        running = mark["running"] = round(running_at - t0, 3)
        # bound before the annotation was seen (pre-bound): from Bound itself
        chosen = selected[0] if selected and selected[0] <= bound else bound
        record["bind"] = round(bound - chosen, 3)
        record["pv"] = pvc.spec.volume_name
        record["running"] = round(running - pod_created, 3)
        record["node"] = pod.spec.node_name
        record["first_write"] = self._first_write(name)
        at("first_write_done")
        self._abilities(name, record, at)
        self._delete(name, record, at)

    def _first_write(self, pod: str) -> float:
        res = self.kube.exec(self.namespace, pod, FIRST_WRITE, deadline_s=120)
        if res.timed_out or res.returncode != 0:
            raise KubeError(f"the first write in pod {self.namespace}/{pod} failed (exit code"
                            f" {res.returncode}): {res.stderr.strip() or res.stdout[-500:]}")
        job = json.loads(res.stdout[res.stdout.index("{"):])["jobs"][0]
        if job.get("error"):
            raise KubeError(f"fio's first write in pod {pod} failed: error {job['error']}")
        if job["write"]["total_ios"] != 1:
            raise KubeError(f"fio's first write in pod {pod} issued"
                            f" {job['write']['total_ios']} writes, not the one asked")
        return round(float(job["write"]["lat_ns"]["mean"]) / 1e9, 6)

    # -- what the driver can do -----------------------------------------------------------

    def _run(self, pod: str, argv: list[str], what: str) -> str:
        res = self.kube.exec(self.namespace, pod, argv, deadline_s=120)
        if res.timed_out or res.returncode != 0:
            raise KubeError(f"{what} in pod {self.namespace}/{pod} failed (exit code"
                            f" {res.returncode}): {res.stderr.strip() or res.stdout[-500:]}")
        return res.stdout

    def _verify(self, pod: str, checksum: str, copy: str, record: dict[str, Any]) -> None:
        found = self._run(pod, CHECKSUM, f"reading the {copy}'s data back").split()[:1]
        if found != [checksum]:
            raise KubeError(f"the {copy} does not hold the data written before it: md5"
                            f" {found[0] if found else 'none'}, written {checksum}")
        record["verified"].append(copy)

    def _copy(self, name: str, data_source: dict[str, str],
              copy: str) -> tuple[float, float, float]:
        """A PVC from ``data_source`` and a pod on it: seconds from the claim's creation to
        Bound, to the pod Running and to its first 4 KiB read back. Refused if the
        provisioner says the driver cannot make this ``copy`` (REFUSALS)."""
        t0 = time.monotonic()
        self._create(pvc_manifest(self.uid, self.namespace, self.o, self.capacity, name,
                                  data_source))
        self._create(pod_for(self.uid, self.namespace, self.o, name, name,
                             int(self.timeout_s) + 120))
        look_at = [t0 + REFUSAL_POLL_S]

        def refusal(pvc: Any) -> None:
            if pvc.status.phase != "Pending" or time.monotonic() < look_at[0]:
                return
            look_at[0] = time.monotonic() + REFUSAL_POLL_S
            for line in self.kube.events(self.namespace, "PersistentVolumeClaim", name):
                if line.startswith("Warning ProvisioningFailed:") and REFUSALS[copy] in line:
                    raise Refused(line.split(":", 1)[1].strip().rsplit(" (x", 1)[0])

        bound, running, _, _ = self._wait_running(name, t0, refusal)
        self._run(name, FIRST_READ, "the first read")
        return bound - t0, running - t0, time.monotonic() - t0

    def _wait_running(self, name: str, t0: float,
                      on_claim: Callable[[Any], None] = lambda pvc: None,
                      ) -> tuple[float, float, Any, Any]:
        """Poll the claim and the pod of that name every POLL_S until the pod runs (each
        claim read also given to ``on_claim``): when it was Bound and when Running
        (monotonic; Bound no later than Running), the claim and the pod as last read."""
        bound = None
        while True:
            self.guard.check()
            pvc = self.kube.read("PersistentVolumeClaim", name, self.namespace)
            pod = self.kube.read("Pod", name, self.namespace)
            if pvc is None or pod is None:
                raise KubeError(f"the PVC or pod {self.namespace}/{name} was deleted by"
                                " someone else")
            on_claim(pvc)
            now = time.monotonic()
            if bound is None and pvc.status.phase == "Bound":
                bound = now
            if pod.status.phase == "Running" and container_state(pod) == "running":
                return bound if bound is not None else now, now, pvc, pod
            problem = pod_problem(pod)
            if problem:
                raise KubeError(f"pod cannot start: {problem}"
                                + events(self.kube, self.namespace, "Pod", name))
            if now - t0 > self.timeout_s:
                what = "not bound" if bound is None else "not running"
                raise KubeError(f"pod {self.namespace}/{name}: {what} after {self.timeout_s:.0f} s"
                                + events(self.kube, self.namespace, "PersistentVolumeClaim",
                                         name) + events(self.kube, self.namespace, "Pod", name))
            self.warned.look(pod, name if bound is None else None, t0 + self.timeout_s - now)
            time.sleep(POLL_S)

    def _abilities(self, name: str, record: dict[str, Any], at: Callable[[str], float]) -> None:
        checksum = self._run(name, WRITE_DATA, f"writing {DATA_MIB} MiB to check").split()[0]
        if self.can.snapshot_class:
            snap = f"{name}-snap"
            at("snapshot_created")
            start = time.monotonic()
            self._create(snapshot_manifest(self.uid, self.namespace, self.o, snap, name,
                                           self.can.snapshot_class))
            record["snapshot"] = round(self._snapshot_ready(snap) - start, 3)
            at("snapshot_ready")
            restored = f"{name}-restore"
            bound, _, first = self._copy(restored, {
                "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                "name": snap}, "restore")
            record["restore"], record["restore_first_read"] = round(bound, 3), round(first, 3)
            record["restore_read_mibs"] = self._read_back(restored)
            self._verify(restored, checksum, "restore", record)
            self._delete_all([("Pod", restored), ("PersistentVolumeClaim", restored),
                              ("VolumeSnapshot", snap)])
        if self.can.clone and "clone" not in self.refused:
            cloned = f"{name}-clone"
            try:
                bound, _, _ = self._copy(cloned, {"kind": "PersistentVolumeClaim",
                                                  "name": name}, "clone")
            except Refused as exc:  # the next volumes do not ask again
                with self.lock:
                    said_before = "clone" in self.refused
                    self.refused.setdefault("clone", exc.said)
                if not said_before:
                    self.note(f"no clones: the provisioner says {exc.said}")
            else:
                record["clone"] = round(bound, 3)
                self._verify(cloned, checksum, "clone", record)
            self._delete_all([("Pod", cloned), ("PersistentVolumeClaim", cloned)])
        # the pod moved: deleted, and a new one on the same claim (detach, attach, mount)
        at("pod_moved")
        start = time.monotonic()
        self._delete_all([("Pod", name)])
        self._create(pod_for(self.uid, self.namespace, self.o, name, name,
                             int(self.timeout_s) + 120))
        _, running, _, _ = self._wait_running(name, start)
        record["reattach"] = round(running - start, 3)
        at("reattached")
        self._verify(name, checksum, "volume after the pod moved", record)
        if self.can.expand:
            record["expand"] = round(self._expand(name), 3)
            at("expanded")

    def _snapshot_ready(self, snap: str) -> float:
        deadline = time.monotonic() + self.timeout_s
        while True:
            self.guard.check()
            found = self.kube.read("VolumeSnapshot", snap, self.namespace)
            status = (found or {}).get("status") or {}
            if status.get("readyToUse"):
                return time.monotonic()
            if status.get("error"):
                raise KubeError(f"VolumeSnapshot {snap}: {status['error'].get('message')}")
            if time.monotonic() > deadline:
                raise KubeError(f"VolumeSnapshot {snap} not ready after {self.timeout_s:.0f} s"
                                + events(self.kube, self.namespace, "VolumeSnapshot", snap))
            time.sleep(POLL_S)

    def _read_back(self, pod: str) -> float:
        """MiB/s of the restored data's first read (direct I/O, fio)."""
        out = self._run(pod, READ_BACK, "reading the restored data")
        job = json.loads(out[out.index("{"):])["jobs"][0]
        if job.get("error"):
            raise KubeError(f"fio's read of the restored data failed: error {job['error']}")
        return round(float(job["read"]["bw_bytes"]) / 2**20, 1)

    def _expand(self, name: str) -> float:
        """Seconds from the resize to the claim's capacity at twice the size (online: the
        pod runs; the kubelet expands on the node at its next sync of the pod)."""
        size = quantity_bytes(self.capacity)
        if not size:
            raise KubeError(f"cannot double the capacity {self.capacity!r} to expand it")
        target = 2 * size
        start = time.monotonic()
        self.kube.resize_claim(self.namespace, name, str(target))
        while True:
            self.guard.check()
            pvc = self.kube.read("PersistentVolumeClaim", name, self.namespace)
            have = quantity_bytes(((pvc.status.capacity or {}) if pvc else {}).get("storage"))
            if have is not None and have >= target:
                return time.monotonic() - start
            if time.monotonic() - start > self.timeout_s:
                raise KubeError(f"PVC {self.namespace}/{name}: not expanded after"
                                f" {self.timeout_s:.0f} s"
                                + events(self.kube, self.namespace, "PersistentVolumeClaim",
                                         name))
            time.sleep(EXPAND_POLL_S)

    def _delete_all(self, objects: list[tuple[str, str]]) -> None:
        problems = delete_saying(self.kube, [(kind, self.namespace, n) for kind, n in objects],
                                 DELETE_WAIT_S, self.note, heeding(self.kube.interrupted))
        if problems:
            raise KubeError("; ".join(problems))
        for kind, n in objects:
            self._forget(kind, n)

    def _delete(self, name: str, record: dict[str, Any], at: Callable[[str], float]) -> None:
        """The pod goes first (not timed); then PVC deleted -> PV gone."""
        problems, _ = self.kube.delete_and_wait([("Pod", self.namespace, name)], DELETE_WAIT_S)
        if problems:
            raise KubeError("; ".join(problems))
        self._forget("Pod", name)
        pv_name = record.get("pv")
        pv = self.kube.read_pv(pv_name) if pv_name else None
        policy = pv.spec.persistent_volume_reclaim_policy if pv is not None else None
        start = at("pvc_deleted")
        problems, retained = self.kube.delete_and_wait(
            [("PersistentVolumeClaim", self.namespace, name)], DELETE_WAIT_S)
        if problems:
            raise KubeError("; ".join(problems))
        self._forget("PersistentVolumeClaim", name)
        gone = at("pv_gone")
        if retained or policy not in (None, "Delete"):
            record["delete_note"] = f"the PV stays (reclaim policy {policy})"
        else:
            record["delete"] = round(gone - start, 3)


LIFECYCLE_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"},
                       "limits": {"memory": "256Mi"}}


def pod_for(uid: str, namespace: str, o: KubeOptions, name: str, claim: str,
            deadline_s: int) -> dict[str, Any]:
    """The benchmark pod, without the job files' ConfigMap (it runs fio commands). Its
    requests are small: it idles but for a few small commands, and up to two pods per
    volume run at once (the volume's and a copy's), which a benchmark's default requests
    would leave Pending on a small node."""
    manifest = pod_manifest(uid, namespace, o, deadline_s, name, claim)
    spec = manifest["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "jobs"]
    container = spec["containers"][0]
    container["resources"] = LIFECYCLE_RESOURCES
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "jobs"]
    spec.pop("affinity", None)
    return manifest
