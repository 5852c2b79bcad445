"""Where fio's I/O goes, as the kernel's block-layer tracepoints name it (``run --explain``,
execute/layers.py): the file system beneath a path, the block device beneath it (the whole
disk of a partition, a loop device's backing file) and the I/O limits this process's cgroup
has on that device. Run as a script (``python3 -I -c SOURCE PATH``: on a host over SSH,
execute/hosttrace.py), it prints the place beneath PATH as JSON; it needs nothing but
Python's standard library."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Beneath:
    """The block device beneath a path, as the block layer's tracepoints name it."""

    name: str  # "loop0", "vda"
    dev: int  # the whole disk's dev_t as the kernel encodes it (major << 20 | minor)
    part_dev: int  # the partition's (the file system's device), the same for a whole disk
    start_sector: int  # the partition's first sector on the disk
    backing: str | None = None  # a loop device's backing file
    backing_fs: str | None = None  # and the file system that holds it


# file systems whose journal or log a sync's wait is timed by, and whose it is: jbd2's
# commits (ext4, ext3), xfs's log forced (its own tracepoints)
JOURNALED = {"ext4": "jbd2", "ext3": "jbd2", "xfs": "xfs"}


@dataclass(frozen=True)
class Place:
    """What the explanation needs of where fio's I/O went."""

    fs_type: str | None
    device: Beneath | None  # None: no block device (tmpfs, a FUSE or network file system)
    throttle: dict[str, int] = field(default_factory=dict)  # blkio limits on the device
    # the cgroup's own count of the I/Os it let through to the device: its file and the
    # device's MAJ:MIN there (execute/capcount.py); None where no limit is set, or unread
    counter: tuple[str, str] | None = None
    # whether the kernel has the tracepoints xfs's log is timed by (5.14 and later)
    xfs_log: bool = False

    @property
    def journal(self) -> str | None:
        """The journal whose commits a sync's wait is timed by (execute/layers.py): jbd2's,
        of ext4 or ext3 on a block device, or xfs's log (where the kernel traces it); None
        where it is not timed."""
        found = JOURNALED.get(self.fs_type or "") if self.device is not None else None
        return None if found == "xfs" and not self.xfs_log else found

    def record(self) -> dict[str, Any]:
        """As an explanation stores it (analysis/explain.py)."""
        d = self.device
        return {"fs_type": self.fs_type, "device": d.name if d is not None else None,
                "backing": d.backing if d is not None else None,
                "backing_fs": d.backing_fs if d is not None else None,
                "throttle": dict(self.throttle), "journal": self.journal}


def place_of(said: Any) -> Place:
    """The place a host said (``locate``'s JSON, as printed below); ValueError for anything
    else: its numbers go into a bpftrace program, so each must be an integer."""
    def number(value: Any) -> int:
        if type(value) is not int or value < 0:
            raise ValueError(f"not a device number: {value!r}")
        return value

    def text(value: Any) -> str | None:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"not a name: {value!r}")
        return value

    if not isinstance(said, dict) or not isinstance(said.get("throttle", {}), dict):
        raise ValueError("not a place")
    d = said.get("device")
    device = None if d is None else Beneath(
        str(text(d["name"])), number(d["dev"]), number(d["part_dev"]),
        number(d["start_sector"]), text(d.get("backing")), text(d.get("backing_fs")))
    return Place(text(said.get("fs_type")), device,
                 {str(k): number(v) for k, v in said.get("throttle", {}).items()},
                 xfs_log=said.get("xfs_log") is True)


def kdev(major: int, minor: int) -> int:
    return (major << 20) | minor


def locate(path: Path) -> Place:
    """The file system and block device beneath ``path`` (a directory, or a device) and the
    I/O limits this process's cgroup has on that device (fio inherits them)."""
    st = os.stat(path)
    is_dev = path.is_block_device()
    number = st.st_rdev if is_dev else st.st_dev
    fs_type = None if is_dev else _fs_type(path)
    major, minor = os.major(number), os.minor(number)
    sys_dir = Path(f"/sys/dev/block/{major}:{minor}")
    if major == 0 or not sys_dir.exists():
        return Place(fs_type, None)
    real = sys_dir.resolve()
    whole, start = real, 0
    if (real / "partition").exists():
        whole = real.parent
        start = int((real / "start").read_text())
    wmaj, wmin = (int(x) for x in (whole / "dev").read_text().split(":"))
    backing = backing_fs = None
    with contextlib.suppress(OSError):
        backing = (whole / "loop" / "backing_file").read_text().strip() or None
    if backing:
        with contextlib.suppress(OSError):
            backing_fs = _fs_type(Path(backing).parent)
    limits = throttle_limits(wmaj, wmin)
    return Place(fs_type, Beneath(whole.name, kdev(wmaj, wmin), kdev(major, minor), start,
                                  backing, backing_fs), limits,
                 throttle_counter(wmaj, wmin) if limits else None,
                 xfs_log=fs_type == "xfs" and kernel_at_least(os.uname().release, (5, 14)))


