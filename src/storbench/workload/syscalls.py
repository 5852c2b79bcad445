"""System calls an application made, as a trace: strace's lines (``from_strace``) and
bpftrace's events (``from_bpf``, execute/bpfcapture.py) -> workload/trace.Trace.

Both follow the same calls (``CALLS``) the same way: each descriptor's file and position
(open, dup, lseek, close), O_APPEND writes at the file's end, which descriptors are
O_DIRECT (open's flags, fcntl F_SETFL), only files under the recorded directory kept
(their names relative to it), what was seen and not kept counted in ``skipped``; calls
in the order they began.
"""

from __future__ import annotations

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


_O_APPEND, _O_TRUNC = 0o2000, 0o1000
# O_DIRECT is the machine's own (x86_64 0o40000, arm64 0o200000): bpftrace's events are
# read where they were recorded
_O_DIRECT = getattr(os, "O_DIRECT", 0o40000)
_F_DUPFD = (0, 1030)  # fcntl's F_DUPFD, F_DUPFD_CLOEXEC
_F_SETFL = 4
_PATHS = ("open", "openat", "openat2", "creat", "chdir")
_BPF_UNSEEN = {**_UNSEEN, "sendfile64": _UNSEEN["sendfile"]}
BPF_STRLEN = 200  # execute/bpfcapture.STRLEN: a path this long may have been cut
CUT = ("I/O on files opened by a path longer than 198 bytes (bpftrace cuts it) or relative"
       " to a directory opened before tracing: unknown file")


