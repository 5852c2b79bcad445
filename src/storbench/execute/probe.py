"""Latency beside the load: small operations every 0.5 s, idle and while fio runs, on
what a user's other clients would wait for.

- A file system (``MetadataProbe``): stat, a directory listing (as `ls -la` does) and
  create+unlink of a small file, in a child process (execute/fsops.py). Study 1 saw
  `ls -lah` on EFS take 11.3 s while fio ran; this shows it before production does. The
  probe runs in a process of its own: on a file system that stops answering, its system
  call blocks in the kernel, and storbench, which only reads its pipe, can still stop
  (the probe is then left, reported by PID).
- An S3 bucket (``ObjectProbe``): a HEAD of a probe object, a LIST of up to 1,000 keys
  under the run's prefix (the test's objects) and a GET of the probe object timed to its
  first byte, on one kept-open connection (as an SDK keeps one), in a thread: each
  request has a timeout.

Every sample carries the time it began, so a stall is placed in the run; samples are
summarised per phase ("idle" before the first test, "layout" while fio lays out its
files and starts, "load" while it does I/O).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storbench.errors import TargetError
from storbench.execute import fsops
from storbench.execute.fsops import OPERATIONS

if TYPE_CHECKING:  # (an S3 bucket's: not loaded for a directory's probe)
    import http.client

    from storbench.execute.s3 import Endpoint

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs",
              "fuse.sshfs", "fuse.s3fs", "fuse.rclone", "fuse.juicefs", "lustre", "9p",
              "afs", "gpfs", "beegfs", "fuse.cephfs", "efs")
PROBE_OBJECT = ".storbench-probe"  # under the run's prefix: what the S3 probe HEADs and GETs
PROBE_OBJECT_BYTES = 256 * 1024  # 0.5 MB/s of GETs beside the load
LIST_KEYS = "1000"  # one page of a listing, S3's largest


def is_network_fs(fs_type: str | None) -> bool:
    return fs_type in NETWORK_FS


class Probe:
    """Samples of ``operations`` by phase; a subclass makes them (``_begin``, ``_end``)."""

    operations: tuple[str, ...] = ()

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[str, float, int]] = []  # (op, began at, ns)
        self.pending: dict[str, float] = {}  # op -> began at, while it has not returned
        self.failed: list[tuple[str, float, str]] = []  # (op, began at, why)
        self.phases: list[tuple[str, float, float]] = []  # (phase, from, to)
        self.started_at = time.monotonic()
        self._phase: tuple[str, float] | None = None
        self._begun = False
        self._lock = threading.Lock()

    def _begin(self) -> None:
        """Start sampling (on first use)."""
        raise NotImplementedError

    def _end(self) -> int | None:
        """Stop sampling; a PID left running, if any."""
        raise NotImplementedError

    def began(self, op: str, t: float) -> None:
        with self._lock:
            self.pending[op] = t

    def took(self, op: str, t: float, ns: int) -> None:
        with self._lock:
            self.pending.pop(op, None)
            self.samples.append((op, t, ns))

    def fell(self, op: str, t: float, why: str) -> None:
        with self._lock:
            self.pending.pop(op, None)
            self.failed.append((op, t, why))

    def start(self, phase: str) -> None:
        """Samples from now on belong to ``phase`` (sampling starts on first use)."""
        if not self._begun:
            self._begin()
            self._begun = True
        self.stop()
        self._phase = (phase, time.monotonic())

    def stop(self, timeout_s: float = 0.0) -> None:
        """The current phase ends (sampling goes on until close())."""
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
        """Stop sampling; a PID when it did not end (stuck in the kernel)."""
        self.stop()
        if not self._begun:
            return None
        self._begun = False
        return self._end()

    def summary(self) -> dict[str, Any]:
        """{op: {phase: {n, p50_ns, p99_ns, max_ns[, unfinished]}}} (nearest-rank
        percentiles). An operation still running at the end counts with the time it
        has waited."""
        now = time.monotonic()
        with self._lock:
            samples = list(self.samples)
            waiting = [(op, t, int((now - t) * 1e9)) for op, t in self.pending.items()]
            failed = list(self.failed)
        out: dict[str, Any] = {}
        for op in self.operations:
            out[op] = {}
            for phase in dict.fromkeys(name for name, _, _ in self.phases):
                spans = [(a, b) for name, a, b in self.phases if name == phase]

                def inside(t: float, spans: list[tuple[float, float]] = spans) -> bool:
                    return any(a <= t <= b for a, b in spans)

                values = sorted(ns for o, t, ns in samples if o == op and inside(t))
                unfinished = [ns for o, t, ns in waiting if o == op and inside(t)]
                values = sorted(values + unfinished)
                errors = [why for o, t, why in failed if o == op and inside(t)]
                if not values and not errors:
                    continue
                entry: dict[str, Any] = {
                    "n": len(values), "p50_ns": _rank(values, 50) if values else None,
                    "p99_ns": _rank(values, 99) if values else None,
                    "max_ns": values[-1] if values else None}
                if unfinished:
                    entry["unfinished"] = len(unfinished)
                if errors:  # not timed: said, with the first one's reason
                    entry["failed"] = len(errors)
                    entry["failed_why"] = errors[0]
                out[op][phase] = entry
        return out

    def timeline(self) -> list[list[Any]]:
        """Every sample as [op, seconds into the run when it began, ns]."""
        with self._lock:
            return [[op, round(t - self.started_at, 3), ns] for op, t, ns in self.samples]


class MetadataProbe(Probe):
    """A file system's metadata: in a child process (execute/fsops.py)."""

    operations = OPERATIONS

    def __init__(self, directory: Path, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.directory = directory
        self._proc: Any = None

    def _begin(self) -> None:
        self._proc = fsops.start("probe", str(self.directory), str(self.interval_s))
        threading.Thread(target=self._read, name="probe-reader", daemon=True).start()

    def _end(self) -> int | None:
        proc, self._proc = self._proc, None
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
            if "ns" in d:
                self.took(d["op"], float(d["t"]), int(d["ns"]))
            else:
                self.began(d["op"], float(d["t"]))

def _rank(ordered: list[int], p: float) -> int:
    k = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(k) - 1]


