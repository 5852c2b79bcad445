"""What a cgroup's I/O cap let through while fio ran (``run --explain``), as the cgroup's
own counters say: the I/Os of this process's cgroup on the device beneath the target and
their bytes (blkio.throttle.io_serviced and io_service_bytes beside it, cgroup v1;
io.stat's rios, wios, rbytes and wbytes, v2: execute/beneath.py finds the file), read
every slice of a test's trace on the monotonic clock the trace's slices keep, so that the
rate of its measured I/O alone (its layout left out) can be set beside the cap's limits,
of IOPS and of bytes a second (analysis/explain.py). An fdatasync's flush is a write
there (an empty bio with a preflush): a commit's write and its sync are two of the cap's
I/Os, where fio counts one.

A cap of blk-throttle's holds the I/Os beyond its limit in bursts (slices of time: a few
wait tens of milliseconds, the rest none), so it sets a test's rate where its p99 may not
show it; the count says it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

MIN_SPAN_S = 0.5  # a rate over less than this, between two readings, is not told
V1_IOS, V1_BYTES = "blkio.throttle.io_serviced", "blkio.throttle.io_service_bytes"


class Served(NamedTuple):
    """What a cgroup let through to a device: its I/Os, and their bytes (None: not kept,
    a v1 cgroup whose io_service_bytes is not read); counts since the cgroup began, or
    their rates a second (Counted.rate)."""

    reads: float
    writes: float
    read_bytes: float | None = None
    write_bytes: float | None = None


def served(path: str, device: str) -> Served | None:
    """The reads and writes, and their bytes, the cgroup's counter file ``path`` holds
    for ``device`` (MAJ:MIN): v1's lines "7:0 Read 12", "7:0 Write 34" (and their bytes
    in the same lines of its io_service_bytes beside it); v2's "7:0 rbytes=4096 wbytes=…
    rios=12 wios=34 …". None: unreadable, or the device not in it."""
    ios = _counts(path, device, "rios", "wios")
    if ios is None:
        return None
    where = Path(path)  # (v1 keeps the bytes in a file beside the I/Os, as "Read" lines)
    done = _counts(str(where.with_name(V1_BYTES) if where.name == V1_IOS else where),
                   device, "rbytes", "wbytes")
    return Served(*ios, *(done or (None, None)))


def _counts(path: str, device: str, reads_key: str, writes_key: str
            ) -> tuple[int, int] | None:
    """The reads and writes a counter file holds for ``device``: v1's "Read"/"Write"
    lines, or v2's ``reads_key``=… and ``writes_key``=… of the device's line."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    reads = writes = None
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != device:
            continue
        if len(words) == 3 and words[2].isdigit():
            if words[1] == "Read":
                reads = int(words[2])
            elif words[1] == "Write":
                writes = int(words[2])
            continue
        pairs = dict(w.partition("=")[::2] for w in words[1:])
        if pairs.get(reads_key, "").isdigit() and pairs.get(writes_key, "").isdigit():
            reads, writes = int(pairs[reads_key]), int(pairs[writes_key])
    if reads is None and writes is None:
        return None
    return reads or 0, writes or 0


@dataclass
class Counted:
    """The counter's readings: (monotonic ns, what it had let through)."""

    readings: list[tuple[int, Served]] = field(default_factory=list)

    def rate(self, start_ns: int, end_ns: int) -> Served | None:
        """What it let through a second between the first and last readings within
        [start_ns, end_ns] (bytes: where both kept them); None: fewer than two readings
        there, or less than MIN_SPAN_S apart."""
        inside = [r for r in self.readings if start_ns <= r[0] <= end_ns]
        if len(inside) < 2:
            return None
        (t0, first), (t1, last) = inside[0], inside[-1]
        span = (t1 - t0) / 1e9
        if span < MIN_SPAN_S:
            return None

        def per_s(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else (b - a) / span

        return Served((last.reads - first.reads) / span, (last.writes - first.writes) / span,
                      per_s(first.read_bytes, last.read_bytes),
                      per_s(first.write_bytes, last.write_bytes))


class Sampler:
    """The counter read every ``every_s`` on a thread of its own while a test runs:
    ``start``, ``stop`` (or ``with Sampler(counter, every_s) as s: ...``), then
    ``s.counted``."""

    def __init__(self, counter: tuple[str, str], every_s: float) -> None:
        self.counter = counter
        self.every_s = every_s
        self.counted = Counted()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="storbench-capcount",
                                        daemon=True)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._read()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._read()

    def _read(self) -> None:
        got = served(*self.counter)
        if got is not None:
            self.counted.readings.append((time.monotonic_ns(), got))
