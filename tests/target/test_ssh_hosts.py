"""Hosts reached over SSH: four sshd "hosts" on loopback addresses, each in its own
mount namespace with its own tmpfs at the target path; real ssh, real fio servers
started for the run and gone after it."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.conftest import STORBENCH, needs_fio, run_cli
from tests.target.test_hosts import job, merged_percentile
from tests.testbed import SshHosts, fio_servers_on_loopback, missing_for_sshfs

pytestmark = [needs_fio, pytest.mark.integration]


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
    time.sleep(1)
    assert fio_servers_on_loopback() == before  # no listener left on any host
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
    assert fio_servers_on_loopback() == before


def test_sigkill_of_storbench_stops_the_remote_servers(ssh_hosts, tmp_path, store_path):
    before = set(fio_servers_on_loopback())
    proc = subprocess.Popen(
        [*STORBENCH, "run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
         "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=30)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "STORBENCH_DB": str(store_path)})
    deadline = time.monotonic() + 30
    while len(set(fio_servers_on_loopback()) - before) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(set(fio_servers_on_loopback()) - before) >= 4  # a server each (and its jobs)
    time.sleep(2)
    proc.kill()  # nothing of storbench's runs: the ssh sessions' stdin closes
    proc.wait()
    deadline = time.monotonic() + 20
    while set(fio_servers_on_loopback()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(fio_servers_on_loopback()) - before == set()


def test_a_host_lost_mid_run_fails_the_run_naming_it(ssh_hosts, tmp_path, store_path):
    victim = 2
    proc = subprocess.Popen(
        [*STORBENCH, "run", str(ssh_hosts.target), "--hosts", ssh_hosts.hosts,
         "--ssh-config", str(ssh_hosts.config), "--job", job(tmp_path, runtime=20)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "STORBENCH_DB": str(store_path)})

    def lose() -> None:
        from storbench.execute.proctree import kill_tree

        time.sleep(6)
        for pid in ssh_hosts.sessions(victim):  # the host's sessions and its fio die
            kill_tree(pid)

    t = threading.Thread(target=lose)
    t.start()
    start = time.monotonic()
    _, err = proc.communicate(timeout=90)
    t.join()
    assert proc.returncode == 1, err
    a, p = ssh_hosts.addresses[victim]
    assert f"fio server ssh://root@{a}:{p} disconnected" in err, err
    assert time.monotonic() - start < 20  # well before the 20 s (+ ramp) of each test
    assert last(store_path)["status"] == "failed"