def from_bpf(events: Iterable[str], root: str) -> Trace:
    """The trace of execute/bpfcapture's events of the files under ``root`` (absolute,
    resolved). Lines: ``C pid cwd`` and ``I pid fd position flags path`` (what a
    followed process had before), ``F parent-tid parent-pid child-tid`` (a fork: a new
    process gets a copy of the parent's descriptors, positions and directory; a thread
    shares its process's), and ``CALL tid pid start-ns end-ns result a b [path]``
    (execute/bpfcapture.CALLS says what a and b are; fcntl's third argument follows).
    Paths of opens are resolved here against the process's directory or the descriptor
    ``dirfd`` names, then their directory's symbolic links, as strace's ``-y`` shows
    them."""
    root = root.rstrip("/") or "/"
    fds: dict[int, dict[int, str | None]] = {}  # pid -> fd -> absolute path (None: unknown)
    position: dict[tuple[int, int], int] = {}
    appending: set[tuple[int, int]] = set()
    direct: set[tuple[int, int]] = set()
    cwd: dict[int, str | None] = {}
    # a child's copy of its parent's: descriptors, positions, O_APPEND and O_DIRECT ones,
    # working directory
    forked: dict[int, tuple[dict[int, str | None], dict[int, int], set[int], set[int],
                            str | None]] = {}
    size: dict[str, int] = {}
    skipped: Counter[str] = Counter()
    raw: list[Call] = []
    resolved: dict[str, str | None] = {}

    def inside(path: str) -> str | None:
        if path not in resolved:
            rel = _under(path, root)
            if rel is None:
                head, tail = os.path.split(path)
                rel = _under(os.path.join(os.path.realpath(head), tail), root)
            resolved[path] = rel
        return resolved[path]

    def process(tid: int, pid: int) -> dict[int, str | None]:
        if pid not in fds:
            got = forked.pop(pid, None) or forked.pop(tid, None)
            table, pos, app, dio, where = got if got is not None else (
                {}, {}, set(), set(), None)
            fds[pid], cwd[pid] = dict(table), where
            position.update({(pid, fd): p for fd, p in pos.items()})
            appending.update((pid, fd) for fd in app)
            direct.update((pid, fd) for fd in dio)
        return fds[pid]

    def opened(pid: int, fd: int, path: str | None, at: int, flags: int) -> None:
        fds[pid][fd] = path
        position[(pid, fd)] = at
        _flag(appending, (pid, fd), bool(flags & _O_APPEND))
        _flag(direct, (pid, fd), bool(flags & _O_DIRECT))
        if path is not None and flags & _O_TRUNC:
            size[path] = 0

    for event in sorted(events, key=_when):
        kind, _, rest = event.partition(" ")
        try:
            if kind == "C":
                pid_s, where = rest.split(" ", 1)
                process(int(pid_s), int(pid_s))
                cwd[int(pid_s)] = os.path.normpath(where)
                continue
            if kind == "I":
                pid_s, fd_s, at_s, flags_s, where = rest.split(" ", 4)
                pid = int(pid_s)
                process(pid, pid)
                opened(pid, int(fd_s), os.path.normpath(where), int(at_s), int(flags_s))
                continue
            if kind == "F":
                ptid, ppid, child = map(int, rest.split()[:3])
                table = process(ptid, ppid)
                forked[child] = (dict(table),
                                 {fd: p for (q, fd), p in position.items() if q == ppid},
                                 {fd for q, fd in appending if q == ppid},
                                 {fd for q, fd in direct if q == ppid}, cwd.get(ppid))
                continue
            parts = rest.split(" ", 7 if kind in _PATHS or kind == "fcntl" else 6)
            tid, pid = int(parts[0]), int(parts[1])
            start, end, result, a, b = (int(x) for x in parts[2:7])
            if 1 << 31 <= a < 1 << 32:  # a descriptor (int) the tracepoint gave unsigned
                a -= 1 << 32
            given = parts[7] if len(parts) > 7 else ""
        except ValueError:
            continue
        table = process(tid, pid)
        if result < 0:
            continue
        if kind in _PATHS:
            if len(given.encode()) >= BPF_STRLEN - 2:
                full = None
            elif given.startswith("/"):
                full = os.path.normpath(given)
            else:
                base = cwd.get(pid) if a == -100 or kind == "chdir" else table.get(a)
                full = None if base is None else os.path.normpath(os.path.join(base, given))
            if kind == "chdir":
                cwd[pid] = full
            else:
                opened(pid, result, full, 0, b)
            continue
        if kind == "fchdir":
            cwd[pid] = table.get(a)
            continue
        if kind == "fcntl" and b == _F_SETFL and given.lstrip("-").isdigit():
            _flag(appending, (pid, a), bool(int(given) & _O_APPEND))
            _flag(direct, (pid, a), bool(int(given) & _O_DIRECT))
            continue
        if kind in ("dup", "dup2", "dup3") or (kind == "fcntl" and b in _F_DUPFD):
            if result != a and a in table:
                opened(pid, result, table[a], position.get((pid, a), 0),
                       (_O_APPEND if (pid, a) in appending else 0)
                       | (_O_DIRECT if (pid, a) in direct else 0))
            elif result != a:  # a pipe, a socket: no file
                table.pop(result, None)
            continue
        if kind == "close":
            table.pop(a, None)
            position.pop((pid, a), None)
            appending.discard((pid, a))
            direct.discard((pid, a))
            continue
        if kind == "lseek":
            position[(pid, a)] = result
            continue
        if kind in _BPF_UNSEEN:
            if any(inside(p) for p in (table.get(a), table.get(b)) if p):
                skipped[_BPF_UNSEEN[kind]] += 1
            continue
        if kind not in _READS and kind not in _WRITES and kind not in _SYNCS and \
                kind not in _NOT_REPLAYED:
            continue
        path = table.get(a, "")
        if path is None:
            skipped[CUT] += 1
            continue
        rel = inside(path) if path else None
        if rel is None:
            if kind not in _NOT_REPLAYED:
                skipped["outside the directory"] += 1
            continue
        t, dur = start / 1e9, max(0, end - start) / 1e9
        if kind in _NOT_REPLAYED:
            skipped[kind] += 1
        elif kind in _SYNCS:
            raw.append((t, dur, path, _SYNCS[kind], 0, 0, False))
        else:
            key = (pid, a)
            at = b if _READS.get(kind) or _WRITES.get(kind) else -1
            offset = _offset(kind, at, key, path, result, position, key in appending, size)
            if offset is not None:
                raw.append((t, dur, path, "read" if kind in _READS else "write", offset,
                            result, key in direct))
    return _assemble(raw, inside, skipped)


def _when(event: str) -> int:
    """When an event took effect (ns), for from_bpf to follow them in that order: bpftrace
    prints each CPU's events in turn, so an open on one CPU may come out after a read of
    its descriptor on another. A call at its end (an open's descriptor exists from then;
    a later call began after it), a fork when it happened, what /proc said first."""
    kind, _, rest = event.partition(" ")
    fields = rest.split(" ", 5)
    try:
        if kind == "F":
            return int(fields[3])
        if kind in ("C", "I"):
            return -1
        return int(fields[3])  # tid pid start END ...
    except (IndexError, ValueError):
        return -1


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


# the blk tracer's text lines (tracefs trace_pipe): "TASK-PID [CPU] FLAGS SECONDS: MAJ,MIN
# ACTION RWBS [SECTOR + COUNT] [COMM]"; FLAGS is there with the irq-info option (default)
