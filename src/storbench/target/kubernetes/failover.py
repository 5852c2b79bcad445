"""A failover pause, measured (`storbench k8s failover`): fio writes at a fixed rate in a
pod, each write synchronous (O_SYNC: acknowledged means durable) with a checksum header;
the pod is deleted, or evicted through the Eviction API as a node drain does (a 1 s
grace period, which its idle main process does not use: the pod dies); a new pod mounts
the same PVC once the kubelet has stopped the old one's containers (so the two never
overlap) and writes again; then fio reads back every write acknowledged before the pause
and checks it.

Times are storbench's clock: the last acknowledged write before is when fio's last
status report (every STATUS_S) that counted a new write arrived; the first after is
when the new pod's first synchronous write returned. Parts (they add up to the
pause): last write → old pod gone (its containers stopped), old pod gone → new pod
running (scheduling, attach, mount), new pod running → first write.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from storbench.errors import Interrupted
from storbench.execute.kubecleanup import Created
from storbench.execute.kubernetes import DELETE_WAIT_S
from storbench.execute.kubestatus import KubeError
from storbench.execute.kubewait import wait_running
from storbench.target.kubernetes.lifecycle import OnClass, pod_for
from storbench.target.kubernetes.manifests import DATA_DIR, name_of, pvc_manifest

STATUS_S = 0.25
FILE = f"{DATA_DIR}/storbench-failover"
BS = 4096


def writer(rate: int, size: int) -> list[str]:
    return ["fio", "--name=failover", f"--filename={FILE}", "--rw=write", f"--bs={BS}",
            f"--size={size}", f"--rate_iops={rate}", "--sync=1", "--ioengine=psync",
            "--verify=crc32c", "--do_verify=0", f"--status-interval={int(STATUS_S * 1000)}ms",
            "--output-format=json"]


def verifier(writes: int) -> list[str]:
    return ["fio", "--name=failover", f"--filename={FILE}", "--rw=write", f"--bs={BS}",
            f"--size={writes * BS}", "--ioengine=psync", "--verify=crc32c", "--verify_only",
            "--output-format=json"]


@dataclass
class _Acks:
    """fio's status reports as they stream in: the acknowledged writes and when."""

    text: str = ""
    writes: int = 0
    last_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def feed(self, data: str) -> None:
        with self.lock:
            self.text += data
            while "\n}\n" in self.text:
                doc, self.text = self.text.split("\n}\n", 1)
                try:
                    job = json.loads(doc[doc.index("{"):] + "\n}")["jobs"][0]
                except (ValueError, KeyError, IndexError):
                    continue
                done = int(job["write"]["total_ios"])
                if done > self.writes:
                    self.writes, self.last_at = done, time.monotonic()


@dataclass
class Failover(OnClass):
    evict: bool = False  # the Eviction API (as a node drain), not a plain delete
    created: Created = field(default_factory=Created)

    def measure(self, rate: int, before_s: float) -> dict[str, Any]:
        claim = name_of(self.uid)
        old, new = f"{claim}-a", f"{claim}-b"
        self._create(pvc_manifest(self.uid, self.namespace, self.o, self.capacity, claim))
        self._create(pod_for(self.uid, self.namespace, self.o, old, claim,
                             int(self.timeout_s * 2 + before_s)))
        self._running(old, claim)
        acks = _Acks()
        size = rate * BS * int(before_s * 3 + 60)
        thread = threading.Thread(target=self._write, args=(old, rate, size, acks), daemon=True)
        thread.start()
        self.note(f"writing {rate} synchronous 4 KiB writes/s in pod {old} for {before_s:g} s")
        self.guard.sleep(before_s)
        if acks.last_at is None:
            raise KubeError(f"fio in pod {old} reported no write in {before_s:g} s")
        deleted = time.monotonic()
        how = "evicting" if self.evict else "deleting"
        self.note(f"{how} pod {old} ({acks.writes} writes acknowledged so far; it writes"
                  " until its containers stop)")
        # a grace period: the pod's object stays until its containers are stopped (at
        # grace 0 it goes at once while fio may still write: the two pods would overlap)
        problems, _ = self.kube.delete_and_wait([("Pod", self.namespace, old)], DELETE_WAIT_S,
                                                grace_s=1, evict=self.evict)
        if problems:
            raise KubeError("; ".join(problems))
        gone = time.monotonic()
        self.created.forget("Pod", self.namespace, old)
        thread.join(5)
        last_at, writes = acks.last_at, acks.writes
        self._create(pod_for(self.uid, self.namespace, self.o, new, claim,
                             int(self.timeout_s * 2)))
        self._running(new, claim)
        running = time.monotonic()
        res = self.kube.exec(self.namespace, new, [
            "fio", "--name=after", f"--filename={FILE}-after", "--rw=write", f"--bs={BS}",
            f"--size={BS}", "--sync=1", "--ioengine=psync", "--output-format=json"],
            deadline_s=120)
        first = time.monotonic()
        if res.timed_out or res.returncode != 0:
            raise KubeError(f"the first write in the new pod {new} failed: {res.stderr.strip()}")
        self.note(f"reading back the {writes} acknowledged writes in pod {new} (all the old"
                  " pod's)")
        check = self.kube.exec(self.namespace, new, verifier(writes), deadline_s=600)
        lost = check.returncode != 0 or check.timed_out
        return {
            "rate_iops": rate, "acknowledged_writes": writes,
            "ended_by": "eviction" if self.evict else "deletion",
            "pause_s": round(first - last_at, 3),
            # the pause's parts add up to it; the dying pod may still write after the
            # delete request (its containers stop some time later)
            "parts": {"last_write_to_old_gone_s": round(gone - last_at, 3),
                      "old_gone_to_new_running_s": round(running - gone, 3),
                      "new_running_to_first_write_s": round(first - running, 3)},
            "delete_to_old_gone_s": round(gone - deleted, 3),
            "wrote_after_delete_s": round(last_at - deleted, 3),
            "status_interval_s": STATUS_S,
            "intact": not lost,
            "verify_message": (check.stderr.strip() or check.stdout[-500:]) if lost else "",
        }

    def cleanup(self) -> None:
        """Delete what is left; raise naming what stays."""
        self.created.delete(self.kube, self.namespace, DELETE_WAIT_S, self.note, self.guard)

    def _create(self, manifest: dict[str, Any]) -> None:
        self.created.create(self.kube, self.namespace, manifest)

    def _running(self, pod: str, claim: str) -> None:
        wait_running(self.kube, self.namespace, [(pod, claim)], self.guard, self.note,
                     time.monotonic() + self.timeout_s)

    def _write(self, pod: str, rate: int, size: int, acks: _Acks) -> None:
        try:  # ends when the pod is deleted under it, or at a signal
            self.kube.exec(self.namespace, pod, writer(rate, size), on_stdout=acks.feed)
        except (KubeError, Interrupted):
            pass
