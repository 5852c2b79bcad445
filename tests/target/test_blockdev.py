"""Block devices, safely: loop devices the tests make (never the machine's own disk),
blank, with a file system, with a partition table, mounted; the root disk's guard
decision is checked without fio ever starting against it."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storbench.target.blockguard import decide, inspect
from tests.conftest import needs_fio, needs_root, needs_timing, run_cli

pytestmark = needs_root  # loop devices

QUICK = ("--suite", "quick", "--runtime", "1", "--ramp", "0")
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

    def mount(self, dev: str, where: Path, *options: str) -> None:
        """``options``: "ro" for a device whose bytes a test compares before and after
        (a read-write ext4 writes on its own: its journal, its lazy inode-table init)."""
        where.mkdir(exist_ok=True)
        subprocess.run(["mount", *(("-o", ",".join(options)) if options else ()), dev,
                        str(where)], check=True)
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
    # blank and not written first: the reads may be of blocks never written
    unwritten = [w for w in run["warnings"] if w["kind"] == "unwritten-reads"]
    assert [w["test"] for w in unwritten] == ["randread", "seqread"], run["warnings"]
    assert "--precondition" in unwritten[0]["message"]
    assert unwritten[0]["details"]["devices"] == [loop.dev]


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
    assert "unwritten-reads" not in {w["kind"] for w in run["warnings"]}  # it holds ext4
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


ROUND_READS = "[randread]\nrw=randread\nbs=4k\niodepth=16\nioengine=libaio\n"


def throttled_device():
    from tests.testbed import Throttled, missing_for_throttled

    if (reason := missing_for_throttled()) is not None:
        pytest.skip(reason)
    # in RAM beneath the cap: only the cap is measured, never the host disk
    return Throttled(raw=True, size="256M", backing_dir="/dev/shm")


@needs_timing
@needs_fio
def test_precondition_then_rounds_until_steady(tmp_path, store_path):
    """SNIA-style: the device written twice, then 1-s rounds; a flat 3000-IOPS cap is
    steady as soon as there are 5 rounds to judge: round 5, its figures the cap's."""
    job = tmp_path / "reads.fio"
    job.write_text(ROUND_READS)
    with throttled_device() as vol:
        refused = run_cli("run", vol.dev, "--job", str(job), "--precondition", db=store_path)
        assert refused.returncode == 1 and "--precondition" in refused.stderr
        from tests.conftest import run_cli_wrapped

        proc = run_cli_wrapped(vol.wrap, "run", vol.dev, "--job", str(job), "--precondition",
                               "--round", "1", "--max-rounds", "8", "--destructive", vol.dev,
                               db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "Preconditioning: writing 512.0 MiB sequentially" in proc.stdout + proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    rounds = run["data"]["steady_rounds"]["reads.fio"]
    assert rounds["reached_round"] == 5 and rounds["window"] == [0, 1, 2, 3, 4]
    # the rounds' median is the cap; each round (1 s) within the criterion's ±10%
    assert statistics.median(rounds["values"]) == pytest.approx(3000, rel=0.03)
    assert all(v == pytest.approx(3000, rel=0.10) for v in rounds["values"])
    assert any("[precondition]" in j and f"io_size={512 * 2**20}" in j
               for j in run["job_files"])
    assert "precondition" in [p["name"] for p in run["data"]["phases"]]
    assert run["environment"]["target"]["preconditioned"] is True
    assert "unwritten-reads" not in {w["kind"] for w in run["warnings"]}  # written first
    doc = json.loads(run_cli("compare", "last", "--json", db=store_path).stdout)
    cols = [c["metric"] for c in doc["comparison"]["columns"]]
    row = doc["comparison"]["rows"][0]
    assert row["repeats"][cols.index("read.iops")] == 5
    assert row["values"][cols.index("read.iops")] == pytest.approx(3000, rel=0.03)
    shown = " ".join(run_cli("show", "last", db=store_path).stdout.split())
    assert "steady state reached in round 5" in shown
    report = tmp_path / "r.html"
    assert run_cli("report", "last", "-o", str(report), db=store_path).returncode == 0
    assert 'id="rounds-' in report.read_text() and "per round, steady in round 5" in (
        report.read_text())


@needs_timing
@needs_fio
def test_rounds_that_never_settle_say_so(tmp_path, store_path):
    """The cap moves every second (1000, 3000, ...): no 5 rounds agree within 20%."""
    import threading
    import time

    from tests.conftest import run_cli_wrapped

    job = tmp_path / "reads.fio"
    job.write_text(ROUND_READS)
    with throttled_device() as vol:
        done = threading.Event()

        def flip() -> None:
            i = 0
            while not done.wait(0.5):
                vol.set_limits(1000 if i % 4 < 2 else 3000, 3000)
                i += 1

        flipper = threading.Thread(target=flip)
        flipper.start()
        try:
            start = time.monotonic()
            proc = run_cli_wrapped(vol.wrap, "run", vol.dev, "--job", str(job),
                                   "--precondition", "--precondition-size", "16m", "--round",
                                   "1", "--max-rounds", "6", "--destructive", vol.dev,
                                   db=store_path)
        finally:
            done.set()
            flipper.join()
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - start < 60
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    rounds = run["data"]["steady_rounds"]["reads.fio"]
    assert rounds["reached_round"] is None and len(rounds["values"]) == 6
    assert rounds["window"] == [1, 2, 3, 4, 5]  # the figures: the last 5 rounds
    warned = [w for w in run["warnings"] if w["kind"] == "not-steady"]
    assert warned and "was not reached in 6 rounds" in warned[0]["message"]


@needs_fio
def test_the_read_half_of_a_suite(loop, store_path):
    """--reads-only: dbench's read tests on a device holding a file system, fio
    --readonly, the write tests left out and said so; not a byte written."""
    mkfs(loop.dev)
    before = loop.digest()
    refused = run_cli("run", loop.dev, "--suite", "dbench", "--size", "16m",
                      "--runtime", "1", "--ramp", "0",
                      db=store_path)
    assert refused.returncode == 1 and "--reads-only" in refused.stderr
    proc = run_cli("run", loop.dev, "--suite", "dbench", "--size", "16m",
                   "--runtime", "1", "--ramp", "0",
                   "--reads-only", db=store_path)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert "Left out (--reads-only): write_iops, write_bw, write_latency, write_seq, rw_mix" in said
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert [t["name"] for t in run["tests"]] == ["read_iops", "read_bw", "read_latency",
                                                  "read_seq"]
    assert all("fio --readonly" in j for j in run["job_files"])
    assert loop.digest() == before


@needs_fio
def test_a_loop_device_over_a_network_file_system_shows_its_round_trip(sshfs_server,
                                                                        store_path, tmp_path):
    """A block device with network latency: a loop device whose backing file lives on
    sshfs behind a proxy adding 1 ms each way. A 4k read that is not cached costs a round
    trip (>= 2 ms); a 1 GiB sparse file read at random for 2 s at qd1 is almost never
    cached, so the median says so, and no cache is claimed in front of it."""
    backing = sshfs_server.mount(proxied=True) / f"disk-{tmp_path.name}.img"
    with backing.open("wb") as f:
        f.truncate(2**30)
    dev = subprocess.run(["losetup", "--find", "--show", str(backing)], check=True,
                         capture_output=True, text=True).stdout.strip()
    job = tmp_path / "qd1.fio"
    job.write_text("[qd1]\nrw=randread\nbs=4k\niodepth=1\nioengine=psync\ntime_based\n"
                   "runtime=2\n")
    try:
        proc = run_cli("run", dev, "--job", str(job), db=store_path)
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
        backing.unlink()
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert run["environment"]["target"]["loop_backing_file"] == str(backing)
    read = run["tests"][0]["read"]
    p50 = {float(k): v for k, v in read["clat"]["percentiles_ns"].items()}[50.0]
    assert p50 >= 2_000_000, read["clat"]
    assert not [w for w in run["warnings"] if "cache" in w["kind"]]


@needs_fio
def test_a_test_shorter_than_fio_s_disk_sampling_is_not_called_uncached(loop, tmp_path,
                                                                          store_path):
    """fio reads the devices' counters every 250 ms: a test that ends before it did shows
    its device untouched, which is no evidence of a cache (it was said once as "100% of
    what fio was told is written never reached it")."""
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nsize=4m\nioengine=libaio\niodepth=4\n")
    proc = run_cli("run", loop.dev, "--job", str(job), "--size", "4m", "--destructive",
                   loop.dev, db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    [test] = run["tests"]
    if test["write"]["runtime_ms"] >= 500:
        pytest.skip(f"the writes took {test['write']['runtime_ms']} ms here: fio sampled")
    assert "device-not-reached" not in {w["kind"] for w in run["warnings"]}, run["warnings"]
