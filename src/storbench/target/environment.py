"""Facts about the machine and the file system under a path, for every stored run."""

from __future__ import annotations

import os
import platform
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storbench.execute import confine
from storbench.result.environment import Machine
from storbench.target.blockguard import device_facts


def host_facts() -> Machine:
    """This machine's facts, for the environment of the runs it measures."""
    return {
        "hostname": socket.gethostname(),
        "os": _os_release(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        **_memory(),
    }


def local_confinement() -> str:
    """How fio on this machine is kept to the run's places: the kernel's Landlock, or
    "none: why" (the job-file checks still hold)."""
    confined, how = confine.status()
    return (f"{how}: fio may write only to the run's scratch directory or device" if confined
            else f"none: {how}")


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _memory() -> Machine:
    """``ram_bytes``: the memory this process's page cache may use, the machine's RAM or
    its memory cgroup's limit (a container's), the smaller; ``memory_limit_bytes``: that
    limit when it is the smaller."""
    ram, limit = _ram_bytes(), memory_limit()
    if limit is not None and (ram is None or limit < ram):
        return {"ram_bytes": limit, "memory_limit_bytes": limit}
    return {"ram_bytes": ram}


def memory_limit(proc_cgroup: Path = Path("/proc/self/cgroup"),
                 root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The tightest memory limit on this process's cgroup and its ancestors (cgroup v2
    memory.max, v1 memory.limit_in_bytes); None: none, or none to be read."""
    limits = []
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = [*line.split(":", 2), "", ""][:3]
        if number == "0" and controllers == "":
            base, name = root if (root / "cgroup.controllers").exists() else root / "unified", \
                "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        here = base / path.lstrip("/")
        if not here.is_dir():  # a cgroup namespace (a container): its own cgroup is the root
            here = base
        for d in (here, *here.parents):
            try:
                text = (d / name).read_text().strip()
            except OSError:
                text = ""
            if text.isdigit() and int(text) < 2**60:  # v1 says "no limit" with ~2**63
                limits.append(int(text))
            if d == base:
                break
    return min(limits) if limits else None


def _ram_bytes(field: str = "MemTotal") -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_available() -> int | None:
    """What the kernel thinks it can give without swapping (MemAvailable): the room of a
    ramfs, which keeps no count and grows into memory."""
    return _ram_bytes("MemAvailable")


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fs_type: str
    source: str
    options: str
    dev: str  # "major:minor"
    root: str = "/"  # what of its file system is mounted there (a bind mount's directory)


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace(
        "\\134", "\\"
    )


def mount_of(path: Path, process: str = "self") -> Mount | None:
    """The mount that holds ``path`` (longest mount point prefix in mountinfo), as this
    process sees it, or as ``process`` (a PID) does: in its mount namespace, from its
    root (``path`` is then taken as written: its symlinks are the process's)."""
    try:
        lines = Path(f"/proc/{process}/mountinfo").read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve()) if process == "self" else os.path.normpath(path)
    best: Mount | None = None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 6 or len(rest) < 2:
            continue
        mp = _unescape(fields[4])
        inside = target == mp or target.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best.mount_point)):
            options = fields[5] + ("," + rest[2] if len(rest) > 2 else "")
            best = Mount(mp, rest[0], _unescape(rest[1]), options, fields[2],
                         _unescape(fields[3]))
    return best


def block_device_facts(dev: str) -> dict[str, Any]:
    """What the block device behind ``major:minor`` is, if any: the same facts as for a
    block device TARGET (blockguard.device_facts; an NVMe namespace's among them)."""
    sys_dev = Path("/sys/dev/block") / dev
    if not sys_dev.exists():
        return {}
    return device_facts(sys_dev.resolve().name)


def path_facts(path: Path) -> dict[str, Any]:
    facts: dict[str, Any] = {"path": str(path.resolve())}
    mount = mount_of(path)
    if mount is not None:
        facts.update(
            mount_point=mount.mount_point,
            fs_type=mount.fs_type,
            mount_source=mount.source,
            mount_options=mount.options,
        )
        device = block_device_facts(mount.dev)
        if device:
            facts["block_device"] = device
    try:
        st = os.statvfs(path)
        facts["free_bytes"] = st.f_bavail * st.f_frsize
        facts["total_bytes"] = st.f_blocks * st.f_frsize
    except OSError:
        pass
    return facts


def agent_path_facts(sock: str, path: Path) -> dict[str, Any]:
    """The file system of ``path`` and its space as the agent (fio's server) listening on
    unix socket ``sock`` sees them: in its mount namespace (a container's, a systemd
    unit's private /tmp), found through the socket's peer (SO_PEERCRED: the process that
    listens). {} when that cannot be known: the peer is out of this PID namespace, or its
    mounts are not ours to read (another user's, hidepid)."""
    import struct

    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(5)
            conn.connect(sock)
            pid = struct.unpack("3i", conn.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
    except OSError:
        return {}
    mount = mount_of(path, str(pid)) if pid > 0 else None
    if mount is None:
        return {}
    facts: dict[str, Any] = {"fs_type": mount.fs_type, "mount_point": mount.mount_point,
                             # one directory of one file system, wherever it is mounted
                             "fs_dir": f"{mount.dev}:" + os.path.normpath(os.path.join(
                                 mount.root, os.path.relpath(path, mount.mount_point)))}
    try:  # the path through the agent's root: its user's, or root's, to look at
        st = os.statvfs(f"/proc/{pid}/root{os.path.normpath(path)}")
        facts.update(free_bytes=st.f_bavail * st.f_frsize, total_bytes=st.f_blocks * st.f_frsize)
    except OSError:
        pass
    return facts
