"""s3:// TARGETs (#59) end to end: real fio (its http engine, scripts/build-fio-http)
against real S3 servers (s3proxy on a directory, moto's server: tests/objects.py), through
the real CLI, loop and store. What is checked: PUT, GET and DELETE measured as fio reports
them, only keys under the run's own prefix touched and none left (after the run, and
after a SIGKILL by the next run), the secret key in no output and nowhere in the
database, reads of objects that are not there refused (fio's engine reads them as
zeros), and names that try to get out refused."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from storbench.errors import ConfigError, Interrupted, TargetError
from storbench.execute import s3 as s3mod
from storbench.result.hidden import hide
from storbench.target.objectnames import Bucket
from storbench.target.storage import Worker
from tests.cli.test_cli import show_json
from tests.conftest import FIO, STORBENCH, needs_fio, run_cli, until
from tests.objects import FIO_HTTP, S3Server

SMALL_JOB = """\
[global]
bs=64k
size=1m
numjobs=2
[put]
rw=write
filename=obj
[get]
stonewall
rw=read
filename=obj
"""


def _cli(s3: S3Server, *args: str, db: Path, fio: Path | str = FIO_HTTP,
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return run_cli("run", *args, "--endpoint", s3.url, "--fio", str(fio), db=db,
                   env=s3.env(), timeout=timeout)


def _bucket(s3: S3Server, name: str) -> str:
    """A new bucket on the module's server: ``name`` and a suffix of its own."""
    name = f"{name}-{secrets.token_hex(3)}"
    s3.client().create_bucket(Bucket=name)
    return name


def test_the_s3_suite_on_a_real_server_puts_gets_deletes_and_leaves_only_what_was_there(
        s3, tmp_path):
    bucket = _bucket(s3, f"sbt-suite-{s3.name}")
    s3.client().put_object(Bucket=bucket, Key="team/keep-me", Body=b"theirs")
    s3.client().put_object(Bucket=bucket, Key="team/storbench-notours/x", Body=b"theirs")
    before = sorted(s3.keys(bucket))  # (s3proxy's directories list as keys too: "team/")
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://{bucket}/team", db=db)  # the s3 suite: s3:// TARGETs' default
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert f"objects go under {bucket}/team/storbench-" in out
    shown = show_json(db)
    tests = {t["name"]: t for t in shown["tests"]}
    assert list(tests) == [f"{op}_{size}" for size in ("4k", "1m", "16m")
                           for op in ("put", "get", "delete")]
    for size, nbytes in (("4k", 4096), ("1m", 1 << 20), ("16m", 16 << 20)):
        put, get, delete = (tests[f"{op}_{size}"] for op in ("put", "get", "delete"))
        assert put["read"] is None
        assert get["read"]["total_ios"] > 0 and get["write"] is None
        # one pass: every object PUT once by the 4 jobs, then deleted once (size / bs each)
        objects = 4 * {"4k": 1 << 20, "1m": 32 << 20, "16m": 128 << 20}[size] // nbytes
        assert put["write"]["total_ios"] == objects == delete["trim"]["total_ios"]
        for t in (put, get, delete):
            assert t["options"]["ioengine"] == "http"
            assert t["options"]["bs"] == size
    assert shown["environment"]["target"]["bucket"] == bucket
    assert shown["environment"]["target"]["endpoint"] == s3.url
    # reached over loopback, which states no speed: no GET rate is beyond it
    assert shown["environment"]["target"]["link"] == {"interface": "lo"}
    assert "beyond-the-link" not in {w["kind"] for w in shown["warnings"]}
    # no cache of this machine's stood between fio and the objects: nothing said of one
    assert not [w for w in shown["warnings"] if w["kind"] in ("page-cache", "small-working-set")]
    # nothing but what was there before
    assert sorted(s3.keys(bucket)) == before
    assert {"team/keep-me", "team/storbench-notours/x"} <= set(before)
    # the secret: nowhere
    exported = run_cli("export", "--format", "csv", db=db)
    for text in (proc.stdout, proc.stderr, json.dumps(shown), exported.stdout):
        assert s3.secret not in text
    assert s3.secret.encode() not in db.read_bytes()
    wal = Path(f"{db}-wal")
    assert not wal.exists() or s3.secret.encode() not in wal.read_bytes()
    assert "http_s3_key=${STORBENCH_S3_SECRET}" in shown["job_files"][0]
    # the table names S3's operations, and no bandwidth of a DELETE
    assert "│ PUT " in proc.stdout and "│ GET " in proc.stdout and "│ DELETE " in proc.stdout
    assert "DELETE" in proc.stderr and "objects/s" in proc.stderr
    # figures gate as for every storage
    checked = run_cli("check", "last", "--assert", "get_1m.read.clat_p99 < 60s", "--assert",
                      "put_4k.write.iops > 1", db=db)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    failing = run_cli("check", "last", "--assert", "get_1m.read.clat_p99 < 1us", db=db)
    assert failing.returncode == 3, failing.stdout + failing.stderr
    _priced_by_request(db, tests)


