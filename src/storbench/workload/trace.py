"""An application's recorded I/O (`storbench record`), as fio replays it (`run --replay`).

A trace is what strace saw the application's processes do to the files under one
directory: each read, write, sync with its file, offset, length and time. It is kept
as fio's iolog version 3 (``fio version 3 iolog``; timestamps in microseconds from the
first I/O), with files named ``f0001``, ``f0002``… and their names relative to the
recorded directory beside it (``files``): the iolog itself holds no name a user or an
application chose, so nothing in it can point fio elsewhere, and ``from_iolog`` refuses
any other name. A trace holds no data, only offsets and sizes.

What strace's view leaves out (said with the trace, ``skipped``): I/O through mmap,
metadata calls (rename, unlink, mkdir, ftruncate, fallocate), files outside the
directory, and the calls of other processes. Offsets of read()/write() follow each file
description's position (lseek, dup); across processes that share one by fork, the
last position one of them left is used.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from storbench.errors import ConfigError

HEADER = "fio version 3 iolog"
# what `record` asks strace to show (-e trace=...): I/O, positions, descriptors
CALLS = ("open,openat,openat2,creat,close,dup,dup2,dup3,lseek,read,pread64,readv,preadv,"
         "preadv2,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,sync_file_range,"
         "ftruncate,fallocate,mmap,sendfile,copy_file_range,splice")
_READS = {"read": False, "readv": False, "pread64": True, "preadv": True, "preadv2": True}
_WRITES = {"write": False, "writev": False, "pwrite64": True, "pwritev": True,
           "pwritev2": True}
_SYNCS = {"fsync": "sync", "fdatasync": "datasync", "sync_file_range": "datasync"}
_OPENS = ("open", "openat", "openat2", "creat")
_NOT_REPLAYED = ("ftruncate", "fallocate")
# I/O strace sees begin but cannot follow (mmap: the pages' reads and writes) or moves
# data between descriptors in the kernel: counted and said, not replayed
_UNSEEN = {"mmap": "mmap of a file (its reads and writes through memory are not seen)",
           "sendfile": "sendfile", "copy_file_range": "copy_file_range", "splice": "splice"}
_ANY_FD = re.compile(r"(?<![\w<])(?P<fd>\d+)<(?P<path>(?:[^>\\]|\\.)*)>")

_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<ts>\d+\.\d+)\s+(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)"
                   r"(?:<(?P<path>(?:[^>\\]|\\.)*)>)?(?P<tail>.*?)(?:\s+<(?P<dur>[\d.]+)>)?$")
_UNFINISHED = re.compile(r"^(?P<call>\w+)\((?P<args>.*?)\s*<unfinished \.\.\.>$")
_RESUMED = re.compile(r"^<\.\.\. (?P<call>\w+) resumed>(?P<rest>.*)$")
_FD = re.compile(r"^(?P<fd>\d+)<(?P<path>(?:[^>\\]|\\.)*)>")
_NAME = re.compile(r"f\d{4,6}")
_IOLOG_LINE = re.compile(r"^(\d+) (\S+) (add|open|close|read|write|sync|datasync|trim)"
                         r"(?: (\d+) (\d+))?$")


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

    # --- what it holds ----------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        by = Counter(o.action for o in self.ops)
        return {"reads": by["read"], "writes": by["write"],
                "syncs": by["sync"] + by["datasync"],
                "read_bytes": sum(o.length for o in self.ops if o.action == "read"),
                "write_bytes": sum(o.length for o in self.ops if o.action == "write"),
                "files": len(self.files)}

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
        the scratch directory, for a replay), else its own (f0001...)."""
        def name(f: str) -> str:
            return paths[f] if paths is not None else f

        lines = [HEADER]
        opened: set[str] = set()
        for o in self.ops:
            if o.file not in opened:
                opened.add(o.file)
                lines += [f"{o.at_us} {name(o.file)} add", f"{o.at_us} {name(o.file)} open"]
            if o.action in ("sync", "datasync"):
                lines.append(f"{o.at_us} {name(o.file)} {o.action} 0 0")
            else:
                lines.append(f"{o.at_us} {name(o.file)} {o.action} {o.offset} {o.length}")
        lines += [f"{self.ops[-1].at_us} {name(f)} close" for f in sorted(opened)]
        return "\n".join(lines) + "\n"

    def facts(self) -> dict[str, Any]:
        """What `record` stores beside the iolog and ``stored`` reads back."""
        return {"counts": self.counts(), "files": self.files, "skipped": self.skipped,
                "depth": self.depth, "duration_s": round(self.duration_s, 6)}

    @classmethod
    def stored(cls, iolog: str, facts: Mapping[str, Any]) -> Trace:
        """A trace as `record` stored it: its iolog and its ``facts``, checked."""
        return cls.from_iolog(iolog, facts["files"], facts.get("skipped", {}),
                              int(facts.get("depth", 1)))

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


def _unescape(path: str) -> str:
    """strace's quoting of a path (\\n, \\x.., \\>) back to the path."""
    if "\\" not in path:
        return path
    return path.encode("latin-1", "backslashreplace").decode("unicode_escape").encode(
        "latin-1", "replace").decode("utf-8", "replace")


