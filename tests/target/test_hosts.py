"""Many hosts through fio's client/server mode, with real fio servers on 127.0.0.x."""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import time

import pytest

from storbench.errors import ConfigError
from storbench.result.fio_json import job_entries, load_fio_json
from storbench.target.hostlist import Host, parse_hosts
from tests.conftest import FIO, STORBENCH, FioServers, needs_fio, run_cli

pytestmark = needs_fio

JOB = ("[global]\nbs=4k\nsize=8m\ntime_based\nruntime={runtime}\n"
       "[randread]\nrw=randread\n[randwrite]\nrw=randwrite\nstonewall\n")


def job(tmp_path, runtime=2):
    path = tmp_path / "mh.fio"
    path.write_text(JOB.format(runtime=runtime))
    return str(path)


def last(db):
    return json.loads(run_cli("show", "last", "--json", "--raw", db=db).stdout)


def assert_finish_line(stdout, test, worker="host"):
    """The line under a test's per-host table: one host is never said to be first and last
    to finish, nor a sub-second time as 0.0 s."""
    m = re.search(rf"^{re.escape(test)}: (?:every {worker} ran (?P<all>[0-9.]+ m?s)|first to finish"
                  r" (?P<first>\S+) after (?P<t1>[0-9.]+ m?s), last (?P<last>\S+) after"
                  r" (?P<t2>[0-9.]+ m?s)); slowest \S+ \([0-9,.]+ IOPS\)$", stdout, re.M)
    assert m is not None, stdout
    assert m["all"] or (m["first"] != m["last"] and m["t1"] != m["t2"]), m[0]
    assert not re.search(r"(?<![0-9.])0(\.0)? m?s\b", m[0]), m[0]


def merged_percentile(entries, direction, p):
    samples = []
    for e in entries:
        for value, count in e[direction]["clat"]["bins"].items():
            samples += [int(value)] * count
    samples.sort()
    return float(samples[math.ceil(p / 100 * len(samples)) - 1])