def _priced_by_request(db: Path, tests: dict) -> None:
    """S3's price sheet: its requests at each test's measured rate, $ an hour of it
    (PUT $0.005 and GET $0.0004 per 1,000, DELETE free), beside the capacity's month."""
    priced = run_cli("compare", "last", "--cost", "s3-standard", "--capacity", "100GB",
                     "--json", db=db)
    assert priced.returncode == 0, priced.stderr
    cost = json.loads(priced.stdout)["cost"][0]
    assert cost["usd_per_month"] == pytest.approx(0.023 * 100)
    rows = {(r["test"], r["operation"]): r for r in cost["requests"]}
    assert len(rows) == 9
    for (test, op), r in rows.items():
        direction = {"PUT": "write", "GET": "read", "DELETE": "trim"}[op]
        assert test.startswith(op.lower()) and r["per_s"] == tests[test][direction]["iops"]
        price = {"PUT": 0.005, "GET": 0.0004, "DELETE": 0.0}[op]
        assert r["per_1000"] == price and r["per_hour"] == pytest.approx(
            r["per_s"] * 3600 / 1000 * price)
    shown = run_cli("compare", "last", "--cost", "s3-standard", "--capacity", "100GB",
                    db=db, env={"COLUMNS": "2000"}).stdout
    get = rows[("get_1m", "GET")]
    assert (f"get_1m {get['per_s']:,.0f} GETs/s ${get['per_hour']:,.2f} ($0.0004 per 1,000)"
            in shown), shown
    assert "delete_1m" in shown and "DELETEs/s not charged" in shown


LONG_PUT = "[put]\nrw=write\nbs=64k\nsize=1m\nfilename=obj\ntime_based\nruntime=60\n"


