"""An s3:// TARGET on --hosts (#59): each host's fio server (fio's http engine) PUTs,
GETs and DELETEs objects of its own at a real S3 server (moto's: tests/objects.py), the
hosts real sshd instances (tests/testbed.SshHosts) whose fio is one built with the http
engine. The secret key reaches each host's fio server through its SSH session's stdin:
it is on no command line of any process while the run lasts, in no output, nowhere in
the database; the objects every host put are gone afterwards; a host whose fio lacks the
engine is named before anything runs, over SSH and as an agent."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.test_cli import show_json
from tests.conftest import STORBENCH, needs, run_cli
from tests.objects import FIO_HTTP, S3Server
from tests.objects import PUT_GET_DELETE as JOB
from tests.objects import PUT_GET_DELETE_OBJECTS as OBJECTS
from tests.testbed import SshHosts, fio_servers_on_loopback, missing_for_sshfs, servers_left

pytestmark = needs("root", "ssh")


def _hosts(**kw: object) -> SshHosts:
    reason = missing_for_sshfs()
    if reason:
        pytest.skip(f"ssh hosts: {reason}")
    return SshHosts(2, **kw)  # type: ignore[arg-type]


def _bucket(s3: S3Server) -> str:
    name = f"sbt-hosts-{secrets.token_hex(3)}"
    s3.client().create_bucket(Bucket=name)
    return name


def _args(s3: S3Server, hosts: SshHosts, bucket: str, job: Path) -> list[str]:
    return ["run", f"s3://{bucket}/team", "--hosts", hosts.hosts, "--ssh-config",
            str(hosts.config), "--endpoint", s3.url, "--job", str(job)]


def _argv_of_every_process() -> list[bytes]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                found.append((d / "cmdline").read_bytes())
            except OSError:
                pass
    return found


@pytest.mark.parametrize("s3", ["moto"], indirect=True)
def test_every_host_puts_gets_and_deletes_its_own_objects_and_the_key_stays_secret(
        s3, tmp_path, store_path):
    bucket = _bucket(s3)
    s3.client().put_object(Bucket=bucket, Key="team/keep-me", Body=b"theirs")
    job = tmp_path / "objects.fio"
    job.write_text(JOB)
    with _hosts(fio=FIO_HTTP) as hosts:
        before = fio_servers_on_loopback()
        # this machine's fio is the client: Debian's, without the http engine (the
        # servers parse the job file, and expand the key from their environment)
        proc = subprocess.Popen([*STORBENCH, *_args(s3, hosts, bucket, job)],
                                env={**os.environ, **s3.env(), "STORBENCH_DB": str(store_path)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        while proc.poll() is None:  # the key on no command line of any process, meanwhile
            seen += [a for a in _argv_of_every_process() if s3.secret.encode() in a]
            time.sleep(0.05)
        out, err = proc.communicate()
        assert proc.returncode == 0, err[-3000:] + hosts.logs()
        assert seen == []
        assert servers_left(before) == set()
    shown = show_json(store_path)
    tests = {t["name"]: t for t in shown["tests"]}
    assert tests["put"]["write"]["total_ios"] == 2 * OBJECTS
    assert tests["get"]["read"]["total_ios"] == 2 * OBJECTS
    assert tests["delete"]["trim"]["total_ios"] == 2 * OBJECTS
    per_host = [h for h in shown["per_host"] if h["name"] == "put"]
    assert sorted(h["host"] for h in per_host) == sorted(hosts.hosts.split(","))
    assert all(h["write"]["total_ios"] == OBJECTS for h in per_host)
    # each host its own keys: h0/ and h1/ under the run's prefix
    texts = "\n".join(shown["job_files"])
    assert "/h0/obj.$jobnum" in texts and "/h1/obj.$jobnum" in texts
    target = shown["environment"]["target"]
    assert target["kind"] == "hosts" and target["path"] == f"s3://{bucket}/team"
    assert target["bucket"] == bucket and target["block_device"] is False
    assert shown["target"] == f"s3://{bucket}/team on 2 hosts"
    # the run's probe (HEAD, LIST, a GET's first byte) ran from here beside the load
    assert "first_byte" in json.dumps(shown.get("probe") or shown)
    # nothing left but what was there; the key nowhere
    assert sorted(s3.keys(bucket)) == ["team/keep-me"]
    exported = run_cli("export", "--format", "csv", db=store_path)
    for text in (out, err, json.dumps(shown), exported.stdout):
        assert s3.secret not in text
    assert s3.secret.encode() not in store_path.read_bytes()


@pytest.mark.parametrize("s3", ["moto"], indirect=True)
def test_a_host_whose_fio_has_no_http_engine_is_named_and_nothing_runs(s3, tmp_path,
                                                                          store_path):
    bucket = _bucket(s3)
    job = tmp_path / "objects.fio"
    job.write_text(JOB)
    with _hosts(fio=FIO_HTTP, fio_on={0}) as hosts:
        before = fio_servers_on_loopback()
        proc = run_cli(*_args(s3, hosts, bucket, job), db=store_path, env=s3.env())
        assert proc.returncode == 1, proc.stdout + proc.stderr
        second = hosts.hosts.split(",")[1]
        said = proc.stderr
        assert "fio on 1 of 2 host(s) has no http engine" in said, said
        assert re.search(rf"\({re.escape(second)}: [^)]*engine http not", said), said
        assert "scripts/build-fio-http" in said, said
        assert "Nothing was started" in proc.stderr
        assert servers_left(before) == set()
    assert s3.keys(bucket) == []
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"


@pytest.mark.parametrize("s3", ["moto"], indirect=True)
def test_agents_fio_is_asked_for_the_engine_and_one_without_it_is_named(s3, tmp_path,
                                                                          store_path):
    """An agent (`storbench agent`, no SSH session to ask `fio --enghelp`) is sent a job
    that loads the http engine and moves nothing: the one whose fio is Debian's is named
    with its fio's own words before anything runs; with the engine on both, the run
    puts, gets and deletes each agent's objects and leaves none."""
    from tests.execute.test_agent import Agent

    bucket = _bucket(s3)
    job = tmp_path / "objects.fio"
    job.write_text(JOB)
    socks = [tmp_path / f"storbench-agent-{n}" / "agent.sock" for n in "abc"]
    agents = [Agent("--socket", str(socks[0]), "--allow-root", "--fio", str(FIO_HTTP)),
              Agent("--socket", str(socks[1]), "--allow-root"),  # Debian's fio
              Agent("--socket", str(socks[2]), "--allow-root", "--fio", str(FIO_HTTP))]
    try:
        for agent, sock in zip(agents, socks, strict=True):
            agent.wait_socket(sock)
        args = ["run", f"s3://{bucket}/team", "--endpoint", s3.url, "--job", str(job),
                "--hosts"]
        proc = run_cli(*args, f"sock:{socks[0]},sock:{socks[1]}", db=store_path,
                       env=s3.env())
        assert proc.returncode == 1, proc.stdout + proc.stderr
        said = " ".join(proc.stderr.split())
        assert f"fio on 1 of 2 host(s) has no http engine, which S3 bucket s3://{bucket}/team" \
               f" needs (sock:{socks[1]}: fio: engine http not loadable)" in said, said
        assert "Nothing was started" in said and f"sock:{socks[0]}:" not in said
        assert s3.keys(bucket) == []
        assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
        ran = run_cli(*args, f"sock:{socks[0]},sock:{socks[2]}", db=store_path,
                      env=s3.env())
        assert ran.returncode == 0, ran.stdout + ran.stderr
        tests = {t["name"]: t for t in show_json(store_path)["tests"]}
        assert tests["put"]["write"]["total_ios"] == 2 * OBJECTS  # each agent's own
        assert tests["get"]["read"]["total_ios"] == 2 * OBJECTS
        assert tests["delete"]["trim"]["total_ios"] == 2 * OBJECTS
        assert s3.keys(bucket) == []
    finally:
        for agent in agents:
            agent.stop()
