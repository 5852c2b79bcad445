"""Hosts reached over SSH: four sshd "hosts" on loopback addresses, each in its own
mount namespace with its own tmpfs at the target path; real ssh, real fio servers
started for the run and gone after it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.conftest import FIO, STORBENCH, needs_fio, run_cli, until
from tests.pipeline.test_replay import _record_fio, needs_strace
from tests.target.test_hosts import assert_finish_line, job, merged_percentile
from tests.testbed import (
    SshHosts,
    fio_servers_on_loopback,
    missing_for_sshfs,
    servers_left,
    tcp_listeners,
)

pytestmark = needs_fio


@pytest.fixture(scope="module")
def ssh_hosts():
    reason = missing_for_sshfs()  # the same needs: root, sshd, unshare
    if reason:
        pytest.skip(f"ssh hosts: {reason}")
    with SshHosts(4) as hosts:
        yield hosts


def last(db):
    return json.loads(run_cli("show", "last", "--json", db=db).stdout)


def test_four_ssh_hosts_run_at_once_and_leave_no_server(ssh_hosts, tmp_path, store_path):
    before = fio_servers_on_loopback()
    proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                   "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path),
                   db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    names = [f"ssh://root@{a}:{p}" for a, p in ssh_hosts.addresses]
    assert [h["host"] for h in run["environment"]["hosts"]] == names
    for h in run["environment"]["hosts"]:  # facts read over SSH
        assert h["via"] == "ssh" and h["ram_bytes"] > 0 and h["fio_version"] == "fio-3.33"
        assert h["hostname"]
    assert run["environment"]["ram_bytes"] == min(h["ram_bytes"]
                                                  for h in run["environment"]["hosts"])
    for test, direction in (("randread", "read"), ("randwrite", "write")):
        agg = next(t for t in run["tests"] if t["name"] == test)
        rows = [h for h in run["per_host"] if h["name"] == test]
        assert sorted(h["host"] for h in rows) == sorted(names)
        assert agg[direction]["iops"] == pytest.approx(sum(h[direction]["iops"] for h in rows))
        for p in (50.0, 99.0):
            assert agg[direction]["clat"]["percentiles_ns"][str(p)] == merged_percentile(
                rows, direction, p)
    assert "randread: per host" in proc.stdout and "ssh://root@127.0.0.20" in proc.stdout
    assert servers_left(before) == set()  # none left on any host
    assert list(ssh_hosts.target.iterdir()) == []  # this machine's directory was not used


def test_a_host_key_that_does_not_match_starts_nothing(ssh_hosts, tmp_path, store_path):
    wrong = tmp_path / "known_hosts"
    wrong.write_text("")
    config = tmp_path / "ssh_config"
    config.write_text(ssh_hosts.config.read_text().replace(
        str(ssh_hosts.dir / "known_hosts"), str(wrong)))
    before = fio_servers_on_loopback()
    proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                   "--ssh-config", str(config), "--job", job(tmp_path), db=store_path)
    assert_one_line_error(proc, 1, "Host key verification failed", "Nothing was started")
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    assert servers_left(before) == set()


def test_a_check_failing_after_the_sessions_opened_ends_them(ssh_hosts, tmp_path,
                                                             store_path):
    """The fio versions are compared once every host's server listens: a mismatch fails
    the run's check with the SSH sessions open, and the run loop's cleanup ends them (the
    hosts target's check did it itself; tests/pipeline/test_loop.py shows the loop calls
    cleanup, this that nothing is left on real hosts). The local client reports another
    version: a stand-in (one fio version is packaged); everything else is real."""
    fake = tmp_path / "fio"
    fake.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo fio-3.28; exit 0; }}\n'
                    f'exec {FIO} "$@"\n')
    fake.chmod(0o755)
    before = set(fio_servers_on_loopback())
    proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                   "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path),
                   "--fio", str(fake), db=store_path)
    assert proc.returncode == 1 and "fio versions differ" in proc.stderr, proc.stderr
    assert servers_left(before) == set()
    assert [ssh_hosts.files_on(i) for i in range(4)] == [[]] * 4


def test_sigkill_of_storbench_stops_the_remote_servers(ssh_hosts, tmp_path, store_path):
    before = set(fio_servers_on_loopback()) | _fio_in(ssh_hosts)
    said = tmp_path / "stderr"
    with said.open("wb") as err:
        proc = subprocess.Popen(
            [*STORBENCH, "run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
             "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=30)],
            stdout=subprocess.DEVNULL, stderr=err,
            env={**os.environ, "STORBENCH_DB": str(store_path)})
    try:
        waited = _until_servers(ssh_hosts, proc, before, 4)
        # a server each (and its jobs): what each host's session was running is said
        assert len(_fio_in(ssh_hosts) - before) >= 4, (
            f"storbench (exit status {proc.poll()}) {waited}; it said: {said.read_text()}\n"
            + _doing(ssh_hosts, proc.pid) + ssh_hosts.logs())
        time.sleep(2)
        deadline = time.monotonic() + 20
        while not all(ssh_hosts.files_on(i) for i in range(4)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(ssh_hosts.files_on(i) for i in range(4))  # fio's files, mid-run
    finally:
        proc.kill()  # nothing of storbench's runs: the ssh sessions' stdin closes
        proc.wait()  # (and a failed test's storbench never runs beside the next test)
    assert servers_left(before, 20) == set()
    # each host's session removes its files once its server ended
    until(lambda: not any(ssh_hosts.files_on(i) for i in range(4)), 20, 0.2)
    assert [ssh_hosts.files_on(i) for i in range(4)] == [[]] * 4


def _until_servers(hosts: SshHosts, proc: subprocess.Popen[Any], before: set[int],
                   count: int) -> str:
    """Waits until ``count`` fio servers of this run (not in ``before``) run in the
    hosts' sessions, each seen at two looks in a row; how long each of its two waits took.

    First storbench's own start until it reaches every host (its store made, fio asked
    its version, the job parsed): ~1 s here, but CI, three lanes on 2 cores, once saw no
    server at 40 s and all four an instant later, and once a Ctrl-C case's storbench
    still opening its sessions at 90 s. Then the servers: storbench gives each host 30 s
    to answer. Counted among the sessions' processes by their names (/proc's stat and
    comm): a scan of every process's command line can stall behind another process's
    memory map."""
    start = time.monotonic()
    until(lambda: all(hosts.sessions(i) for i in range(hosts.n)) or proc.poll() is not None,
          120, 0.05)
    reached, seen = time.monotonic(), set[int]()
    while time.monotonic() < reached + 40 and proc.poll() is None:
        now = _fio_in(hosts) - before
        if len(now & seen) >= count:
            break
        seen = now
        time.sleep(0.02)
    return (f"reached the hosts after {reached - start:.1f} s, and"
            f" {time.monotonic() - reached:.1f} s later ran {len(_fio_in(hosts) - before)}"
            " fio server(s) there")


def _fio_in(hosts: SshHosts) -> set[int]:
    """The fio processes of every host's SSH sessions (servers and the jobs they fork)."""
    found = set()
    for i in range(hosts.n):
        for pid in hosts.sessions(i):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "fio":
                    found.add(pid)
            except OSError:
                continue
    return found


