"""`run --explain --hosts ssh://…`: each host's fio followed by bpftrace on that host, over
an SSH command of its own (execute/hosttrace.py), the hosts' layers summed. The hosts are
real sshd servers in mount namespaces of this machine (tests/testbed.SshHosts): their
kernel is this one, but each host's trace follows only its own fio server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from storbench.execute import layers
from tests.conftest import needs, needs_alone, run_cli
from tests.pipeline.test_explain import explained, job, ran
from tests.testbed import SshHosts, processes

pytestmark = [needs("tracer", "root", "fio", "ssh",
                    unavailable=layers.usable() and "bpftrace is not installed"
                    " (scripts/install-testbed) or not root"),
              needs("alone")]  # a timing test here is traced: alone


def bpftraces(hosts: SshHosts) -> set[int]:
    """The bpftrace processes the hosts' SSH sessions run."""
    ours = {p for i in range(hosts.n) for p in hosts.sessions(i)}
    return ours & set(processes(lambda argv: bool(argv) and argv[0].endswith(b"bpftrace")))


def on_hosts(hosts: SshHosts, path: Path, jobfile: Path, db: Path) -> Any:
    return run_cli("run", str(path), "--hosts", hosts.hosts, "--ssh-config",
                   str(hosts.config), "--job", str(jobfile), "--explain",
                   "--no-probe-metadata", db=db)


@needs_alone  # fio on tmpfs on two hosts, each traced: the heaviest tracing (alone)
def test_on_tmpfs_hosts_there_is_no_block_layer_and_every_host_is_counted(tmp_path: Path
                                                                            ) -> None:
    """Two hosts, each its own tmpfs at the path: the sentence names tmpfs, and the calls
    the traces saw are those of both hosts' fio (one host's alone would be half). Each
    fio at 20,000 reads a second: at full speed (~600,000 each) the two bpftraces,
    told to stop, have now and then not ended within STOP_S (60 s; the run then says
    so, and keeps no explanation: a full run of 2026-12-06, and before). Most likely the
    SIGINT that bpftrace 0.17 forgets under load (layers.STOPPED, mended since)."""
    db = tmp_path / "s.db"
    with SshHosts(2) as hosts:
        ran(on_hosts(hosts, hosts.target,
                     job(tmp_path, size="8m", runtime=3, rate_iops=20000), db))
        assert bpftraces(hosts) == set()  # every host's tracer ended with its test
    entry, data = explained(db)
    # paced: fio's spinning wait for each next read is not what bound it (its own pace is)
    assert entry["limit"] == "no_block", entry["said"]
    assert "its rate was the job's own pace" in entry["said"]
    assert "tmpfs" in entry["said"] and "device" not in entry["layers"]
    total = data["tests"][0]["read"]["total_ios"]
    per_host = [h["read"]["total_ios"] for h in data["per_host"]]
    assert len(per_host) == 2 and sum(per_host) == total
    # the kernel skips a program that would run inside another on its CPU: most are seen
    assert entry["layers"]["call_nobio"]["n"] >= max(per_host) * 1.2, (entry, per_host)