def _putting(s3: S3Server, bucket: str, tmp_path: Path) -> subprocess.Popen[str]:
    """A run PUTting objects for a minute, once its marker and fio's first objects are
    in the bucket (its own process group, to be signalled)."""
    job = tmp_path / "long.fio"
    job.write_text(LONG_PUT)
    env = {**os.environ, **s3.env(), "STORBENCH_DB": str(tmp_path / "r.db")}
    proc = subprocess.Popen([*STORBENCH, "run", f"s3://{bucket}", "--endpoint", s3.url,
                             "--fio", str(FIO_HTTP), "--job", str(job)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    until(lambda: len(s3.keys(bucket)) >= 3, 60, 0.2)
    assert len(s3.keys(bucket)) >= 3
    return proc


def test_ctrl_c_ends_the_run_and_deletes_what_it_put(s3, tmp_path):
    bucket = _bucket(s3, f"sbt-int-{s3.name}")
    db = tmp_path / "r.db"
    proc = _putting(s3, bucket, tmp_path)
    started = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert proc.returncode == 130, err
    assert s3.keys(bucket) == []
    assert show_json(db)["status"] == "interrupted"


def test_a_run_killed_leaves_its_objects_to_the_next_run_which_deletes_them(s3, tmp_path):
    bucket = _bucket(s3, f"sbt-kill-{s3.name}")
    db = tmp_path / "r.db"
    proc = _putting(s3, bucket, tmp_path)
    left = s3.keys(bucket)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(left) >= 3 and all(k.startswith("storbench-") for k in left)
    assert any(k.endswith("/.storbench-run") for k in left)
    prefix = left[0].split("/")[0]
    again = _cli(s3, f"s3://{bucket}", "--job", str(tmp_path / "long.fio"), "--runtime", "1",
                 db=db)
    assert again.returncode == 0, again.stderr[-3000:]
    assert prefix in again.stderr + again.stdout  # the leftover's removal is said
    assert s3.keys(bucket) == []


@pytest.mark.parametrize("text, says", [
    ("[get]\nrw=read\nbs=64k\nsize=256k\nfilename=obj\n", "no job before it PUT"),
    # PUT as another name, or fewer, or in smaller objects: not the objects it reads
    ("[put]\nrw=write\nbs=64k\nsize=256k\nfilename=a\n[get]\nstonewall\nrw=read\n"
     "bs=64k\nsize=256k\nfilename=b\n", "no job before it PUT"),
    ("[put]\nrw=write\nbs=64k\nsize=128k\nfilename=a\n[get]\nstonewall\nrw=read\n"
     "bs=64k\nsize=256k\nfilename=a\n", "no job before it PUT"),
    ("[put]\nrw=write\nbs=4k\nsize=256k\nfilename=a\n[get]\nstonewall\nrw=read\n"
     "bs=64k\nsize=256k\nfilename=a\n", "no job before it PUT"),
    # a PUT that may stop early, read in the same fio run: a missing object unseen
    ("[put]\nrw=write\nbs=64k\nsize=256k\nfilename=a\nnumber_ios=2\n[get]\nstonewall\n"
     "rw=read\nbs=64k\nsize=256k\nfilename=a\n", "may stop before it PUT them all"),
    ("[put]\nrw=trim\nbs=64k\nsize=256k\nfilename=a\n", "no job before it PUT"),
    # a mix GETs too: the objects must have been PUT before it
    ("[mix]\nrw=randrw\nbs=64k\nsize=256k\n", "no job before it PUT"),
    ("[tw]\nrw=trimwrite\nbs=64k\nsize=256k\n", "one kind per job"),
])
def test_a_read_of_objects_no_job_put_is_refused_not_counted_as_zeros(s3, tmp_path, text,
                                                                       says):
    bucket = _bucket(s3, f"sbt-noput-{s3.name}")
    job = tmp_path / "get.fio"
    job.write_text(text)
    proc = _cli(s3, f"s3://{bucket}", "--job", str(job), db=tmp_path / "r.db")
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert s3.keys(bucket) == []


def test_before_a_test_that_reads_every_object_it_names_is_looked_for(s3):
    """A PUT test cut short (by --runtime, say) leaves fewer objects than the next test
    reads: the test is refused, not run on 404s (fio reads them as zeros). Against the
    real server, without fio: the check that runs between tests."""
    from storbench.execute.s3 import resolve
    from storbench.target.objects import ObjectStorage
    from storbench.workload.jobfile import parse_jobfile
    from storbench.workload.plan import PlannedTest

    bucket = _bucket(s3, f"sbt-between-{s3.name}")
    storage = ObjectStorage(Bucket.parse(f"s3://{bucket}/p"), resolve(s3.url, None, s3.env()))
    get = PlannedTest("get", "", parse_jobfile(
        "[get]\nrw=read\nbs=64k\nsize=256k\nnumjobs=2\nfilename=obj\n"), None)
    for jobnum, offset in ((0, 0), (0, 65536), (0, 131072), (0, 196608), (1, 0)):
        s3.client().put_object(Bucket=bucket, Key=f"p/storbench-u/obj.{jobnum}.0_{offset}_65536",
                               Body=b"x")
    here = _Workers([Worker("")])
    with pytest.raises(TargetError, match="reads or deletes 8 objects and 3 are not there"):
        storage.between(here, get, set(), None, "u")  # type: ignore[arg-type]
    for offset in (65536, 131072, 196608):
        s3.client().put_object(Bucket=bucket, Key=f"p/storbench-u/obj.1.0_{offset}_65536",
                               Body=b"x")
    storage.between(here, get, set(), None, "u")  # type: ignore[arg-type]
    # on two hosts, each reads its own: under h0/ and h1/, none of which are there
    hosts = _Workers([Worker("a", "h0"), Worker("b", "h1")])
    with pytest.raises(TargetError, match=re.escape(
            "reads or deletes 16 objects and 16 are not there (e.g."
            " 'p/storbench-u/h0/obj.0.0_0_65536'")):
        storage.between(hosts, get, set(), None, "u")  # type: ignore[arg-type]


@dataclass
class _Workers:
    """A place as far as a storage's check between tests asks it: its workers."""

    of: list[Worker]
    stops: int | None = None  # Interrupted at this call of stop_point (None: never)

    def workers(self) -> list[Worker]:
        return self.of

    def stop_point(self) -> None:
        if self.stops is not None:
            self.stops -= 1
            if self.stops == 0:
                raise Interrupted(signal.SIGINT)


@pytest.mark.parametrize("s3", ["moto"], indirect=True)
def test_a_long_listing_between_tests_stops_when_the_run_is_told_to(s3):
    """Ctrl-C while a run's 130,000 objects were listed before a GET test (s3proxy, ~1 s
    a page) was acted on only after the listing: minutes. The listing looks at the place's
    stop point after each page (1,000 keys)."""
    from concurrent.futures import ThreadPoolExecutor

    from storbench.execute.s3 import resolve
    from storbench.target.objects import ObjectStorage
    from storbench.workload.jobfile import parse_jobfile
    from storbench.workload.plan import PlannedTest

    bucket = _bucket(s3, "sbt-stop")
    storage = ObjectStorage(Bucket.parse(f"s3://{bucket}/p"), resolve(s3.url, None, s3.env()))
    client = s3.client()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: client.put_object(
            Bucket=bucket, Key=f"p/storbench-u/obj.0.0_{i * 4096}_4096", Body=b"x"),
            range(2100)))
    get = PlannedTest("get", "", parse_jobfile(
        "[get]\nrw=read\nbs=4k\nsize=8400k\nfilename=obj\n"), None)
    storage.between(_Workers([Worker("")]), get, set(), None, "u")  # type: ignore[arg-type]
    place = _Workers([Worker("")], stops=2)
    with pytest.raises(Interrupted):
        storage.between(place, get, set(), None, "u")  # type: ignore[arg-type]
    assert place.stops == 0  # after the second page, before the third


