"""Metadata latency beside the load: stat, a directory listing (as `ls -la` does) and
create+unlink of a small file, every 0.5 s, in a thread of storbench's own.

Study 1 saw `ls -lah` on EFS take 11.3 s while fio ran; this shows it before
production does. Samples are kept per phase ("idle" before the first test,
"load" while fio runs).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

OPERATIONS = ("stat", "listdir", "create_unlink")
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs",
              "fuse.sshfs", "fuse.s3fs", "fuse.rclone", "fuse.juicefs", "lustre", "9p",
              "afs", "gpfs", "beegfs", "fuse.cephfs", "efs")


def is_network_fs(fs_type: str | None) -> bool:
    return fs_type in NETWORK_FS


class MetadataProbe:
    def __init__(self, directory: Path, interval_s: float = 0.5) -> None:
        self.directory = directory
        self.interval_s = interval_s
        self.samples: dict[str, dict[str, list[int]]] = {}
        self._phase: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._blocked_since: float | None = None

    def start(self, phase: str) -> None:
        self.stop()
        self._phase = phase
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"probe-{phase}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout_s)
        self._thread = None

    def _loop(self) -> None:
        phase = self._phase or "load"
        bucket = self.samples.setdefault(phase, {op: [] for op in OPERATIONS})
        probe_file = self.directory / f".storbench-probe-{os.getpid()}"
        while not self._stop.is_set():
            tick = time.monotonic()
            for op in OPERATIONS:
                t0 = time.perf_counter_ns()
                self._blocked_since = time.monotonic()
                try:
                    if op == "stat":
                        os.stat(self.directory)
                    elif op == "listdir":
                        with os.scandir(self.directory) as it:
                            for entry in it:
                                entry.stat(follow_symlinks=False)
                    else:
                        fd = os.open(probe_file, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
                        os.write(fd, b"x" * 512)
                        os.close(fd)
                        os.unlink(probe_file)
                except OSError:
                    continue
                finally:
                    self._blocked_since = None
                bucket[op].append(time.perf_counter_ns() - t0)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - tick)))

    def summary(self) -> dict[str, Any]:
        """{op: {phase: {n, p50_ns, p99_ns, max_ns}}} (nearest-rank percentiles)."""
        out: dict[str, Any] = {}
        for op in OPERATIONS:
            out[op] = {}
            for phase, ops in self.samples.items():
                values = sorted(ops[op])
                if not values:
                    continue
                out[op][phase] = {
                    "n": len(values),
                    "p50_ns": _rank(values, 50),
                    "p99_ns": _rank(values, 99),
                    "max_ns": values[-1],
                }
        return out


def _rank(ordered: list[int], p: float) -> int:
    k = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(k) - 1]
