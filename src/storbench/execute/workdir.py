"""Directories storbench makes for a run: the scratch directory on a directory target,
and its own work directory for fio's job files, output and logs.

Each carries a marker (run id, PID, host, start) that the run holds locked (flock)
as long as it lives: a later run, or a storbench in another PID namespace (a
container with the host's name, sharing /tmp or the target), tells a directory a
crashed run left (nobody holds its lock) from one in use, and removes only
directories that carry a marker. A marker of another host's is not judged (its lock
may not be visible from here: a FUSE file system keeps locks to one machine).

Removal is bounded in time: on a file system that stopped responding, ``rmtree`` would
block forever in the kernel; the directory is then left for the next run and said so.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from storbench.execute.scratchops import MARKER as MARKER

PREFIX = "storbench-"
UNREADABLE_GRACE_S = 60.0  # a marker that cannot be read is left alone this long
_HELD: dict[str, int] = {}  # marker path -> the open, locked descriptor of this process


@dataclass(frozen=True)
class Leftover:
    """What a crashed run left (found by its marker)."""

    path: Path
    run_uid: str
    created: str


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return True  # gone meanwhile: nothing to remove


def run_workdir(run_uid: str) -> Path:
    """Where the run ``run_uid`` keeps fio's job files, output and logs (its work
    directory, created by the loop with create_marked)."""
    return Path(tempfile.gettempdir()) / f"storbench-fio-{run_uid}"


def create_marked(path: Path, run_uid: str) -> Path:
    """mkdir ``path`` (0700) with storbench's marker in it, locked by this process until
    it removes the directory or ends (OSError as mkdir raises it).

    The marker appears whole and already locked, or not at all (written aside, locked,
    then renamed): a run starting at the same moment never judges a half-made one.
    """
    path.mkdir(mode=0o700)  # no other local user enters (it may hold fio's sockets)
    marker = {
        "run_uid": run_uid,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "lock": True,  # alive while someone holds the marker's flock
    }
    aside = path / f"{MARKER}.new"
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, (json.dumps(marker) + "\n").encode())
        os.replace(aside, path / MARKER)
    except BaseException:
        os.close(fd)
        raise
    _HELD[str(path / MARKER)] = fd
    return path


def held(marker: Path) -> bool | None:
    """Does a live process hold ``marker``'s lock? None when it cannot be told (gone)."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)
    return False


def release(path: Path) -> None:
    """Let go of the lock on ``path``'s marker (this process's own directory)."""
    fd = _HELD.pop(str(path / MARKER), None)
    if fd is not None:
        os.close(fd)


def leftovers(parent: Path) -> list[Leftover]:
    """Marked directories in ``parent`` whose run died: this host's, PID gone."""
    found = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        marker = entry / MARKER
        if not entry.name.startswith(PREFIX) or not marker.is_file():
            continue
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):
            if _younger_than(marker, UNREADABLE_GRACE_S):
                continue  # being written (by an older storbench) or not ours to judge yet
            info = {}
        same_host = info.get("hostname") == socket.gethostname()
        if not same_host and info.get("hostname"):
            continue  # another host's run on a shared file system: not ours to judge
        if info.get("lock"):
            if held(marker) is not False:
                continue  # a run in progress (in any PID namespace), or gone meanwhile
        else:  # a marker of a storbench before locks: its PID, as seen from here
            pid = info.get("pid")
            if same_host and isinstance(pid, int) and pid_alive(pid):
                continue
        found.append(Leftover(entry, str(info.get("run_uid", "?")), str(info.get("created"))))
    return found
