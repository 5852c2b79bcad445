"""The operations storbench does on a target's file system in a child process, started
by execute/fsops.py as a file (``python -I .../scratchops.py``): ``... serve`` answers
them one after the other (a JSON list [OP, PATH, ...] a line on stdin, {"out": TEXT} a
line on stdout, until stdin ends); ``... scratchops OP PATH ...`` does one (an operation asked
while the serving child is busy), and ``... scratchops probe DIR INTERVAL`` the metadata
probe. An operation's child says "+" first, once its Python is up: the operation's time
limit is the file system's, not the start's.

A run asks for several (a look at the target, a clean before each test, the removal at
the end): one child serves them all, where a child each cost a Python start (~45 ms).
The module imports the standard library only, nothing of storbench's (a child that
loaded storbench's modules took ~100 ms to start). While it works on an operation, the
child's name (``ps -o comm``) is "sb-OP", so that one stuck in the kernel says what it
was doing.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time
from pathlib import Path

MARKER = ".storbench-scratch"  # in every directory storbench made (execute/workdir.py)
OPERATIONS = ("stat", "listdir", "create_unlink")  # the metadata probe's

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def remove(path: Path) -> None:
    """rm -rf ``path``, only when it carries storbench's marker; the marker goes last,
    so that a removal cut short (a file system gone silent, the child killed) leaves a
    directory the next run still knows as storbench's."""
    if (path / MARKER).is_file():
        clean(path, set())
        (path / MARKER).unlink(missing_ok=True)
        shutil.rmtree(path, ignore_errors=True)


def clean(scratch: Path, keep: set[str]) -> dict[str, int]:
    """Remove the scratch directory's files but the marker and ``keep``; what is kept
    and what is free afterwards, in bytes."""
    kept = 0
    for entry in scratch.iterdir():
        if entry.name == MARKER:
            continue
        if entry.name in keep:
            kept += entry.stat().st_size if entry.is_file() else 0
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    st = os.statvfs(scratch)
    return {"kept_bytes": kept, "free_bytes": st.f_bavail * st.f_frsize}


def probe(directory: Path, interval_s: float) -> None:
    """Forever: time stat, a listing (as ls -la) and create+unlink of a small file.
    Before each operation a JSON line {"op", "t"} (its start, CLOCK_MONOTONIC s), after
    it {"op", "t", "ns"}: an operation that never returns is seen as begun."""
    probe_file = directory / f".storbench-probe-{os.getpid()}"
    while True:
        tick = time.monotonic()
        for op in OPERATIONS:
            begun = time.monotonic()
            print(json.dumps({"op": op, "t": begun}), flush=True)
            t0 = time.perf_counter_ns()
            try:
                if op == "stat":
                    os.stat(directory)
                elif op == "listdir":
                    with os.scandir(directory) as it:
                        for entry in it:
                            entry.stat(follow_symlinks=False)
                else:
                    fd = os.open(probe_file, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
                    os.write(fd, b"x" * 512)
                    os.close(fd)
                    os.unlink(probe_file)
            except OSError:
                continue
            print(json.dumps({"op": op, "t": begun, "ns": time.perf_counter_ns() - t0}),
                  flush=True)
        time.sleep(max(0.0, interval_s - (time.monotonic() - tick)))


def look(path: Path) -> dict[str, Any]:
    """What a directory target needs to know before a run: it is a directory, on a file
    system mounted read-write, writable by us, and its free bytes (statvfs: answered
    by the server, never from a cache as a stat can be)."""
    try:
        is_dir = path.is_dir()
        vfs = os.statvfs(path)
    except OSError as exc:
        return {"error": errno.errorcode.get(exc.errno or 0, "?"), "message": exc.strerror}
    return {"is_dir": is_dir, "read_only": bool(vfs.f_flag & os.ST_RDONLY),
            "writable": os.access(path, os.W_OK | os.X_OK),
            "free_bytes": vfs.f_bavail * vfs.f_frsize, "total_bytes": vfs.f_blocks * vfs.f_frsize}


def answer(op: str, path: Path, rest: list[str]) -> str:
    """What one operation prints (JSON; nothing for "remove")."""
    if op == "mode":
        try:
            return json.dumps(os.stat(path).st_mode)
        except OSError:
            return "null"
    if op == "look":
        return json.dumps(look(path))
    if op == "remove":
        remove(path)
        return ""
    if op == "clean":
        return json.dumps(clean(path, set(rest)))
    raise SystemExit(f"scratchops: unknown operation {op!r}")


def _name(what: str) -> None:
    """The process's name as ps shows it (15 bytes at most)."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(what[:15])
    except OSError:
        pass


def serve() -> None:
    """Answer operations until stdin ends; one that fails answers "" (as a child of its
    own that died would have printed nothing). It says "+" first, once it is up."""
    _started()
    while line := sys.stdin.readline():
        op, path, *rest = json.loads(line)
        _name(f"sb-{op}")
        try:
            out = answer(op, Path(path), rest)
        except Exception:
            out = ""
        _name("sb-idle")
        sys.stdout.write(json.dumps({"out": out}) + "\n")
        sys.stdout.flush()


def main(argv: list[str]) -> None:  # pragma: no cover - runs as its own process
    if argv == ["serve"]:
        try:
            serve()
        except (BrokenPipeError, KeyboardInterrupt):
            pass
    elif argv[0] == "probe":
        try:
            probe(Path(argv[1]), float(argv[2]))
        except (BrokenPipeError, KeyboardInterrupt):
            pass
    else:
        _started()
        print(json.dumps({"out": answer(argv[0], Path(argv[1]), argv[2:])}))


def _started() -> None:
    """Say that this child is up (its Python started) and about to look at the file
    system: the operation's time limit begins there (fsops._answer)."""
    sys.stdout.write("+")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
