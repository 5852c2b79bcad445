"""What storbench itself does on a target's file system during a run, in a child
process that can be left behind.

A file system that stops answering (a network server gone silent) blocks a system
call on it in the kernel, past SIGKILL: a thread of storbench's own stuck there
would keep storbench from ever exiting. So removing files, measuring what is left
and the metadata probe run as ``python -m storbench.execute.fsops ...``; storbench
waits for them with a time limit, reports a stuck one by its PID and goes on.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storbench.execute.workdir import MARKER, release

OPERATIONS = ("stat", "listdir", "create_unlink")  # the metadata probe's
CHECK_EVERY_S = 0.1  # call(check=...): how often a wait looks for a signal


class Stuck(Exception):
    """The child did not finish in time (the file system does not respond)."""

    def __init__(self, pid: int, waited_s: float) -> None:
        super().__init__(f"no answer within {waited_s:.0f} s (PID {pid} left running)")
        self.pid = pid


def start(*args: str) -> subprocess.Popen[str]:
    """A child running one operation; its output comes back through a pipe of its own
    (never storbench's stdout, which a stuck child would hold open)."""
    return subprocess.Popen([sys.executable, "-m", "storbench.execute.fsops", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def call(*args: str, timeout_s: float, check: Callable[[], None] | None = None) -> str:
    """Run one operation to its end and return what it printed; Stuck past the limit.

    ``check`` (a SignalGuard's) is called every CHECK_EVERY_S while it waits: what it
    raises (a signal came) ends the wait at once, not at the limit, which on a file
    system gone silent would keep Ctrl-C waiting for a minute."""
    proc = start(*args)
    ends = time.monotonic() + timeout_s
    try:
        while True:
            if check is not None:
                check()
            left = ends - time.monotonic()
            try:
                out, _ = proc.communicate(
                    timeout=max(0.0, min(left, CHECK_EVERY_S) if check else left))
                return out
            except subprocess.TimeoutExpired:
                if time.monotonic() >= ends:
                    raise Stuck(proc.pid, timeout_s) from None
    except BaseException:
        proc.kill()  # takes effect if and when the kernel lets go; not waited for
        raise


def remove_marked(path: Path, timeout_s: float | None = None) -> bool:
    """Delete a directory that carries storbench's marker (others are left alone).

    With ``timeout_s``, in a child process: False when it did not
    finish in time (the file system does not respond); it goes on by itself, and a
    later run removes what is left.
    """
    # The lock goes first: on a FUSE file system a marker still open would only be
    # renamed (.fuse_hidden...) and the directory could not go.
    release(path)
    if timeout_s is None:
        remove(path)  # here, in this process
        return True
    try:
        call("remove", str(path), timeout_s=timeout_s)
    except Stuck:
        return False
    return True


# -- the operations (in the child) ----------------------------------------------------

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


def stat_mode(path: Path, timeout_s: float) -> int | None:
    """``path``'s st_mode, looked at in a child (None: it does not exist or cannot be
    looked at); Stuck when its file system does not answer within ``timeout_s``."""
    mode = json.loads(call("mode", str(path), timeout_s=timeout_s))
    return int(mode) if mode is not None else None


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
        raise SystemExit(f"fsops: unknown operation {op!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
