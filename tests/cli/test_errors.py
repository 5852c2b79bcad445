"""One clear line, never a traceback, and a run's stored status that tells the truth:
each case caused for real (issue #13 items 5 to 11)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from storbench.result.model import Direction, Latency
from storbench.result.model import TestResult as Result
from storbench.result.record import Invocation
from storbench.store import Store
from tests.cli.test_cli import assert_one_line_error, scratch_dirs, show_json
from tests.conftest import STORBENCH, needs_fio, run_cli

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"


def test_a_binary_job_file(tmpfs, tmp_path, store_path):
    job = tmp_path / "job.fio"
    job.write_bytes(bytes(range(256)) * 4)
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    assert_one_line_error(proc, 2, "is not text")


@needs_fio
def test_numjobs_in_hex_which_fio_accepts(tmpfs, tmp_path, store_path):
    job = tmp_path / "job.fio"
    job.write_text("[x]\nrw=read\nbs=4k\nsize=1m\nnumjobs=0x2\n")
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert show_json(store_path)["tests"][0]["jobs"] == 2


@pytest.mark.parametrize("text, needle", [
    ('{"jobs":"s"}', "not fio's JSON output"),
    ('{"fio version": "fio-3.33", "jobs": [{"jobname": "a", "error": 0}]}', "no results"),
])
def test_import_of_what_cannot_be_fio_output(text, needle, tmp_path, store_path):
    path = tmp_path / "x.json"
    path.write_text(text)
    proc = run_cli("import", str(path), db=store_path)
    assert_one_line_error(proc, 2, needle, "nothing was imported")


@pytest.mark.parametrize("value, needle", [("Infinity", "is inf"), ("-Infinity", "is -inf"),
                                           ("-5", "is -5"), ("1e30", "beyond any storage"),
                                           ("NaN", "is nan")])
def test_import_refuses_impossible_figures(value, needle, tmp_path, store_path):
    text = re.sub(r'"iops" : [0-9.]+', f'"iops" : {value}',
                  (DATA / "randread.json").read_text(), count=1)
    path = tmp_path / "x.json"
    path.write_text(text)
    proc = run_cli("import", str(path), db=store_path)
    assert_one_line_error(proc, 2, needle, "nothing was imported")
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"


def infinite_run(store_path: Path) -> int:
    """A run holding ±Infinity, stored through the library as an older storbench
    (before imports were checked) could have stored it."""
    store = Store(store_path)
    run_id = store.begin_run(uid="inf", suite="imported", target="t", environment={},
                             settings={}, storbench_version="0", fio_version="fio-3.33")
    lat = Latency(10, 1.0, float("inf"), float("inf"), 0.0, {50.0: 1.0, 99.0: float("inf")})
    d = Direction(float("inf"), float("-inf"), 1, 1, 1000, 0, 0, None, lat, lat)
    r = Result("x", 1, 0, d, None, None, None, 0.0, 0.0, 0, {}, 1.0, {})
    store.add_invocation(run_id, Invocation(0, "", "{}", 0, "", 1.0), [(0, r)])
    store.finish_run(run_id, "completed", verdicts=[])
    store.close()
    return run_id


@pytest.mark.parametrize("command", [["export", "1", "--format", "json"],
                                     ["export", "1", "--format", "csv"],
                                     ["export", "1", "--format", "md"],
                                     ["compare", "1"], ["compare", "1", "--json"],
                                     ["show", "1"], ["show", "1", "--json"]])
def test_infinite_figures_never_make_a_traceback(command, store_path, tmp_path):
    infinite_run(store_path)
    proc = run_cli(*command, db=store_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    if "--json" in command or "json" in command:
        json.loads(proc.stdout)  # strict JSON: no Infinity, no NaN
        assert "Infinity" not in proc.stdout and "NaN" not in proc.stdout


def test_report_with_infinite_figures(store_path, tmp_path):
    infinite_run(store_path)
    proc = run_cli("report", "1", "-o", str(tmp_path / "r.html"), db=store_path)
    assert "Traceback" not in proc.stderr, proc.stderr


def damaged(store_path: Path, fio_json: str) -> None:
    """A database with runs, then garbage written into the middle of the file."""
    from tests.store.test_sqlite import add_run

    s = Store(store_path)
    for label in "abc":
        add_run(s, fio_json, label=label)
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    size = store_path.stat().st_size
    with store_path.open("r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(size // 3))


@pytest.mark.parametrize("command", [["show", "2"], ["report", "1", "2", "-o", "{tmp}/r.html"],
                                     ["export", "1", "2"], ["compare", "1", "2"],
                                     ["check", "1", "--assert", "mix.read.iops > 1"],
                                     ["rm", "2"], ["list"]])
def test_a_database_damaged_in_the_middle(command, store_path, fio_json_text, tmp_path):
    damaged(store_path, fio_json_text)
    proc = run_cli(*[c.format(tmp=tmp_path) for c in command], db=store_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode != 0:
        assert_one_line_error(proc, 1, str(store_path))
        assert "damaged" in proc.stderr and ".recover" in proc.stderr


@pytest.mark.parametrize("command", [["list"], ["show", "1"], ["compare", "1", "2"]])
def test_a_database_damaged_where_it_is_opened(command, store_path, fio_json_text, tmp_path):
    """Its first page (the schema) overwritten: opening it fails, and the error says so in
    the words of any other damage: damaged, and how to recover what is readable (a CI run
    got "cannot open the results database …: malformed; pass --db another file" for
    every command of the test above, whose damage lands where it may)."""
    damaged(store_path, fio_json_text)  # then the first page, after its 100-byte header
    with store_path.open("r+b") as f:
        f.seek(100)
        f.write(b"\xa5" * 3996)
    proc = run_cli(*[c.format(tmp=tmp_path) for c in command], db=store_path)
    assert_one_line_error(proc, 1, str(store_path), "is damaged", "malformed",
                          f"sqlite3 '{store_path}' .recover")


@pytest.mark.parametrize("command", [["show", "2"], ["export", "1", "2"], ["compare", "1", "2"],
                                     ["report", "1", "2", "-o", "{tmp}/r.html"]])
def test_a_stored_text_that_is_no_longer_utf8(command, store_path, fio_json_text, tmp_path):
    """Damage sqlite cannot see: a byte in the middle of each stored result's JSON turned
    into one that is not UTF-8 (Python's sqlite3 quoted the whole text in its error, garbage
    included, and storbench did not say the file was damaged: a CI run)."""
    from tests.store.test_sqlite import add_run

    s = Store(store_path)
    for label in "abc":
        add_run(s, fio_json_text, label=label)
    s.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    s.close()
    data = store_path.read_bytes()
    assert data.count(b'"bw_bytes_per_s"') >= 3
    store_path.write_bytes(data.replace(b'"bw_bytes_per_s"', b'"bw_bytes_per_\xff"'))
    proc = run_cli(*[c.format(tmp=tmp_path) for c in command], db=store_path)
    assert_one_line_error(proc, 1, str(store_path))
    assert "damaged" in proc.stderr and ".recover" in proc.stderr, proc.stderr
    assert "Could not decode to UTF-8 column 'result'" in proc.stderr, proc.stderr
    assert "bw_bytes" not in proc.stderr and len(proc.stderr) < 600, proc.stderr


@pytest.mark.parametrize("after", ["click", "rich.console", "storbench.result.record",
                                   "storbench.cli.history", "storbench.store.sqlite"])
def test_sigint_during_start_up_is_one_line(after, store_path):
    """Ctrl-C while storbench is still importing its modules: the signal is sent as
    soon as Python reports (-v) that the module ``after`` was imported.

    The report comes through a pipe that the child may be ahead of: for a module
    imported last, the child can have listed the (empty) store and be exiting when the
    signal lands. That attempt says nothing (the listing shows it ran to its end) and
    is made again, up to 5 times."""
    for _ in range(5):
        proc = subprocess.Popen([STORBENCH[0], "-v", *STORBENCH[1:], "list"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "STORBENCH_DB": str(store_path)})
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith(f"import '{after}'"):
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.stderr.read()
        proc.wait(timeout=30)
        said = "".join(seen) + rest
        assert "Traceback" not in said, said[-2000:]
        if proc.returncode == 0 and "No runs stored" in rest:
            continue  # the command had run to its end before the signal came
        assert proc.returncode == 130, said[-2000:]
        assert "storbench: interrupted" in rest
        return
    pytest.fail(f"in 5 attempts, storbench always finished before the signal after {after}")


def test_debug_is_the_groups_option_only(store_path, tmp_path):
    """`--debug` before the command shows the traceback; the same word as a value (a host
    named "--debug" here, which is refused) is not the option (hypothesis found it so)."""
    nowhere = str(tmp_path / "nowhere")
    proc = run_cli("run", nowhere, "--hosts", "--debug", db=store_path)
    assert_one_line_error(proc, 2, "'--debug' is not ssh://")
    proc = subprocess.run([*STORBENCH, "--debug", "run", nowhere, "--hosts", "--debug",
                           "--db", str(store_path)], capture_output=True, text=True, check=False)
    assert "Traceback" in proc.stderr and "ConfigError" in proc.stderr, proc.stderr
    # STORBENCH_DEBUG read as the group reads it: click's boolean words, one rule
    for value, traceback in (("1", True), ("Yes", True), ("on", True), ("0", False),
                             ("off", False), ("", False)):
        proc = subprocess.run([*STORBENCH, "run", nowhere, "--db", str(store_path)],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "STORBENCH_DEBUG": value})
        assert ("Traceback" in proc.stderr) == traceback, (value, proc.stderr)
    proc = subprocess.run([*STORBENCH, "run", nowhere, "--db", str(store_path)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "STORBENCH_DEBUG": "maybe"})
    assert_one_line_error(proc, 2, "'maybe' is not a valid boolean")


def test_size_zero_is_refused_before_anything_runs(tmpfs, store_path):
    proc = run_cli("run", str(tmpfs), "--size", "0", db=store_path)
    assert_one_line_error(proc, 2, "--size '0'")
    assert scratch_dirs(tmpfs) == []


@needs_fio  # fio's own check of the job files
@pytest.mark.parametrize("args, said", [
    (["--size", "1k"], "--size 1k is smaller than a block of test 'seqwrite' (job 'seqwrite':"
                       " 1.0 MiB): fio refuses a job with no room for one block; give 1.0 MiB"),
    (["--size", "1k", "--suite", "etcd"], "(job 'etcd': 2,300 bytes)"),
    (["--job", "{tmp}/j.fio"], "size=8k is smaller than a block of test 'j.fio' (job 'j':"
                               " 64.0 KiB)"),
])
def test_a_size_smaller_than_a_block_is_refused_before_the_run(tmpfs, tmp_path, store_path,
                                                               args, said):
    """fio refuses such a job only as its test starts ("size too small, must not be less
    than minimum block size"): the run was stored as failed."""
    (tmp_path / "j.fio").write_text("[j]\nrw=randrw\nbs=64k,128k\nsize=8k\n")
    proc = run_cli("run", str(tmpfs), *(a.format(tmp=tmp_path) for a in args), db=store_path)
    assert_one_line_error(proc, 2, said)
    assert scratch_dirs(tmpfs) == []
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    ok = run_cli("run", str(tmpfs), "--job", str(tmp_path / "j.fio"), "--size", "64k",
                 "--runtime", "1", "--ramp", "0", db=store_path)
    assert ok.returncode == 0, ok.stderr  # one block of its smallest is room enough


def test_a_baseline_that_does_not_exist_is_found_before_the_benchmark(tmpfs, store_path):
    start = time.monotonic()
    proc = run_cli("run", str(tmpfs), "--baseline", "no-such-label", db=store_path)
    assert_one_line_error(proc, 2, "no completed run labelled 'no-such-label'")
    assert time.monotonic() - start < 10  # the quick suite takes a minute
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"


@needs_fio
def test_check_of_a_run_that_did_not_complete_fails_with_its_status(tmpfs, tmp_path,
                                                                    store_path):
    job = tmp_path / "nofile.fio"
    job.write_text("[x]\nrw=read\nfilename=missing\nallow_file_create=0\nsize=1m\n")
    assert run_cli("run", str(tmpfs), "--job", str(job), db=store_path).returncode == 1
    proc = run_cli("check", "last", "--assert", "x.iops >= 0", db=store_path)
    assert_one_line_error(proc, 1, "run 1 failed (fio exited", "no verdict")


@needs_fio
def test_a_test_fio_did_no_i_o_in_fails_with_no_row_of_zeros(tmpfs, tmp_path, store_path):
    """fio reads runtime=1e+09 as 1 and then does no I/O in the time it measures: that
    run was completed with IOPS 0.00 (a test with no I/O at all had no row). It fails,
    saying so; the figures fio gave are kept with the run."""
    job = tmp_path / "never.fio"
    job.write_text("[z]\nrw=randread\nsize=4m\ntime_based\nruntime=1e+09\n")
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    said = "test 'never.fio': fio's job 'z' did no I/O in the time it measured"
    assert_one_line_error(proc, 1, said)
    assert "[1] FAILED: " + said in proc.stderr
    run = show_json(store_path)
    assert run["status"] == "failed" and run["error"].startswith(said)
    assert "0.00" not in run_cli("show", "last", db=store_path).stdout
    assert scratch_dirs(tmpfs) == []


@needs_fio
def test_synced_writes_fio_paced_into_one_fail_with_no_row_of_zeros(tmpfs, tmp_path, store_path):
    """fio 3.33 paces fdatasync'd sync writes by Poisson arrivals into one write a job, of 0
    bytes in 0 ms (2,000 asked: 10 runs in 10): that was stored as a completed test at
    0 IOPS, "the storage could not keep up". It fails, saying so and what to do."""
    job = tmp_path / "paced.fio"
    job.write_text("[p]\nrw=write\nioengine=sync\nfdatasync=1\nbs=2300\nsize=8m\n"
                   "rate_iops=2000\nrate_process=poisson\nruntime=1\n")
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    said = "test 'paced.fio': fio's job 'p' did no I/O in the time it measured"
    assert_one_line_error(proc, 1, said)
    assert "paced by Poisson arrivals" in proc.stderr and "rate_process=linear" in proc.stderr
    assert show_json(store_path)["status"] == "failed"
    assert scratch_dirs(tmpfs) == []
    # evenly spaced, the same job keeps its rate
    job.write_text(job.read_text().replace("poisson", "linear"))
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert show_json(store_path)["tests"][0]["write"]["total_ios"] >= 1800


@needs_fio
def test_a_job_done_within_its_ramp_fails_with_no_figure(tmpfs, tmp_path, store_path):
    """4 MiB read on tmpfs in milliseconds, inside a 2 s ramp_time: fio never leaves the
    ramp, counts its 1,024 reads (at 500,000 IOPS, say) and times none. That was stored
    as a completed test with those IOPS and no latency; it fails, saying why."""
    job = tmp_path / "ramped.fio"
    job.write_text("[r]\nrw=randread\nsize=4m\nramp_time=2\n")
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    said = ("test 'ramped.fio': fio's job 'r' ended inside its ramp_time (2 s): its 1,024 I/Os"
            " were the ramp's and fio timed none of them")
    assert_one_line_error(proc, 1, said)
    run = show_json(store_path)
    assert run["status"] == "failed" and run["error"].startswith(said)
    assert scratch_dirs(tmpfs) == []


@needs_fio
def test_the_progress_line_says_failed_for_a_failed_test(tmpfs, tmp_path, store_path):
    job = tmp_path / "nofile.fio"
    job.write_text("[x]\nrw=read\nfilename=missing\nallow_file_create=0\nsize=1m\n")
    proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
    assert "[1] FAILED: fio exited with status 1" in proc.stderr
    assert "done:" not in proc.stderr


@needs_fio
def test_a_killed_runs_work_directory_is_removed_by_the_next_run(tmpfs, tmp_path,
                                                                 store_path):
    job = tmp_path / "slow.fio"
    job.write_text("[x]\nrw=randread\nbs=4k\nsize=4m\ntime_based\nruntime=30\n")
    proc = subprocess.Popen([*STORBENCH, "run", str(tmpfs), "--job", str(job)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "STORBENCH_DB": str(store_path)})
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    deadline = time.monotonic() + 30
    mine: list[Path] = []
    while not mine and time.monotonic() < deadline:
        mine = [p for p in tmp.glob("storbench-fio-*") if (p / ".storbench-scratch").exists()
                and json.loads((p / ".storbench-scratch").read_text())["pid"] == proc.pid]
        time.sleep(0.1)
    assert mine, "no work directory seen"
    time.sleep(1)
    proc.kill()  # SIGKILL: nothing of storbench's can run
    proc.wait()
    assert mine[0].exists()
    later = run_cli("run", str(tmpfs), "--job", str(job), "--runtime", "1", db=store_path)
    assert later.returncode == 0, later.stderr
    assert not mine[0].exists()
    assert f"left by crashed run {mine[0].name.removeprefix('storbench-fio-')}" in later.stderr


def test_a_damaged_store_is_never_written_by_a_run(tmpfs, store_path, fio_json_text):
    damaged(store_path, fio_json_text)
    with sqlite3.connect(store_path) as db:
        try:
            db.execute("PRAGMA integrity_check").fetchall()
        except sqlite3.DatabaseError:
            pass
    proc = run_cli("run", str(tmpfs), "--suite", "etcd", "--size", "1m", db=store_path)
    assert "Traceback" not in proc.stderr, proc.stderr


@needs_fio
def test_a_run_killed_outright_is_crashed_not_running_forever(tmpfs, tmp_path, store_path):
    job = tmp_path / "slow.fio"
    job.write_text("[x]\nrw=randread\nbs=4k\nsize=4m\ntime_based\nruntime=30\n")
    log = tmp_path / "run.log"
    proc = subprocess.Popen([*STORBENCH, "run", str(tmpfs), "--job", str(job)],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"),
                            env={**os.environ, "STORBENCH_DB": str(store_path)})
    deadline = time.monotonic() + 60
    runs: list[dict] = []
    while time.monotonic() < deadline:
        listed = run_cli("list", "--json", db=store_path)
        runs = json.loads(listed.stdout or "[]")
        if runs and runs[0]["status"] == "running":
            break
        time.sleep(0.2)
    assert runs and runs[0]["status"] == "running", (runs, listed.stderr, log.read_text())
    proc.kill()
    proc.wait()
    listed = run_cli("list", db=store_path)
    assert "crashed" in listed.stdout
    run = show_json(store_path)
    assert run["status"] == "crashed" and f"PID {proc.pid}" in run["error"]
    proc = run_cli("check", "last", "--assert", "x.iops > 0", db=store_path)
    assert_one_line_error(proc, 1, f"run {run['id']} crashed (the storbench process", "no verdict")


@needs_fio
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a second PID namespace needs root and unshare")
def test_a_storbench_in_another_pid_namespace_never_judges_a_live_run_dead(tmpfs, tmp_path,
                                                                           store_path):
    """A container with the host's name, sharing /tmp and the target: its `list` and a
    second `run` on the same target see the live run's files and lock, not its PID.
    They leave it alone (it used to be marked crashed, its scratch directory deleted and
    the run then failed); the live run completes. Killed, it is crashed all the same."""
    job = tmp_path / "slow.fio"
    job.write_text("[x]\nrw=randread\nbs=4k\nsize=4m\ntime_based\nruntime=8\n")
    env = {**os.environ, "STORBENCH_DB": str(store_path)}
    live = subprocess.Popen([*STORBENCH, "run", str(tmpfs), "--job", str(job)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not (scratch_dirs(tmpfs) and list(scratch_dirs(tmpfs)[0].glob("x.*"))):
        assert time.monotonic() < deadline and live.poll() is None
        time.sleep(0.1)
    scratch = scratch_dirs(tmpfs)[0]
    elsewhere = ["unshare", "--pid", "--fork", "--mount-proc", *STORBENCH]
    listed = subprocess.run([*elsewhere, "list", "--json"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert json.loads(listed.stdout)[0]["status"] == "running", listed.stderr
    second = subprocess.run([*elsewhere, "run", str(tmpfs), "--suite", "etcd", "--size", "1m"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "Removed" not in second.stderr and scratch.exists()
    _, err = live.communicate(timeout=60)
    assert live.returncode == 0, err
    runs = json.loads(run_cli("list", "--json", db=store_path).stdout)
    assert sorted(r["status"] for r in runs) == ["completed", "completed"]
    # a run killed outright is still found out, from the other namespace too
    killed = subprocess.Popen([*STORBENCH, "run", str(tmpfs), "--job", str(job)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while not scratch_dirs(tmpfs):
        assert time.monotonic() < deadline + 60 and killed.poll() is None
        time.sleep(0.1)
    time.sleep(1)
    killed.kill()
    killed.wait()
    listed = subprocess.run([*elsewhere, "list", "--json"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert json.loads(listed.stdout)[0]["status"] == "crashed", listed.stdout


def test_what_cannot_be_written_is_one_line_in_the_systems_words(fio_json_text, tmp_path,
                                                                  store_path):
    """An --output in a directory that does not exist, charts into a place no file can
    be made, standard output on a full device: one line naming what and why, never a
    traceback (each was one)."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), db=store_path).returncode == 0
    proc = run_cli("export", "last", "--output", str(tmp_path / "no" / "x.csv"),
                   db=store_path)
    assert_one_line_error(proc, 2, f"cannot write '{tmp_path / 'no' / 'x.csv'}': No such file")
    proc = run_cli("report", "last", "--output", str(tmp_path / "r.html"), "--png",
                   "/proc/storbench-charts", db=store_path)
    assert_one_line_error(proc, 2, "cannot write the charts into '/proc/storbench-charts'")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*STORBENCH, "show", "last", "--json"], stdout=full,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "STORBENCH_DB": str(store_path)})
    assert_one_line_error(proc, 1, "No space left on device")


# A stand-in for a fault this test machine cannot cause: its kernel gives a writer no
# EPIPE when the pipe's reader has gone (a write of 100 MB "succeeds"), so the writer is
# storbench with a standard output that raises what Linux raises elsewhere.
BROKEN_STDOUT = """
import io, os, sys
class Broken(io.TextIOWrapper):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")
sys.stdout = Broken(os.fdopen(os.open(os.devnull, os.O_WRONLY), "wb"))
from storbench.cli import main
main(sys.argv[1:])
"""


def test_a_reader_that_went_away_ends_storbench_quietly():
    """`storbench list | head`: the reader has what it wanted; no traceback, no error
    line (rich's console and click's main each end such a process with 1, quietly,
    before cli.main's handler of other OSErrors, which names them, sees it)."""
    import sys

    for words in (["suites"], ["reference", "list", "--json"]):  # rich; click.echo
        proc = subprocess.run([sys.executable, "-c", BROKEN_STDOUT, *words],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 1 and proc.stderr == "", (words, proc.stderr)


def test_a_name_in_brackets_is_said_as_given(fio_json_text, tmp_path):
    """A path, a label or a series name like '[/]' or '[red]x' is text, not the terminal
    library's markup: `export -o '[/]/x.md'` ended in a traceback after writing the file,
    '[x]/o.md' was said as '/o.md', and `list --label '[red]x'` said 'x'."""
    home = tmp_path / "[/]" / "[red]db"
    home.mkdir(parents=True)
    db = home / "sb.db"
    proc = run_cli("history", db=db)
    assert proc.returncode == 0 and f"No series in {db} yet" in proc.stderr, proc.stderr
    proc = run_cli("list", db=db)
    assert f"No runs stored in {db} yet" in proc.stderr, proc.stderr
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), "--label", "[bold]a", db=db).returncode == 0
    for out in (home / "x.md", tmp_path / "[x]" / "o.md"):
        out.parent.mkdir(exist_ok=True)
        proc = run_cli("export", "last", "--format", "md", "--output", str(out), db=db)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip() == f"Wrote {out}" and out.exists()
    proc = run_cli("list", "--label", "[red]x[/red]", "--tag", "[/]=1", db=db)
    assert proc.stderr.strip() == f"No runs stored in {db} match --label [red]x[/red] --tag [/]=1."
    proc = run_cli("series", "[/]", "last", db=db)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("history", "[/]", db=db)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("group", [[], ["db"], ["k8s"], ["reference"], ["cost"]])
def test_a_group_without_its_command_shows_its_help(group, store_path):
    """`storbench`, `storbench db`: the group's help (exit 2, as click's own), not an error
    line holding the help and a hint to ask for it."""
    proc = run_cli(*group, db=store_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"Usage: storbench {' '.join(group)}".rstrip()), proc.stderr
    assert "Commands:" in proc.stderr and "storbench: error" not in proc.stderr
    assert "see `" not in proc.stderr


@pytest.mark.parametrize("target", ["/proc", "/sys"])
def test_a_file_system_with_no_storage_is_said_so(target, store_path):
    """/proc was refused as "not enough free space ... 0 B are free": a pseudo file
    system has no size at all; said so, and what to pass instead."""
    proc = run_cli("run", target, "--size", "4m", db=store_path)
    assert_one_line_error(proc, 1, f"target directory '{target}' is on a file system of no"
                                   " size (0 bytes in all)")


def test_a_database_path_given_makes_no_directories(fio_json_text, tmp_path):
    """`--db /mnt/typo/x.db` made /mnt/typo (and `db copy SRC /nowhere/x.db` made /nowhere)
    and wrote a database there; a path a user gives names a file in a directory that is
    there. The default place ($XDG_DATA_HOME/storbench) is still made, by a command that
    stores a run: one that only reads (`list`, `show`, `history`) made an empty database
    file wherever it was pointed, a typo too; it now reads nothing and leaves nothing."""
    typo = tmp_path / "typo" / "deeper" / "x.db"
    proc = run_cli("list", db=typo)
    assert_one_line_error(proc, 1, f"the directory of the database '{typo}' does not exist")
    src = tmp_path / "src.db"
    for words in (["list"], ["history"], ["workloads"]):
        proc = run_cli(*words, db=src)
        assert proc.returncode == 0 and "No " in proc.stdout + proc.stderr, proc
    proc = run_cli("show", "last", db=src)
    assert_one_line_error(proc, 2, f"no runs stored yet in {src}")  # not there: usage
    assert not list(tmp_path.glob("src.db*")), list(tmp_path.iterdir())
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), db=src).returncode == 0 and src.is_file()
    proc = run_cli("db", "copy", str(src), str(typo), db=src)
    assert_one_line_error(proc, 1, "does not exist: create it")
    assert not (tmp_path / "typo").exists()
    # a database copied onto itself (another spelling of its path): said, not "0 copied"
    same = run_cli("db", "copy", str(src), f"{tmp_path}/../{tmp_path.name}/src.db", db=src)
    assert_one_line_error(same, 2, "are the same database: nothing to copy")
    # progress: a line every 2 s and the last (every 50 runs said 2,000 lines at 100,000)
    copied = run_cli("db", "copy", str(src), str(tmp_path / "copy.db"), db=src)
    assert copied.returncode == 0, copied.stderr
    assert copied.stderr.splitlines() == ["  1/1 runs looked at (100%)"], copied.stderr
    env = {k: v for k, v in os.environ.items() if k != "STORBENCH_DB"}
    proc = subprocess.run([*STORBENCH, "list"], capture_output=True, text=True, check=False,
                          env={**env, "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "xdg").exists()
    proc = subprocess.run([*STORBENCH, "import", str(got)], capture_output=True, text=True,
                          check=False, env={**env, "XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "xdg" / "storbench" / "results.db").is_file()


def test_a_run_named_twice_is_one_run(fio_json_text, tmp_path, store_path):
    """`export 4 4 -f openmetrics` held each sample twice (a Pushgateway refuses such a
    group), `compare 4 4` two rows of one run, `series s 4 4` a database error."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), db=store_path).returncode == 0
    once = run_cli("export", "1", "--format", "openmetrics", db=store_path).stdout
    assert run_cli("export", "1", "#1", "last", "--format", "openmetrics",
                   db=store_path).stdout == once
    rows = json.loads(run_cli("compare", "1", "1", "--json", db=store_path).stdout)["runs"]
    assert [r["id"] for r in rows] == [1]
    proc = run_cli("series", "s", "1", "1", db=store_path)
    assert proc.returncode == 0 and "1 run(s) now in series 's'" in proc.stderr, proc.stderr


def test_an_output_of_dash_is_standard_output(fio_json_text, tmp_path, store_path):
    """`report -o -` wrote a file named '-' (and said "Wrote -"); `-` is standard output,
    as for fio and curl, its control characters shown, never obeyed."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), db=store_path).returncode == 0
    with sqlite3.connect(store_path) as db:  # as another tool (an older storbench) wrote it
        db.execute("UPDATE runs SET label = ?", ("a\x1b[2Jb",))
    for command in (["report", "last", "-o", "-"], ["export", "last", "-f", "csv", "-o", "-"]):
        proc = run_cli(*command, db=store_path, cwd=tmp_path)
        assert proc.returncode == 0 and "Wrote" not in proc.stderr, proc.stderr
        assert not (tmp_path / "-").exists()
        assert "a\\x1b[2Jb" in proc.stdout and "\x1b" not in proc.stdout
    assert proc.stdout.startswith("run,label,")


@pytest.mark.parametrize("args, said", [
    (["check", "last", "--baseline", "1", "--max-regression", "nan"],
     "--max-regression 'nan' is not a percentage"),
    (["check", "last", "--baseline", "1", "--max-regression", "inf%"],
     "--max-regression 'inf%' is not a percentage"),
    (["history", "s", "--min-change", "100%"], "--min-change must be at least 0% and below"),
    # a fraction meant as 10% was read as 0.1%: a run 1% slower by chance failed the gate
    (["check", "last", "--baseline", "1", "--max-regression", "0.1"],
     "--max-regression 0.1: a fraction or a percentage? Write 0.1% or 10%"),
    (["history", "s", "--min-change", " .05"],
     "--min-change .05: a fraction or a percentage? Write 0.05% or 5%"),
    (["compare", "last", "--cost", "ebs-gp3", "--capacity", "500GiB", "--provisioned-iops",
      "nan"], "--provisioned-iops 'nan': expected a number"),
    # click's FloatRange lets nan through its bounds (before the cluster is asked)
    (["k8s", "failover", "--storage-class", "x", "--before", "nan"],
     "Invalid value for '--before': 'nan' is not a finite number"),
])
def test_a_number_that_is_not_one_is_refused(args, said, fio_json_text, tmp_path, store_path):
    """--max-regression nan passed: every comparison with nan is false, so no regression
    ever failed the gate (a randwrite 104% worse was "noise")."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), "--series", "s", db=store_path).returncode == 0
    assert_one_line_error(run_cli(*args, db=store_path), 2, said)


def test_a_percentage_is_read_as_written():
    """What the refusal above leaves: a percentage with its sign, a whole number, zero."""
    from storbench.cli.common import percent

    assert [percent(t, "--max-regression", "10%") for t in ("0.1%", "10", "0", "1", "250%")] \
        == pytest.approx([0.001, 0.1, 0.0, 0.01, 2.5])


@pytest.mark.parametrize("args", [["run", "{tmp}", "--series", ""],
                                  ["run", "{tmp}", "--series", "a\x1bb"],
                                  ["import", "{tmp}/fio.json", "--series", " "]])
def test_a_series_name_nobody_can_see_is_refused_before_the_run(args, fio_json_text, tmp_path,
                                                                 store_path):
    """`run --series ''` ran and joined the run's own series, unsaid (`series ''` refused
    it); a control character in it was stored."""
    (tmp_path / "fio.json").write_text(fio_json_text)
    proc = run_cli(*(a.format(tmp=tmp_path) for a in args), db=store_path)
    assert_one_line_error(proc, 2, "a series name must be printable text")
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    assert list(tmp_path.glob("storbench-*")) == []


@pytest.mark.parametrize(("args", "said"), [
    (["run", "{tmp}", "--label", "12"], "a label '12' reads as a run"),
    (["run", "{tmp}", "--label", " "], "a label must be printable text"),
    (["import", "{tmp}/fio.json", "--label", "last"], "a label 'last' reads as a run"),
    (["import", "{tmp}/fio.json", "--label", "a\tb"], "a label must be printable text"),
])
def test_a_label_nobody_could_name_the_run_by_is_refused_before_the_run(
        args, said, fio_json_text, tmp_path, store_path):
    """`--label 12` was stored, and `show 12` (or `--baseline 12`) is run 12, never the
    run labelled so; `--label ' '` made a blank name in every table."""
    (tmp_path / "fio.json").write_text(fio_json_text)
    proc = run_cli(*(a.format(tmp=tmp_path) for a in args), db=store_path)
    assert_one_line_error(proc, 2, said)
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    assert list(tmp_path.glob("storbench-*")) == []
    assert run_cli("import", str(tmp_path / "fio.json"), db=store_path).returncode == 0
    for label, said in (("#1", "a label '#1' reads as a run"),
                        ("   ", "a label must be printable text")):
        assert_one_line_error(run_cli("label", "1", label, db=store_path), 2, said)
    assert run_cli("label", "1", "run-12", db=store_path).returncode == 0


@pytest.mark.parametrize("flag", [["--size", "4m"], ["--suite", "dbench"], ["-s", "quick"],
                                  ["--runtime", "3"]])
def test_what_a_replay_does_not_use_is_refused(flag, tmp_path, store_path):
    """`run T --replay NAME --size 4m` replayed the recorded I/O as it was, the size (and
    --suite, --runtime) ignored, unsaid."""
    proc = run_cli("run", str(tmp_path), "--replay", "w", *flag, db=store_path)
    assert_one_line_error(proc, 2, f"{flag[0] if flag[0] != '-s' else '--suite'} does nothing"
                                   " with --replay NAME")
    assert list(tmp_path.glob("storbench-*")) == []


def test_record_says_what_duration_is_for(tmp_path, store_path):
    """`record NAME --dir D --duration 5 -- CMD` said "--duration is a positive number of
    seconds, with --pid" of a positive number."""
    proc = run_cli("record", "w", "--dir", str(tmp_path), "--duration", "5", "--", "true",
                   db=store_path)
    assert_one_line_error(proc, 2, "--duration applies to --pid: a command after -- is"
                                   " recorded until it ends")
    proc = run_cli("record", "w", "--dir", str(tmp_path), "--pid", str(os.getpid()),
                   "--duration", "0", db=store_path)
    assert_one_line_error(proc, 2, "--duration is a positive number of seconds")


def test_no_change_in_a_series_too_short_to_tell_says_so(fio_json_text, tmp_path, store_path):
    """`check --no-change` of a series of 1 to 3 runs said "no change in 1 runs": no change
    could have been found there (2 runs on each side of one). "too few runs to tell: 1 of
    3" then read as a fraction (a series named 3): the series is named as one."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    for _ in range(3):
        assert run_cli("import", str(got), "--series", "s", db=store_path).returncode == 0
    proc = run_cli("check", "last", "--no-change", db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "too few runs to tell: series 's' has 3 runs (a change needs 2 runs on each side)" \
        in proc.stdout
    assert "run(s)" not in proc.stdout and "no change in" not in proc.stdout
    overview = run_cli("history", "s", db=store_path).stdout  # was "none"
    assert "too few runs to tell" in overview and " none " not in overview
    # one figure run by run: it said "No change point in 3 runs"
    figure = run_cli("history", "s", "--metric", "mix.read.iops", db=store_path).stdout
    assert "Too few runs to tell a change: 3 runs" in figure and "No change" not in figure
    assert run_cli("import", str(got), "--series", "s", db=store_path).returncode == 0
    assert "no change in the 4 runs of series 's'" in run_cli("check", "last", "--no-change",
                                                 db=store_path).stdout
    overview = run_cli("history", "s", db=store_path).stdout
    assert "too few" not in overview and " none " in overview
    figure = run_cli("history", "s", "--metric", "mix.read.iops", db=store_path).stdout
    assert "No change point in 4 runs" in figure and "Too few" not in figure


def test_show_says_what_it_cannot_show(fio_json_text, tmp_path, store_path):
    """`show --raw` without --json was ignored; `show --timeline` of a run that failed
    before its first test printed a blank line."""
    store = Store(store_path)
    run_id = store.begin_run(uid="ufail", suite="quick", target="/mnt/x", environment={},
                             settings={}, storbench_version="0", fio_version="fio-3.33")
    store.finish_run(run_id, "failed", error="fio exited with status 1: fio: bad")
    store.close()
    proc = run_cli("show", "last", "--timeline", db=store_path)
    assert proc.returncode == 0
    assert "no per-second series: run #1 has no test results (failed)" in proc.stdout
    assert_one_line_error(run_cli("show", "last", "--raw", db=store_path), 2,
                          "--raw adds fio's raw JSON to --json")


@pytest.mark.parametrize("args, said", [
    (["run", "{tmp}", "--max-regression", "5%"], "--max-regression applies to --baseline"),
    (["run", "{tmp}", "--steady-window", "3"], "--steady-window applies to --until-steady"),
    (["run", "{tmp}", "--round", "30"], "--round applies to --precondition"),
    (["run", "{tmp}", "--max-rounds", "10"], "--max-rounds applies to --precondition"),
    (["run", "{tmp}", "--threshold", "5"], "--threshold sets the limit of a suite's verdict"),
    # the example is a figure of the suite run: PostgreSQL's was 'randread.p99 < 5ms'
    (["run", "{tmp}", "--suite", "postgresql", "--threshold", "5"],
     "give --assert instead (e.g. 'postgresql.commit_p99 < 5ms')"),
    (["run", "{tmp}", "--suite", "dbench", "--threshold", "2"], "< 2ms')"),
    (["run", "{tmp}", "--job", "{tmp}/j.fio", "--suite", "etcd", "--threshold", "5"],
     "--threshold sets the limit"),
    (["curve", "{tmp}", "--max-regression", "5%"], "--max-regression applies to `run"),
    (["history", "--metric", "randread.read.iops"], "--metric applies to a SERIES"),
    (["history", "s", "--all"], "--all applies to --metric"),
    (["check", "last", "--assert", "x.iops > 1", "--max-regression", "5%"],
     "--max-regression applies to --baseline or --no-change"),
    # the agent listened on its unix socket: a user thought it was on TCP port 9000
    (["agent", "--port", "9000", "--allow-root"], "--port applies to --bind"),
    (["run", "{tmp}", "--capacity", "5Gi"],
     "--capacity: Kubernetes options apply to --storage-class CLASS (or k8s://CLASS)"),
    (["curve", "{tmp}", "-n", "bench"], "--namespace: Kubernetes options apply"),
])
def test_an_option_that_does_nothing_here_is_refused(args, said, tmp_path, store_path):
    """Each was ignored, unsaid: a CI job that set --max-regression with no --baseline,
    or --threshold on a suite with no verdict, gated on nothing it asked for."""
    (tmp_path / "j.fio").write_text("[j]\nrw=read\nsize=1m\n")
    proc = run_cli(*(a.format(tmp=tmp_path) for a in args), db=store_path)
    assert_one_line_error(proc, 2, said)
    assert list(tmp_path.glob("storbench-*")) == []


@pytest.mark.parametrize("given", ["", ",", " , "])
def test_columns_that_name_no_figure_are_refused(given, fio_json_text, tmp_path, store_path):
    """`export --columns ','` made a table of no figure, and '' one of every figure."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), db=store_path).returncode == 0
    assert_one_line_error(run_cli("export", "last", "--columns", given, db=store_path), 2,
                          "names no figure")
    assert_one_line_error(run_cli("compare", "last", "--reference", given, db=store_path), 2,
                          "names no reference")  # it added none, unsaid


def test_the_runner_image_variable_is_no_option_typed(store_path):
    """STORBENCH_IMAGE is set once for every run: a directory run with it is no
    Kubernetes option given (refused here for /proc's own reason, not for the image)."""
    proc = run_cli("run", "/proc", db=store_path, env={"STORBENCH_IMAGE": "registry/fio:x"})
    assert_one_line_error(proc, 1, "file system of no size")


@needs_fio
def test_fio_s_errors_that_differ_only_in_their_offsets_are_said_once(disk_dir, tmp_path,
                                                                       store_path):
    """Direct I/O in 1000-byte blocks on the disk: the kernel refuses each read (EINVAL)
    and fio writes an io_u error per offset; the run's error printed all of them (four
    per line, three times: the progress line, under the table, the last line)."""
    job = tmp_path / "odd.fio"
    job.write_text("[odd]\nrw=randread\nbs=1000\nsize=4m\nioengine=libaio\niodepth=8\n"
                   "direct=1\n")
    proc = run_cli("run", str(disk_dir), "--job", str(job), db=store_path)
    assert proc.returncode == 1, proc.stderr
    error = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)["error"]
    assert error.startswith("fio job 'odd' failed with error 22 (Invalid argument): fio:"
                            " io_u error on file "), error
    assert error.count("io_u error") == 1, error  # the first as fio wrote it, then a count
    assert re.search(r"read offset=\d+, buflen=1000 \(and [1-9]\d* more like it\)", error)
    assert proc.stderr.count("io_u error") == 2  # the progress line and the last line


def test_a_profile_that_is_a_suite_says_to_use_suite(tmp_path, store_path):
    """`run T --profile postgresql` said "suite quick has no profile 'postgresql'" with no
    hint that postgresql is a suite of its own."""
    proc = run_cli("run", str(tmp_path), "--profile", "postgresql", db=store_path)
    assert_one_line_error(proc, 2, "suite quick has no profile 'postgresql'; postgresql is a"
                                   " suite: --suite postgresql")
    assert list(tmp_path.glob("storbench-*")) == []


def test_history_takes_a_figure_as_assert_does(tmp_path, store_path):
    """`--assert "randread.iops >= 1"` names a figure without its direction where the test
    has one; `history S --metric randread.iops` was refused ("not TEST.DIRECTION.FIGURE")."""
    data = Path(__file__).resolve().parents[1] / "data" / "fio" / "randread.json"
    for _ in range(2):
        assert run_cli("import", str(data), "--series", "r", db=store_path).returncode == 0
    short = run_cli("history", "r", "--metric", "randread.iops", "--json", db=store_path)
    assert short.returncode == 0, short.stderr
    whole = run_cli("history", "r", "--metric", "randread.read.iops", "--json", db=store_path)
    assert json.loads(short.stdout) == json.loads(whole.stdout)
    assert "randread.read.iops" in short.stdout


def test_check_no_change_of_nothing_known_names_series_too(fio_json_text, tmp_path,
                                                          store_path):
    """`check nosuch --no-change` said "neither a run id nor a label" (exit 1), the series
    it also looks for unnamed, where `history nosuch` is a usage error (exit 2)."""
    got = tmp_path / "fio.json"
    got.write_text(fio_json_text)
    assert run_cli("import", str(got), "--series", "s", db=store_path).returncode == 0
    assert_one_line_error(run_cli("check", "nosuch", "--no-change", db=store_path), 2,
                          "'nosuch' is neither a series, a run id nor a label; `storbench"
                          " history` lists the series, `storbench list` the runs")
    # every "not there" is a usage error: a run, a label, a series (show and check
    # --assert exited 1, as a failed fio does)
    for command in (["show", "nosuch"], ["check", "nosuch", "--assert", "x.iops > 1"],
                    ["show", "99"], ["history", "nosuch"], ["rm", "99"]):
        proc = run_cli(*command, db=store_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (command, proc.stderr)
    # a series that holds only a run that did not complete is there: said so, not "no
    # series" (`show --json` names it)
    from storbench.store import Store

    store = Store(store_path)
    stopped = store.begin_run(uid="stopped", suite="quick", target="/x", environment={},
                              settings={}, storbench_version="test", fio_version=None,
                              series="halted")
    store.finish_run(stopped, "interrupted")
    store.close()
    assert_one_line_error(run_cli("history", "halted", db=store_path), 2,
                          f"series 'halted' holds no completed run (#{stopped} interrupted)")


def test_the_probe_on_a_bucket_is_its_requests_not_refused(store_path):
    """On a bucket --probe-metadata times its requests (tests/target/test_objects_probe):
    not refused as a probe of a directory would be; the run goes on to the endpoint here
    (nothing listens on port 9), or to fio where there is none."""
    proc = run_cli("run", "s3://bucket", "--endpoint", "http://127.0.0.1:9",
                   "--probe-metadata", db=store_path,
                   env={**os.environ, "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"})
    assert proc.returncode == 1, proc.stderr
    assert "--probe-metadata" not in proc.stderr
    assert "http://127.0.0.1:9: HEAD /bucket" in proc.stderr or "fio" in proc.stderr