def test_puts_then_gets_in_one_job_file_read_the_objects_written(s3, tmp_path):
    """A job file of the user's: each of the 2 clones its own keys (no two jobs write one
    key), the GETs read the very objects the PUTs wrote (the server's count of GETs of
    them, through its own listing, is what fio says it read)."""
    bucket = _bucket(s3, f"sbt-job-{s3.name}")
    job = tmp_path / "pg.fio"
    job.write_text(SMALL_JOB)
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://{bucket}", "--job", str(job), db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = show_json(db)
    put = next(t for t in shown["tests"] if t["write"])
    get = next(t for t in shown["tests"] if t["read"])
    assert put["write"]["total_ios"] == 2 * 16 and get["read"]["total_ios"] == 2 * 16
    assert s3.keys(bucket) == []


def test_a_bucket_that_is_not_there_is_said_and_made_only_when_asked(s3, tmp_path):
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://sbt-absent-{s3.name}", "--suite", "s3", db=db)
    assert proc.returncode != 0
    assert "does not exist" in proc.stderr and "--create-bucket" in proc.stderr
    job = tmp_path / "put.fio"
    job.write_text("[put]\nrw=write\nbs=64k\nsize=256k\nfilename=obj\n")
    made = _cli(s3, f"s3://sbt-made-{s3.name}", "--create-bucket", "--job", str(job), db=db)
    assert made.returncode == 0, made.stderr[-3000:]
    assert s3.keys(f"sbt-made-{s3.name}") == []  # the bucket is kept, empty


@needs_fio
def test_a_fio_without_the_http_engine_is_said_with_how_to_get_one(s3, tmp_path):
    bucket = _bucket(s3, f"sbt-nohttp-{s3.name}")
    proc = _cli(s3, f"s3://{bucket}", "--suite", "s3", db=tmp_path / "r.db", fio=str(FIO))
    assert proc.returncode != 0
    assert "has no http engine" in proc.stderr and "scripts/build-fio-http" in proc.stderr
    assert s3.keys(bucket) == []


# -- what needs no server ------------------------------------------------------------------

@pytest.mark.parametrize("word, says", [
    ("s3://../etc", "names a bucket"),
    ("s3://Bucket", "names a bucket"),
    ("s3://ab", "names a bucket"),
    ("s3://bucket/../other", "plain key parts"),
    ("s3://bucket/a/./b", "plain key parts"),
    ("s3://bucket/a b", "plain key parts"),
    ("s3://bucket/a\x1b[2J", "plain key parts"),
])
def test_a_target_that_would_reach_other_keys_is_refused(word, says):
    with pytest.raises(ConfigError, match=says):
        Bucket.parse(word)


