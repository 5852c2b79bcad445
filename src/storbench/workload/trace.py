"""An application's recorded I/O (`storbench record`), as fio replays it (`run --replay`).

A trace is what strace or bpftrace (eBPF) saw the application's processes do to the
files under one directory (or the blk tracer saw reach one device): each read, write,
sync with its file, offset, length and time. It is kept as fio's iolog version 3 (``fio
version 3 iolog``; timestamps in microseconds from the first I/O), with files named
``f0001``, ``f0002``… and their names relative to the recorded directory beside it
(``files``): the iolog itself holds no name a user or an application chose, so nothing
in it can point fio elsewhere, and ``from_iolog`` refuses any other name. A trace holds
no data, only offsets and sizes.

What a file-level view leaves out (said with the trace, ``skipped``): I/O through mmap,
asynchronous I/O (io_submit, io_uring), metadata calls (rename, unlink, mkdir,
ftruncate, fallocate), files outside the directory, and the calls of other processes.
Offsets of read()/write() follow each descriptor's position (lseek, dup); across
processes that share one by fork, from strace the last position one of them left is
used, from bpftrace each process's own copy from the fork on.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from storbench.errors import ConfigError

IOLOG_NAME_MAX = 256  # fio reads an iolog line with sscanf("%256s ...")


def check_iolog_name(name: str) -> None:
    """ConfigError unless fio's I/O log can name the file ``name`` (a replay opens it)."""
    if len(name) > IOLOG_NAME_MAX or re.search(r"\s", name):
        raise ConfigError(
            f"a replay names each file in fio's I/O log, which reads a name of at most"
            f" {IOLOG_NAME_MAX} characters and no space; {name!r} is not one: give a TARGET"
            " whose path has no space (or is shorter)")

HEADER = "fio version 3 iolog"
# fio 3.33 takes a time of 0 for "no I/O yet": every I/O at 0, and the wait after the
# last of them, were replayed at once (0, 0, 300 ms: the 300 ms never waited). A replay's
# times start at 1 µs, which it waits for from the first I/O on.
REPLAY_START_US = 1
_NAME = re.compile(r"f\d{4,6}")
_IOLOG_LINE = re.compile(r"^(\d+) (\S+) (add|open|close|read|write|sync|datasync|trim)"
                         r"(?: (\d+) (\d+))?$")


def io_mode(direct: int | None, data: int) -> str | None:
    """How ``data`` reads and writes, ``direct`` of them through an O_DIRECT descriptor,
    were issued: 'direct' (every one), 'buffered' (none), 'mixed', or None (not known)."""
    if direct is None:
        return None
    if direct == 0 or data == 0:
        return "buffered"
    return "direct" if direct >= data else "mixed"


@dataclass(frozen=True)
class Op:
    at_us: int  # from the first I/O
    file: str  # f0001...
    action: str  # read, write, sync, datasync
    offset: int = 0
    length: int = 0


@dataclass
class Trace:
    ops: list[Op]
    files: dict[str, str]  # f0001 -> its name relative to the recorded directory
    skipped: dict[str, int] = field(default_factory=dict)  # what was seen, not kept
    depth: int = 1  # the most I/O calls in flight at once
    # how many of its reads and writes went through an O_DIRECT descriptor (None: not
    # known, a trace stored before storbench looked; or not asked, a block-level trace)
    direct: int | None = 0

    # --- what it holds ----------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        by = Counter(o.action for o in self.ops)
        return {"reads": by["read"], "writes": by["write"],
                "syncs": by["sync"] + by["datasync"],
                "read_bytes": sum(o.length for o in self.ops if o.action == "read"),
                "write_bytes": sum(o.length for o in self.ops if o.action == "write"),
                "files": len(self.files)}

    def io_mode(self) -> str | None:
        """io_mode() of its reads and writes."""
        c = self.counts()
        return io_mode(self.direct, c["reads"] + c["writes"])

    @property
    def duration_s(self) -> float:
        return self.ops[-1].at_us / 1e6 if self.ops else 0.0

    def read_extents(self) -> dict[str, int]:
        """Per file, how far its reads reach past what the trace wrote there before
        them: the bytes a replay must find in the file (fio fails a read past its end)."""
        written: dict[str, int] = {}
        needed: dict[str, int] = {}
        for o in self.ops:
            end = o.offset + o.length
            if o.action == "write":
                written[o.file] = max(written.get(o.file, 0), end)
            elif o.action == "read" and end > written.get(o.file, 0):
                needed[o.file] = max(needed.get(o.file, 0), end)
        return needed

    # --- as fio reads it ----------------------------------------------------------------
    def iolog(self, paths: Mapping[str, str] | None = None) -> str:
        """fio's iolog v3; each file under its name in ``paths`` (absolute paths in
        the scratch directory, for a replay: its times from 1 µs, see REPLAY_START_US),
        else its own (f0001..., as stored: from 0)."""
        def name(f: str) -> str:
            return paths[f] if paths is not None else f

        start = 0 if paths is None else REPLAY_START_US

        for f in sorted({o.file for o in self.ops}):
            check_iolog_name(name(f))
        lines = [HEADER]
        opened: set[str] = set()
        for o in self.ops:
            at = o.at_us + start
            if o.file not in opened:
                opened.add(o.file)
                lines += [f"{at} {name(o.file)} add", f"{at} {name(o.file)} open"]
            if o.action in ("sync", "datasync"):
                lines.append(f"{at} {name(o.file)} {o.action} 0 0")
            else:
                lines.append(f"{at} {name(o.file)} {o.action} {o.offset} {o.length}")
        lines += [f"{self.ops[-1].at_us + start} {name(f)} close" for f in sorted(opened)]
        return "\n".join(lines) + "\n"

    def facts(self) -> dict[str, Any]:
        """What `record` stores beside the iolog and ``stored`` reads back."""
        return {"counts": self.counts(), "files": self.files, "skipped": self.skipped,
                "depth": self.depth, "duration_s": round(self.duration_s, 6),
                "direct": self.direct}

    @classmethod
    def stored(cls, iolog: str, facts: Mapping[str, Any]) -> Trace:
        """A trace as `record` stored it: its iolog and its ``facts``, checked."""
        trace = cls.from_iolog(iolog, facts["files"], facts.get("skipped", {}),
                               int(facts.get("depth", 1)))
        direct = facts.get("direct")
        trace.direct = direct if isinstance(direct, int) and direct >= 0 else None
        return trace

    @classmethod
    def from_iolog(cls, text: str, files: Mapping[str, str], skipped: Mapping[str, int],
                   depth: int) -> Trace:
        """A stored trace, checked: version 3, its own file names only (f0001...,
        each listed in ``files``), every action one storbench writes."""
        lines = text.splitlines()
        if not lines or lines[0].strip() != HEADER:
            raise ConfigError("the stored trace is not an fio version 3 iolog")
        ops = []
        for n, line in enumerate(lines[1:], start=2):
            m = _IOLOG_LINE.match(line.strip())
            if m is None:
                raise ConfigError(f"the stored trace's line {n} is not one storbench writes"
                                  " (a trace recorded before storbench sorted the calls"
                                  " of several threads can hold a negative time): record"
                                  " the workload again")
            at, name, action, offset, length = m.groups()
            if not _NAME.fullmatch(name) or name not in files:
                raise ConfigError(f"the stored trace's line {n} names a file that is not one"
                                  " of its own (f0001...): refused, fio would open it; record the"
                                  " workload again")
            if action in ("read", "write", "sync", "datasync"):
                ops.append(Op(int(at), name, action, int(offset or 0), int(length or 0)))
            elif action == "trim":
                raise ConfigError(f"the stored trace's line {n} trims: storbench records none")
        for rel in files.values():
            check_relative(rel)
        return cls(ops, dict(files), dict(skipped), max(1, depth))