class ObjectProbe(Probe):
    """An S3 bucket's requests, beside fio's: HEAD and GET of a probe object the probe
    PUTs under the run's prefix (deleted with the run's other keys), and a LIST of the
    run's prefix, in a thread on one kept-open connection. A request that fails is
    counted with its reason (``failed``), never timed."""

    operations = ("head", "list", "first_byte")

    def __init__(self, endpoint: Endpoint, bucket: str, prefix: str,
                 interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.endpoint = endpoint
        self.bucket = bucket
        self.prefix = prefix  # the run's: PREFIX/storbench-UID/
        self.key = prefix + PROBE_OBJECT
        self._quit = threading.Event()
        self._thread: threading.Thread | None = None

    def _begin(self) -> None:
        self.endpoint.put(self.bucket, self.key, os.urandom(PROBE_OBJECT_BYTES))
        self._thread = threading.Thread(target=self._loop, name="s3-probe", daemon=True)
        self._thread.start()

    def _end(self) -> int | None:
        self._quit.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)  # a request in flight ends by its timeout
        return None

    def _loop(self) -> None:
        import http.client

        connection: http.client.HTTPConnection | None = None
        due = time.monotonic()
        while not self._quit.is_set():
            for op in self.operations:
                if self._quit.is_set():
                    break
                t = time.monotonic()
                self.began(op, t)
                try:
                    connection = connection or self.endpoint.connect()
                    ns = self._timed(connection, op)
                except (OSError, http.client.HTTPException, TargetError) as exc:
                    if connection is not None:
                        connection.close()
                    connection = None
                    self.fell(op, t, str(exc) or type(exc).__name__)
                    continue
                self.took(op, t, ns)
            due += self.interval_s
            self._quit.wait(max(0.0, due - time.monotonic()))
        if connection is not None:
            connection.close()

    def _timed(self, connection: http.client.HTTPConnection, op: str) -> int:
        """Nanoseconds of one request: a HEAD's and a LIST's to their last byte, a GET's
        to its first."""
        from storbench.execute.s3 import error_code  # (loaded before the clock starts)

        began = time.perf_counter_ns()
        if op == "list":
            response = self.endpoint.send(connection, "GET", f"/{self.bucket}", {
                "list-type": "2", "prefix": self.prefix, "max-keys": LIST_KEYS})
        else:
            response = self.endpoint.send(connection, "HEAD" if op == "head" else "GET",
                                          f"/{self.bucket}/{self.key}")
        first = response.read(1) if op == "first_byte" else b""
        took = time.perf_counter_ns() - began
        rest = response.read()
        if op != "first_byte":
            took = time.perf_counter_ns() - began
        if response.status >= 300:
            raise TargetError(f"HTTP {response.status}"
                              + (f" ({code})" if (code := error_code(first + rest)) else ""))
        return took

