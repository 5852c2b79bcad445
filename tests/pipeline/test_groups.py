"""A user's job file whose jobs fio reports together or leaves out of its report, run by
storbench on real fio: each test counts the jobs fio ran for it, a job fio keeps no
figures of (stats=0) is no test, reads and writes are reported apart, and tail latency
is measured whatever the job file says."""

from __future__ import annotations

import json
import sqlite3

import pytest

from storbench.result.fio_json import job_entries, load_fio_json
from tests.conftest import needs_fio, run_cli

pytestmark = needs_fio

GLOBAL = "[global]\nioengine=psync\nsize=8m\nbs=4k\ntime_based\nruntime=1\n"


def _run(tmp_path, text):
    (tmp_path / "target").mkdir()
    job = tmp_path / "mine.fio"
    job.write_text(GLOBAL + text)
    db = tmp_path / "sb.db"
    done = run_cli("run", str(tmp_path / "target"), "--job", str(job), db=db)
    assert done.returncode == 0, done.stderr
    shown = json.loads(run_cli("show", "last", "--json", db=db).stdout)
    with sqlite3.connect(db) as conn:
        (raw,) = conn.execute("SELECT raw_json FROM invocations").fetchone()
    return shown["tests"], job_entries(load_fio_json(raw))


def test_two_sections_fio_reports_as_one_group_are_their_four_jobs(tmp_path):
    """group_reporting over two sections of 2 jobs each: fio's one entry, "a", holds all
    4 (it was counted as a's 2, with half of their CPU: fio gives a group's CPU as one
    job's share)."""
    tests, entries = _run(tmp_path, "group_reporting\n[a]\nrw=randread\nnumjobs=2\n"
                                    "[b]\nrw=randwrite\nnumjobs=2\n")
    (entry,) = entries
    (test,) = tests
    assert test["name"] == "a" and test["jobs"] == 4
    assert test["read"] and test["write"]  # b's writes are in a's entry, as fio gives them
    assert test["usr_cpu_percent"] == pytest.approx(4 * entry["usr_cpu"], rel=1e-3)
    assert test["sys_cpu_percent"] == pytest.approx(4 * entry["sys_cpu"], rel=1e-3)


def test_a_job_fio_keeps_no_figures_of_is_no_test(tmp_path):
    """A job with stats=0 (a load beside the one measured): fio writes an empty entry for
    it (no job name, group -1), which failed the run as "fio's job '' did no I/O"."""
    tests, _ = _run(tmp_path, "[a]\nrw=randread\n[load]\nrw=randwrite\nstats=0\n")
    assert [t["name"] for t in tests] == ["a"]
    assert tests[0]["jobs"] == 1 and tests[0]["read"]["iops"] > 0


def test_until_steady_reports_each_job_as_its_own_test(tmp_path):
    """--until-steady groups a job's clones (group_reporting) so that fio judges them
    together; fio then joined them to the job before it: `[a] randread [b] randwrite
    numjobs=2` was one test "a" of 3 jobs, with b's writes as its own, and no b."""
    (tmp_path / "target").mkdir()
    job = tmp_path / "mine.fio"
    job.write_text("[global]\nioengine=psync\nsize=8m\nbs=4k\nrate_iops=400\n"
                   "[a]\nrw=randread\n[b]\nrw=randwrite\nnumjobs=2\n")
    db = tmp_path / "sb.db"
    done = run_cli("run", str(tmp_path / "target"), "--job", str(job), "--until-steady",
                   "--steady-window", "2", db=db)
    assert done.returncode == 0, done.stderr
    tests = {t["name"]: t for t in json.loads(run_cli("show", "last", "--json",
                                                      db=db).stdout)["tests"]}
    assert sorted(tests) == ["a", "b"]
    assert tests["a"]["jobs"] == 1 and tests["a"]["write"] is None
    assert tests["b"]["jobs"] == 2 and tests["b"]["read"] is None
    # (each paced at 400 IOPS a job: b's two 800)
    assert tests["b"]["write"]["iops"] == pytest.approx(800, rel=0.2)


def test_a_job_file_asking_for_one_mixed_report_is_reported_read_and_write(tmp_path):
    """unified_rw_reporting=1 makes fio report reads and writes as one "mixed" direction,
    which storbench does not read: the run failed as "fio's job 'a' did no I/O". It is
    left out of the job file (as gtod_reduce is), and both directions are shown."""
    tests, _ = _run(tmp_path, "[a]\nrw=randrw\nunified_rw_reporting=1\n")
    assert tests[0]["read"]["iops"] > 0 and tests[0]["write"]["iops"] > 0


@pytest.mark.parametrize("dropping", ["clat_percentiles=0", "disable_clat=1"])
def test_a_job_file_that_would_drop_tail_latency_is_measured_with_it(dropping, tmp_path):
    """Options that drop latency are left out, as gtod_reduce is: the test had IOPS and
    empty latency columns (no p99: tail latency always)."""
    tests, _ = _run(tmp_path, f"[a]\nrw=randread\n{dropping}\n")
    clat = tests[0]["read"]["clat"]
    assert clat["mean_ns"] > 0 and clat["percentiles_ns"]["99.0"] > 0


def test_what_is_left_out_of_a_job_file_is_said_as_the_run_starts(tmp_path):
    """The options left out (latency, its tail, one mixed report) were left out silently:
    the run says which, in which section and why, naming options and sections only (an
    included file's text is never quoted); a job file with none of them is not told so."""
    (tmp_path / "target").mkdir()
    (tmp_path / "inc.fio").write_text("[c]\nrw=read\nclat_percentiles=0\n")
    job = tmp_path / "mine\x1b[2J.fio"
    job.write_text(GLOBAL + "gtod_reduce=1\n[a]\nrw=randread\ndisable_lat=1\n"
                   "[b]\nrw=randrw\nunified_rw_reporting=both\ninclude inc.fio\n")
    db = tmp_path / "sb.db"
    done = run_cli("run", str(tmp_path / "target"), "--job", str(job), db=db)
    assert done.returncode == 0, done.stderr
    said = [ln for ln in (done.stdout + done.stderr).splitlines() if "left out" in ln]
    assert len(said) == 1, done.stdout + done.stderr
    assert said[0].startswith("mine\\x1b[2J.fio: left out of the job file as fio runs it:")
    for part in ("gtod_reduce in [global] (it drops latency)",
                 "disable_lat in [a] (it drops latency)",
                 "unified_rw_reporting in [b] (storbench reads fio's reads and writes apart)",
                 "clat_percentiles in a section of"):
        assert part in said[0], said
    assert "=both" not in said[0] and "=1" not in said[0]
    plain = tmp_path / "plain.fio"
    plain.write_text(GLOBAL + "[a]\nrw=randread\n")
    done = run_cli("run", str(tmp_path / "target"), "--job", str(plain), db=db)
    assert done.returncode == 0 and "left out" not in done.stdout + done.stderr