def _doing(hosts: SshHosts, storbench: int) -> str:
    """What storbench and its children (each thread's kernel wait: a blocked sync shows
    there) and each host's sessions run: a command line (cut short) per process."""
    from storbench.execute.proctree import descendants

    def line(pid: int) -> str:
        try:
            argv = " ".join(Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
                            .replace("\0", " ").split())  # a script's lines on one line
            waits = sorted({(t / "wchan").read_text() for t in Path(f"/proc/{pid}/task")
                            .iterdir()} - {"0"})
        except OSError:
            return f"{pid}: gone"
        return f"{pid} (waits in {','.join(waits) or '-'}): {argv[:160]}"

    return "\n".join([*(f"storbench {line(p)}" for p in [storbench, *descendants(storbench)]),
                      *(f"host {i} {line(p)}" for i in range(hosts.n)
                        for p in hosts.sessions(i))]) + "\n"


def test_a_host_lost_mid_run_fails_the_run_naming_it(ssh_hosts, tmp_path, store_path):
    victim = 2
    proc = subprocess.Popen(
        [*STORBENCH, "run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
         "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=20)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "STORBENCH_DB": str(store_path)})

    def lose() -> None:
        from storbench.execute.proctree import kill_tree

        # once fio works on the victim (its file laid out): a fixed 6 s came before fio
        # started on a busy machine (the run then failed earlier, rightly, but otherwise)
        until = time.monotonic() + 60
        while time.monotonic() < until and not any(
                f"-h{victim}" in f for f in ssh_hosts.files_on(victim)):
            time.sleep(0.2)
        time.sleep(1)
        for pid in ssh_hosts.sessions(victim):  # the host's sessions and its fio die
            kill_tree(pid)

    t = threading.Thread(target=lose)
    t.start()
    start = time.monotonic()
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        proc.kill()  # a failed test's storbench never runs beside the next test
        t.join()
    assert proc.returncode == 1, err
    a, p = ssh_hosts.addresses[victim]
    assert f"fio server ssh://root@{a}:{p} disconnected" in err, err
    assert time.monotonic() - start < 20  # well before the 20 s (+ ramp) of each test
    assert last(store_path)["status"] == "failed"
    # the lost host's session could not remove its files; its next session does, and says so
    # the others' sessions end on their own
    until(lambda: not any(ssh_hosts.files_on(i) for i in range(4) if i != victim))
    left = ssh_hosts.files_on(victim)
    assert left and all(f.startswith("storbench-") for f in left)
    again = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                    "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=1),
                    db=store_path)
    assert again.returncode == 0, again.stderr
    assert f"ssh://root@{a}:{p}: removed " in again.stderr, again.stderr
    assert [ssh_hosts.files_on(i) for i in range(4)] == [[]] * 4


def _sockets_of(proc: subprocess.Popen[bytes], servers: set[int]) -> tuple[list[str], list[str]]:
    """The run's forwarded sockets here (its work directory's h*.sock) and the hosts'
    fio servers' sockets, each once it listens (from the command lines of fio's own
    processes: on its way to becoming the server, a process is a shell, then the python3
    that confines it, all with the server's arguments, and its command line reads empty
    while it execs)."""
    from pathlib import Path

    here = [str(s) for d in Path(tempfile.gettempdir()).glob("storbench-fio-*")
            if f'"pid": {proc.pid},' in (d / ".storbench-scratch").read_text()
            for s in d.glob("h*.sock")]
    there = []
    for pid in servers:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if Path(argv[0].decode()).name != "fio":
            continue
        there += [a.decode()[len("--server=sock:"):] for a in argv
                  if a.startswith(b"--server=sock:")
                  and os.path.exists(a.decode()[len("--server=sock:"):])]
    return here, sorted(set(there))  # a server's job processes carry its command line too


def _parent(pid: int) -> int | None:
    """Its parent's PID; None once it has ended."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_no_tcp_port_and_no_other_local_user_reaches_a_server(ssh_hosts, tmp_path, store_path):
    """fio's server runs any job a client sends, exec_prerun= included: during an ssh://
    run no TCP port of fio's or ssh's listens, and `nobody` cannot connect to the unix
    sockets (here, forwarded; on the host, fio's own), with a stock fio client."""
    from storbench.execute.proctree import descendants

    before = set(fio_servers_on_loopback())
    sessions_before = _fio_in(ssh_hosts)
    proc = subprocess.Popen(
        [*STORBENCH, "run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
         "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=30)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "STORBENCH_DB": str(store_path)})
    marker = f"/tmp/sb-pwned-{os.getpid()}"
    attack = tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False)
    try:
        waited = _until_servers(ssh_hosts, proc, before | sessions_before, 4)
        deadline = time.monotonic() + 10
        while True:  # the four hosts' servers up (a server's job processes count once)
            servers = set(fio_servers_on_loopback()) - before
            if len(_sockets_of(proc, servers)[1]) >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(_sockets_of(proc, servers)[1]) == 4, f"{waited}\n{_doing(ssh_hosts, proc.pid)}"
        ours = {proc.pid, *descendants(proc.pid)}  # storbench, its ssh clients, fio client
        theirs = {p for i in range(4) for p in ssh_hosts.sessions(i)}  # sessions, servers
        # every server is a session's; a job process whose connection closed first (the
        # client's probe) is left to init by fio, still on its session's socket
        _, session_sockets = _sockets_of(proc, servers & theirs)
        strays = {p for p in servers - theirs if _parent(p) not in (1, None)}
        assert strays == set(), strays
        _, stray_sockets = _sockets_of(proc, servers - theirs)
        assert set(stray_sockets) <= set(session_sockets), (stray_sockets, session_sockets)
        assert tcp_listeners(ours | theirs) == []  # nothing of the run listens on TCP
        here, there = _sockets_of(proc, servers)
        assert len(here) == 4 and len(there) == 4
        for sock in here + there:
            assert os.stat(os.path.dirname(sock)).st_mode & 0o777 == 0o700
        attack.write(f"[x]\nioengine=null\nsize=4k\nexec_prerun=touch {marker}\n")
        attack.close()
        os.chmod(attack.name, 0o644)
        for sock in here + there:
            tried = subprocess.run(["runuser", "-u", "nobody", "--", FIO or "fio",
                                    f"--client=sock:{sock}", attack.name],
                                   capture_output=True, text=True, timeout=30)
            assert tried.returncode != 0, tried.stdout
            assert "Permission denied" in tried.stdout + tried.stderr
        assert not os.path.exists(marker)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        os.unlink(attack.name)
    assert ssh_clients(ssh_hosts) == []  # storbench waited for its sessions to end
    assert proc.returncode == 130
    # storbench ended once every session had: its server and every process it forked
    # gone (a job process whose connection closed first is left to init on the host)
    assert servers_left(before, 0.5) == set()  # (storbench waited for them)
    assert [ssh_hosts.files_on(i) for i in range(4)] == [[]] * 4  # each host removed its files


def ssh_clients(hosts: SshHosts) -> list[int]:
    """PIDs of ssh clients still running with the hosts' configuration."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if argv and argv[0] == b"ssh" and str(hosts.config).encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("after_s", [0.0, 0.3, 1.0])
def test_ctrl_c_while_the_servers_start_or_are_asked_ends_them_all(ssh_hosts, tmp_path,
                                                                    store_path, after_s):
    """A Ctrl-C that comes before the run has begun (the sessions open, the probe asks
    the servers) ends the sessions too, and storbench waits for them."""
    before = set(fio_servers_on_loopback()) | _fio_in(ssh_hosts)
    proc = subprocess.Popen(
        [*STORBENCH, "run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
         "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=30)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "STORBENCH_DB": str(store_path), "PYTHONFAULTHANDLER": "1"})
    waited = _until_servers(ssh_hosts, proc, before, 1)
    # (looked at again for 2 s: a full run here saw two servers as the wait ended, and none
    # at the next look an instant later, then two again as the stacks were taken: a
    # host's server can be between two processes, or its session's tree read mid-fork)
    if not until(lambda: bool(_fio_in(ssh_hosts) - before), 2, 0.02):
        # where storbench waits: first what it and the hosts run (each thread's kernel
        # wait), then SIGABRT makes Python's fault handler print every thread's stack
        doing = _doing(ssh_hosts, proc.pid)
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"storbench (exit status {proc.returncode}) {waited}\n{doing}{err}")
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert (proc.returncode, ssh_clients(ssh_hosts)) == (130, []), err  # it waited for them
    assert "interrupted by SIGINT" in err
    assert servers_left(before, 0.5) == set()  # (storbench waited for them)
    assert [ssh_hosts.files_on(i) for i in range(4)] == [[]] * 4
    # sshd's own session process ends just after
    until(lambda: not any(ssh_hosts.sessions(i) for i in range(4)), 2, 0.05)
    assert [ssh_hosts.sessions(i) for i in range(4)] == [[]] * 4


def test_a_path_missing_on_one_host_is_said_before_anything_runs(ssh_hosts, tmp_path,
                                                                  store_path):
    from tests.testbed import sh

    before = set(fio_servers_on_loopback())
    sub = ssh_hosts.target / "bench"
    for i in (0, 1, 3):  # host 2 has no such directory
        sh("nsenter", "-t", str(ssh_hosts.sshd[i].pid), "-m", "--", "mkdir", str(sub))
    try:
        proc = run_cli("run", str(sub), "--hosts", ssh_hosts.hosts, "--ssh-config",
                       str(ssh_hosts.config), "--job", job(tmp_path), db=store_path)
        a, p = ssh_hosts.addresses[2]
        assert_one_line_error(proc, 1, f"ssh://root@{a}:{p}: {sub} does not exist on this host",
                              "Nothing was started")
        assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
        assert servers_left(before) == set()
    finally:
        for i in (0, 1, 3):
            sh("nsenter", "-t", str(ssh_hosts.sshd[i].pid), "-m", "--", "rmdir", str(sub))


def test_a_host_whose_session_fails_unexpectedly_ends_the_others(ssh_hosts, tmp_path,
                                                                 monkeypatch):
    """A stand-in fault (one host's session set-up raising what no host says: a bug, or
    no thread left to start): the other hosts' real sessions are ended and the run is
    refused naming the host, never left open behind a half-started run."""
    from storbench.errors import TargetError
    from storbench.execute import ssh

    hosts = [h for h in (ssh.parse_ssh(x) for x in ssh_hosts.hosts.split(",")) if h]
    real = ssh._open

    def third_fails(host, local, config, remote, chosen=None):
        if host == hosts[2]:
            raise RuntimeError("can't start new thread")
        return real(host, local, config, remote, chosen)

    monkeypatch.setattr(ssh, "_open", third_fails)
    sockets = Path(tempfile.mkdtemp(dir=tmp_path))
    before = set(fio_servers_on_loopback())
    with pytest.raises(TargetError) as refused:
        ssh.open_tunnels(hosts, str(ssh_hosts.config), sockets,
                         ssh.Remote(f"{ssh_hosts.target}/storbench-x-", ()))
    assert f"{hosts[2].key}: RuntimeError: can't start new thread" in str(refused.value)
    assert "1 of 4 host(s)" in str(refused.value)
    assert ssh_clients(ssh_hosts) == []  # the three real sessions were ended, and waited for
    assert servers_left(before, 0.5) == set()  # (storbench waited for them)


@needs_strace
def test_a_recorded_workload_replays_on_every_host(ssh_hosts, tmp_path, store_path, tmpfs):
    """fio as the application, recorded with strace; replayed on four SSH hosts at once:
    each host gets its own copy of the iolog (a new file over SSH, in its own target),
    the file the trace reads is written on each first, every host issues what was
    recorded, and each host's session removes every file of the run."""
    _, w = _record_fio(store_path, tmpfs, "app")
    recorded = w["counts"]
    before = fio_servers_on_loopback()
    for fast in ((), ("--replay-fast",)):
        proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                       "--ssh-config", str(ssh_hosts.config), "--replay", "app", *fast,
                       db=store_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr + ssh_hosts.logs()
        run = last(store_path)
        assert run["status"] == "completed"
        replay = run["data"]["replay"]
        assert replay["workers"] == 4 and replay["prefilled"]
        assert replay["issued"] == {k: 4 * recorded[k] for k in ("reads", "writes", "syncs")}
        rows = [h for h in run["per_host"] if h["name"] == "app"]
        assert len(rows) == 4
        assert all(h["read"]["total_ios"] == recorded["reads"] for h in rows)
        assert all(h["write"]["total_ios"] == recorded["writes"] for h in rows)
        assert "× 4 hosts" in proc.stdout
        jobs = "\n".join(run["job_files"])
        assert all(f"read_iolog={ssh_hosts.target}/storbench-{run['uid']}-h{i}-replay.iolog"
                   in jobs for i in range(4)), jobs
        until(lambda: all(ssh_hosts.files_on(i) == [] for i in range(4)))
        assert all(ssh_hosts.files_on(i) == [] for i in range(4))  # its session removed all
    assert servers_left(before) == set()
    assert list(ssh_hosts.target.iterdir()) == []  # nothing of it on this machine
    # every host must be reached over SSH to take the iolog; and each its own files
    proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                   "--ssh-config", str(ssh_hosts.config), "--shared-file", "--replay", "app",
                   db=store_path)
    assert_one_line_error(proc, 2, "leave out --shared-file")


def test_a_file_put_on_a_host_is_new_named_as_given_and_never_followed(ssh_hosts):
    """The way a replay's iolog reaches a host: a path with shell syntax in it is one
    name there (nothing it says runs), a file that exists is not overwritten, and a link
    planted at the name is not followed."""
    from storbench.errors import TargetError
    from storbench.execute.ssh import parse_ssh, put_remote

    address, port = ssh_hosts.addresses[0]
    host = parse_ssh(f"ssh://root@{address}:{port}")
    assert host is not None
    config, target = str(ssh_hosts.config), ssh_hosts.target
    name = "a b$(id>ran);x'\"`id>ran2`"  # run, it would leave ran, ran2 in the shell's cwd
    odd = f"{target}/{name}"
    put_remote(host, config, odd, "fio version 3 iolog\n")
    there = ["nsenter", "-t", str(ssh_hosts.sshd[0].pid), "-m", "--"]
    listed = subprocess.run([*there, "ls", "-A1", str(target)], capture_output=True,
                            text=True, check=True).stdout
    assert listed == name + "\n"
    assert not any(Path(d, f).exists() for d in (Path.home(), Path("/")) for f in ("ran", "ran2"))
    with pytest.raises(TargetError, match="exists"):
        put_remote(host, config, odd, "again")
    victim = f"{target}/victim"
    subprocess.run([*there, "sh", "-c", f"echo kept > {victim} && ln -s {victim}"
                    f" {target}/link"], check=True)
    with pytest.raises(TargetError, match="exists"):
        put_remote(host, config, f"{target}/link", "overwritten?")
    kept = subprocess.run([*there, "cat", victim], capture_output=True, text=True).stdout
    assert kept == "kept\n"
    subprocess.run([*there, "sh", "-c", f"rm -f -- {target}/* {target}/.??*"], check=True)
    assert ssh_hosts.files_on(0) == []


def test_a_target_word_names_the_hosts_and_the_path(ssh_hosts, tmp_path, store_path):
    """`run ssh://HOST,HOST/PATH` is `run PATH --hosts ssh://HOST,ssh://HOST`: two of the
    hosts run, each on its own files in PATH; nothing left on them."""
    before = fio_servers_on_loopback()
    two = [f"root@{a}:{p}" for a, p in ssh_hosts.addresses[:2]]
    word = f"ssh://{','.join(two)}{ssh_hosts.target}"
    proc = run_cli("run", word, "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path),
                   db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    assert [h["host"] for h in run["environment"]["hosts"]] == [f"ssh://{h}" for h in two]
    assert run["target"] == f"{ssh_hosts.target} on 2 hosts"
    assert servers_left(before) == set()


def test_each_host_s_file_system_is_read_and_its_room_checked(ssh_hosts, tmp_path,
                                                               store_path):
    """Each host says the file system of the path (its mount's type) and its free space:
    fsync on the hosts' tmpfs is flagged as on this machine's, and a test too large for
    one host's free space is said before anything runs, naming that host only."""
    from tests.testbed import sh

    proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts, "--ssh-config",
                   str(ssh_hosts.config), "--suite", "etcd", "--size", "4m", db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    assert run["environment"]["target"]["fs_type"] == "tmpfs"
    for h in run["environment"]["hosts"]:
        assert h["fs_type"] == "tmpfs" and 0 < h["free_bytes"] <= h["total_bytes"]
    assert "sync-in-ram" in [w["kind"] for w in run["warnings"]]
    assert "warning (sync-in-ram): etcd: fsync on tmpfs is a no-op" in proc.stdout
    assert_finish_line(proc.stdout, "etcd")  # each host's milliseconds, never "0.0 s"
    shown = run_cli("show", "last", db=store_path, env={"COLUMNS": "200"}).stdout
    assert re.search(r"hosts\[1\]\.fs_type +│ tmpfs", shown), shown  # a fact a line
    assert re.search(r"hosts\[0\]\.free_bytes +│ [0-9.]+ MiB", shown), shown
    assert "{'" not in shown  # no Python notation

    before = set(fio_servers_on_loopback())
    there = ["nsenter", "-t", str(ssh_hosts.sshd[1].pid), "-m", "--"]
    full = ssh_hosts.target / "someone-else-s"
    total = run["environment"]["hosts"][1]["total_bytes"]
    sh(*there, "fallocate", "-l", str(total - 32 * 2**20), str(full))  # 32 MiB left
    try:
        proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                       "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path),
                       "--size", "64m", db=store_path)
        a, p = ssh_hosts.addresses[1]
        assert_one_line_error(proc, 1, f"for test 'mh.fio': it needs 128.0 MiB on each host;"
                              f" ssh://root@{a}:{p} has 32.0 MiB free; pass a smaller --size")
        assert proc.stderr.count("ssh://") == 1, proc.stderr  # the others had room
        assert len(json.loads(run_cli("list", "--json", db=store_path).stdout)) == 1
        assert servers_left(before) == set()
        assert sh(*there, "ls", "-A", str(ssh_hosts.target)) == full.name  # nothing laid out
    finally:
        sh(*there, "rm", "-f", str(full))

    # host 1's path on ramfs (it counts no free space: 0 bytes of 0), the others' on tmpfs
    sh(*there, "mount", "-t", "ramfs", "ramfs", str(ssh_hosts.target))
    try:
        proc = run_cli("run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
                       "--ssh-config", str(ssh_hosts.config), "--suite", "etcd", "--size", "4m",
                       db=store_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        names = [f"ssh://root@{a}:{p}" for a, p in ssh_hosts.addresses]
        others = ", ".join(n for i, n in enumerate(names) if i != 1)
        assert (f"{ssh_hosts.target} is on different file systems on the hosts (tmpfs on"
                f" {others}; ramfs on {names[1]}): each figure merges them") in proc.stderr
        run = last(store_path)
        assert "fs_type" not in run["environment"]["target"]
        assert [h["fs_type"] for h in run["environment"]["hosts"]] == [
            "ramfs" if i == 1 else "tmpfs" for i in range(len(names))]
        # every host's fsync was a no-op (tmpfs and ramfs are RAM): said, though no one
        # file system is the target's (it was not warned of at all)
        ram = f"fsync on tmpfs on {others} and ramfs on {names[1]} is a no-op"
        assert f"warning (sync-in-ram): etcd: {ram}: RAM is the storage" in proc.stdout
        # and the verdict's caveat
        assert re.search(r"PASS etcd\.fdatasync\.p99 < 10ms: measured [\d.]+ [nµm]?s; "
                         + re.escape(ram), proc.stdout), proc.stdout
        assert "sync-in-ram" in [w["kind"] for w in run["warnings"]]
    finally:
        sh(*there, "umount", str(ssh_hosts.target))


def test_hosts_that_share_the_path_need_room_for_all_their_files(ssh_hosts, store_path):
    """Each host works on its own files in the path: four hosts on one file system (an
    NFS export) need room for four. The room was checked per host (64 MiB free for each:
    4 × 24 MiB passed, and fio ran out of space mid-run). Which hosts share the path is
    found by each writing a file of the run's and looking for the others'; said, stored."""
    names = [f"ssh://root@{a}:{p}" for a, p in ssh_hosts.addresses]

    def run(*hosts: str, size: str = "24m", path: Path = ssh_hosts.shared):
        return run_cli("run", str(path), "--hosts", ",".join(hosts), "--ssh-config",
                       str(ssh_hosts.config), "--suite", "etcd", "--size", size,
                       db=store_path)

    proc = run(*names)
    assert_one_line_error(proc, 1, f"not enough free space in '{ssh_hosts.shared}' for test"
                          f" 'etcd': {', '.join(names)} share it (each sees the others'"
                          " files), so their 4 files need 96.0 MiB at once; 64.0 MiB are free")
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    until(lambda: not list(ssh_hosts.shared.iterdir()))
    assert list(ssh_hosts.shared.iterdir()) == []  # the hosts' marks removed with them

    proc = run(*names[:2])  # 48 MiB: room
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{names[0]}, {names[1]} share {ssh_hosts.shared} (each sees the others'" \
        " files): each works on its own files in it, 2 at once" in proc.stderr
    assert last(store_path)["environment"]["target"]["shared_by"] == [names[:2]]
    assert list(ssh_hosts.shared.iterdir()) == []
    # each host's own tmpfs at the path: shared by none, nothing said, 4 × 24 MiB run
    proc = run(*names, path=ssh_hosts.target)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "shared_by" not in last(store_path)["environment"]["target"]
    assert " share " not in proc.stderr


def test_another_set_of_hosts_is_another_series(ssh_hosts, store_path):
    """A series is one storage: the same path on other hosts starts its own (it joined
    "etcd@PATH on 2 hosts" with any two hosts, and history compared other machines as
    one); the same hosts in another order join theirs."""
    names = [f"ssh://root@{a}:{p}" for a, p in ssh_hosts.addresses]

    def series(*hosts: str) -> str:
        proc = run_cli("run", str(ssh_hosts.target), "--hosts", ",".join(hosts),
                       "--ssh-config", str(ssh_hosts.config), "--suite", "etcd", "--size",
                       "4m", db=store_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return last(store_path)["series"]

    first = series(names[0], names[1])
    assert first == (f"etcd/size=4m@{ssh_hosts.target} on 2 hosts ({names[0]},"
                     f" {names[1]})")
    assert series(names[1], names[0]) == first
    assert series(names[2], names[3]) != first
    assert re.fullmatch(rf"etcd/size=4m@{re.escape(str(ssh_hosts.target))} on 4 hosts"
                        rf" \({re.escape(min(names))} and 3 more #[0-9a-f]{{6}}\)",
                        series(*reversed(names))), "four hosts: the first and a digest"
    assert len({r["series"] for r in json.loads(
        run_cli("list", "--json", db=store_path).stdout)}) == 3


def test_a_shared_file_needs_a_path_the_hosts_share(ssh_hosts, store_path):
    """--shared-file where each host has a tmpfs of its own at the path: refused before
    anything runs, naming the hosts that did not see the file the first one wrote (each
    would have worked on its own file, stored as one shared file); in a directory every
    host sees (this machine's disk beneath their tmpfs mounts) it runs, on one file.
    A suite with no verdict (etcd's, fdatasync p99 < 10 ms, is the disk's business: four
    hosts syncing one file on CI's disk gave 28.7 ms, exit 3)."""
    from tests.testbed import sh

    names = [f"ssh://root@{a}:{p}" for a, p in ssh_hosts.addresses]

    def run(path: Path) -> subprocess.CompletedProcess[str]:
        return run_cli("run", str(path), "--hosts", ssh_hosts.hosts, "--ssh-config",
                       str(ssh_hosts.config), "--shared-file", "--suite", "sync-iops",
                       "--size", "4m", "--runtime", "1", db=store_path)

    proc = run(ssh_hosts.target)
    assert_one_line_error(proc, 1, f"--shared-file: {', '.join(names[1:])} did not see the"
                          f" file {names[0]} wrote in '{ssh_hosts.target}'",
                          "leave out --shared-file")
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    first = ["nsenter", "-t", str(ssh_hosts.sshd[0].pid), "-m", "--"]
    assert sh(*first, "ls", "-A", str(ssh_hosts.target)) == ""  # its file removed

    shared = ssh_hosts.dir / "shared"
    shared.mkdir()
    try:
        proc = run(shared)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert last(store_path)["environment"]["target"]["shared_file"] is True
        assert list(shared.iterdir()) == []
    finally:
        shared.rmdir()
