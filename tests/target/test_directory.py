"""A directory target whose file system stops answering: a network file system's
server frozen with SIGSTOP mid-run (TCP stays open, as in a partition), for real.

Nothing hangs: the test's time limit ends the run saying the target stopped
responding; Ctrl-C and SIGTERM end storbench within 5 s whatever fio and the
metadata probe are doing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import STORBENCH, needs_fio, needs_timing, run_cli

pytestmark = needs_fio

LONG_READ = ("[reader]\nrw=randread\nbs=4k\nsize=8m\ndirect=1\ntime_based\nruntime={runtime}\n")


def start_run(mnt, tmp_path, store_path, runtime, *extra, stderr=subprocess.PIPE,
              silent=False):
    """storbench run on ``mnt``; ``silent``: the server is frozen already, so the mount
    is not looked at here (the test would hang in the kernel)."""
    job = tmp_path / "reader.fio"
    job.write_text(LONG_READ.format(runtime=runtime))
    proc = subprocess.Popen([*STORBENCH, "run", str(mnt), "--job", str(job), *extra],
                            stdout=subprocess.PIPE, stderr=stderr, text=True,
                            env={**os.environ, "STORBENCH_DB": str(store_path)})
    # left by an earlier test's run
    proc.earlier = set() if silent else set(mnt.glob("storbench-*"))
    return proc


def ended(proc, sig=None, timeout=60.0):
    """Send ``sig`` (if any) and wait for storbench to end: its stderr, and the seconds
    from the signal (or from now) to its end. Killed if it has not ended by then."""
    start = time.monotonic()
    try:
        if sig is not None:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return err, time.monotonic() - start


def wait_for_io(mnt, proc, timeout=30.0):
    """Until this run's file is laid out and read (fio has started its I/O; else the run
    is killed and the test fails). An earlier
    run's directory, left on the silent server, is not this run's: CI once took its
    file for fio's and froze the server while storbench was still starting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = [f for d in mnt.glob("storbench-*") if d not in proc.earlier
                 for f in d.glob("reader*")]
        if files and files[0].stat().st_size >= 8 * 2**20:
            time.sleep(1.5)  # fio truncates the file to its size first, then writes it
            return
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("fio never started")


def stored(store_path):
    return json.loads(run_cli("show", "last", "--json", db=store_path).stdout)


def test_a_server_that_goes_silent_fails_the_run_at_its_time_limit(sshfs_server, tmp_path,
                                                                    store_path):
    mnt = sshfs_server.mount(proxied=False)
    proc = start_run(mnt, tmp_path, store_path, 60, "--timeout", "12", "--no-probe-metadata")
    wait_for_io(mnt, proc)
    with sshfs_server.frozen():
        err, took = ended(proc)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "the target stopped responding during test 'reader.fio' (no I/O for" in err, err
    assert took < 20  # the --timeout of 12 s, not the test's 60 s, nor forever
    run = stored(store_path)
    assert run["status"] == "failed" and "stopped responding" in run["error"]


@needs_timing  # a bound in seconds: beside the other lanes a SIGTERM took 5.4 s in a full run
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_storbench_within_5_s_on_a_silent_server(sig, code, sshfs_server, tmp_path,
                                                                 store_path):
    mnt = sshfs_server.mount(proxied=False)
    # the metadata probe is on (a network file system): its stat() blocks too
    proc = start_run(mnt, tmp_path, store_path, 60)
    wait_for_io(mnt, proc)
    with sshfs_server.frozen():
        time.sleep(2)  # fio and the probe are blocked in the kernel now
        err, took = ended(proc, sig)
    assert proc.returncode == code, err
    assert took < 5, (took, err)
    assert "Traceback" not in err and f"interrupted by {sig.name}" in err
    run = stored(store_path)
    assert run["status"] == "interrupted"
    # the scratch directory could not be removed from a silent server: the next run does it
    later = run_cli("run", str(mnt), "--job", str(tmp_path / "reader.fio"), "--runtime", "1",
                    "--no-probe-metadata", db=store_path)
    assert later.returncode == 0, later.stderr
    assert list(mnt.glob("storbench-*")) == []


