"""Block devices, safely: loop devices the tests make (never the machine's own disk),
blank, with a file system, with a partition table, mounted; the root disk's guard
decision is checked without fio ever starting against it."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storbench.target.blockguard import decide, inspect
from tests.conftest import IS_ROOT, needs_fio, run_cli

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="loop devices need root")

QUICK = ("--suite", "quick", "--runtime", "1")
READS = "[reads]\nrw=randread\nbs=4k\niodepth=8\nioengine=libaio\ntime_based\nruntime=1\n"


class Loop:
    """A loop device on a file of the test's own."""

    def __init__(self, tmp: Path, size: int = 64 * 2**20, partitioned: bool = False) -> None:
        self.image = tmp / "disk.img"
        with self.image.open("wb") as f:
            f.truncate(size)
            if partitioned:  # an MBR with one Linux partition from sector 2048
                entry = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0", 2048,
                                    size // 512 - 2048)
                f.seek(446)
                f.write(entry)
                f.seek(510)
                f.write(b"\x55\xaa")
        self.dev = subprocess.run(["losetup", "--find", "--show", "--partscan",
                                   str(self.image)], check=True, capture_output=True,
                                  text=True).stdout.strip()
        if partitioned and not Path(f"{self.dev}p1").exists():
            # where the kernel does not scan it by itself (no udev): tell it
            subprocess.run(["partx", "-a", self.dev], check=False, capture_output=True)
        self.mounts: list[Path] = []

    def digest(self, dev: str | None = None) -> str:
        return hashlib.sha256(Path(dev or self.dev).read_bytes()).hexdigest()

    def mount(self, dev: str, where: Path) -> None:
        where.mkdir(exist_ok=True)
        subprocess.run(["mount", dev, str(where)], check=True)
        self.mounts.append(where)

    def close(self) -> None:
        for m in self.mounts:
            subprocess.run(["umount", str(m)], check=False)
        subprocess.run(["losetup", "-d", self.dev], check=False)


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    dev = Loop(tmp_path)
    yield dev
    dev.close()


def mkfs(dev: str) -> None:
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)


@needs_fio
def test_a_blank_device_with_destructive(loop, store_path):
    proc = run_cli("run", loop.dev, *QUICK, "--destructive", loop.dev, db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert f"WRITING to {loop.dev}" in proc.stdout + proc.stderr
    assert "found on it: nothing (blank)" in proc.stdout + proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    target = run["environment"]["target"]
    assert target["kind"] == "block device" and target["device"] == loop.dev
    assert target["size_bytes"] == 64 * 2**20
    assert target["loop_backing_file"] == str(loop.image)
    assert {"logical_sector_bytes", "rotational", "scheduler"} <= set(target)
    assert [t["name"] for t in run["tests"]] == ["randread", "randwrite", "seqread", "seqwrite",
                                                  "synclat"]
    assert all(f"filename={loop.dev}" in j and "direct=1" in j for j in run["job_files"])


@needs_fio
def test_a_file_system_is_refused_and_nothing_written(loop, store_path):
    mkfs(loop.dev)
    before = loop.digest()
    proc = run_cli("run", loop.dev, *QUICK, db=store_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("storbench: error:")]
    assert len(errors) == 1 and "ext4 file system" in errors[0]
    assert f"--destructive {loop.dev}" in errors[0]
    assert loop.digest() == before  # not a byte written
    assert json.loads(run_cli("list", "--json", db=store_path).stdout) == []


@needs_fio
def test_reading_needs_no_flag_and_fio_cannot_write(loop, tmp_path, store_path):
    mkfs(loop.dev)
    before = loop.digest()
    job = tmp_path / "reads.fio"
    job.write_text(READS)
    proc = run_cli("run", loop.dev, "--job", str(job), db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "Reading (fio --readonly)" in proc.stdout + proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert run["tests"][0]["read"]["iops"] > 0
    assert "fio --readonly" in run["job_files"][0]
    assert loop.digest() == before


@pytest.mark.parametrize("name_it", ["path", "symlink"])
def test_mounted_is_refused_even_with_destructive(name_it, loop, tmp_path, store_path):
    mkfs(loop.dev)
    loop.mount(loop.dev, tmp_path / "mnt")
    target = loop.dev
    if name_it == "symlink":  # as /dev/disk/by-id/... names a device
        (tmp_path / "by-id").mkdir()
        target = str(tmp_path / "by-id" / "usb-Test_Disk_1234-0:0")
        os.symlink(loop.dev, target)
    proc = run_cli("run", target, *QUICK, "--destructive", target, db=store_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "is in use, storbench never touches it" in proc.stderr
    assert f"mounted: {loop.dev} at {tmp_path / 'mnt'}" in proc.stderr


def test_a_partition_mounted_or_a_partition_table(tmp_path, store_path):
    dev = Loop(tmp_path, partitioned=True)
    try:
        part = f"{dev.dev}p1"
        assert Path(part).exists(), "the kernel did not scan the partition table"
        whole = decide(inspect(dev.dev), writes=True, destructive=None)
        assert not whole.allowed and "dos partition table" in whole.reason
        mkfs(part)
        dev.mount(part, tmp_path / "mnt")
        for target in (dev.dev, part):  # the disk of a mounted partition, and the partition
            proc = run_cli("run", target, *QUICK, "--destructive", target, db=store_path)
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert f"mounted: {part} at" in proc.stderr
    finally:
        dev.close()


def test_destructive_must_name_the_same_device(loop, tmp_path, store_path):
    (tmp_path / "other").mkdir()
    other = Loop(tmp_path / "other")
    try:
        proc = run_cli("run", loop.dev, *QUICK, "--destructive", other.dev, db=store_path)
        assert proc.returncode == 2
        assert "--destructive" in proc.stderr and "must name a block device given" in proc.stderr
    finally:
        other.close()


def root_device() -> str:
    """The device the machine's root file system is on (from the mount table)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if parts[4] == "/":
            return str(Path("/dev") / Path(f"/sys/dev/block/{parts[2]}").resolve().name)
    raise AssertionError("no root mount")


def test_the_root_disk_is_refused_in_every_form(tmp_path):
    """Only the guard's decision: fio is never started against the machine's disk."""
    root = root_device()
    name = Path(root).name
    forms = [root, f"/sys/../dev/{name}"]
    parent = Path(f"/sys/class/block/{name}")
    if (parent / "partition").exists():
        forms.append(f"/dev/{parent.resolve().parent.name}")  # the whole disk
    forms += [f"/dev/{p.name}" for p in parent.iterdir() if (p / "partition").exists()]
    link = tmp_path / "by-id-root"
    os.symlink(root, link)
    forms.append(str(link))
    if Path(f"/dev/block/{os.major(os.stat(root).st_rdev)}:"
            f"{os.minor(os.stat(root).st_rdev)}").exists():
        forms.append(f"/dev/block/{os.major(os.stat(root).st_rdev)}:"
                     f"{os.minor(os.stat(root).st_rdev)}")
    for form in forms:
        found = inspect(form)
        for writes in (True, False):
            for destructive in (None, form):
                d = decide(found, writes=writes, destructive=destructive)
                assert not d.allowed, (form, writes, destructive, d)
