"""A block device on hosts reached over SSH (`run /dev/X --hosts ssh://…`): two sshd
"hosts", each in its own mount namespace where one device name is a different loop
device (64 and 96 MiB) of the test's own. The guard runs on each host, by the same
code as for a local device; a host that refuses stops the run before any fio starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.conftest import needs, needs_fio, run_cli
from tests.target.test_blockdev import READS, Loop, mkfs
from tests.testbed import SshHosts, fio_servers_on_loopback, missing_for_sshfs, servers_left

pytestmark = [needs_fio, needs("ssh", "root")]  # sshd servers here, counted by the tests

MIB = 2**20
SIZES = (64 * MIB, 96 * MIB)


class Disks:
    def __init__(self, tmp: Path) -> None:
        self.loops = []
        for i, size in enumerate(SIZES):
            (tmp / f"disk{i}").mkdir()
            self.loops.append(Loop(tmp / f"disk{i}", size=size))
        self.hosts = SshHosts(2, devices=[lo.dev for lo in self.loops])

    def run(self, *args: str, db: Path):
        return run_cli("run", str(self.hosts.device_path), "--hosts", self.hosts.hosts,
                       "--ssh-config", str(self.hosts.config), *args, db=db)

    def blank(self, i: int) -> bool:
        return not any(Path(self.loops[i].dev).read_bytes())


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[Disks]:
    reason = missing_for_sshfs()  # root, sshd, unshare
    if reason:
        pytest.skip(f"ssh hosts: {reason}")
    d = Disks(tmp_path)
    try:
        with d.hosts:
            yield d
    finally:
        for lo in d.loops:
            lo.close()


def show(db: Path) -> dict:
    return json.loads(run_cli("show", "last", "--json", db=db).stdout)


def test_each_host_writes_its_own_device_whole_when_named_again(disks, store_path):
    before = fio_servers_on_loopback()
    path = str(disks.hosts.device_path)
    proc = disks.run("--suite", "quick",
                     "--runtime", "1", "--ramp", "0", "--destructive", path, db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(f"WRITING to {path}") == 2, proc.stderr
    assert "found on it: nothing (blank)" in proc.stderr
    run = show(store_path)
    hosts = run["environment"]["hosts"]
    assert [h["device"]["size_bytes"] for h in hosts] == list(SIZES)
    assert all(h["device"]["name"].startswith("loop") for h in hosts)
    # each host's job file covers its own device
    assert any(f"size={SIZES[0]}" in j for j in run["job_files"])
    assert any(f"size={SIZES[1]}" in j for j in run["job_files"])
    randwrite = next(t for t in run["tests"] if t["name"] == "randwrite")
    assert randwrite["write"]["iops"] > 0
    # both devices were blank and not preconditioned: their reads may be of nothing
    unwritten = [w for w in run["warnings"] if w["kind"] == "unwritten-reads"]
    assert [w["test"] for w in unwritten] == ["randread", "seqread"], run["warnings"]
    assert unwritten[0]["details"]["devices"] == [path]
    assert not disks.blank(0) and not disks.blank(1)  # both hosts' disks were written
    assert servers_left(before) == set()


def test_a_host_whose_device_holds_a_file_system_refuses_the_run(disks, store_path,
                                                                   tmp_path):
    mkfs(disks.loops[1].dev)
    digests = [lo.digest() for lo in disks.loops]
    quick = ("--suite", "quick", "--size", "16m", "--runtime", "1", "--ramp", "0")
    proc = disks.run(*quick, db=store_path)
    # writing needs the device named again on every host; host 1 also says what it holds
    assert_one_line_error(proc, 1, "2 of 2 host(s) refuse",
                          f"{disks.hosts.hosts.split(',')[1]}: writing to",
                          "holds: ext4 file system", "--destructive",
                          "(tests that write: randwrite, seqwrite, synclat); or --reads-only")
    assert [lo.digest() for lo in disks.loops] == digests
    # the read half of the suite, as on a device here: the tests that write left out
    proc = disks.run(*quick, "--reads-only", db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "Left out (--reads-only): randwrite, seqwrite, synclat: they write" in \
        proc.stderr
    run = show(store_path)
    assert [t["name"] for t in run["tests"]] == ["randread", "seqread"]
    assert all("fio --readonly" in j for j in run["job_files"])
    assert [lo.digest() for lo in disks.loops] == digests
    # reading needs no flag: fio --readonly on every host
    job = tmp_path / "reads.fio"
    job.write_text(READS)
    proc = disks.run("--job", str(job), db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("Reading (fio --readonly)") == 2
    assert "found on it: ext4 file system" in proc.stderr
    assert "--readonly" in show(store_path)["job_files"][0]
    assert [lo.digest() for lo in disks.loops] == digests


def test_a_device_in_use_on_a_host_is_refused_even_when_named_again(disks, store_path,
                                                                      tmp_path):
    """Mounted here, after the hosts' namespaces were made: their mount tables do not
    show it, the kernel's exclusive open does."""
    mkfs(disks.loops[0].dev)
    disks.loops[0].mount(disks.loops[0].dev, tmp_path / "mnt")
    path = str(disks.hosts.device_path)
    proc = disks.run("--suite", "quick", "--runtime", "1", "--ramp", "0", "--destructive", path,
                     db=store_path)
    assert_one_line_error(proc, 1, "1 of 2 host(s) refuse", "in use, storbench never"
                          " touches it", "Nothing was started")
    assert disks.blank(1)  # the other host's device was not touched either


