"""A user's job file whose jobs fio reports together or leaves out of its report, run by
storbench on real fio: each test counts the jobs fio ran for it, and a job fio keeps no
figures of (stats=0) is no test."""

from __future__ import annotations

import json
import sqlite3

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


def test_a_job_fio_keeps_no_figures_of_is_no_test(tmp_path):
    """A job with stats=0 (a load beside the one measured): fio writes an empty entry for
    it (no job name, group -1), which failed the run as "fio's job '' did no I/O"."""
    tests, _ = _run(tmp_path, "[a]\nrw=randread\n[load]\nrw=randwrite\nstats=0\n")
    assert [t["name"] for t in tests] == ["a"]
    assert tests[0]["jobs"] == 1 and tests[0]["read"]["iops"] > 0