def check_relative(rel: str) -> None:
    """A recorded name must stay inside the recorded directory."""
    norm = os.path.normpath(rel)
    if os.path.isabs(rel) or norm == ".." or norm.startswith("../") or "\0" in rel:
        raise ConfigError(f"the stored trace names {rel!r}, outside its directory: refused;"
                          " record the workload again")


_BLK = re.compile(r"^\s*.+?-\d+\s+\[\d+\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):\s+(?P<dev>\d+,\d+)"
                  r"\s+(?P<act>[A-Z]{1,2})\s+(?P<rwbs>[A-Z]+)"
                  r"(?:\s+(?P<sector>\d+)\s+\+\s+(?P<count>\d+))?")
SECTOR = 512
FUA = "FUA writes (replayed as plain writes: an iolog has no FUA)"
DISCARD = "discards (not replayed)"


def from_blk(text: Iterable[str], majmin: str, name: str) -> Trace:
    """The trace of the blk tracer's events on the device ``majmin`` ("7,0"): each
    request queued (action Q) as the kernel's block layer received it, before merging.
    An empty flush (fsync's cache flush: RWBS ``FWS``, ``FN``) is a sync; a write with a
    flush before it is a sync then the write; FUA (a ``F`` after the direction) and
    discards are counted and said. The depth is the most requests the device had in
    flight (issued, D, and not yet completed, C). The device is the trace's one file."""
    skipped: Counter[str] = Counter()
    raw: list[tuple[float, int, str, int, int]] = []  # time, order, action, offset, length
    flight = depth = 0
    for line in text:
        m = _BLK.match(line)
        if m is None or m["dev"] != majmin:
            continue
        act, rwbs, sector = m["act"], m["rwbs"], m["sector"]
        if act in ("D", "C") and sector is not None and m["count"] != "0":
            flight = flight + 1 if act == "D" else max(0, flight - 1)
            depth = max(depth, flight)
        if act != "Q":
            continue
        preflush = len(rwbs) > 1 and rwbs[0] == "F" and rwbs[1] in "RWDN"
        direction = rwbs[1] if preflush else rwbs[0]
        ts = float(m["ts"])
        if preflush:
            raw.append((ts, len(raw), "sync", 0, 0))
        if sector is None or direction not in "RWD":
            continue
        if direction == "D":
            skipped[DISCARD] += 1
            continue
        length = int(m["count"]) * SECTOR
        if length == 0:
            continue
        if direction == "W" and "F" in rwbs[2 if preflush else 1:]:
            skipped[FUA] += 1
        raw.append((ts, len(raw), "read" if direction == "R" else "write",
                    int(sector) * SECTOR, length))
    if not raw:
        return Trace([], {}, dict(skipped))
    raw.sort()
    t0 = raw[0][0]
    ops = [Op(round((ts - t0) * 1e6), "f0001", action, offset, length)
           for ts, _, action, offset, length in raw]
    # below the page cache, whoever sent them: O_DIRECT is not a question here
    return Trace(ops, {"f0001": name}, dict(skipped), max(1, depth), direct=None)
