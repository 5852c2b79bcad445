"""Which process runs a run, and whether it still does: a run whose process is gone
(SIGKILL, the OOM killer, a power loss) while its row says 'running' crashed.

A process is its host, PID, start time (the kernel's, in clock ticks since boot:
a recycled PID has another) and the machine's boot id (a reboot ends every process).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    host: str
    pid: int
    start: str | None  # /proc/PID/stat field 22, or None where there is no /proc
    boot_id: str | None


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses
    return stat[stat.rfind(")") + 2:].split()[19]


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def this_process() -> Process:
    import os

    pid = os.getpid()
    return Process(os.uname().nodename, pid, _start_time(pid), _boot_id())


def vanished(pid: int | None, start: str | None, boot_id: str | None, me: Process) -> bool:
    """Is the process that ran a run (on this host) gone? False when it cannot be told
    (a run stored before storbench recorded its process)."""
    if pid is None:
        return False
    if boot_id is not None and me.boot_id is not None and boot_id != me.boot_id:
        return True  # the machine rebooted since
    now = _start_time(pid)
    if now is None:
        return Path("/proc").is_dir()  # no such process (where /proc can say so)
    return start is not None and now != start  # the PID now belongs to another process


def crash_note(pid: int | None, host: str) -> str:
    return (f"crashed: the storbench process (PID {pid} on {host}) ended without finishing"
            " the run (killed, out of memory, or the machine stopped); what it stored"
            " before is kept")