def test_the_run_prefix_is_the_only_place_fio_may_name(tmp_path):
    assert Bucket.parse("s3://bench/a/b/").key("storbench-x") == "a/b/storbench-x"
    from storbench.workload import guard
    from storbench.workload.jobfile import parse_jobfile

    ok = parse_jobfile("[j]\nioengine=http\nhttp_s3_key=${STORBENCH_S3_SECRET}\n"
                       "filename_format=/bench/storbench-1/obj.$jobnum.$filenum\n")
    guard.check_final(ok, ["/bench/storbench-1"], allow_exec=False, source="t")
    for bad in ("filename_format=/bench/storbench-2/obj.$jobnum.$filenum",
                "filename_format=/bench/storbench-1/../x/obj.$jobnum.$filenum",
                "http_s3_key=${HOME}", "http_host=${HOST}"):
        with pytest.raises(ConfigError):
            guard.check_final(parse_jobfile(f"[j]\n{bad}\n"), ["/bench/storbench-1"],
                              allow_exec=False, source="t")


@pytest.mark.parametrize("line", ["http_host=evil.example:80", "ioengine=http",
                                  "http_s3_key=x", "https=insecure"])
def test_a_job_file_cannot_point_fio_at_another_server(tmp_path, line):
    job = tmp_path / "evil.fio"
    job.write_text(f"[j]\nrw=write\nbs=4k\nsize=64k\n{line}\n")
    proc = run_cli("run", "s3://bench", "--endpoint", "http://127.0.0.1:9", "--job", str(job),
                   db=tmp_path / "r.db", env={"AWS_ACCESS_KEY_ID": "AKID",
                                              "AWS_SECRET_ACCESS_KEY": "sekrit-value"})
    assert proc.returncode == 2, proc.stderr
    assert line.split("=")[0] in proc.stderr
    assert "sekrit-value" not in proc.stdout + proc.stderr


def test_credentials_come_from_aws_places_and_are_never_shown(tmp_path):
    home = tmp_path
    (home / ".aws").mkdir()
    (home / ".aws/credentials").write_text(
        "[default]\naws_access_key_id=AKIDDEF\naws_secret_access_key=def-secret-1\n"
        "[team]\naws_access_key_id=AKIDTEAM\naws_secret_access_key=team-secret-2\n")
    (home / ".aws/config").write_text(
        "[profile team]\nregion=eu-west-1\nendpoint_url=http://127.0.0.1:9000\n")
    found = s3mod.resolve(None, None, {"HOME": str(home), "AWS_PROFILE": "team"})
    assert (found.url, found.region) == ("http://127.0.0.1:9000", "eu-west-1")
    assert found.credentials is not None and found.credentials.key_id == "AKIDTEAM"
    assert found.credentials.secret.value == "team-secret-2"
    assert "team-secret-2" not in repr(found) + str(found.credentials.secret)
    assert hide('{"http_s3_key": "team-secret-2"}') == '{"http_s3_key": "(hidden)"}'
    env = {"HOME": str(home), "AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "e-s",
           "AWS_ENDPOINT_URL": "https://s3.example.com"}
    assert s3mod.resolve("http://127.0.0.1:1", "us-west-2", env).url == "http://127.0.0.1:1"
    assert s3mod.resolve(None, None, env).credentials.key_id == "AKIDENV"  # type: ignore[union-attr]
    for bad in ("ftp://x", "http://h/bucket", "http://u:p@h", "http://h?x=1"):
        with pytest.raises(ConfigError, match="--endpoint"):
            s3mod.resolve(bad, None, {"HOME": str(home)})


def test_endpoint_flags_without_an_s3_target_are_refused(tmp_path):
    proc = run_cli("run", str(tmp_path), "--endpoint", "http://127.0.0.1:9", db=tmp_path / "r.db")
    assert proc.returncode == 2
    assert "apply to s3://BUCKET" in proc.stderr