@pytest.mark.parametrize("n", [2, 4, 8])
def test_hosts_aggregate_is_the_sum_and_the_merged_histogram(n, fio_servers, tmpfs, tmp_path,
                                                             store_path):
    servers = fio_servers(n)
    proc = run_cli("run", str(tmpfs), "--hosts", servers.hosts, "--job", job(tmp_path),
                   db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    assert sorted(h["host"] for h in run["environment"]["hosts"]) == sorted(
        f"{a}:{servers.port}" for a in servers.addresses)
    for test in ("randread", "randwrite"):
        agg = next(t for t in run["tests"] if t["name"] == test)
        hosts = [h for h in run["per_host"] if h["name"] == test]
        assert len(hosts) == n
        direction = "read" if test == "randread" else "write"
        assert agg[direction]["iops"] == pytest.approx(sum(h[direction]["iops"] for h in hosts))
        assert agg[direction]["bw_bytes_per_s"] == pytest.approx(
            sum(h[direction]["bw_bytes_per_s"] for h in hosts))
        for p in (50.0, 99.0, 99.9):
            assert agg[direction]["clat"]["percentiles_ns"][str(p)] == merged_percentile(
                hosts, direction, p)
        assert f"{test}: per host" in proc.stdout
        assert_finish_line(proc.stdout, test)
    assert list(tmpfs.iterdir()) == []  # every host deleted its files (unlink=1)
    # per-host file names by default: hosts never collide
    texts = run["job_files"][0]
    assert "storbench-" in texts and "-h0." in texts and f"-h{n - 1}." in texts


def test_each_hosts_group_of_two_sections_is_their_jobs(fio_servers, tmpfs, tmp_path,
                                                         store_path):
    """group_reporting over two sections of 2 jobs each, on 2 hosts: each host's one
    entry, "a", is its 4 jobs (its job file says so: fio's JSON does not), with 4 times
    the CPU fio gives it (one job's share); the test 8 jobs (it was 2 a host, 4 in all)."""
    path = tmp_path / "groups.fio"
    path.write_text("[global]\nbs=4k\nsize=8m\ntime_based\nruntime=1\ngroup_reporting\n"
                    "[a]\nrw=randread\nnumjobs=2\n[b]\nrw=randwrite\nnumjobs=2\n")
    proc = run_cli("run", str(tmpfs), "--hosts", fio_servers(2).hosts, "--job", str(path),
                   db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    (test,) = run["tests"]
    hosts = [h for h in run["per_host"] if h["name"] == "a"]
    assert test["jobs"] == 8 and [h["jobs"] for h in hosts] == [4, 4]
    (output,) = run["fio_output"]  # (last(): --raw)
    entries = job_entries(load_fio_json(output))
    assert len(entries) == 2  # one a host
    assert sorted(h["usr_cpu_percent"] for h in hosts) == pytest.approx(
        sorted(4 * e["usr_cpu"] for e in entries), rel=1e-3)


def test_shared_file(fio_servers, tmpfs, tmp_path, store_path):
    servers = fio_servers(2)
    proc = run_cli("run", str(tmpfs), "--hosts", servers.hosts, "--suite", "etcd", "--size",
                   "1m", "--shared-file", db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = last(store_path)["job_files"][0]
    names = {line for line in text.splitlines() if line.startswith("filename=")}
    assert len(names) == 1  # one file for every host
    assert list(tmpfs.iterdir()) == []


def test_unreachable_host_starts_nothing(fio_servers, tmpfs, tmp_path, store_path):
    servers = fio_servers(2)
    hosts = f"{servers.hosts},127.0.0.99:{servers.port}"
    proc = run_cli("run", str(tmpfs), "--hosts", hosts, "--job", job(tmp_path), db=store_path)
    assert proc.returncode == 1
    assert f"127.0.0.99:{servers.port}" in proc.stderr and "Nothing was started" in proc.stderr
    assert "Connection refused" in proc.stderr
    assert list(tmpfs.iterdir()) == []
    assert json.loads(run_cli("list", "--json", db=store_path).stdout) == []


def test_host_dying_mid_run_fails_the_run_and_stops_the_others(fio_servers, tmpfs, tmp_path,
                                                                store_path):
    servers = fio_servers(3)
    victim = servers.addresses[1]
    env_cmd = [*STORBENCH, "run", str(tmpfs), "--hosts", servers.hosts, "--job",
               job(tmp_path, runtime=20)]
    proc = subprocess.Popen(env_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "STORBENCH_DB": str(store_path)})
    threading.Timer(4, servers.kill, args=(victim,)).start()
    start = time.monotonic()
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - start
    assert proc.returncode == 1, err
    assert f"fio server {victim} disconnected" in err
    assert took < 15  # well before the 20 s runtime: the other hosts were stopped
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert run["status"] == "failed" and victim in run["error"]


def test_fio_version_mismatch_is_detected_before_starting(fio_servers, tmpfs, tmp_path,
                                                          store_path):
    # A stand-in client that reports another fio version (a fault we cannot cause for
    # real: only one fio version is packaged); everything else is the real fio.
    servers = fio_servers(2)
    fake = tmp_path / "fio"
    fake.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo fio-3.28; exit 0; }}\n'
                    f'exec {FIO} "$@"\n')
    fake.chmod(0o755)
    proc = run_cli("run", str(tmpfs), "--hosts", servers.hosts, "--job", job(tmp_path),
                   "--fio", str(fake), db=store_path)
    assert proc.returncode == 1
    assert "fio versions differ" in proc.stderr and "fio-3.28" in proc.stderr
    assert "fio-3.33" in proc.stderr or "runs fio-" in proc.stderr
    assert list(tmpfs.iterdir()) == []


def test_parse_hosts():
    assert parse_hosts("a,b:9000,[::1]:8766") == [Host("a"), Host("b", 9000), Host("::1", 8766)]
    assert parse_hosts("# nodes\nn1\n\nn2:1 # second\n", "f") == [Host("n1"), Host("n2", 1)]
    with pytest.raises(ConfigError, match="twice"):
        parse_hosts("a,a")
    with pytest.raises(ConfigError, match="no hosts"):
        parse_hosts(" , ")
    for bad in ("--debug", "-oProxyCommand=x", "-h:8765",  # an option, never a host name
                "db-", "...", "a..b", "db-.example", "x" * 64):  # nor what DNS refuses
        with pytest.raises(ConfigError, match="is not ssh://"):
            parse_hosts(bad)
    assert [h.address for h in parse_hosts("db-1.example.com.,10.0.0.7:9,my_host,a")] == \
        ["db-1.example.com.", "10.0.0.7", "my_host", "a"]


