"""Which process runs a run, and whether it still does: a run whose process is gone
(SIGKILL, the OOM killer, a power loss) while its row says 'running' crashed.

A run is alive while its process holds the lock on its work directory's marker
(execute/workdir.py): any process that sees that file can tell, in any PID namespace.
Where the file cannot be seen, the process is judged by its host, PID, start time (the
kernel's, in clock ticks since boot: a recycled PID has another), PID namespace (a PID
means nothing in another one) and the machine's boot id (a reboot ends every process);
what cannot be told is "cannot tell", and the run is left alone.
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
    pid_ns: str | None = None  # "pid:[4026531836]": the namespace its PID is in


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
    try:
        ns: str | None = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = None
    return Process(os.uname().nodename, pid, _start_time(pid), _boot_id(), ns)


def vanished(pid: int | None, start: str | None, boot_id: str | None, me: Process,
             lock_path: str | None = None, pid_ns: str | None = None) -> bool:
    """Is the process that ran a run (on this host) gone? False when it cannot be told
    (a run stored before storbench recorded its process, or one whose lock this process
    cannot see from another PID namespace)."""
    if pid is None:
        return False
    if boot_id is not None and me.boot_id is not None and boot_id != me.boot_id:
        return True  # the machine rebooted since
    if lock_path is not None:
        alive = _locked(lock_path)
        if alive is not None:
            return not alive
    if pid_ns is not None and pid_ns != me.pid_ns:
        return False  # its PID means nothing here: cannot tell
    now = _start_time(pid)
    if now is None:
        return Path("/proc").is_dir()  # no such process (where /proc can say so)
    return start is not None and now != start  # the PID now belongs to another process


def _locked(path: str) -> bool | None:
    """Is the run's marker locked by its process (execute/workdir.create_marked)? None:
    the file is not here to ask (removed, or this is another mount namespace)."""
    import fcntl

    try:
        with open(path, "rb") as marker:
            try:
                fcntl.flock(marker.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
    except OSError:
        return None
    return False


def crash_note(pid: int | None, host: str) -> str:
    return (f"crashed: the storbench process (PID {pid} on {host}) ended without finishing"
            " the run (killed, out of memory, or the machine stopped); what it stored"
            " before is kept")
