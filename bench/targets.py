"""Benchmark targets whose true performance we set ourselves (see shared/testbed/STORAGE.md).

- tmpfs(): no-latency RAM file system.
- throttled(): ext4 on a loop device (direct I/O to a file on the disk) capped by a
  cgroup v1 blkio throttle; the calling process joins the cgroup, so every fio it
  starts (directly or through storbench) is throttled. Needs root and cgroup v1 blkio.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def tmpfs(size: str = "1g") -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sb-bench-") as d:
        mnt = Path(d) / "tmpfs"
        mnt.mkdir()
        sh("mount", "-t", "tmpfs", "-o", f"size={size}", "sb-bench", str(mnt))
        try:
            yield mnt
        finally:
            sh("umount", "-l", str(mnt))


@contextlib.contextmanager
def throttled(read_iops: int = 3000, write_iops: int = 3000,
              read_bps: int = 125 * 2**20, size: str = "2G") -> Iterator[Path]:
    if not (BLKIO / "cgroup.procs").exists():
        raise RuntimeError("cgroup v1 blkio is not mounted at /sys/fs/cgroup/blkio")
    with tempfile.TemporaryDirectory(prefix="sb-bench-", dir="/var/tmp") as d:
        img, mnt = Path(d) / "disk.img", Path(d) / "mnt"
        mnt.mkdir()
        sh("truncate", "-s", size, str(img))
        dev = sh("losetup", "--find", "--show", "--direct-io=on", str(img))
        cg = BLKIO / f"storbench-bench-{os.getpid()}"
        try:
            sh("mkfs.ext4", "-q", "-E", "nodiscard", dev)
            sh("mount", dev, str(mnt))
            majmin = sh("lsblk", "-no", "MAJ:MIN", dev).strip()
            cg.mkdir()
            (cg / "blkio.throttle.read_iops_device").write_text(f"{majmin} {read_iops}")
            (cg / "blkio.throttle.write_iops_device").write_text(f"{majmin} {write_iops}")
            (cg / "blkio.throttle.read_bps_device").write_text(f"{majmin} {read_bps}")
            (cg / "cgroup.procs").write_text(str(os.getpid()))
            yield mnt
        finally:
            (BLKIO / "cgroup.procs").write_text(str(os.getpid()))
            for _ in range(50):
                with contextlib.suppress(OSError):
                    cg.rmdir()
                if not cg.exists():
                    break
                import time

                time.sleep(0.1)
            subprocess.run(["umount", "-l", str(mnt)], check=False)
            subprocess.run(["losetup", "-d", dev], check=False)
