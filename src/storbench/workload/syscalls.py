"""System calls an application made, as a trace: strace's lines (``from_strace``) and
bpftrace's events (workload/bpfevents.from_bpf) -> workload/trace.Trace.

Both follow the same calls (``CALLS``) the same way: each descriptor's file and position
(open, dup, lseek, close), O_APPEND writes at the file's end, which descriptors are
O_DIRECT (open's flags, fcntl F_SETFL), only files under the recorded directory kept
(their names relative to it), what was seen and not kept counted in ``skipped``; calls
in the order they began.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from storbench.workload.trace import Op, Trace

K = TypeVar("K")

# what `record` asks strace to show (-e trace=...): I/O, positions, descriptors
CALLS = ("open,openat,openat2,creat,close,dup,dup2,dup3,lseek,read,pread64,readv,preadv,"
         "preadv2,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,sync_file_range,"
         "ftruncate,fallocate,mmap,sendfile,copy_file_range,splice,fcntl")
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
# a read or write call seen: start, duration, absolute path, action, offset, length, and
# whether its descriptor was O_DIRECT
Call = tuple[float, float, str, str, int, int, bool]
_O_APPEND, _O_TRUNC = 0o2000, 0o1000
# O_DIRECT is the machine's own (x86_64 0o40000, arm64 0o200000): a tracer's flags are
# read where they were recorded
_O_DIRECT = getattr(os, "O_DIRECT", 0o40000)


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
    ``root`` (absolute, resolved). Lines ``I pid fd position flags path`` before it
    (execute/followed.start_state, with --pid) say what the followed processes had open
    before strace attached: each descriptor's position, O_APPEND and O_DIRECT."""
    root = root.rstrip("/") or "/"
    position: dict[tuple[int, str], int] = {}  # (fd, path) -> its offset
    appending: set[tuple[int, str]] = set()
    direct: set[tuple[int, str]] = set()
    size: dict[str, int] = {}
    skipped: Counter[str] = Counter()
    raw: list[Call] = []

    def inside(path: str) -> str | None:
        if path == root or not path.startswith(root + "/"):
            return None
        return path[len(root) + 1:]

    def state(lines: Iterable[str]) -> Iterable[str]:
        for line in lines:
            if not line.startswith("I "):
                yield line
                continue
            with contextlib.suppress(ValueError):
                _, _pid_s, fd_s, at_s, flags_s, where = line.rstrip("\n").split(" ", 5)
                key, flags = (int(fd_s), os.path.normpath(where)), int(flags_s)
                position[key] = int(at_s)
                _flag(appending, key, bool(flags & _O_APPEND))
                _flag(direct, key, bool(flags & _O_DIRECT))

    for _pid, ts, rest in _lines(state(text)):
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
            _flag(appending, key, "O_APPEND" in flags.split("|"))
            _flag(direct, key, "O_DIRECT" in flags.split("|"))
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
        if call == "fcntl":
            cmd = args.split(", ")[1] if args.count(", ") >= 1 else ""
            if cmd == "F_SETFL":
                flags = args.split(", ")[2].split("|") if args.count(", ") >= 2 else []
                _flag(appending, key, "O_APPEND" in flags)
                _flag(direct, key, "O_DIRECT" in flags)
            elif cmd in ("F_DUPFD", "F_DUPFD_CLOEXEC"):
                _dup(key, (result, path), position, appending, direct)
            continue
        if call in ("dup", "dup2", "dup3"):
            _dup(key, (result, path), position, appending, direct)
            continue
        if call == "close":
            position.pop(key, None)
            appending.discard(key)
            direct.discard(key)
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
            raw.append((ts, dur, path, _SYNCS[call], 0, 0, False))
            continue
        if call in _READS or call in _WRITES:
            positioned = _READS.get(call, _WRITES.get(call))
            parts = args.rsplit(", ", 2 if call.endswith("v2") else 1)
            given = int(parts[-2] if call.endswith("v2") else parts[-1]) if positioned else -1
            offset = _offset(call, given, key, path, result, position, key in appending, size)
            if offset is not None:
                raw.append((ts, dur, path, "read" if call in _READS else "write", offset,
                            result, key in direct))
    return _assemble(raw, inside, skipped)


def _flag(keys: set[K], key: K, on: bool) -> None:
    if on:
        keys.add(key)
    else:
        keys.discard(key)


def _dup(old: K, new: K, position: dict[K, int], appending: set[K], direct: set[K]) -> None:
    """A descriptor duplicated: the same open file, position and flags."""
    position[new] = position.get(old, 0)
    _flag(appending, new, old in appending)
    _flag(direct, new, old in direct)


def _offset(call: str, given: int, key: K, path: str, result: int, position: dict[K, int],
            appending: bool, size: dict[str, int]) -> int | None:
    """Where a read or write call of ``result`` bytes went: ``given`` (pread, pwrite;
    -1: the descriptor's position, as read() or preadv2's -1), else the end of the file
    when appending, else the descriptor's position, which moves on. None: no byte moved."""
    if given >= 0:
        offset = given
    else:
        offset = size.get(path, 0) if call in _WRITES and appending else position.get(key, 0)
        position[key] = offset + result
    if result == 0:
        return None
    if call in _WRITES:
        size[path] = max(size.get(path, 0), offset + result)
    return offset


def _assemble(raw: list[Call], inside: Callable[[str], str | None],
              skipped: Mapping[str, int]) -> Trace:
    """The trace of calls (``Call``): in the order the application issued them, files
    named f0001... by first use, and how many of its reads and writes were O_DIRECT."""
    if not raw:
        return Trace([], {}, dict(skipped))
    # a tracer writes a call when it ends (a call another thread interrupted: when it
    # resumes): in the order the application issued them, by when each began
    raw.sort(key=lambda r: r[0])
    t0 = raw[0][0]
    names: dict[str, str] = {}  # absolute path -> f0001
    files: dict[str, str] = {}
    ops = []
    for start, _dur, path, action, offset, length, _direct in raw:
        if path not in names:
            names[path] = f"f{len(names) + 1:04d}"
            rel = inside(path)
            assert rel is not None
            files[names[path]] = rel
        ops.append(Op(round((start - t0) * 1e6), names[path], action, offset, length))
    return Trace(ops, files, dict(skipped), _depth((s, s + d) for s, d, *_ in raw),
                 direct=sum(1 for *_, d in raw if d))


def _under(path: str, root: str) -> str | None:
    if path == root or not path.startswith(root.rstrip("/") + "/"):
        return None
    return path[len(root.rstrip("/")) + 1:]


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