def test_the_device_rules_hold_on_hosts_as_here(disks, store_path, tmp_path):
    """The device's rules are one (target/device.py), wherever fio runs on it: on the
    hosts' devices as on one here, --size is held to the smallest host's device and
    --precondition writes every host's device whole before its rounds (--reads-only:
    the test above)."""
    path = str(disks.hosts.device_path)
    smallest = disks.hosts.hosts.split(",")[0]  # its device: 64 MiB
    beyond = disks.run("--suite", "quick", "--size", "80m", "--destructive", path,
                       db=store_path)
    assert_one_line_error(beyond, 1, "reaches 80.0 MiB", f"{path} on {smallest}",
                          "holds 64.0 MiB", "--size")
    job = tmp_path / "reads.fio"
    job.write_text("[randread]\nrw=randread\nbs=4k\niodepth=4\nioengine=libaio\n")
    unnamed = disks.run("--job", str(job), "--precondition", "--round", "1",
                        "--max-rounds", "5", db=store_path)  # writes: --destructive
    assert_one_line_error(unnamed, 1, "2 of 2 host(s) refuse",
                          "tests that write: --precondition")
    proc = disks.run("--job", str(job), "--precondition", "--round", "1", "--max-rounds",
                     "5", "--destructive", path, db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = show(store_path)
    written = sorted(int(line.split("=", 1)[1]) for j in run["job_files"]
                     if "[precondition]" in j for line in j.splitlines()
                     if line.startswith("io_size="))
    assert written == [2 * size for size in SIZES], run["job_files"]  # each host its own
    assert all(h["device"]["preconditioned"] for h in run["environment"]["hosts"])
    assert "unwritten-reads" not in {w["kind"] for w in run["warnings"]}  # written first
    assert len(run["data"]["steady_rounds"]["reads.fio"]["values"]) >= 5
    assert all(Path(lo.dev).read_bytes()[-4096:].strip(b"\0")
               for lo in disks.loops)  # each written to its end


@pytest.mark.parametrize("path", ["/dev/sbtest-none", "/dev/shm/../sbtest-none",
                                  "/dev//./sbtest-none", "/dev/shm/x/../../sbtest-none"])
def test_a_device_on_hosts_needs_ssh(path, store_path):
    """Every way of writing a path that ends in /dev (not /dev/shm) names a device:
    a path out of /dev/shm by .. is no directory of files."""
    proc = run_cli("run", path, "--hosts", "127.0.0.1:8765", "--suite", "quick",
                   db=store_path)
    assert_one_line_error(proc, 2, "needs every host reached over SSH")
    proc = run_cli("run", "/dev/sbtest-none", "--hosts", "ssh://127.0.0.1", "--suite",
                   "quick", "--destructive", "/dev/other", db=store_path)
    assert_one_line_error(proc, 2, "name the TARGET device again")


@pytest.mark.parametrize("flag", ["--reads-only", "--precondition"])
def test_the_device_flags_on_hosts_need_a_device(flag, store_path):
    """A directory on the hosts is no device: the flag is refused before any host is asked."""
    proc = run_cli("run", "/data", "--hosts", "ssh://127.0.0.1", "--suite", "quick", flag,
                   db=store_path)
    assert_one_line_error(proc, 2, "apply to block devices", "here or on --hosts")


@pytest.mark.usefixtures("blk_tracer")  # (the kernel's, one test at a time)
def test_a_block_recording_replays_on_each_hosts_device(disks, store_path, tmp_path):
    """fio's direct random writes and reads on a loop device of the test's, recorded at
    block level, replayed on both hosts' devices: refused without --destructive (both
    untouched), then each host issues the whole recording on its own device (the iolog
    put in each SSH session's 0700 directory, gone with it); no server left."""
    from tests.conftest import FIO, IS_ROOT

    if not IS_ROOT:
        pytest.skip("recording a block device needs root")
    (tmp_path / "src").mkdir()
    src = Loop(tmp_path / "src", size=128 * MIB)
    try:
        far = run_cli("record", "far", "--device", src.dev, "--", str(FIO), "--name=f",
                      f"--filename={src.dev}", "--rw=write", "--bs=4k", "--offset=100m",
                      "--size=4k", "--direct=1", db=store_path)
        assert far.returncode == 0, far.stderr
        rec = run_cli("record", "blk", "--device", src.dev, "--", str(FIO), "--name=w",
                      f"--filename={src.dev}", "--rw=randwrite", "--bs=4k", "--size=8m",
                      "--io_size=512k", "--direct=1", "--ioengine=psync", "--name=r",
                      "--stonewall", f"--filename={src.dev}", "--rw=randread", "--bs=4k",
                      "--size=8m", "--io_size=256k", "--direct=1", "--ioengine=psync",
                      db=store_path)
    finally:
        src.close()
    assert rec.returncode == 0, rec.stderr
    w = next(w for w in json.loads(run_cli("workloads", "--json", db=store_path).stdout)
             if w["name"] == "blk")
    c = w["counts"]
    assert (c["writes"], c["reads"]) == (128, 64), c
    before = fio_servers_on_loopback()
    path = str(disks.hosts.device_path)
    # beyond the smaller host's 64 MiB: refused, once the hosts' devices are known
    beyond = disks.run("--replay", "far", "--destructive", path, db=store_path)
    assert beyond.returncode != 0, beyond.stderr
    assert "reaches 100.0 MiB into its device" in beyond.stderr, beyond.stderr
    assert "holds 64.0 MiB on its smallest host" in beyond.stderr
    refused = disks.run("--replay", "blk", "--replay-fast", db=store_path)
    assert refused.returncode != 0 and "--destructive" in refused.stderr, refused.stderr
    assert disks.blank(0) and disks.blank(1)
    proc = disks.run("--replay", "blk", "--replay-fast", "--destructive", path, db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = show(store_path)
    replay = run["data"]["replay"]
    assert replay["workers"] == 2, replay
    assert replay["issued"] == {"reads": 2 * 64, "writes": 2 * 128, "syncs": 0}, replay
    assert not disks.blank(0) and not disks.blank(1)  # each host wrote its own device
    assert all("replay_redirect=" + path in j for j in run["job_files"]), run["job_files"]
    assert all("read_iolog=/tmp/storbench-" in j for j in run["job_files"])
    assert servers_left(before) == set()
    # the sessions' directories (and the iologs in them) are gone
    for j in run["job_files"]:
        iolog = next(line.split("=", 1)[1] for line in j.splitlines()
                     if line.startswith("read_iolog="))
        assert not Path(iolog).parent.exists(), iolog
