"""A StorageClass's lifecycle times (`storbench k8s lifecycle`): per volume, how long
each phase took; per class, their p50, p90 and maximum; and assertions on them
(``lifecycle.bind.p90 < 30s``).

Phases (seconds, as storbench saw them by polling the API every 0.1 s):

- ``bind``: PVC created -> Bound (WaitForFirstConsumer: from the scheduler choosing a
  node for the pod, the PVC's selected-node annotation);
- ``running``: pod created -> Running with the volume mounted (attach and mount);
- ``first_write``: the first durable 4 KiB write in the running pod (fio: one write
  opened O_SYNC, which returns once durable; fio's own latency). Runs stored before
  (``first_write_sync`` absent) timed the write alone: fio's ``--fsync=1`` syncs before
  the next write, and a job of one write has none (~30 µs where the durable write takes
  ~600 µs on the test-bed's disk). Their figure is said so and not judged;
- ``reattach``: the pod deleted -> a new pod on the same claim Running (detach, attach,
  mount again; on one node the same node);
- where the class's driver can (else a line saying it cannot, and why):
  ``snapshot`` VolumeSnapshot created -> readyToUse; ``restore`` a PVC from it created ->
  Bound, ``restore_first_read`` -> the first 4 KiB read back in a pod on it, and
  ``restore_read_mibs`` the restored 16 MiB read once (direct I/O, MiB/s); ``clone`` a PVC
  from the PVC created -> Bound; ``expand`` resized to twice the size -> the claim's
  capacity is the new size (online: the pod runs);
- ``delete``: PVC deleted -> its PersistentVolume gone (reclaim policy Delete).

Every copy (restore, clone, the volume after the pod moved) is checked against the md5
of the random data written before (``verified``); a mismatch fails the volume.
"""

from __future__ import annotations

import math
from typing import Any

from storbench.result.sections import LifecycleSection

PHASES = {"bind": "PVC created (WaitForFirstConsumer: node chosen) → Bound",
          "running": "pod created → Running (attach, mount)",
          "first_write": "first durable 4 KiB write",
          "snapshot": "VolumeSnapshot created → readyToUse",
          "restore": "PVC from the snapshot created → Bound",
          "restore_first_read": "PVC from the snapshot created → first 4 KiB read in a pod",
          "clone": "PVC from the PVC (clone) created → Bound",
          "reattach": "pod deleted → new pod on the claim Running (detach, attach)",
          "expand": "resized ×2 → claim's capacity is the new size (online)",
          "delete": "PVC deleted → PV gone"}
FIRST_WRITE_SYNC = "O_SYNC"  # stored with the run: how its first write was made durable
UNSYNCED = "first 4 KiB write, not durable (an earlier storbench did not time its sync)"
RATES = {"restore_read_mibs": "restored data's first read (16 MiB, direct I/O)"}
# the phases a class may not support: their row is left out when it says why
MAY_NOT = {"snapshot": "snapshot", "restore": "restore", "restore_first_read": "restore",
           "restore_read_mibs": "restore", "clone": "clone", "expand": "resize"}
STATS = ("p50", "p90", "max")
# How often storbench reads what each phase waits for (seconds): a phase seen over within
# one read is shorter than this, not zero. first_write is fio's own figure; the restored
# read's first 4 KiB ends when the read returns. (The intervals are target/kubernetes/
# lifecycle.py's POLL_S and EXPAND_POLL_S and execute/kubecleanup.py's READ_EVERY_S; a
# test holds them equal.)
READ_EVERY_S = {"bind": 0.1, "running": 0.1, "reattach": 0.1, "snapshot": 0.1,
                "restore": 0.1, "clone": 0.1, "expand": 0.5, "delete": 0.5}


def phase_label(phase: str, life: LifecycleSection) -> str:
    """What a row measured: the bind row of an Immediate class counts from the PVC's
    creation (no node is chosen first), of a WaitForFirstConsumer one from the node; the
    first write of a run stored before it was made durable is the write alone."""
    if phase == "first_write" and first_write_unsynced(life):
        return UNSYNCED
    binding_mode = life.get("binding_mode")
    if phase == "bind":
        if binding_mode == "Immediate":
            return "PVC created → Bound (Immediate)"
        if binding_mode == "WaitForFirstConsumer":
            return "node chosen for the pod → Bound (WaitForFirstConsumer)"
    return PHASES[phase]


def phase_caveat(phase: str, life: LifecycleSection) -> str:
    """What a figure of the phase must say beside it where its row label is not shown
    (`compare`): " (not durable)" for such an old run's first write."""
    return " (not durable)" if phase == "first_write" and first_write_unsynced(life) else ""


def first_write_unsynced(life: LifecycleSection) -> bool:
    """A run stored before its first write was made durable: it timed the write alone."""
    return "first_write_sync" not in life


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(volumes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per phase: p50, p90, max over the volumes that got that far, and how many."""
    out: dict[str, dict[str, Any]] = {}
    for phase in (*PHASES, *RATES):
        values = [float(v[phase]) for v in volumes if v.get(phase) is not None]
        out[phase] = {"n": len(values), "of": len(volumes), **(
            {"p50": percentile(values, 50), "p90": percentile(values, 90),
             "max": max(values)} if values else {s: None for s in STATS})}
    return out


FAILOVER_FIGURES = ("pause", "last_write_to_old_gone", "old_gone_to_new_running",
                    "new_running_to_first_write")
