"""bpftrace's events of the calls an application made (execute/bpfcapture.lines) ->
workload/trace.Trace, followed as workload/syscalls.from_strace follows strace's lines:
each process's descriptors (with what a fork copies), positions, O_APPEND and O_DIRECT,
its working directory, only files under the recorded directory kept.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from storbench.workload.syscalls import (
    _NOT_REPLAYED,
    _O_APPEND,
    _O_DIRECT,
    _O_TRUNC,
    _READS,
    _SYNCS,
    _UNSEEN,
    _WRITES,
    Call,
    _assemble,
    _flag,
    _offset,
    _under,
)
from storbench.workload.trace import Trace

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
