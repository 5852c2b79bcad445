"""`neighbours --isolate`: the aggressors in a cgroup of their own whose limits hold them,
as another tenant's would be (a container's blkio limits, a pod's I/O limit).

The cgroup is a blkio (cgroup v1) child of storbench's own, created before the first
isolated step with its limits on the block device beneath the target, joined by the
aggressor jobs alone (fio's ``cgroup=``; the victims stay where storbench runs), and
removed after the run. Its limits are those of cgroup v2's ``io.max`` and ``io.weight``
by name (``riops``, ``wiops``, ``rbps``, ``wbps``, ``weight``), written to v1's
``blkio.throttle.*_device`` and ``blkio.bfq.weight_device``.

What is refused, and why, before anything is measured: not root (cgroups are root's);
no blkio hierarchy (a machine of cgroup v2 only: its ``io.max`` is not done yet); no
block device beneath the target (RAM, FUSE and network file systems: nothing a blkio
cgroup can limit); and a storbench that runs in a cgroup which already limits that
device: cgroup v1 does not hold a child to its parent's throttle, so the aggressors
would escape that limit while the victims stay under it (measured on kernel 6.18: a
child of a cgroup capped at 5 MiB/s wrote 2.4 GB/s).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from storbench.errors import ConfigError

THROTTLE = {"riops": "blkio.throttle.read_iops_device",
            "wiops": "blkio.throttle.write_iops_device",
            "rbps": "blkio.throttle.read_bps_device",
            "wbps": "blkio.throttle.write_bps_device"}
WEIGHT = "blkio.bfq.weight_device"  # BFQ's: the only v1 scheduler that reads weights
REMOVE_WAIT_S = 5.0  # for the aggressors' processes to leave the cgroup after fio ends


@dataclass(frozen=True)
class Device:
    """The whole disk beneath a target: 'MAJ:MIN', its name, its I/O scheduler."""

    dev: str
    name: str
    scheduler: str

    @property
    def words(self) -> str:
        return f"/dev/{self.name} ({self.dev})"


def device_under(path: Path) -> Device:
    """The block device a blkio limit on ``path``'s I/O is written for: the path's own
    (a block device) or its file system's, a partition's whole disk. ConfigError where
    there is none."""
    st = os.stat(path)
    number = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    dev = f"{os.major(number)}:{os.minor(number)}"
    sys_dev = Path("/sys/dev/block") / dev
    if os.major(number) == 0 or not sys_dev.exists():
        raise ConfigError(f"--isolate: {path} is on no block device (RAM, a FUSE or network"
                          " file system): there is no device queue a blkio cgroup can"
                          " limit; give a directory on a disk or a block device")
    real = sys_dev.resolve()
    if (real / "partition").exists():  # limits are the whole disk's (the kernel's rule)
        real = real.parent
        dev = (real / "dev").read_text().strip()
    text = (real / "queue" / "scheduler").read_text() if (real / "queue").exists() else ""
    chosen = re.search(r"\[(\S+)\]", text)
    return Device(dev, real.name, chosen[1] if chosen else (text.strip() or "none"))


def blkio_mount() -> Path | None:
    """Where cgroup v1's blkio hierarchy is mounted, or None."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 3 and parts[2] == "cgroup" and "blkio" in parts[3].split(","):
                return Path(parts[1])
    return None


def own_blkio_path() -> str:
    """storbench's own blkio cgroup, relative to the hierarchy's root ('' at the root)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "blkio" in controllers.split(","):
            return path.strip("/")
    return ""


def ignored(keys: list[str], device: Device) -> str | None:
    """Why the device ignores a weight, if one is among ``keys`` (only BFQ reads blkio
    weights)."""
    if "weight" in keys and device.scheduler != "bfq":
        return (f"weight is ignored: {device.words} is scheduled by {device.scheduler}, and"
                " only bfq reads cgroup weights (echo bfq > /sys/block/"
                f"{device.name}/queue/scheduler)")
    return None


def check(path: Path) -> Device:
    """That the aggressors can be isolated for I/O on ``path``: the device, or a
    ConfigError saying why not (module docstring)."""
    if os.geteuid() != 0:
        raise ConfigError("--isolate creates a cgroup for the aggressors: run storbench as"
                          " root")
    mount = blkio_mount()
    if mount is None:
        raise ConfigError("--isolate needs cgroup v1's blkio controller, which this machine"
                          " does not mount; cgroup v2's io.max is not supported yet")
    device = device_under(path)
    own = own_blkio_path()
    parts = own.split("/") if own else []
    for depth in range(len(parts), -1, -1):  # its own, its parents', the root's
        cgroup = mount.joinpath(*parts[:depth])
        for key, name in THROTTLE.items():
            rules = (cgroup / name).read_text() if (cgroup / name).exists() else ""
            if any(line.split()[:1] == [device.dev] for line in rules.splitlines()):
                raise ConfigError(
                    f"--isolate: storbench runs in the blkio cgroup {cgroup}, which limits"
                    f" {device.words} ({key}); cgroup v1 does not hold a child cgroup to"
                    " its parent's limit, so the aggressors would escape it while the"
                    " victims stay under it. Run storbench outside that cgroup")
    return device


def cgroup_name(prefix: str) -> str:
    """A new cgroup's path for fio's cgroup= (relative to the blkio hierarchy's root),
    beneath storbench's own: ``prefix`` and 8 hex digits."""
    own = own_blkio_path()
    leaf = f"{prefix}{secrets.token_hex(4)}"
    return f"{own}/{leaf}" if own else leaf


def absolute(name: str) -> Path | None:
    mount = blkio_mount()
    return None if mount is None else mount / name


def root_tasks() -> Path:
    """The hierarchy root's tasks file: fio moves a job's process there as it ends (fio
    3.33's cgroup.c; a job that cannot fails with EACCES)."""
    mount = blkio_mount()
    assert mount is not None  # check() refused a machine without it
    return mount / "tasks"


class Cgroup:
    """The aggressors' cgroup at ``path``: made with its limits (make), removed (remove)."""

    def __init__(self, path: Path, limits: tuple[tuple[str, int], ...], device: Device,
                 text: str) -> None:
        """``limits``: (io.max's key, value) pairs; ``text``: as the user gave them."""
        self.path = path
        self.limits, self.device, self.text = limits, device, text

    def make(self) -> Cgroup:
        self.path.mkdir()
        try:
            for key, value in self.limits:
                if key == "weight":
                    if self.device.scheduler == "bfq":
                        (self.path / WEIGHT).write_text(f"{self.device.dev} {value}")
                    continue
                (self.path / THROTTLE[key]).write_text(f"{self.device.dev} {value}")
        except OSError as exc:
            self.remove()
            raise ConfigError(f"--isolate: the kernel refuses {self.text!r} for"
                              f" {self.device.words}: {exc.strerror}") from exc
        return self

    def remove(self, wait_s: float = REMOVE_WAIT_S) -> bool:
        """Gone (True), or still holding processes after ``wait_s`` (a fio stuck in
        the kernel): left, and False."""
        ends = time.monotonic() + wait_s
        while self.path.exists():
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > ends:
                    return False
                time.sleep(0.1)
        return True