def test_storbench_killed_mid_test_leaves_no_tracer_on_the_hosts(tmp_path: Path) -> None:
    """SIGKILL while both hosts trace: each tracer's SSH connection closes, and bpftrace
    there stops (as the sessions' fio servers do), or is killed there STOP_S after."""
    import signal
    import subprocess
    import time

    from tests.conftest import STORBENCH

    with SshHosts(2) as hosts:
        proc = subprocess.Popen(
            [*STORBENCH, "run", str(hosts.target), "--hosts", hosts.hosts, "--ssh-config",
             str(hosts.config), "--job", str(job(tmp_path, size="8m", runtime=60)),
             "--explain", "--no-probe-metadata"],
            env={**os.environ, "STORBENCH_DB": str(tmp_path / "s.db")},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while len(bpftraces(hosts)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(bpftraces(hosts)) == 2, "the hosts' tracers never started"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        # told to stop as the connection closed, and killed there if not ended STOP_S
        # after (once here, beside nothing else, one was still running 10 s after)
        deadline = time.monotonic() + layers.STOP_S + 10
        while bpftraces(hosts) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert bpftraces(hosts) == set()


@needs_alone
def test_a_cgroup_throttle_on_the_hosts_is_named(tmp_path: Path) -> None:
    """The hosts' sshd (so their fio servers) in a blkio cgroup capped at 3,000 read IOPS
    on a loop volume both see: each host's trace finds the cap in its own cgroup, and the
    wait in blk-throttle holds most of fio's p99; the device saw both hosts' reads."""
    from tests.testbed import Throttled, missing_for_throttled

    if why := missing_for_throttled():
        pytest.skip(why)
    db = tmp_path / "s.db"
    with Throttled(backing_dir="/dev/shm", size="1G") as vol, \
            SshHosts(2, wrap=vol.wrap) as hosts:
        ran(on_hosts(hosts, vol.mnt, job(tmp_path, ioengine="libaio", iodepth=16), db))
    entry, data = explained(db)
    assert entry["limit"] == "throttle", entry["said"]
    assert "3,000 read IOPS" in entry["said"]
    assert entry["place"]["throttle"]["read_iops"] == 3000
    result = data["tests"][0]
    p99 = float(result["read"]["clat"]["percentiles_ns"]["99.0"])
    assert entry["layers"]["throttle"]["p99_ns"] >= 0.8 * p99
    assert entry["layers"]["device"]["n"] >= 0.9 * result["read"]["total_ios"], entry


def test_a_host_that_cannot_trace_is_named_before_anything_runs(tmp_path: Path) -> None:
    """bpftrace missing on the second host: the run is refused, naming it, before any
    test; no fio server is left on either host and no run is stored."""
    from tests.testbed import fio_servers_on_loopback, servers_left

    db = tmp_path / "s.db"
    before = set(fio_servers_on_loopback())
    with SshHosts(2, hidden={1: "bpftrace"}) as hosts:
        proc = on_hosts(hosts, hosts.target, job(tmp_path, size="8m", runtime=1), db)
        second = hosts.hosts.split(",")[1]
        assert proc.returncode == 1, proc.stdout + proc.stderr
        said = " ".join(proc.stderr.split())
        assert f"--explain cannot follow fio on 1 of 2 host(s): {second}: bpftrace" in said
        assert "Nothing was started" in said
        assert "[1]" not in proc.stderr  # no test began
        assert hosts.files_on(0) == [] and hosts.files_on(1) == []
    assert servers_left(before) == set()
    assert run_cli("list", "--json", db=db).stdout.strip() == "[]"


def test_a_tracer_that_writes_much_to_its_stderr_is_read_to_its_end(tmp_path: Path) -> None:
    """A stand-in for a fault not caused at will (bpftrace's warnings, a line each of the
    events it lost, say): 8 MiB to stderr on one host, then the real bpftrace. Nobody
    read the ssh session's stderr until bpftrace ended: a full pipe stopped ssh, bpftrace
    with it, and the test kept no explanation. It is read as it comes."""
    import shutil

    real = tmp_path / "bpftrace.real"
    shutil.copy(shutil.which("bpftrace") or "bpftrace", real)
    loud = tmp_path / "bpftrace"
    loud.write_text(f"#!/bin/sh\nhead -c 8388608 /dev/zero | tr '\\0' w >&2\n"
                    f'exec {real} "$@"\n')
    loud.chmod(0o755)
    db = tmp_path / "s.db"
    with SshHosts(2, replaced={1: ("bpftrace", loud)}) as hosts:
        ran(on_hosts(hosts, hosts.target, job(tmp_path, size="8m", runtime=2), db))
        assert bpftraces(hosts) == set()
    entry, data = explained(db)
    assert len(data["per_host"]) == 2 and entry["layers"]


def test_an_agent_cannot_be_traced(tmp_path: Path) -> None:
    """Only a host reached over SSH can be traced (its session runs bpftrace there)."""
    db = tmp_path / "s.db"
    proc = run_cli("run", "--hosts", "127.0.0.1:1", str(tmp_path), "--explain", db=db)
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "--explain follows fio through each host's kernel over its SSH session" in said
    assert "not reached over SSH (ssh://HOST): 127.0.0.1:1" in said