def clearing_child(parent, timeout=20.0):
    """The PID of the child in which storbench (PID ``parent``) clears the scratch
    directory before a test (execute/scratchops.py, named "sb-clean" while it does), once
    it does. Only its own child: another test's storbench may clear at the same time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-eo", "pid,ppid,comm"], capture_output=True,
                            text=True).stdout
        for line in ps.splitlines():
            if line.split()[1:] == [str(parent), "sb-clean"]:
                return int(line.split()[0])
        time.sleep(0.05)
    raise AssertionError("storbench never cleared its scratch directory")


def test_one_child_serves_the_operations_and_a_stuck_one_is_left(sshfs_server, tmp_path):
    """The operations on a target's file system are served by one child (a Python start
    each cost ~45 ms, several a test); one that does not answer in time is left (killed
    when the kernel lets go: its name says what it was doing) and the next operation gets
    a new child. An operation asked while the child is busy gets one of its own."""
    from storbench.execute import fsops

    mnt = sshfs_server.mount(proxied=False)
    assert json.loads(fsops.call("look", str(mnt), timeout_s=10))["is_dir"]
    served = fsops._Server.proc
    assert json.loads(fsops.call("mode", str(tmp_path), timeout_s=10)) is not None
    assert fsops._Server.proc is served and served.poll() is None
    assert Path(f"/proc/{served.pid}/comm").read_text() == "sb-idle\n"
    names = []
    with sshfs_server.frozen():
        with pytest.raises(fsops.Stuck, match=f"PID {served.pid} left running"):
            fsops.call("look", str(mnt), timeout_s=1, check=lambda: names.append(
                Path(f"/proc/{served.pid}/comm").read_text().strip()))
        assert fsops._Server.proc is None and "sb-look" in names
        with fsops._Server.lock:  # busy (another thread's): a child of its own
            assert json.loads(fsops.call("mode", str(tmp_path), timeout_s=10)) is not None
        assert fsops._Server.proc is None
    assert json.loads(fsops.call("look", str(mnt), timeout_s=10))["is_dir"]
    assert fsops._Server.proc.pid != served.pid
    assert served.wait(timeout=10) == -signal.SIGKILL


def test_storbench_started_in_a_silent_directory_runs_on_another_target(
        sshfs_server, tmpfs, store_path):
    """`storbench run` on a tmpfs, started (as a user starts it: its console script) from a
    directory of a network file system gone silent: the run completes. Its children (the
    look at the target, the clean, fio's watchdog) were started as `python -m`, which
    looked for their modules in the working directory first: the look hung there for its
    start's 60 s, and the tmpfs was said not to respond."""
    import sys

    script = Path(sys.executable).with_name("storbench")
    assert script.exists(), f"no console script beside {sys.executable}"
    here = sshfs_server.mount(proxied=False) / f"cwd-{os.getpid()}-{time.monotonic_ns()}"
    here.mkdir()
    with sshfs_server.frozen():
        proc = subprocess.run([str(script), "run", str(tmpfs), "--suite", "etcd", "--size",
                               "1m"], cwd=here, capture_output=True, text=True, timeout=50,
                              env={**os.environ, "STORBENCH_DB": str(store_path)})
    assert proc.returncode == 0, proc.stderr
    assert stored(store_path)["status"] == "completed"


@needs_timing  # beside other lanes, twice in CI the clear it waits in had ended already
def test_a_signal_ends_storbench_within_5_s_while_it_waits_on_a_silent_server(
        sshfs_server, tmp_path, store_path):
    """Before each test storbench clears its scratch directory in a child and waits for
    it, up to a minute on a slow file system. A signal ends that wait at once: CI saw
    Ctrl-C wait the whole minute when it came there."""
    mnt = sshfs_server.mount(proxied=False)
    for attempt in range(3):  # until the clear is caught in the silence (see _interrupted)
        log = tmp_path / f"stderr-{attempt}.txt"
        if (took := _interrupted(sshfs_server, mnt, tmp_path, store_path, log)) is not None:
            break
    else:
        pytest.fail("storbench's clear ended before the server went silent, three times")
    err = log.read_text()
    assert took < 5, (took, err)
    assert "Traceback" not in err and "interrupted by SIGINT" in err, err
    assert "[1] reader.fio" not in err  # fio never started
    assert stored(store_path)["status"] == "interrupted"


def _interrupted(sshfs_server, mnt, tmp_path, store_path, log) -> float | None:
    """A run SIGINTed while its child clears the scratch directory on a silent server:
    the seconds it took to end (exit code 130), or None where the clear was over before
    the server went silent (the child named itself sb-idle again: beside other lanes
    the probe's idle phase can pass before the silence begins)."""
    with log.open("w") as stderr:
        proc = start_run(mnt, tmp_path, store_path, 60, stderr=stderr)
    try:
        deadline = time.monotonic() + 30
        while "Run #" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        # the metadata probe's idle phase (3 s) comes first: the server goes silent in it
        with sshfs_server.frozen():
            child = clearing_child(proc.pid)
            time.sleep(1)  # the child is blocked in the kernel now; storbench waits for it
            assert proc.poll() is None
            try:  # still clearing: stuck there (the kill storbench sends it on the signal
                # may take effect at once, in a wait FUSE lets a kill end, or never)
                stuck = Path(f"/proc/{child}/comm").read_text().strip() == "sb-clean"
            except OSError:
                stuck = False
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=15)  # without a check for signals it waited 60 s
            took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if not stuck:
        return None
    assert proc.returncode == 130, log.read_text()
    return took


@pytest.mark.parametrize("sig", [None, signal.SIGINT])
def test_a_server_already_silent_is_said_before_anything_runs(sig, sshfs_server, tmp_path,
                                                              store_path):
    """storbench's first look at the target (is it a device? does it exist?) is taken in
    a child: on a server already silent it says so within 20 s, and Ctrl-C ends it at
    once, where a stat of its own would hold it in the kernel until the server answers."""
    mnt = sshfs_server.mount(proxied=False)  # looked at before the server goes silent
    with sshfs_server.frozen():
        proc = start_run(mnt, tmp_path, store_path, 5, silent=True)
        if sig is not None:
            time.sleep(3)  # Python started; storbench waits for its child's stat
        err, took = ended(proc, sig)
    assert "Traceback" not in err, err
    if sig is None:
        assert proc.returncode == 1, err
        assert f"target {str(mnt)!r} does not respond: looking at it got no answer" in err, err
        assert took < 30, took  # is_block_device's 5 s, then the target's own 15 s
    else:
        assert proc.returncode == 130, err
        assert took < 5, took
    assert "Run #" not in err  # nothing was started