def _lines(text: Iterable[str]) -> Iterable[tuple[int, float, str]]:
    """strace -f -ttt -T lines as (pid, time, 'call(args) = ret<path> <dur>'), each
    call's unfinished and resumed halves joined."""
    pending: dict[int, tuple[float, str, str]] = {}
    for raw in text:
        m = _LINE.match(raw.rstrip("\n"))
        if m is None:
            continue
        pid, ts, rest = int(m["pid"]), float(m["ts"]), m["rest"]
        u = _UNFINISHED.match(rest)
        if u is not None:
            pending[pid] = (ts, u["call"], u["args"])
            continue
        r = _RESUMED.match(rest)
        if r is not None:
            if pid not in pending:
                continue
            ts, call, args = pending.pop(pid)
            tail = r["rest"]
            rest = f"{call}({args}{' ' if args.endswith(',') else ''}{tail}"
        yield pid, ts, rest


def from_strace(text: Iterable[str], root: str) -> Trace:
    """The trace of strace's output (-f -ttt -T -y, ``CALLS``) of the files under
    ``root`` (absolute, resolved)."""
    root = root.rstrip("/") or "/"
    names: dict[str, str] = {}  # absolute path -> f0001
    files: dict[str, str] = {}
    position: dict[tuple[int, str], int] = {}  # (fd, path) -> its offset
    appending: set[tuple[int, str]] = set()
    size: dict[str, int] = {}
    skipped: Counter[str] = Counter()
    raw: list[tuple[float, float, str, str, int, int]] = []  # start, dur, path, action, off, len

    def inside(path: str) -> str | None:
        if path == root or not path.startswith(root + "/"):
            return None
        return path[len(root) + 1:]

    for _pid, ts, rest in _lines(text):
        m = _CALL.match(rest)
        if m is None:
            continue
        call, args, ret = m["call"], m["args"], m["ret"]
        if ret == "?" or int(ret) < 0:
            continue
        result = int(ret)
        if call in _OPENS:
            if m["path"] is None:
                continue
            path = _unescape(m["path"])
            key = (result, path)
            position[key] = 0
            flags = args.split(", ")[2 if call in ("openat", "openat2") else 1] \
                if args.count(", ") >= 1 else ""
            if "O_APPEND" in flags:
                appending.add(key)
            else:
                appending.discard(key)
            if "O_TRUNC" in flags or call == "creat":
                size[path] = 0
            continue
        if call in _UNSEEN:
            if any(inside(_unescape(f["path"])) for f in _ANY_FD.finditer(args)):
                skipped[_UNSEEN[call]] += 1
            continue
        fd = _FD.match(args)
        if fd is None:
            continue
        path = _unescape(fd["path"])
        key = (int(fd["fd"]), path)
        if call in ("dup", "dup2", "dup3"):
            position[(result, path)] = position.get(key, 0)
            continue
        if call == "close":
            position.pop(key, None)
            appending.discard(key)
            continue
        if call == "lseek":
            position[key] = result
            continue
        rel = inside(path)
        if rel is None:
            if call in _READS or call in _WRITES or call in _SYNCS:
                skipped["outside the directory"] += 1
            continue
        dur = float(m["dur"] or 0.0)
        if call in _NOT_REPLAYED:
            skipped[call] += 1
            continue
        if call in _SYNCS:
            raw.append((ts, dur, path, _SYNCS[call], 0, 0))
            continue
        if call in _READS or call in _WRITES:
            positioned = _READS.get(call, _WRITES.get(call))
            parts = args.rsplit(", ", 2 if call.endswith("v2") else 1)
            if positioned:
                offset = int(parts[-2] if call.endswith("v2") else parts[-1])
            elif call in _WRITES and key in appending:
                offset = size.get(path, 0)
            else:
                offset = position.get(key, 0)
            if not positioned:
                position[key] = offset + result
            if result == 0:
                continue
            action = "read" if call in _READS else "write"
            if action == "write":
                size[path] = max(size.get(path, 0), offset + result)
            raw.append((ts, dur, path, action, offset, result))
    if not raw:
        return Trace([], {}, dict(skipped))
    # strace writes a call when it ends (a call another thread interrupted: when it
    # resumes): in the order the application issued them, by when each began
    raw.sort(key=lambda r: r[0])
    t0 = raw[0][0]
    ops = []
    for start, _dur, path, action, offset, length in raw:
        if path not in names:
            names[path] = f"f{len(names) + 1:04d}"
            rel = inside(path)
            assert rel is not None
            files[names[path]] = rel
        ops.append(Op(round((start - t0) * 1e6), names[path], action, offset, length))
    return Trace(ops, files, dict(skipped), _depth((s, s + d) for s, d, *_ in raw))


def _depth(spans: Iterable[tuple[float, float]]) -> int:
    """The most calls in flight at once (strace -T: each call's start and duration)."""
    spans = list(spans)
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                    key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return max(1, most)


# the blk tracer's text lines (tracefs trace_pipe): "TASK-PID [CPU] FLAGS SECONDS: MAJ,MIN
# ACTION RWBS [SECTOR + COUNT] [COMM]"; FLAGS is there with the irq-info option (default)
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
    return Trace(ops, {"f0001": name}, dict(skipped), max(1, depth))
