"""A StorageClass's lifecycle, timed (`storbench k8s lifecycle`): volumes created,
``parallel`` at a time, each as a PVC and a pod that mounts it (as a StatefulSet
would); the PVC's and pod's states polled every POLL_S until the pod runs; one
durable 4 KiB write in the pod; then pod and PVC deleted and the PersistentVolume
watched until it is gone. analysis/lifecycle.py says what each phase is.

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

from storbench.execute.kubepods import container_state, events, pod_problem
from storbench.execute.kubernetes import DELETE_WAIT_S, Kube
from storbench.execute.kubestatus import KubeError
from storbench.execute.signals import SignalGuard
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    KubeOptions,
    name_of,
    pod_manifest,
    pvc_manifest,
)

POLL_S = 0.1  # how often the PVC's and the pod's states are read: the times' resolution
SELECTED_NODE = "volume.kubernetes.io/selected-node"
FIRST_WRITE = ["fio", "--name=first-write", f"--filename={DATA_DIR}/storbench-first-write",
               "--rw=write", "--bs=4k", "--size=4k", "--fsync=1", "--ioengine=psync",
               "--output-format=json"]


@dataclass
class Lifecycle:
    """One class's measurement: its volumes' phases, and what was created."""

    kube: Kube
    o: KubeOptions
    uid: str
    namespace: str
    capacity: str
    timeout_s: float
    guard: SignalGuard
    note: Callable[[str], None]
    wait_for_consumer: bool = False
    created: list[tuple[str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def measure(self, volumes: int, parallel: int) -> list[dict[str, Any]]:
        """Every volume's record, in order; objects left are deleted by cleanup()."""
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            return list(pool.map(self._volume, range(volumes)))

    def cleanup(self) -> list[str]:
        """Delete what is left (a volume that failed half-way, Ctrl-C): what stays."""
        with self.lock:
            left, self.created = self.created[::-1], []
        if not left:
            return []
        problems, _ = self.kube.delete_and_wait(left, DELETE_WAIT_S)
        return problems

    # -- one volume ---------------------------------------------------------------------

    def _create(self, manifest: dict[str, Any]) -> None:
        self.kube.create(manifest)
        with self.lock:
            self.created.append((manifest["kind"], self.namespace,
                                 manifest["metadata"]["name"]))

    def _forget(self, kind: str, name: str) -> None:
        with self.lock:
            self.created = [c for c in self.created if c != (kind, self.namespace, name)]

    def _volume(self, i: int) -> dict[str, Any]:
        name = f"{name_of(self.uid)}-v{i}"
        record: dict[str, Any] = {"volume": name, "bind": None, "running": None,
                                  "first_write": None, "delete": None, "error": None,
                                  "timeline": {}}
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
        selected = None if self.wait_for_consumer else created
        bound = running = None
        deadline = t0 + self.timeout_s
        while running is None:
            self.guard.check()
            pvc = self.kube.read("PersistentVolumeClaim", name, self.namespace)
            pod = self.kube.read("Pod", name, self.namespace)
            if pvc is None or pod is None:
                raise KubeError(f"the PVC or pod {self.namespace}/{name} was deleted by"
                                " someone else")
            if selected is None and SELECTED_NODE in (pvc.metadata.annotations or {}):
                selected = at("node_selected")
            if bound is None and pvc.status.phase == "Bound":
                bound = at("bound")
                if selected is None:  # bound before we saw the annotation: same poll
                    selected = bound
                record["bind"] = round(bound - selected, 3)
                record["pv"] = pvc.spec.volume_name
            if pod.status.phase == "Running" and container_state(pod) == "running":
                running = at("running")
                record["running"] = round(running - pod_created, 3)
                record["node"] = pod.spec.node_name
                break
            problem = pod_problem(pod)
            if problem:
                raise KubeError(f"pod cannot start: {problem}"
                                + events(self.kube, self.namespace, "Pod", name))
            if time.monotonic() > deadline:
                what = "not bound" if bound is None else "not running"
                raise KubeError(f"{what} after {self.timeout_s:.0f} s"
                                + events(self.kube, self.namespace, "PersistentVolumeClaim",
                                         name) + events(self.kube, self.namespace, "Pod", name))
            time.sleep(POLL_S)
        record["first_write"] = self._first_write(name)
        at("first_write_done")
        self._delete(name, record, at)

    def _first_write(self, pod: str) -> float:
        res = self.kube.exec(self.namespace, pod, FIRST_WRITE, deadline_s=120)
        if res.timed_out or res.returncode != 0:
            raise KubeError(f"the first write in pod {self.namespace}/{pod} failed (exit code"
                            f" {res.returncode}): {res.stderr.strip() or res.stdout[-500:]}")
        job = json.loads(res.stdout[res.stdout.index("{"):])["jobs"][0]
        if job.get("error"):
            raise KubeError(f"fio's first write in pod {pod} failed: error {job['error']}")
        write_ns = float(job["write"]["lat_ns"]["mean"])
        sync_ns = float(job["sync"]["lat_ns"]["mean"])
        return round((write_ns + sync_ns) / 1e9, 6)

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


def pod_for(uid: str, namespace: str, o: KubeOptions, name: str, claim: str,
            deadline_s: int) -> dict[str, Any]:
    """The benchmark pod, without the job files' ConfigMap (it runs fio commands)."""
    manifest = pod_manifest(uid, namespace, o, deadline_s, name, claim)
    spec = manifest["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "jobs"]
    container = spec["containers"][0]
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "jobs"]
    spec.pop("affinity", None)
    return manifest
