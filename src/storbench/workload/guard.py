"""Which fio options may reach outside storbench's scratch directory: one table.

fio's job options can name files (logs, iologs, the files to do I/O on), run commands
(``exec_prerun=``, the ``exec`` engine, external engines) and change the machine
(``ioscheduler=``, ``cgroup=``). A job file from elsewhere runs with storbench's
rights (often root), on this machine or on every ``--hosts`` server: each such
option is checked here, before fio sees the file.

- PATH: a relative path is resolved into the scratch directory; an absolute path,
  ``..``, or an environment variable (``${HOME}``: fio expands it) is refused.
- COMMAND: refused unless ``--allow-exec``.
- ENGINE: ``ioengine=`` is checked: engines that run programs (exec) or load code
  (external:..., a path) need ``--allow-exec``; engines that do no I/O in the target
  directory (network, Ceph, SCSI generic, ...) are refused.
- SYSTEM: changes the machine for everyone (the device's I/O scheduler, cgroups,
  a built-in profile with its own devices): refused.
"""

from __future__ import annotations

import enum
import os
import re
from pathlib import PurePosixPath


class Risk(enum.Enum):
    PATH = "path"
    COMMAND = "command"
    ENGINE = "engine"
    SYSTEM = "system"


OPTIONS: dict[str, tuple[Risk, str]] = {
    "filename": (Risk.PATH, "the file(s) fio does I/O on"),
    "filename_format": (Risk.PATH, "how fio names its files"),
    "opendir": (Risk.PATH, "a directory whose files fio does I/O on"),
    "write_iolog": (Risk.PATH, "a log of every I/O fio writes"),
    "read_iolog": (Risk.PATH, "an I/O log fio replays"),
    "merge_blktrace_file": (Risk.PATH, "a merged blktrace fio writes"),
    "write_bw_log": (Risk.PATH, "a bandwidth log fio writes"),
    "write_lat_log": (Risk.PATH, "latency logs fio writes"),
    "write_iops_log": (Risk.PATH, "an IOPS log fio writes"),
    "write_hist_log": (Risk.PATH, "a latency histogram log fio writes"),
    "mem": (Risk.PATH, "a file backing fio's buffers (mmap:PATH, mmaphuge:PATH)"),
    "iomem": (Risk.PATH, "a file backing fio's buffers (mmap:PATH, mmaphuge:PATH)"),
    "replay_redirect": (Risk.PATH, "the device an I/O log is replayed onto"),
    "exec_prerun": (Risk.COMMAND, "a command fio runs before the job"),
    "exec_postrun": (Risk.COMMAND, "a command fio runs after the job"),
    "ioengine": (Risk.ENGINE, "how fio issues I/O"),
    "ioscheduler": (Risk.SYSTEM, "switches the I/O scheduler of the device under the"
                                 " target, for everyone"),
    "cgroup": (Risk.SYSTEM, "creates cgroups on this machine"),
    "profile": (Risk.SYSTEM, "a built-in fio profile with devices of its own"),
}
COMMAND_ENGINES = ("exec",)  # runs ``program=`` with ``arguments=``
ELSEWHERE_ENGINES = ("rbd", "rados", "nbd", "http", "nfs", "gfapi", "gfapi_async", "sg",
                     "mtd", "net", "netsplice", "rdma", "libhdfs", "dev-dax", "libpmem",
                     "pmemblk", "cpuio", "io_uring_cmd", "xnvme", "spdk", "windowsaio")
# fio's own tokens in file names; anything else after "$" is expanded by fio
_FIO_TOKENS = re.compile(r"\$(jobname|jobnum|filenum|clientuid)\b")


# Paths fio resolves against its working directory, not directory=: storbench points
# them into the scratch directory (on the target: a --hosts server writes them there).
INTO_SCRATCH = ("write_iolog", "read_iolog", "merge_blktrace_file", "mem", "iomem")


def check(section: str, key: str, value: str | None, *, allow_exec: bool) -> str | None:
    """None when the option may stay as it is, else why not (a ConfigError's text)."""
    entry = OPTIONS.get(key.lower())
    if entry is None or value is None:
        return None
    risk, what = entry
    where = f"job [{section}] sets {key}={value}"
    if risk is Risk.PATH:
        for part in path_parts(key.lower(), value):
            why = outside(part)
            if why is not None:
                return (f"{where} ({what}): {why}; storbench only writes inside its own"
                        " scratch directory: use a relative name")
        return None
    if risk is Risk.COMMAND and not allow_exec:
        return (f"{where} ({what}): storbench does not run commands from job files; pass"
                " --allow-exec if you trust this job file")
    if risk is Risk.SYSTEM:
        return f"{where}: it {what}; storbench refuses it (leave it out of the job file)"
    if risk is Risk.ENGINE:
        engine = value.strip()
        if engine.startswith("external") or "/" in engine:
            if not allow_exec:
                return (f"{where}: an external engine loads code from outside fio; pass"
                        " --allow-exec if you trust it")
        elif engine in COMMAND_ENGINES and not allow_exec:
            return (f"{where}: the exec engine runs a program; pass --allow-exec if you trust"
                    " this job file")
        elif engine in ELSEWHERE_ENGINES:
            return (f"{where}: that engine does no I/O in the target directory; storbench"
                    " measures the target it is given")
    return None


def path_parts(key: str, value: str) -> list[str]:
    """The paths in an option's value: filename's ':' list, mem=mmap:PATH's path."""
    if key in ("mem", "iomem"):
        kind, sep, path = value.partition(":")
        return [path] if sep and kind in ("mmap", "mmaphuge", "mmapshared") else []
    if key in ("filename", "opendir"):
        return [p for p in re.split(r"(?<!\\):", value) if p]
    return [value]


def outside(part: str) -> str | None:
    """Why a path from a job file would reach outside the scratch directory, or None."""
    rest = _FIO_TOKENS.sub("", part)
    if "$" in rest or "~" in rest.split("/")[0]:
        return "fio would expand it (a variable or ~) to a path storbench cannot check"
    if os.path.isabs(part):
        return "an absolute path"
    if ".." in PurePosixPath(part).parts:
        return "a path that leaves the directory (..)"
    return None
