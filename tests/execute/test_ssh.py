"""The script each SSH host runs for a session (execute/ssh.REMOTE), run here as it runs
there, with real fio: what it does when storbench is gone at the wrong moment."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from storbench.execute.ssh import REMOTE
from tests.conftest import needs, needs_fio
from tests.testbed import fio_servers_on_loopback

pytestmark = [needs_fio, needs("ssh", "root")]  # sshd servers here, counted by the tests


def servers_of(there: str) -> list[int]:
    return [p for p in fio_servers_on_loopback()
            if f"--server=sock:{there}/fio.sock".encode()
            in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")]


@pytest.fixture
def ours():
    """Socket directories a test's sessions use; a server left in one (the defect these
    tests catch) is ended afterwards, and the directory removed."""
    made: list[str] = []
    yield made
    for there in made:
        for pid in servers_of(there):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(there, ignore_errors=True)


def session(there: str, target: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sh", "-c", REMOTE, "sh", there, f"{target}/storbench-x-", "",
                             "", "", "", "--write", str(target)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


def test_a_session_whose_storbench_is_gone_before_ready_stops_its_server(tmp_path, ours):
    """storbench killed while a host's server starts: the session's output and input
    close before it says "ready". Its shell used to die of SIGPIPE on that line, before
    its cleanup, and the server ran on (a CI run found one 10 minutes later)."""
    target = tmp_path / "target"
    target.mkdir()
    there = f"/tmp/storbench-{secrets.token_hex(8)}"
    ours.append(there)
    proc = session(there, target)
    assert proc.stdout is not None and proc.stdin is not None
    for line in proc.stdout:  # the server starts right after this line
        if line.startswith((b"storbench-unconfined", b"storbench-confined")):
            break
    proc.stdout.close()
    proc.stdin.close()
    proc.wait(30)
    deadline = time.monotonic() + 5
    while servers_of(there) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert servers_of(there) == []
    assert not Path(there).exists()


def test_a_server_a_dead_session_left_is_stopped_by_the_next_session(tmp_path, ours):
    """What a session that could not end well left (its shell killed outright): the next
    session of the same user removes its directory, its files, and its server."""
    target = tmp_path / "target"
    target.mkdir()
    there = f"/tmp/storbench-{secrets.token_hex(8)}"
    ours.append(there)
    proc = session(there, target)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(b"storbench-ready"):
            break
    [server] = servers_of(there)
    proc.kill()  # the shell only: its server runs on, its lock is free
    proc.wait()
    assert servers_of(there) == [server]
    ours.append(f"/tmp/storbench-{secrets.token_hex(8)}")
    nxt = session(ours[-1], target)
    out, _ = nxt.communicate(b"", timeout=30)
    assert f"storbench-removed {target}/storbench-x-".encode() in out, out
    assert servers_of(there) == [] and not Path(there).exists()