def kernel_at_least(release: str, version: tuple[int, int]) -> bool:
    """Whether a kernel release ("6.1.0-18-amd64") is ``version`` or later (xfs's log
    tracepoints, xlog_iclog_*, came with 5.14)."""
    found = re.match(r"([0-9]+)\.([0-9]+)", release)
    return found is not None and (int(found[1]), int(found[2])) >= version


def _fs_type(path: Path) -> str | None:
    """The type of the file system holding ``path`` (the longest mount point above it)."""
    real = str(path.resolve())
    best, found = -1, None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            point = left.split(" ")[4].encode().decode("unicode_escape")
            if (real == point or point == "/" or real.startswith(point.rstrip("/") + "/")) \
                    and len(point) > best:
                best, found = len(point), right.split(" ")[0]
    return found


def _cgroup_dirs() -> list[tuple[str, Path]]:
    """This process's cgroup directories: ("blkio", its v1 blkio cgroup) and ("", its v2
    one), as /proc/self/cgroup names them."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, where = line.split(":", 2)
            if "blkio" in controllers.split(","):
                found.append(("blkio", Path("/sys/fs/cgroup/blkio") / where.lstrip("/")))
            elif controllers == "":
                found.append(("", Path("/sys/fs/cgroup") / where.lstrip("/")))
    return found


def throttle_counter(major: int, minor: int) -> tuple[str, str] | None:
    """The file in which this process's cgroup counts the I/Os it let through to device
    MAJOR:MINOR, in the hierarchy whose limits are set on it (blkio.throttle.io_serviced,
    cgroup v1; io.stat, v2), and the device as it names it; None where it keeps none."""
    for kind, base in _cgroup_dirs():
        path = base / ("blkio.throttle.io_serviced" if kind else "io.stat")
        if _limits_in(kind, base, f"{major}:{minor}") and os.access(path, os.R_OK):
            return str(path), f"{major}:{minor}"
    return None


def throttle_limits(major: int, minor: int) -> dict[str, int]:
    """This process's cgroup's I/O limits on device MAJOR:MINOR: blkio.throttle.* (cgroup
    v1) or io.max (v2), as {"read_iops": 3000, "write_bps": ...}."""
    found: dict[str, int] = {}
    for kind, base in _cgroup_dirs():
        found.update(_limits_in(kind, base, f"{major}:{minor}"))
    return found


def _limits_in(kind: str, base: Path, device: str) -> dict[str, int]:
    """The limits on ``device`` (MAJ:MIN) of the cgroup at ``base``: v1's blkio ("blkio")
    or v2's ("")."""
    found: dict[str, int] = {}
    if kind:
        for name, key in (("read_iops", "read_iops_device"), ("write_iops", "write_iops_device"),
                          ("read_bps", "read_bps_device"), ("write_bps", "write_bps_device")):
            with contextlib.suppress(OSError):
                for entry in (base / f"blkio.throttle.{key}").read_text().split("\n"):
                    dev, _, value = entry.partition(" ")
                    if dev == device and value.strip().isdigit():
                        found[name] = int(value)
        return found
    with contextlib.suppress(OSError):
        for entry in (base / "io.max").read_text().splitlines():
            dev, *pairs = entry.split()
            if dev != device:
                continue
            for pair in pairs:
                key, _, value = pair.partition("=")
                if value.isdigit():
                    found[{"riops": "read_iops", "wiops": "write_iops", "rbps": "read_bps",
                           "wbps": "write_bps"}.get(key, key)] = int(value)
    return found


if __name__ == "__main__":  # on a host over SSH: the place beneath the path given, as JSON
    import dataclasses
    import json
    import sys

    print(json.dumps(dataclasses.asdict(locate(Path(sys.argv[1])))))
