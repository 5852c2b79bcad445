"""Repeats, steady state, assertions, baselines and the etcd verdict, end to end."""

from __future__ import annotations

import json
import re
import time

import pytest

from storbench.analysis.assertions import Assertion
from storbench.errors import ConfigError
from tests.conftest import needs_fio, needs_timing, run_cli, run_cli_wrapped

pytestmark = needs_fio

READ3 = ("[randread]\nrw=randread\nbs=4k\nsize=32m\ndirect=1\nioengine=libaio\niodepth=16\n"
         "time_based\nruntime=3\n")


def job(tmp_path, text=READ3, name="read.fio"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def last(db):
    return json.loads(run_cli("show", "last", "--json", db=db).stdout)


def test_repeats_interleave_and_give_confidence_intervals(tmpfs, store_path):
    proc = run_cli("run", str(tmpfs), "--size", "8m",
                   "--runtime", "1", "--ramp", "0", "--repeat", "3",
                   "-l", "r", db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = last(store_path)
    assert run["repeats"] == 3
    names = [t["name"] for t in run["tests"]]
    assert names == ["randread", "randwrite", "seqread", "seqwrite", "synclat"] * 3
    assert [t["repeat"] for t in run["tests"]] == [0] * 5 + [1] * 5 + [2] * 5
    assert "3 repeats per test" in proc.stdout and " ± " in proc.stdout
    comp = json.loads(run_cli("compare", "last", "--json", db=store_path).stdout)
    row = comp["comparison"]["rows"][0]
    col = [c["metric"] for c in comp["comparison"]["columns"]].index("read.iops")
    values = sorted(t["read"]["iops"] for t in run["tests"] if t["name"] == "randread")
    assert row["values"][col] == values[1]  # the median
    assert row["repeats"][col] == 3 and row["ci95"][col] > 0


def test_compare_words_with_uncertainty(tmpfs, store_path, tmp_path):
    for label in ("a", "b"):
        proc = run_cli("run", str(tmpfs), "--job", job(tmp_path), "--repeat", "2",
                       "--runtime", "1", "-l", label, db=store_path)
        assert proc.returncode == 0, proc.stderr
    proc = run_cli("compare", "2", "--baseline", "1", db=store_path)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("b: "))
    assert " ± " in line and "× the randread read IOPS of a" in line
    plain = run_cli("compare", "1", "2", db=store_path)  # no --baseline: still in words
    assert "Summary, relative to a:" in plain.stdout
    line = next(ln for ln in plain.stdout.splitlines() if ln.startswith("  b: "))
    assert " ± " in line and "× the randread read IOPS of a" in line


def test_until_steady_records_attainment(throttled, tmp_path, store_path):
    proc = run_cli_wrapped(throttled.wrap, "run", str(throttled.mnt), "--job",
                           job(tmp_path), "--until-steady", "--steady-window", "3",
                           "--runtime", "30", db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = last(store_path)
    ss = run["tests"][0]["steady_state"]
    assert ss["attained"] is True and ss["criterion"].startswith("iops_slope:0.5")
    # before the 30 s; fio counts the window from its first sample and the run time
    # from its first I/O, so a 3 s window can end at 2.6 s of run time (8 s in a CI
    # run, 15.7 s in another on a busier machine: the slope's noise is the machine's)
    assert ss["window_s"] == 3 and 2 <= ss["stopped_after_s"] < 25
    assert "steadystate=iops_slope:0.5%" in run["job_files"][0]
    assert run["tests"][0]["read"]["iops"] == pytest.approx(3000, rel=0.03)


def test_until_steady_says_when_a_group_of_jobs_stopped_not_their_times_summed(
        tmpfs, tmp_path, store_path):
    """A test of 4 jobs is judged as one group (group_reporting), and fio's job_runtime
    sums its jobs' times: the test was said to stop 4 times later than it did (the
    dbench suite's sequential tests: "attained after 13.1 s" for 3.3 s). Rate-limited,
    its figures level out at once."""
    text = ("[grouped]\nrw=read\nbs=4k\nsize=4m\nnumjobs=4\nthread\nrate=2m\n"
            "time_based\nruntime=3\n")
    start = time.monotonic()
    proc = run_cli("run", str(tmpfs), "--job", job(tmp_path, text), "--until-steady",
                   "bw_slope:2%", "--steady-window", "2", "--runtime", "20", db=store_path)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    [test] = last(store_path)["tests"]
    ss = test["steady_state"]
    assert ss["attained"] is True and ss["criterion"] == "bw_slope:2%"
    assert "group_reporting" in last(store_path)["job_files"][0]
    assert ss["stopped_after_s"] == test["read"]["runtime_ms"] / 1000 < took


def test_until_steady_swallowing_the_target_is_explained(tmpfs, store_path):
    proc = run_cli("run", "--until-steady", str(tmpfs), db=store_path)
    assert proc.returncode == 2
    assert "not a fio steady-state criterion" in proc.stderr


def test_assertions_pass_and_fail(tmpfs, tmp_path, store_path):
    ok = run_cli("run", str(tmpfs), "--job", job(tmp_path), "--assert",
                 "randread.iops >= 1k", "--assert", "randread.p99 < 1s", db=store_path)
    assert ok.returncode == 0, ok.stderr
    assert "PASS randread.iops >= 1k: measured" in ok.stdout
    assert "PASS randread.p99 < 1s: measured" in ok.stdout
    bad = run_cli("check", "last", "--assert", "randread.iops >= 100M",
                  "--assert", "randread.read.clat.p99.9 < 1ns", db=store_path)
    assert bad.returncode == 3, bad.stderr
    assert "FAIL randread.iops >= 100M: measured" in bad.stdout
    assert "FAIL randread.read.clat.p99.9 < 1ns: measured" in bad.stdout
    assert "2 check(s) failed" in bad.stderr
    # a figure as `history --metric` names it (read.clat_p99): the same figure
    named = run_cli("check", "last", "--assert", "randread.read.clat_p99 < 1s", "--assert",
                    "randread.read.clat.p99 < 1s", "--assert", "randread.lat_mean < 1s",
                    db=store_path)
    assert named.returncode == 0, named.stdout + named.stderr
    measured = re.findall(r"^PASS randread\.read\.clat[._]p99 < 1s: measured (.+)$",
                          named.stdout, re.M)
    assert len(measured) == 2 and measured[0] == measured[1], named.stdout
    assert "PASS randread.lat_mean < 1s" in named.stdout
    missing = run_cli("check", "last", "--assert", "nosuch.iops > 1", db=store_path)
    assert missing.returncode == 3 and "has no test 'nosuch'" in missing.stdout
    syntax = run_cli("check", "last", "--assert", "randread iops big", db=store_path)
    assert syntax.returncode == 2 and "cannot read the assertion" in syntax.stderr
    unit = run_cli("check", "last", "--assert", "randread.p99 < 10", db=store_path)
    assert unit.returncode == 2 and "does not fit a latency figure" in unit.stderr
    # syntax errors are caught before any I/O
    early = run_cli("run", str(tmpfs), "--assert", "what", db=store_path)
    assert early.returncode == 2 and "Run #" not in early.stdout


@pytest.mark.parametrize("text, said", [
    ("nosuch.iops > 1", "the run has no test 'nosuch' (its tests: randread)"),
    ("randread.foo > 1", "unknown figure 'foo'"),
    ("randread.fdatasync.iops > 1", "unknown figure 'iops'"),
    ("randread.p99 < 10", "no unit does not fit a latency figure"),
    ("randread.bw > 1ms", "ms does not fit a bw figure"),
])
def test_an_assertion_no_run_could_pass_is_refused_before_any_io(tmpfs, tmp_path, store_path,
                                                                 text, said):
    """A typo in a CI gate is said at once (exit 2), not after the whole suite ran (it was
    exit 3 then, the run stored)."""
    proc = run_cli("run", str(tmpfs), "--job", job(tmp_path), "--assert", "randread.iops > 1",
                   "--assert", text, db=store_path)
    assert proc.returncode == 2 and said in proc.stderr, proc.stdout + proc.stderr
    assert "Run #" not in proc.stdout and list(tmpfs.iterdir()) == []
    assert "No runs stored" in run_cli("list", db=store_path).stderr


def test_a_kinds_own_answers_are_assertions_before_the_run(tmp_path):
    """An application's estimate (postgresql.tps) and a curve's answer are not tests of
    the plan: they pass the check before the run, which judges them when they exist."""
    from storbench.pipeline.loop import plan_run
    from storbench.pipeline.spec import RunSpec
    from storbench.target.files import FilesStorage
    from storbench.target.here import HereTarget

    spec = RunSpec(suite="postgresql", assertions=("postgresql.tps >= 1",
                                                   "postgresql.commit_p99 < 5ms"))
    assert plan_run(spec, HereTarget(FilesStorage(str(tmp_path)))).plan.tests
    with pytest.raises(ConfigError, match="no test 'mysql'"):
        plan_run(RunSpec(suite="postgresql", assertions=("mysql.tps >= 1",)),
                 HereTarget(FilesStorage(str(tmp_path))))


def test_assertion_needs_direction_for_mixed_tests(tmpfs, tmp_path, store_path):
    text = READ3.replace("rw=randread", "rw=randrw")
    run_cli("run", str(tmpfs), "--job", job(tmp_path, text), "--runtime", "1", db=store_path)
    proc = run_cli("check", "last", "--assert", "randread.iops > 1", db=store_path)
    assert proc.returncode == 2 and "randread.read.iops" in proc.stderr
    ok = run_cli("check", "last", "--assert", "randread.write.iops > 1", db=store_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_baseline_regression_gates_ci(throttled, tmp_path, store_path):
    path = job(tmp_path)
    fast = run_cli_wrapped(throttled.wrap, "run", str(throttled.mnt), "--job", path,
                           "-l", "fast", db=store_path)
    assert fast.returncode == 0, fast.stderr
    throttled.set_limits(1500, 3000)
    slow = run_cli_wrapped(throttled.wrap, "run", str(throttled.mnt), "--job", path,
                           "--baseline", "fast", "--max-regression", "10%", db=store_path)
    assert slow.returncode == 3, slow.stdout + slow.stderr
    assert "WORSE randread read IOPS" in slow.stdout
    pattern = (r"randread read IOPS: 1,[45]\d\d IOPS vs [23],\d{3} IOPS in fast:"
               r" (4[5-9]|5[0-5])\.\d% worse")
    assert re.search(pattern, slow.stdout), slow.stdout
    throttled.set_limits(3000, 3000)
    again = run_cli_wrapped(throttled.wrap, "run", str(throttled.mnt), "--job", path,
                            "--baseline", "fast", db=store_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ok randread read IOPS" in again.stdout
    # and later, from the store alone
    assert run_cli("check", "2", "--baseline", "1", db=store_path).returncode == 3
    assert run_cli("check", "3", "--baseline", "fast", db=store_path).returncode == 0


def test_rate_only_where_it_means_something(tmpfs, store_path):
    proc = run_cli("run", str(tmpfs), "--suite", "quick", "--rate", "150", db=store_path)
    assert proc.returncode == 2 and "--rate applies to" in proc.stderr


def test_etcd_profiles_and_threshold(tmpfs, store_path):
    proc = run_cli("run", str(tmpfs), "--suite", "etcd", "--size", "1m", "--profile",
                   "openshift", db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "PASS etcd.fdatasync.p99 < 20ms" in proc.stdout and "OpenShift" in proc.stdout
    bad = run_cli("run", str(tmpfs), "--suite", "etcd", "--profile", "nope", db=store_path)
    assert bad.returncode == 2 and "upstream, openshift" in bad.stderr


@needs_timing  # a capped volume of its own
def test_etcd_open_loop_rate_on_a_capped_volume(tmp_path, store_path):
    from tests.testbed import Throttled, missing_for_throttled

    if (reason := missing_for_throttled()) is not None:
        pytest.skip(reason)
    with Throttled(read_iops=600, write_iops=600, backing_dir="/dev/shm") as capped:
        proc = run_cli_wrapped(capped.wrap, "run", str(capped.mnt), "--suite", "etcd",
                               "--size", "2m", "--rate", "150", db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = last(store_path)
    by_name = {t["name"]: t for t in run["tests"]}
    closed = by_name["etcd"]["sync"]["lat"]["percentiles_ns"]["99.0"]
    rated = by_name["etcd_rated"]["sync"]["lat"]["percentiles_ns"]["99.0"]
    # closed loop: as fast as the cap allows (each write and its journal flush count)
    assert 150 * 1.5 < by_name["etcd"]["write"]["iops"] < 600
    assert by_name["etcd_rated"]["write"]["iops"] == pytest.approx(150, rel=0.1)
    assert rated < closed  # the closed loop measures the throttle's queue
    assert "etcd_rated.fdatasync.p99 < 10ms" in proc.stdout
    assert "open loop at 150 writes/s" in proc.stdout


@pytest.mark.parametrize("text, test, path", [
    ("etcd.fdatasync.p99 < 10ms", "etcd", "fdatasync.p99"),
    ("seqread.bw > 100MiB/s", "seqread", "bw"),
    ("read_latency.read.lat.mean <= 500us", "read_latency", "read.lat.mean"),
])
def test_assertion_parse(text, test, path):
    a = Assertion.parse(text)
    assert (a.test, a.path) == (test, path)


def test_assertion_parse_errors():
    with pytest.raises(ConfigError, match="cannot read"):
        Assertion.parse("iops > 3")


def test_a_test_of_the_same_name_and_another_workload_is_never_better_or_worse(
        tmpfs, tmp_path, store_path):
    """Two runs whose 'randread' read 4 KiB and 64 KiB blocks: compare said '0.30 × …
    (worse)' and `--baseline` judged the storage by it. The ratio stays, said to be of
    another workload; the gate fails on it, saying why (not 'x% worse')."""
    small = run_cli("run", str(tmpfs), "--job", job(tmp_path), "--runtime", "1", "-l", "4k",
                    db=store_path)
    assert small.returncode == 0, small.stderr
    big = READ3.replace("bs=4k", "bs=64k")
    gated = run_cli("run", str(tmpfs), "--job", job(tmp_path, big, "big.fio"), "--runtime",
                    "1", "-l", "64k", "--baseline", "4k", "--max-regression", "99%",
                    db=store_path)
    assert gated.returncode == 3, gated.stdout + gated.stderr
    assert ("UNLIKE randread read IOPS: another workload than 4k's (bs 64.0 KiB vs 4.0 KiB):"
            " no baseline for it") in gated.stdout
    assert "another workload than #1's (bs 64.0 KiB vs 4.0 KiB)" in gated.stderr
    said = " ".join(run_cli("compare", "4k", "64k", "-b", "4k", db=store_path).stdout.split())
    assert "× the randread read IOPS of 4k (another workload) — caveats: 64k: another" \
           " workload than 4k's: bs 64.0 KiB vs 4.0 KiB" in said, said
    assert "(worse)" not in said and "(better)" not in said, said
    doc = json.loads(run_cli("compare", "4k", "64k", "-b", "4k", "--json",
                             db=store_path).stdout)
    assert "another workload than 4k's: bs 64.0 KiB vs 4.0 KiB" in doc["comparison"][
        "rows"][1]["caveats"][0]
    # the same job file again: alike, judged as ever
    again = run_cli("run", str(tmpfs), "--job", job(tmp_path), "--runtime", "1",
                    "--baseline", "4k", "--max-regression", "99%", db=store_path)
    # judged as ever: passed, or worse by its figures (tmpfs' microsecond p99 doubled
    # under a loaded machine's load: 86.5 µs against 39.2), never "another workload"
    assert again.returncode == 0 or (again.returncode == 3 and "% worse than #1" in
                                     again.stderr), again.stdout + again.stderr
    assert "UNLIKE" not in again.stdout and "another workload" not in run_cli(
        "compare", "4k", "last", "-b", "4k", db=store_path).stdout