@pytest.mark.parametrize(("extra", "says"), [
    (["--shared-file"], "--shared-file: on s3://sbt-b each host PUTs and GETs objects of its own"),
    (["/srv"], "with --hosts, give one TARGET: the storage on the hosts"),
    (["s3://sbt-c"], "with --hosts, give one TARGET: the storage on the hosts"),
    (["--dry-run"], "TARGET s3://sbt-b cannot be combined with --dry-run"),
])
def test_what_does_not_apply_to_a_bucket_on_hosts_is_refused(tmp_path, extra, says):
    proc = run_cli("run", "s3://sbt-b", "--hosts", "ssh://db1,ssh://db2", *extra,
                   "--endpoint", "http://127.0.0.1:9", db=tmp_path / "r.db")
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("endpoint", "hosts", "far"), [
    ("http://127.0.0.1:9", "ssh://192.0.2.7,ssh://127.0.0.21", "ssh://192.0.2.7"),
    ("http://localhost:9", "ssh://db1,sock:/run/sb.sock", "ssh://db1"),
    ("http://[::1]:9", "192.0.2.8:8765,ssh://root@[::1]:22", "192.0.2.8:8765"),
])
def test_a_loopback_endpoint_is_refused_where_a_host_is_not_this_machine(tmp_path, endpoint,
                                                                         hosts, far):
    """An endpoint on 127.0.0.1 is, from another host, that host's own loopback: another
    server, or none. The hosts on this machine's loopback (and agents on its unix
    sockets) reach it; the others are named, and nothing is started."""
    proc = run_cli("run", "s3://sbt-b", "--hosts", hosts, "--endpoint", endpoint,
                   db=tmp_path / "r.db")
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"{endpoint} is a loopback address: on {far} it is that host's own, not this" \
           " endpoint; give --endpoint an address the hosts reach" in said, said


@pytest.mark.parametrize("s3", ["s3proxy"], indirect=True)
def test_the_sweep_puts_gets_and_deletes_at_1_4_and_16_requests_at_a_time(s3, tmp_path):
    """How an endpoint's rate grows with concurrency: small objects' GETs wait for the
    round trip, so more at a time carry more where the server serves them at once
    (s3proxy here: about 2.5× from 1 to 4, quiet or beside 3 CPU hogs). On s3proxy alone:
    moto's server serves about one request at a time whatever the concurrency (371 and
    407 GETs a second at 1 and 4), so its sweep showed nothing the suite's test on it does
    not (75 s of CI's). That the GETs were c at a time is read from the run itself (rate
    × mean latency, Little's law: 0.997, 3.994 and 15.99 here), not from how much faster
    the server was with more: that is the server's and the machine's business."""
    bucket = _bucket(s3, f"sbt-sweep-{s3.name}")
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://{bucket}", "--suite", "s3-sweep", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tests = {t["name"]: t for t in show_json(db)["tests"]}
    assert list(tests) == [f"{op}_{size}_c{c}" for size in ("4k", "1m") for c in (1, 4, 16)
                           for op in ("put", "get", "delete")]
    for size, nbytes, total in (("4k", 4096, 256 << 10), ("1m", 1 << 20, 8 << 20)):
        for c in (1, 4, 16):
            put, get, delete = (tests[f"{op}_{size}_c{c}"] for op in ("put", "get", "delete"))
            assert put["jobs"] == get["jobs"] == delete["jobs"] == c
            assert put["write"]["total_ios"] == c * total // nbytes == delete["trim"]["total_ios"]
            assert get["read"]["total_ios"] > 0 and get["read"]["clat"]["percentiles_ns"]
            in_flight = get["read"]["iops"] * get["read"]["clat"]["mean_ns"] / 1e9
            assert 0.8 * c < in_flight <= 1.05 * c, (f"get_{size}_c{c}", in_flight)
    assert s3.keys(bucket) == []  # every object deleted


def test_the_mixed_suite_gets_and_puts_the_same_objects_at_once(s3, tmp_path):
    """warp's mix as far as fio goes: GETs and PUTs of the objects the first pass put,
    75/25 at once, each with its own latency; every object deleted after."""
    bucket = _bucket(s3, f"sbt-mixed-{s3.name}")
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://{bucket}", "--suite", "s3-mixed", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tests = {t["name"]: t for t in show_json(db)["tests"]}
    assert list(tests) == ["put_1m", "mixed_1m", "delete_1m"]
    mixed = tests["mixed_1m"]
    gets, puts = mixed["read"]["total_ios"], mixed["write"]["total_ios"]
    assert gets > 0 and puts > 0 and 0.65 < gets / (gets + puts) < 0.85, (gets, puts)
    assert mixed["read"]["clat"]["percentiles_ns"] and mixed["write"]["clat"]["percentiles_ns"]
    assert not mixed["error"]  # no GET of an object that was not there
    assert s3.keys(bucket) == []
