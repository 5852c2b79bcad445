"""The processes a file-level recording follows (``storbench record --pid``), as /proc
and the tracer tell: their threads, what they had open before the tracer attached,
and whether any of them, or of the processes they started since, still runs."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path


def start_state(pids: Sequence[int]) -> list[str]:
    """What the followed processes had before tracing, as lines from_bpf reads: ``C pid
    cwd`` and ``I pid fd position flags path`` for each open descriptor."""
    lines = []
    for pid in pids:
        with contextlib.suppress(OSError):
            lines.append(f"C {pid} {os.readlink(f'/proc/{pid}/cwd')}")
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                info = dict(line.split(":", 1) for line in
                            Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines()
                            if ":" in line)
                pos, flags = int(info["pos"]), int(info["flags"], 8)
            except (OSError, KeyError, ValueError):
                continue
            if target.startswith("/"):
                lines.append(f"I {pid} {fd} {pos} {flags} {target}")
    return lines


def threads(pid: int) -> list[int]:
    """The threads of a process; none when it has ended (since it was listed)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


class Followed:
    """The ``--pid`` processes' threads and every process and thread they started since
    the tracer attached (its ``F`` lines, read as they come): the recording follows them
    until all have ended, as strace's -f does (a process that ended while one it started
    still works, a shell that put its job in the background, is not the end)."""

    def __init__(self, out: Path, token: str, seeds: Iterable[int]) -> None:
        self.out, self.fork = out, f"{token} F ".encode()
        self.tids, self.offset = set(seeds), 0

    def any_running(self) -> bool:
        with self.out.open("rb") as f:
            f.seek(self.offset)
            new = f.read()
        done = new[:new.rfind(b"\n") + 1]  # a line bpftrace still writes waits for the next
        self.offset += len(done)
        for line in done.splitlines() if self.fork in done else ():
            if line.startswith(self.fork):  # TOKEN F PARENT PID CHILD NSECS
                self.tids.add(int(line.split()[4]))
        self.tids = {t for t in self.tids if running(t)}
        return bool(self.tids)


def running(tid: int) -> bool:
    """A thread or process that has not ended (a zombie waiting to be reaped has)."""
    try:
        stat = Path(f"/proc/{tid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X", "")
