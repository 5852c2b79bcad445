"""`storbench agent`: nobody else gets in. A real agent (fio's server) on a unix socket,
`nobody` trying it with a stock fio client and an exec_prerun= job, root refused without
--allow-root, --bind to an address the host does not have, --confine holding a job
that writes outside."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from storbench.execute import confine
from tests.cli.test_cli import assert_one_line_error
from tests.conftest import FIO, IS_ROOT, STORBENCH, needs_fio, run_cli

pytestmark = [needs_fio,
              pytest.mark.skipif(not IS_ROOT or shutil.which("runuser") is None,
                                 reason="needs root and runuser (to be `nobody`)")]


class Agent:
    def __init__(self, *args: str, wrap: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen([*wrap, *STORBENCH, "agent", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_socket(self, path: Path) -> None:
        """Until it listens, its socket made 0600 (fio makes it open to all, in the 0700
        directory that keeps others out meanwhile)."""
        deadline = time.monotonic() + 20
        while not path.is_socket() or path.stat().st_mode & 0o777 != 0o600:
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)

    def stop(self) -> str:
        self.proc.terminate()
        return self.proc.communicate(timeout=10)[1]


@pytest.fixture
def public() -> Iterator[Path]:
    """A directory everyone may read (for `nobody`'s job file)."""
    d = Path(tempfile.mkdtemp(prefix="sb-agent-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


def nobody_tries(sock: Path, public: Path, marker: Path) -> subprocess.CompletedProcess[str]:
    job = public / "attack.fio"
    job.write_text(f"[x]\nioengine=null\nsize=4k\nexec_prerun=touch {marker}\n")
    job.chmod(0o644)
    return subprocess.run(["runuser", "-u", "nobody", "--", FIO or "fio",
                           f"--client=sock:{sock}", str(job)],
                          capture_output=True, text=True, timeout=30)


def test_as_root_it_refuses_without_allow_root(tmp_path, store_path):
    proc = run_cli("agent", "--socket", str(tmp_path / "a" / "agent.sock"), db=store_path)
    assert_one_line_error(proc, 2, "refuses to run as root", "--allow-root", "unprivileged")


def test_a_socket_only_its_user_reaches(tmp_path, public, store_path, tmpfs):
    sock = tmp_path / "storbench-agent" / "agent.sock"
    agent = Agent("--socket", str(sock), "--allow-root")
    marker = public / "pwned"
    try:
        agent.wait_socket(sock)
        assert sock.stat().st_mode & 0o777 == 0o600
        assert sock.parent.stat().st_mode & 0o777 == 0o700
        tried = nobody_tries(sock, public, marker)
        assert tried.returncode != 0 and "Permission denied" in tried.stdout + tried.stderr
        assert not marker.exists()
        # its own user runs benchmarks through it
        ran = run_cli("run", str(tmpfs), "--hosts", f"sock:{sock}", "--suite", "quick",
                      "--runtime", "1", "--ramp", "0", "--size", "4m", db=store_path)
        assert ran.returncode == 0, ran.stderr
        assert "sock:" + str(sock) in run_cli("show", "last", db=store_path).stdout
    finally:
        said = agent.stop()
    assert "WARNING" not in said and f"socket {sock}" in said


def test_tcp_warns_who_can_use_it_on_every_start(tmp_path):
    from tests.testbed import free_port, wait_port_on

    port = free_port()
    agent = Agent("--bind", "127.0.0.1", "--port", str(port), "--allow-root")
    try:  # until it listens (a fixed 1.5 s was too short on a busy machine: nothing said)
        wait_port_on("127.0.0.1", port, 20)
    finally:
        said = agent.stop()
    assert "WARNING: listening on TCP 127.0.0.1" in said
    assert "every local user of this host" in said and "run commands as root" in said


@pytest.mark.parametrize("address", ["10.255.255.1", "192.0.2.7", "::2"])
def test_bind_to_an_address_the_host_does_not_have_fails(address, store_path):
    proc = run_cli("agent", "--bind", address, "--allow-root", db=store_path)
    assert_one_line_error(proc, 2, f"--bind {address}", "no such address")


def test_a_socket_others_could_replace_is_refused(store_path):
    shared = Path(tempfile.mkdtemp(prefix="sb-shared-"))
    try:
        shared.chmod(0o1777)
        proc = run_cli("agent", "--socket", str(shared / "a.sock"), "--allow-root",
                       db=store_path)
        assert_one_line_error(proc, 2, "lets other users in", "0700")
    finally:
        shutil.rmtree(shared)


def test_a_live_agent_is_not_replaced_and_a_stale_socket_is(tmp_path, store_path):
    import socket

    sock = tmp_path / "storbench-x" / "agent.sock"
    sock.parent.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()  # a socket file nobody listens on
    agent = Agent("--socket", str(sock), "--allow-root")
    try:
        agent.wait_socket(sock)
        time.sleep(0.5)
        assert agent.proc.poll() is None
        second = run_cli("agent", "--socket", str(sock), "--allow-root", db=store_path)
        assert_one_line_error(second, 2, "already listens there")
    finally:
        agent.stop()


@pytest.mark.skipif(not confine.abi(), reason="the kernel offers no Landlock")
def test_confine_keeps_every_client_s_jobs_in_its_directory(tmp_path, public):
    bench, outside = tmp_path / "bench", tmp_path / "outside"
    bench.mkdir()
    outside.mkdir()
    sock = tmp_path / "storbench-c" / "agent.sock"
    agent = Agent("--socket", str(sock), "--allow-root", "--confine", str(bench))
    try:
        agent.wait_socket(sock)
        for where, allowed in ((bench, True), (outside, False)):
            job = public / "w.fio"
            job.write_text(f"[w]\ndirectory={where}\nrw=write\nbs=4k\nsize=64k\n")
            done = subprocess.run([FIO or "fio", f"--client=sock:{sock}", str(job)],
                                  capture_output=True, text=True, timeout=60)
            said = done.stdout + done.stderr
            assert (("err=13" in said or "Permission denied" in said) != allowed), said
        assert list(bench.iterdir()) and not list(outside.iterdir())
    finally:
        said = agent.stop()
    assert f"may write only {bench}" in said


def test_agent_over_the_default_path_for_a_user(tmp_path, store_path):
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    agent = subprocess.Popen([*STORBENCH, "agent", "--allow-root"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "storbench-agent.sock").is_socket():
            assert agent.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        agent.terminate()
        agent.communicate(timeout=10)


def test_an_agent_s_file_system_is_the_one_it_sees(tmp_path, disk_dir, store_path):
    """fio's server says nothing of its path; storbench reads the path's file system and
    space where an agent on a unix socket sees them, in its mount namespace (found through
    the socket's peer). Here the agent's namespace has a tmpfs over a directory that is on
    the disk for everyone else: fsync there is flagged as in RAM, and the tmpfs's size,
    not the disk's, is the room a test must fit in."""
    from storbench.target.environment import mount_of

    assert getattr(mount_of(disk_dir), "fs_type", None) not in ("tmpfs", None)
    sock = tmp_path / "storbench-agent" / "agent.sock"
    private = ("unshare", "-m", "--propagation", "private", "sh", "-c",
               f'mount -t tmpfs -o size=24m storbench-agent "{disk_dir}" && exec "$@"', "sh")
    agent = Agent("--socket", str(sock), "--allow-root", wrap=private)
    try:
        agent.wait_socket(sock)
        ran = run_cli("run", str(disk_dir), "--hosts", f"sock:{sock}", "--suite", "etcd",
                      "--size", "4m", "--json", db=store_path)
        assert ran.returncode == 0, ran.stderr
        run = json.loads(ran.stdout)
        [host] = run["environment"]["hosts"]
        assert host["fs_type"] == "tmpfs" and host["total_bytes"] == 24 * 2**20
        assert 0 < host["free_bytes"] <= host["total_bytes"] and "fs_dir" not in host
        assert run["environment"]["target"]["fs_type"] == "tmpfs"
        [w] = [w for w in run["warnings"] if w["kind"] == "sync-in-ram"]
        assert "etcd: fsync on tmpfs is a no-op" in w["message"]

        big = run_cli("run", str(disk_dir), "--hosts", f"sock:{sock}", "--suite", "quick",
                      "--size", "64m", "--ramp", "0", db=store_path)
        assert_one_line_error(big, 1, "not enough free space", f"sock:{sock} has 24",
                              "pass a smaller --size")
    finally:
        agent.stop()
    assert not list(disk_dir.iterdir())  # the agent's tmpfs went with it; the disk kept none


def test_agents_that_share_a_path_are_told_from_those_that_do_not(tmp_path, disk_dir,
                                                                   small_tmpfs, store_path):
    """Agents on unix sockets that see the path as one directory of one file system share
    it: their files must fit in it together, and --shared-file is theirs to use. An agent
    whose namespace mounts a tmpfs over the path sees another directory: --shared-file with
    it is refused (each fio would work on a file of its own while the run says one)."""
    socks = [tmp_path / f"storbench-agent-{n}" / "agent.sock" for n in "abc"]
    private = ("unshare", "-m", "--propagation", "private", "sh", "-c",
               f'mount -t tmpfs -o size=24m storbench-agent "{disk_dir}" && exec "$@"', "sh")
    agents = [Agent("--socket", str(socks[0]), "--allow-root", wrap=private),
              Agent("--socket", str(socks[1]), "--allow-root"),
              Agent("--socket", str(socks[2]), "--allow-root")]
    a, b, c = (f"sock:{s}" for s in socks)
    quick = ("--suite", "quick", "--runtime", "1", "--ramp", "0")
    try:
        for agent, sock in zip(agents, socks, strict=True):
            agent.wait_socket(sock)
        apart = run_cli("run", str(disk_dir), "--hosts", f"{a},{b}", "--shared-file",
                        *quick, "--size", "4m", db=store_path)
        assert_one_line_error(apart, 1, "--shared-file: the agents do not see",
                              f"({a}: tmpfs; {b}: ", "leave out --shared-file")

        # b and c both see the 16 MiB tmpfs: two files of 10 MiB do not fit in it at once
        both = run_cli("run", str(small_tmpfs), "--hosts", f"{b},{c}", *quick, "--size",
                       "10m", db=store_path)
        assert_one_line_error(both, 1, f"{b}, {c} share it", "2 files need 20.0 MiB")
        one_test = tmp_path / "one.fio"  # one short test: the plumbing is what is checked
        one_test.write_text("[w]\nrw=randwrite\nbs=4k\nsize=4m\ntime_based\nruntime=1\n")
        fits = run_cli("run", str(small_tmpfs), "--hosts", f"{b},{c}", "--job", str(one_test),
                       "--json", db=store_path)
        assert fits.returncode == 0, fits.stderr
        assert json.loads(fits.stdout)["environment"]["target"]["shared_by"] == [[b, c]]
        assert f"{b}, {c} share {small_tmpfs} (each sees the others' files)" in fits.stderr
        one = run_cli("run", str(small_tmpfs), "--hosts", f"{b},{c}", "--shared-file",
                      "--job", str(one_test), db=store_path)
        assert one.returncode == 0, one.stderr
    finally:
        for agent in agents:
            agent.stop()
    assert not list(small_tmpfs.iterdir()) and not list(disk_dir.iterdir())


def test_a_shared_file_is_laid_out_once_for_every_host(tmp_path, small_tmpfs, store_path):
    """--shared-file: fio lays out a file it finds short by unlinking it and writing it
    anew, so hosts that start a test at once each laid out the one file, unlinking one
    another's (its room held twice over, and a host could end on a file of its own). Now
    the first host lays it out alone first: one file is created per job on the shared
    tmpfs (its inode numbers are given in order: counted between two marks)."""
    socks = [tmp_path / f"storbench-agent-{n}" / "agent.sock" for n in "bc"]
    agents = [Agent("--socket", str(s), "--allow-root") for s in socks]
    if confine.abi():  # an agent that may not write the path: its layout fails, loudly
        (tmp_path / "elsewhere").mkdir()
        socks.insert(0, tmp_path / "storbench-agent-a" / "agent.sock")
        agents.insert(0, Agent("--socket", str(socks[0]), "--allow-root", "--confine",
                               str(tmp_path / "elsewhere")))
    job = tmp_path / "reads.fio"
    job.write_text("[global]\nrw=randread\nbs=4k\nsize=3m\ntime_based\nruntime=1\n"
                   "ramp_time=0\n" + "".join(f"[read{i}]\nstonewall\n" for i in range(4)))
    try:
        for agent, sock in zip(agents, socks, strict=True):
            agent.wait_socket(sock)
        if confine.abi():
            denied = run_cli("run", str(small_tmpfs), "--hosts",
                             ",".join(f"sock:{s}" for s in socks), "--shared-file", "--job",
                             str(job), db=store_path)
            assert_one_line_error(denied, 1,
                                  "--shared-file: laying out the files of test 'reads.fio'",
                                  f"from sock:{socks[0]} (before every host starts it)"
                                  " failed: ", "Permission denied")
            assert not list(small_tmpfs.iterdir())
            socks.pop(0)
        (small_tmpfs / "before").touch()
        ran = run_cli("run", str(small_tmpfs), "--hosts", ",".join(f"sock:{s}" for s in socks),
                      "--shared-file", "--job", str(job), db=store_path)
        (small_tmpfs / "after").touch()
        assert ran.returncode == 0, ran.stderr
    finally:
        for agent in agents:
            agent.stop()
    assert f"each test's file is laid out from sock:{socks[0]} first" in ran.stderr
    made = (small_tmpfs / "after").stat().st_ino - (small_tmpfs / "before").stat().st_ino - 1
    assert made == 4, f"{made} files were made for the 4 jobs"
    # and none was removed under a host by another's fio that ended first: the file is
    # removed from the first host once every host ended the test (here, as the run ends)
    texts = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)["job_files"]
    assert texts and all("unlink=0" in t and "unlink=1" not in t for t in texts), texts
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["after", "before"]
