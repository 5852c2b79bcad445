"""Runs stored by an older storbench read the same today.

tests/data/old-runs/ holds a results database written by storbench at commit b834774,
the last before kinds of run became a contract (pipeline/kinds/, result/sections.py:
nothing of a run's stored data was migrated then), and what that version printed of
it (scripts/record-old-runs made both, with real fio). Four runs: the quick suite, the
quick suite with --repeat 2, a curve, and an --until-steady run that version failed.
Today's storbench opens the database (upgrading its schema), and `show` and `list`
print those runs exactly as that version did; `export` holds the same data (keys added
since aside); `report` draws them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

OLD = Path(__file__).resolve().parent.parent / "data" / "old-runs"
PLAIN = {"COLUMNS": ""}  # as it was printed: not a terminal, no width given


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    db.write_bytes(gzip.decompress((OLD / "runs.db.gz").read_bytes()))
    return db


def test_old_runs_are_shown_as_their_version_showed_them(old_db):
    for run in (1, 2, 3, 4):
        proc = run_cli("show", str(run), db=old_db, env=PLAIN)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == (OLD / f"show-{run}.txt").read_text(), f"show {run}"
    listed = run_cli("list", db=old_db, env=PLAIN)
    assert listed.stdout == (OLD / "list.txt").read_text()
    # what the four are: a curve's answer and a failed run's error among them
    assert "IOPS at p99<=2ms" in (OLD / "show-3.txt").read_text()
    assert "status=failed" in (OLD / "show-4.txt").read_text()


def _without_new_keys(now: Any, then: Any) -> Any:
    """``now`` with only the keys ``then`` has (at every depth)."""
    if isinstance(now, dict) and isinstance(then, dict):
        return {k: _without_new_keys(v, then[k]) for k, v in now.items() if k in then}
    if isinstance(now, list) and isinstance(then, list) and len(now) == len(then):
        return [_without_new_keys(a, b) for a, b in zip(now, then, strict=True)]
    return now


def test_old_runs_export_the_same_data(old_db):
    then = json.loads(gzip.decompress((OLD / "export.json.gz").read_bytes()))
    proc = run_cli("export", "1", "2", "3", "4", "--format", "json", db=old_db)
    assert proc.returncode == 0, proc.stderr
    now = json.loads(proc.stdout)
    assert _without_new_keys(now, then) == then
    assert len(now["runs"]) == 4 and now["runs"][2]["data"]["curve"]


def test_old_runs_are_reported(old_db, tmp_path):
    out = tmp_path / "r.html"
    proc = run_cli("report", "1", "2", "3", "-o", str(out), db=old_db)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert all(label in html for label in ("plain", "twice", "curve"))
    assert "IOPS-latency curve" in html
