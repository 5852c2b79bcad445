"""fio's process tree. fio's job processes call setsid(), so they leave fio's process
group: killing the group is not enough, the tree is walked instead (Linux /proc)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def children_map() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..."; comm may contain spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree = children_map()
    out, todo = [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def freeze(pid: int, rounds: int = 20) -> list[int]:
    """SIGSTOP ``pid`` and every process below it, walking the tree again until no
    new one appears (a stopped process forks no more): the whole tree, stopped."""
    _send(pid, signal.SIGSTOP)
    stopped: list[int] = []
    for _ in range(rounds):
        new = [p for p in descendants(pid) if p not in stopped]
        if not new:
            break
        for p in new:
            _send(p, signal.SIGSTOP)
        stopped += new
    return stopped


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to ``pid`` and every process below it (children first). For
    SIGKILL the tree is frozen first, so that no job process fio starts meanwhile
    escapes (it would leave the tree once fio is gone)."""
    below = freeze(pid) if sig == signal.SIGKILL else []
    for p in [*reversed(dict.fromkeys([*below, *descendants(pid)])), pid]:
        _send(p, sig)


def watchdog_main() -> None:  # pragma: no cover - runs as its own process
    """``python -I .../proctree.py PID``: kill PID's tree unless told "done".

    storbench starts one beside every fio; if storbench dies (even by SIGKILL) the
    pipe closes without "done" and fio goes with it.
    """
    pid = int(sys.argv[1])
    if sys.stdin.read() != "done":
        kill_tree(pid)


if __name__ == "__main__":
    watchdog_main()
