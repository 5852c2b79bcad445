"""Runs stored by an older storbench read the same today.

tests/data/old-runs/ holds a results database written by storbench at commit b834774,
the last before kinds of run became a contract (pipeline/kinds/, result/sections.py:
nothing of a run's stored data was migrated then), and what that version printed of
it (scripts/record-old-runs made both, with real fio). Six runs: the quick suite, the
quick suite with --repeat 2, a curve, an --until-steady run that version failed, and on
the Kubernetes test-bed a `k8s lifecycle` (two volumes) and a `k8s failover` run.
Today's storbench opens the database (upgrading its schema), and `show` and `list`
print those runs exactly as that version did; `export` holds the same data (keys added
since aside); `report` draws them."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

OLD = Path(__file__).resolve().parent.parent / "data" / "old-runs"
RUNS = tuple(range(1, 7))
PLAIN = {"COLUMNS": ""}  # as it was printed: not a terminal, no width given


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    db.write_bytes(gzip.decompress((OLD / "runs.db.gz").read_bytes()))
    return db


# what today's storbench says differently by design, per run: (then, now), ...
GROUPED = ("): 5 tests (", "): each of 5 tests (")  # a test's words said of several
RELABELLED = {1: [("lat mean [µs]", "clat mean [µs]"), GROUPED],  # the column was always
              2: [("lat mean [µs]", "clat mean [µs]"), GROUPED],  # clat's mean: fio's "lat"
              3: [GROUPED],                                          # adds slat to it
              5: [("PVC created (WaitForFirstConsumer: node chosen) → Bound",  # fed9b89: the
                   "node chosen for the pod → Bound (WaitForFirstConsumer)"),  # bind row
                  # its fio issued no sync (--fsync=1 syncs before a next write): not durable
                  ("first durable 4 KiB write",
                   "first 4 KiB write, not durable (an earlier storbench did not time its"
                   " sync)")],
              6: [("Failover on local-hostpath",  # 3d78c24: the title names the access mode
                   "Failover on local-hostpath (ReadWriteOnce)")]}


def cells(text: str) -> list[list[str]]:
    """A printed text's lines, a table's rows as their cells (borders and the padding
    that a cell's width gives left out)."""
    rows = []
    for line in text.splitlines():
        if line[:1] in "┏┡└┌├╭╰" or not line.strip():
            continue
        rows.append([c.strip() for c in re.split("[│┃]", line)] if line[:1] in "│┃"
                    else [line.strip()])
    return rows


# a line today's `show` adds beneath a kind's section: the names its answers go by
NAMED = "for --assert and check: "


def test_old_runs_are_shown_as_their_version_showed_them(old_db):
    for run in RUNS:
        proc = run_cli("show", str(run), db=old_db, env=PLAIN)
        assert proc.returncode == 0, proc.stderr
        if run in (3, 5, 6):  # a curve, a lifecycle, a failover: what --assert names
            named = [line for line in proc.stdout.splitlines() if line.startswith(NAMED)]
            assert len(named) == 1, proc.stdout
            proc.stdout = proc.stdout.replace(named[0] + "\n", "")
        then = (OLD / f"show-{run}.txt").read_text()
        if run not in RELABELLED:
            assert proc.stdout == then, f"show {run}"
            continue
        for was, now in RELABELLED[run]:  # the same cells, these labels aside
            assert was in then and now in proc.stdout
            then = then.replace(was, now)
        assert cells(proc.stdout) == cells(then), f"show {run}"
    listed = run_cli("list", db=old_db, env=PLAIN)
    assert listed.stdout == (OLD / "list.txt").read_text()
    # what the four are: a curve's answer and a failed run's error among them
    assert "IOPS at p99<=2ms" in (OLD / "show-3.txt").read_text()
    assert "status=failed" in (OLD / "show-4.txt").read_text()
    assert "Lifecycle of local-hostpath" in (OLD / "show-5.txt").read_text()
    assert "k8s-failover" in (OLD / "show-6.txt").read_text()


def _without_new_keys(now: Any, then: Any) -> Any:
    """``now`` with only the keys ``then`` has (at every depth)."""
    if isinstance(now, dict) and isinstance(then, dict):
        return {k: _without_new_keys(v, then[k]) for k, v in now.items() if k in then}
    if isinstance(now, list) and isinstance(then, list) and len(now) == len(then):
        return [_without_new_keys(a, b) for a, b in zip(now, then, strict=True)]
    return now


def test_old_runs_export_the_same_data(old_db):
    then = json.loads(gzip.decompress((OLD / "export.json.gz").read_bytes()))
    proc = run_cli("export", *map(str, RUNS), "--format", "json", db=old_db)
    assert proc.returncode == 0, proc.stderr
    now = json.loads(proc.stdout)
    # a run that did not complete says so first among its caveats (new since they were
    # recorded: their failed run #4 was a row of blank cells in a comparison)
    said = now["comparison"]["rows"][3]["run_caveats"]
    assert said[0].startswith("run failed: ") and then["comparison"]["rows"][3]["run_caveats"] \
        == said[1:]
    now["comparison"]["rows"][3]["run_caveats"] = said[1:]
    assert _without_new_keys(now, then) == then
    assert len(now["runs"]) == len(RUNS) and now["runs"][2]["data"]["curve"]
    assert len(now["runs"][4]["data"]["lifecycle"]["volumes"]) == 2
    assert now["runs"][5]["data"]["failover"]


def test_old_runs_are_reported(old_db, tmp_path):
    out = tmp_path / "r.html"
    proc = run_cli("report", "1", "2", "3", "-o", str(out), db=old_db)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert all(label in html for label in ("plain", "twice", "curve"))
    assert "IOPS-latency curve" in html


def test_old_kubernetes_runs_are_reported(old_db, tmp_path):
    """The lifecycle run's timeline (2 volumes x 4 phases) and the failover's pause, as
    the report draws them from runs stored before kinds became a contract."""
    out = tmp_path / "k.html"
    proc = run_cli("report", "5", "6", "-o", str(out), db=old_db)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert html.count("<rect") == 2 * 4
    assert "Running → first write done" in html
    assert "pause: last acknowledged write → first write after" in html
    compared = run_cli("compare", "5", "6", db=old_db)
    assert compared.returncode == 0, compared.stderr
    assert "failover pause" in compared.stdout


def test_a_large_old_store_says_why_it_pauses_before_its_migrations(old_db, capsys,
                                                                     monkeypatch):
    """Migrations that fill a table take seconds at 100,000 runs: before them, a line on
    stderr (stdout stays the command's). Said for a store of LARGE_STORE runs or more
    (here made 6, the old store's), never for a smaller one, nor once migrated."""
    from storbench.store import migrations
    from storbench.store.sqliteopen import open_sqlite

    monkeypatch.setattr(migrations, "LARGE_STORE", 6)
    open_sqlite(str(old_db)).close()
    said = capsys.readouterr()
    assert said.out == ""
    assert f"bringing the results database {old_db} up to this storbench" in said.err
    assert "6 runs): once, a few seconds" in said.err and "0012_result_figures" in said.err
    open_sqlite(str(old_db)).close()  # migrated: nothing to say
    assert capsys.readouterr().err == ""
    proc = run_cli("list", db=gzip_copy(old_db.parent / "again.db"))  # 6 < 10,000 runs
    assert proc.returncode == 0 and "bringing" not in proc.stderr, proc.stderr


def gzip_copy(to: Path) -> Path:
    to.write_bytes(gzip.decompress((OLD / "runs.db.gz").read_bytes()))
    return to
