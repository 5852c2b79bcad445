"""Metadata latency beside the load: stat, a directory listing (as `ls -la` does) and
create+unlink of a small file, every 0.5 s, in a child process (execute/fsops.py).

Study 1 saw `ls -lah` on EFS take 11.3 s while fio ran; this shows it before
production does. Every sample carries the time it began, so a stall is placed in
the run; samples are summarised per phase ("idle" before the first test, "layout"
while fio lays out its files and starts, "load" while it does I/O). The probe runs in
a process of its own: on a file system that stops answering, its system call blocks
in the kernel, and storbench, which only reads its pipe, can still stop (the probe is
then left, reported by PID).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from storbench.execute import fsops
from storbench.execute.fsops import OPERATIONS

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs",
              "fuse.sshfs", "fuse.s3fs", "fuse.rclone", "fuse.juicefs", "lustre", "9p",
              "afs", "gpfs", "beegfs", "fuse.cephfs", "efs")


def is_network_fs(fs_type: str | None) -> bool:
    return fs_type in NETWORK_FS


class MetadataProbe:
    def __init__(self, directory: Path, interval_s: float = 0.5) -> None:
        self.directory = directory
        self.interval_s = interval_s
        self.samples: list[tuple[str, float, int]] = []  # (op, began at, ns)
        self.pending: dict[str, float] = {}  # op -> began at, while it has not returned
        self.phases: list[tuple[str, float, float]] = []  # (phase, from, to)
        self.started_at = time.monotonic()
        self._phase: tuple[str, float] | None = None
        self._proc: Any = None
        self._lock = threading.Lock()

    def start(self, phase: str) -> None:
        """Samples from now on belong to ``phase`` (the child starts on first use)."""
        if self._proc is None:
            self._proc = fsops.start("probe", str(self.directory), str(self.interval_s))
            threading.Thread(target=self._read, name="probe-reader", daemon=True).start()
        self.stop()
        self._phase = (phase, time.monotonic())

    def stop(self, timeout_s: float = 0.0) -> None:
        """The current phase ends (the child goes on until close())."""
        if self._phase is not None:
            name, since = self._phase
            self.phases.append((name, since, time.monotonic()))
            self._phase = None

    def split_last(self, at: float, before: str) -> None:
        """The last phase ended began as ``before`` until ``at`` (a test's layout and
        start-up: fio's I/O, the load, began only then)."""
        if self.phases:
            name, a, b = self.phases[-1]
            if a < at < b:
                self.phases[-1:] = [(before, a, at), (name, at, b)]

    def close(self) -> int | None:
        """Stop the child; its PID when it did not end (stuck in the kernel)."""
        self.stop()
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        proc.kill()
        try:
            proc.wait(timeout=0.5)
        except Exception:
            return int(proc.pid)
        return None

    def _read(self) -> None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            return
        for line in proc.stdout:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "ns" in d:
                    self.pending.pop(d["op"], None)
                    self.samples.append((d["op"], float(d["t"]), int(d["ns"])))
                else:
                    self.pending[d["op"]] = float(d["t"])

    def summary(self) -> dict[str, Any]:
        """{op: {phase: {n, p50_ns, p99_ns, max_ns[, unfinished]}}} (nearest-rank
        percentiles). An operation still running at the end counts with the time it
        has waited."""
        now = time.monotonic()
        with self._lock:
            samples = list(self.samples)
            waiting = [(op, t, int((now - t) * 1e9)) for op, t in self.pending.items()]
        out: dict[str, Any] = {}
        for op in OPERATIONS:
            out[op] = {}
            for phase in dict.fromkeys(name for name, _, _ in self.phases):
                spans = [(a, b) for name, a, b in self.phases if name == phase]

                def inside(t: float, spans: list[tuple[float, float]] = spans) -> bool:
                    return any(a <= t <= b for a, b in spans)

                values = sorted(ns for o, t, ns in samples if o == op and inside(t))
                unfinished = [ns for o, t, ns in waiting if o == op and inside(t)]
                values = sorted(values + unfinished)
                if not values:
                    continue
                entry = {"n": len(values), "p50_ns": _rank(values, 50),
                         "p99_ns": _rank(values, 99), "max_ns": values[-1]}
                if unfinished:
                    entry["unfinished"] = len(unfinished)
                out[op][phase] = entry
        return out

    def timeline(self) -> list[list[Any]]:
        """Every sample as [op, seconds into the run when it began, ns]."""
        with self._lock:
            return [[op, round(t - self.started_at, 3), ns] for op, t, ns in self.samples]


def _rank(ordered: list[int], p: float) -> int:
    k = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(k) - 1]
