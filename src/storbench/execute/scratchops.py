"""The operations storbench does on a target's file system in a child process
(``python -m storbench.execute.scratchops OP PATH ...``, started by execute/fsops.py).

The module imports the standard library only, nothing of storbench's: a run starts it
several times (a look at the target, a clean before each test, the removal at the
end), each time a Python start, and a child loading storbench's modules took ~100 ms
where one that loads nothing of them takes ~40.
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


def main(argv: list[str]) -> None:  # pragma: no cover - runs as its own process
    op, path = argv[0], Path(argv[1])
    if op == "mode":
        try:
            print(json.dumps(os.stat(path).st_mode))
        except OSError:
            print("null")
    elif op == "look":
        print(json.dumps(look(path)))
    elif op == "remove":
        remove(path)
    elif op == "clean":
        print(json.dumps(clean(path, set(argv[2:]))))
    elif op == "probe":
        try:
            probe(path, float(argv[2]))
        except (BrokenPipeError, KeyboardInterrupt):
            pass
    else:
        raise SystemExit(f"scratchops: unknown operation {op!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
