"""Directories storbench makes for a run: the scratch directory on a directory target,
and its own work directory for fio's job files, output and logs.

Each carries a marker (run id, PID, host, start) so that a later run can tell one a
crashed run left (its PID is gone) from one in use, and removes only directories
that carry it. Removal is bounded in time: on a file system that stopped
responding, ``rmtree`` would block forever in the kernel; the directory is then
left for the next run and said so.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = ".storbench-scratch"
PREFIX = "storbench-"
UNREADABLE_GRACE_S = 60.0  # a marker that cannot be read is left alone this long


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


def create_marked(path: Path, run_uid: str) -> Path:
    """mkdir ``path`` with storbench's marker in it (OSError as mkdir raises it).

    The marker appears whole or not at all (written aside, then renamed): a run
    starting at the same moment never reads a half-written one.
    """
    path.mkdir(mode=0o700)  # no other local user enters (it may hold fio's sockets)
    marker = {
        "run_uid": run_uid,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    aside = path / f"{MARKER}.new"
    aside.write_text(json.dumps(marker) + "\n")
    os.replace(aside, path / MARKER)
    return path


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
        pid = info.get("pid")
        if same_host and isinstance(pid, int) and pid_alive(pid):
            continue  # a run in progress
        if not same_host and info.get("hostname"):
            continue  # another host's run on a shared file system: not ours to judge
        found.append(Leftover(entry, str(info.get("run_uid", "?")), str(info.get("created"))))
    return found


def remove_marked(path: Path, timeout_s: float | None = None) -> bool:
    """Delete a directory that carries storbench's marker (others are left alone).

    With ``timeout_s``, in a child process (execute/fsops.py): False when it did not
    finish in time (the file system does not respond); it goes on by itself, and a
    later run removes what is left.
    """
    if timeout_s is None:
        if (path / MARKER).is_file():
            shutil.rmtree(path, ignore_errors=True)
        return True
    from storbench.execute import fsops  # fsops imports this module

    try:
        fsops.call("remove", str(path), timeout_s=timeout_s)
    except fsops.Stuck:
        return False
    return True