def test_agent_serves_a_run(tmpfs, tmp_path, store_path):
    from tests.testbed import free_port, wait_port_on

    port = free_port()
    agent = subprocess.Popen([*STORBENCH, "agent", "--bind", "127.0.0.5", "--port", str(port),
                              "--allow-root"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_port_on("127.0.0.5", port)
        proc = run_cli("run", str(tmpfs), "--hosts", f"127.0.0.5:{port}", "--job",
                       job(tmp_path, runtime=1), db=store_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        from storbench.execute.proctree import kill_tree

        kill_tree(agent.pid)
        agent.wait()


class WrappedFioServers(FioServers):
    """fio servers started through ``wrap`` (e.g. inside a throttled volume's cgroup)."""

    def __init__(self, n, wrap):
        super().__init__(n)
        self.wrap = wrap

    def start(self) -> None:
        from tests.testbed import wait_port_on

        for a in self.addresses:
            self.procs[a] = subprocess.Popen(self.wrap([FIO, f"--server=ip:{a},{self.port}"]),
                                             stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
        for a in self.addresses:
            wait_port_on(a, self.port)


def test_hosts_repeats_give_the_across_repeat_variation_warning(throttled, tmp_path,
                                                                store_path):
    """The second of three repeats runs at a third of the cap: the run says the repeats
    disagree (issue #11: --hosts runs used to skip this warning). The volume's mount point
    is under /dev/shm: a directory there is no device (--hosts took every path under /dev
    for one)."""
    assert str(throttled.mnt).startswith("/dev/shm/")
    servers = WrappedFioServers(2, throttled.wrap)
    servers.start()
    try:
        path = tmp_path / "r.fio"
        path.write_text("[randread]\nrw=randread\nbs=4k\nsize=8m\ndirect=1\nioengine=libaio\n"
                        "iodepth=8\ntime_based\nruntime=2\n")
        caps = iter([3000, 1000, 3000])

        def changer():
            """Set each repeat's cap while no job file exists (fio unlinks them; fio's
            server puts the host's address before their names)."""
            deadline = time.monotonic() + 90
            throttled.set_limits(next(caps), 3000)
            for cap in caps:
                while not list(throttled.mnt.glob("*storbench-*")):
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.02)
                while list(throttled.mnt.glob("*storbench-*")):
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.02)
                throttled.set_limits(cap, 3000)

        t = threading.Thread(target=changer)
        t.start()
        proc = run_cli("run", str(throttled.mnt), "--hosts", servers.hosts, "--job", str(path),
                       "--repeat", "3", db=store_path)
        t.join()
    finally:
        servers.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    iops = [t["read"]["iops"] for t in run["tests"]]
    assert iops[1] < 0.5 * min(iops[0], iops[2]), iops  # the cap did change
    across = [w for w in run["warnings"] if w["kind"] == "high-variation"
              and "repeats" in w["details"]]
    assert len(across) == 1 and across[0]["details"]["repeats"] == 3, run["warnings"]
    assert "between 3 repeats" in proc.stdout


def test_hosts_page_cache_warning(fio_servers, disk_dir, tmp_path, store_path):
    """Buffered reads of a file per host that fits in the hosts' memory (they are this
    machine: loopback addresses), its blocks read again (norandommap), so that the page
    cache answers them."""
    servers = fio_servers(2)
    path = tmp_path / "buffered.fio"
    path.write_text("[cached]\nrw=randread\nbs=4k\nsize=16m\ntime_based\nruntime=1\n"
                    "norandommap\n")
    proc = run_cli("run", str(disk_dir), "--hosts", servers.hosts, "--job", str(path),
                   db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    (w,) = [w for w in run["warnings"] if w["kind"] == "page-cache"]
    assert w["details"]["working_set_bytes"] == 16 * 2**20  # one host's file, not the sum
    assert w["details"]["ram_bytes"] == run["environment"]["ram_bytes"] > 0
    assert all(h["this_machine"] for h in run["environment"]["hosts"])
    assert "16.0 MiB working set per host" in proc.stdout
    assert run["environment"]["target"]["kind"] == "hosts"


def listening_on(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on ``port`` (from /proc/net/tcp)."""
    found = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        local, _, state = line.split()[1:4]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":
            found.add(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_agent_listens_on_no_tcp_port_unless_told_and_then_warns(tmp_path):
    from storbench.execute.proctree import kill_tree
    from tests.testbed import free_port, tcp_listeners

    quiet = subprocess.Popen([*STORBENCH, "agent", "--allow-root", "--socket",
                              str(tmp_path / "storbench-a" / "agent.sock")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "storbench-a" / "agent.sock").is_socket():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        from storbench.execute.proctree import descendants

        assert tcp_listeners({quiet.pid, *descendants(quiet.pid)}) == []
    finally:
        kill_tree(quiet.pid)
        _, said = quiet.communicate()
    assert "WARNING" not in said
    port = free_port()
    loud = subprocess.Popen([*STORBENCH, "agent", "--bind", "0.0.0.0", "--port", str(port),
                             "--allow-root"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not listening_on(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert listening_on(port) == {"0.0.0.0"}
    finally:
        kill_tree(loud.pid)
        _, said = loud.communicate()
    assert "WARNING: listening on TCP 0.0.0.0" in said and "run commands as root" in said
