"""A series' figures read in SQL (`storbench history` reads no whole result): the same
values as the figures of the result loaded whole, from real fio output, on SQLite and on
a real PostgreSQL; and the cache of change points between commands."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from storbench.analysis import history as hist
from storbench.analysis.changepoints import find_changes
from storbench.analysis.metrics import metric, value
from storbench.store import Store
from storbench.store.changes import KEEP, ChangeCache
from storbench.store.schema import FIGURES
from storbench.store.series import every_series_values, series_runs, series_values, set_series
from tests.analysis.test_ahead import _gone, two_cpus
from tests.store.test_sqlite import add_run

# every kind of figure and place a path reaches: counts, bandwidth, each latency's
# statistics, percentiles with and without a decimal, sync latency, absent directions
KEYS = ["read.iops", "write.bw", "trim.iops", "read.clat_p99", "write.clat_p99.9",
        "read.lat_mean", "write.clat_stdev", "read.clat_min", "read.clat_max",
        "write.slat_p50", "sync.lat_p99", "sync.lat_mean", "read.clat_p42",
        # and each headline figure, read from its own column
        "read.bw", "write.iops", "write.clat_p99", "trim.bw", "trim.clat_p99"]


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None
                                         and math.isclose(a, b, rel_tol=1e-12))


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, store_path):
    s = Store(request.getfixturevalue("postgres_db") if request.param == "postgresql"
              else store_path)
    yield s
    s.close()


def test_figures_read_in_sql_are_the_results_figures(any_store, fio_json_text):
    ids = [add_run(any_store, fio_json_text, label=str(i)) for i in range(3)]
    failed = add_run(any_store, fio_json_text, label="failed", status="failed")
    set_series(any_store, [*ids, failed], "s")
    metrics = [metric(k) for k in KEYS]
    rows = series_values(any_store, "s", hist.figure_paths(metrics))
    assert [r[0] for r in rows] == ids  # completed runs only, oldest first, one result each
    assert series_runs(any_store, "s") == ids
    results = any_store.get_run(ids[0]).tests
    for (_, _, test, *values), t in zip(rows, [results[0]] * 3, strict=True):
        assert test == t.result.name and values[0] == 0
        for m, v in zip(metrics, values[1:], strict=True):
            assert _same(value(t.result, m), v), (m.key, value(t.result, m), v)
    expected = [value(results[0].result, m) for m in metrics]
    assert sum(v is not None for v in expected) >= 9  # the test is no empty one
    assert series_values(any_store, "s", hist.figure_paths(metrics), test="other") == []
    # and what each run ran, last: the same rows with it
    ran = series_values(any_store, "s", hist.figure_paths(metrics), workload=True)
    assert [r[:-1] for r in ran] == rows and {r[-1] for r in ran} == {"quick:mix"}


def test_every_figure_a_suite_names_and_every_headline_one_has_a_column():
    """History reads these from result_figures' columns; any other from the result."""
    from storbench.analysis.metrics import headline_metrics, value_path
    from storbench.result.model import DIRECTIONS
    from storbench.workload.suites import SUITES

    named = {k for suite in SUITES.values() for t in suite.tests for k in t.metrics}
    wanted = {value_path(metric(k)) for k in named} | {
        value_path(m) for m in headline_metrics(DIRECTIONS, True)}
    assert len(named) > 10 and wanted <= set(FIGURES.values())
    assert set(hist.figure_paths(hist.candidates(None))) <= set(FIGURES.values())


def test_a_path_is_never_sql(store_path):
    s = Store(store_path)
    with pytest.raises(ValueError, match="not a path"):
        series_values(s, "s", [("read", "iops') FROM runs; --",)])


def _at(doc: dict, path: tuple[str, ...]) -> object:
    for key in path:
        doc = (doc or {}).get(key)
    return doc


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_each_result_keeps_its_figures_also_those_stored_before(dialect, request, store_path,
                                                                 fio_json_text):
    """A result's figures (every figure a suite names, and the headline ones) are kept in
    columns as it is stored (and copied), immutable, gone with their run; a database made
    before they were kept gets them for every result it holds as it is opened."""
    where = (request.getfixturevalue("postgres_db") if dialect == "postgresql"
             else store_path)
    s = Store(where)
    ids = [add_run(s, fio_json_text, label=str(i)) for i in range(2)]
    set_series(s, ids, "s")
    metrics = [metric(k) for k in KEYS]
    before = series_values(s, "s", hist.figure_paths(metrics))
    # as a database made before 0012 was: no figures kept
    s.db.execute("DROP TABLE result_figures", ())
    s.db.execute("DROP INDEX runs_when", ())
    s.db.execute("DELETE FROM schema_migrations WHERE name = '0012_result_figures'", ())
    s.close()
    s = Store(where)
    assert series_values(s, "s", hist.figure_paths(metrics)) == before
    ids.append(add_run(s, fio_json_text, label="new"))
    stored = s.db.execute(f"SELECT res.result, f.test, f.host, f.workload, {', '.join(FIGURES)}"
                          " FROM results res JOIN result_figures f ON f.run_id = res.run_id"
                          " AND f.ordinal = res.ordinal ORDER BY res.id", ()).fetchall()
    assert len(stored) == 3 * len(s.get_run(ids[0]).tests)
    found = 0
    for result, test, host, workload, *figures in stored:
        whole = json.loads(result)
        assert whole["name"] == test and host == "" and workload == "quick:mix"
        for (name, path), v in zip(FIGURES.items(), figures, strict=True):
            assert _same(_at(whole, path), v), (name, _at(whole, path), v)
            found += v is not None
    assert found >= 8 * len(stored)  # the test is no empty one
    with pytest.raises(Exception, match="immutable"):
        s.db.execute("UPDATE result_figures SET test = 'x'", ())
    s.delete_run(ids[-1])
    assert s.db.execute("SELECT count(*) FROM result_figures WHERE run_id = ?",
                        (ids[-1],)).fetchone()[0] == 0
    s.close()


def test_an_answer_is_kept_and_reused(tmp_path):
    cache = ChangeCache(tmp_path / "changes")
    values = [100.0] * 10 + [60.0] * 10
    runs = list(range(101, 121))
    found = find_changes(values, runs, True, cache=cache)
    assert [c.run for c in found] == [111]
    [kept] = list(cache.root.iterdir())
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    # the answer kept is the one given (planted here: the detector is not asked again)
    kept.write_text(json.dumps([[3, 1.0, 2.0, 0.5, True]]))
    [again] = find_changes(values, runs, True, cache=cache)
    assert (again.index, again.run, again.after) == (3, 104, 2.0)
    # another question (one more run) is another answer
    assert [c.run for c in find_changes([*values, 61.0], [*runs, 121], True,
                                              cache=cache)] == [111]


def test_an_answer_anyone_could_plant_is_not_read(tmp_path):
    root = tmp_path / "changes"
    cache = ChangeCache(root)
    values = [100.0] * 10 + [60.0] * 10
    find_changes(values, list(range(20)), True, cache=cache)
    [kept] = list(root.iterdir())
    kept.write_text(json.dumps([]))
    os.chmod(root, 0o777)
    assert [c.index for c in find_changes(values, list(range(20)), True,
                                               cache=cache)] == [10]
    assert kept.read_text() == "[]"  # nor written there


def test_the_oldest_answers_go(tmp_path):
    ChangeCache(tmp_path / "changes").put("k0", [])  # the cache makes its directory
    root = tmp_path / "changes"
    os.utime(root / "k0", (0, 0))
    for i in range(1, KEEP):  # answers kept earlier (by other commands)
        (root / f"k{i}").write_text("[]")
        os.utime(root / f"k{i}", (i, i))
    cache = ChangeCache(root)  # a command's: it lists the directory once
    cache.put(f"k{KEEP}", [])  # one more than it keeps
    left = sorted(p.name for p in root.iterdir())
    assert len(left) <= KEEP and "k0" not in left and f"k{KEEP}" in left
    # and it goes on counting what it keeps: past KEEP again, the oldest go again
    for i in range(KEEP + 1, KEEP + 1 + KEEP - len(left) + 1):
        cache.put(f"k{i}", [])
    again = {p.name for p in root.iterdir()}
    assert len(again) <= KEEP and f"k{KEEP}" in again and not again & {f"k{KEEP // 2}"}


def test_an_answer_superseded_goes_from_a_full_directory(tmp_path):
    """An answer to the same question about a series with a run more takes the place of
    the one before (kept under keys QUESTION-DIGEST), however many answers are kept."""
    root = tmp_path / "changes"
    ChangeCache(root).put("qa-1", [1], superseding="qa")
    for i in range(2000):
        (root / f"qother{i}-x").write_text("[]")
    ChangeCache(root).put("qb-1", [1], superseding="qb")
    cache = ChangeCache(root)
    cache.put("qa-2", [2], superseding="qa")
    cache.put("qa-3", [3], superseding="qa")  # twice in one command
    names = {p.name for p in root.iterdir()}
    assert {"qa-3", "qb-1"} <= names and not names & {"qa-1", "qa-2"}
    assert len(names) == 2002


def test_a_run_named_twice_joins_a_series_once(any_store, fio_json_text):
    """`storbench series s 4 4` was the database's "UNIQUE constraint failed"."""
    run = add_run(any_store, fio_json_text)
    set_series(any_store, [run, run], "s")
    assert series_runs(any_store, "s") == [run]


def _plans(store, query_of):
    """SQLite's plan of each query of a series ``query_of()`` makes: {query: plan}."""
    import sqlite3

    seen: list[str] = []
    db = store.db
    assert isinstance(db, sqlite3.Connection)
    db.set_trace_callback(seen.append)
    try:
        query_of()
    finally:
        db.set_trace_callback(None)
    return {q: " ".join(str(r[3]) for r in db.execute(f"EXPLAIN QUERY PLAN {q}"))
            for q in seen if "run_series s" in q}


def test_a_series_is_read_from_the_index_its_size_wants(store_path):
    """A series that is most of the store is read from the runs_digest index (no runs
    row read: 100,000 runs' rows, each with its environment, took 0.1 s of every
    `history` answer); one that is a small part of it from its own rows of
    run_series (a series of 2,000 runs among 100,000 read the store's index whole: 44 ms
    of each, 2 s of `history` over 50 series). Both give the same runs in the same order
    as the series were filled."""
    from pathlib import Path

    from storbench.store.series import series_last

    recorded = (Path(__file__).parent.parent / "data" / "fio" / "randread.json").read_text()
    store = Store(store_path)
    try:
        ids = [add_run(store, recorded, label=str(i)) for i in range(8)]
        small, big = ids[2:4], [*ids[:2], *ids[4:]]  # 2 of 8 runs (a third or less), 6
        set_series(store, small, "small")
        set_series(store, big, "big")
        paths = hist.figure_paths([metric("read.iops")])
        for name, runs, index in (("big", big, "COVERING INDEX runs_digest"),
                                  ("small", small, "COVERING INDEX run_series_name")):
            plans = _plans(store, lambda n=name: (
                series_values(store, n, paths), series_runs(store, n),
                series_last(store, n)))  # (series_sections: the test below)
            assert len(plans) == 3 and all(p.startswith(f"SEARCH {'r' if name == 'big' else 's'}"
                                                        f" USING {index}")
                                           for p in plans.values()), plans
            # and a small series' runs' rows are not read: the runs_of_id index holds all
            # its questions need (its rows, each with its environment, are most of a store)
            assert name == "big" or all("SEARCH r USING COVERING INDEX runs_of_id" in p
                                        for p in plans.values()), plans
            assert series_runs(store, name) == runs and series_last(store, name) == runs[-1]
            assert [r[0] for r in series_values(store, name, paths)] == runs
    finally:
        store.close()


@pytest.mark.parametrize("elsewhere", [1, 12])
def test_a_series_sections_are_the_same_whichever_way_they_are_read(store_path, elsewhere):
    """series_sections reads the rows of its keys of run_data from their index, each
    looked up in the series, when the store holds no more of them than the series has
    runs (a store of measured runs: each keeps its phases and the host's load there
    too); else each of the series' runs is looked up in run_data. The same sections in
    the same order either way, and no other key's."""
    from storbench.store.series import series_sections

    store = Store(store_path)
    try:
        def run(i: int, data: dict) -> int:
            rid = store.begin_run(uid=f"u{i}", suite="postgresql", target="/mnt/x",
                                  environment={"hostname": "h"}, settings={},
                                  storbench_version="0", fio_version="fio-3.33")
            store.finish_run(rid, "completed", data=data)
            return rid

        measured = {"phases": [{"name": "run", "start_s": 0.0, "end_s": 1.0}],
                    "host_load": {"cpus": 2}}
        mine = [run(i, {**measured, **({"postgresql": {"tps": i}} if i % 2 else {})})
                for i in range(8)]
        others = [run(100 + i, {"postgresql": {"tps": 100 + i}}) for i in range(elsewhere)]
        set_series(store, mine, "mine")
        set_series(store, others, "others")
        want = [(rid, store.get_run(rid, with_results=False).created_at, "postgresql",
                 {"tps": i}) for i, rid in enumerate(mine) if i % 2]
        plans = _plans(store, lambda: series_sections(store, "mine", ["postgresql", "redis"],
                                                      len(mine)))
        # 4 of the series' runs hold one, and 1 or 12 others: 5 <= 8 < 16
        by_index = elsewhere == 1
        assert len(plans) == 1 and all(
            p.startswith("SEARCH d USING INDEX run_data_key") == by_index
            for p in plans.values()), plans
        assert series_sections(store, "mine", ["postgresql", "redis"], len(mine)) == want
        # and the other way (told the series has no runs: every key's row is more)
        assert series_sections(store, "mine", ["postgresql", "redis"], 0) == want
        assert series_sections(store, "mine", ["postgresql"]) == want  # its size unknown
    finally:
        store.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_runs_answers_are_kept_in_the_store_for_every_machine(request, dialect, store_path,
                                                                 tmp_path, monkeypatch):
    """The run (or import) that adds a series' latest run keeps its answers (the series'
    change points, the --no-change gate) in the store as well as in its own cache: another
    machine reading the store (a CI runner of a team's PostgreSQL, its cache empty) reads
    them rather than finding them again from every run's figures, keeps them in its
    cache, and says what was kept (an answer changed in the store by hand shows).
    Commands that only read write nothing to the store; a run more replaces the series'
    answers there, one a question."""
    from pathlib import Path

    from storbench.cli import trend
    from tests.conftest import run_cli

    db = request.getfixturevalue("postgres_db") if dialect == "postgresql" else store_path
    recorded = (Path(__file__).parent.parent / "data" / "fio" / "randread.json").read_text()
    store = Store(db)

    def kept_rows() -> list[tuple[str, str]]:
        return sorted((r[0], r[1]) for r in store.db.execute(
            "SELECT key, question FROM kept_answers", ()).fetchall())

    def refreshed(machine: str) -> None:  # as the run that stored the latest run ends
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / machine))
        trend.refresh(store, [store.get_run(trend.series_last(store, "s"),
                                            with_results=False)])

    def asked(machine: str, *args: str) -> str:
        proc = run_cli(*args, "--json", db=db, env={"XDG_CACHE_HOME": str(tmp_path / machine)})
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    try:
        ids = [add_run(store, recorded, label=str(i)) for i in range(trend.REFRESH_RUNS)]
        set_series(store, ids, "s")
        refreshed("ran")
        first = kept_rows()
        assert len(first) == 2  # the series' change points and its latest run's gate
        gate = asked("ran", "check", "s", "--no-change")
        overview = json.loads(asked("ran", "history", "s"))
        # another machine: its cache empty, the store's answers read and kept there
        assert asked("ci", "check", "s", "--no-change") == gate
        assert json.loads(asked("ci", "history", "s")) == overview
        assert len(list((tmp_path / "ci" / "storbench" / "changes").iterdir())) == 2
        # what it says is what the store kept: the first point changed there by hand
        for key, _ in first:
            (text,) = store.db.execute("SELECT answer FROM kept_answers WHERE key = ?",
                                       (key,)).fetchone()
            doc = json.loads(text)
            if isinstance(doc, dict):  # the change points: each figure's first value
                from storbench.cli.kept import packed, unpacked

                for h in doc["histories"]:
                    values = unpacked(h["values"])
                    values[0] = 1.0
                    h["values"] = packed(values, "d")
            else:  # the gate: each figure's words
                for _, said, _ in doc:
                    said["said"] = "as kept in the store"
            with store._tx() as tx:
                tx.execute("UPDATE kept_answers SET answer = ? WHERE key = ?",
                           (json.dumps(doc), key))
        assert json.loads(asked("dashboard", "history", "s"))[0]["points"][0]["value"] == 1.0
        assert "as kept in the store" in asked("dashboard", "check", "s", "--no-change")
        # an answer that is not one (whoever may write runs there may write it): found again
        with store._tx() as tx:
            tx.execute("UPDATE kept_answers SET answer = ? WHERE answer LIKE ?",
                       ('[[1, 2, 3], ["x"]]', "%as kept in the store%"))
        assert json.loads(asked("other", "check", "s", "--no-change")) == json.loads(gate)
        # commands that only read keep answers in their own cache, never in the store
        with store._tx() as tx:
            tx.execute("DELETE FROM kept_answers", ())
        asked("reader", "history", "s")
        asked("reader", "check", "s", "--no-change")
        assert kept_rows() == []
        # a run more: its answers replace the series' ones, one a question
        refreshed("ran")
        set_series(store, [add_run(store, recorded, label="new")], "s")
        refreshed("ran")
        after = kept_rows()
        assert len(after) == 2 and {q for _, q in after} == {q for _, q in first}
        assert not {k for k, _ in after} & {k for k, _ in first}
    finally:
        store.close()


def test_a_copy_keeps_the_answers_of_the_series_it_copied_into(store_path, tmp_path):
    """`db copy` finds the answers of each series it copied runs into (40 runs or more)
    and keeps them in the destination, for every machine that reads it: the source's
    name its own run ids. A shorter series, and a copy that copied nothing, find none;
    `storbench series` and `storbench rm` find those of the series whose runs they moved
    or deleted."""
    from pathlib import Path

    from storbench.cli.trend import REFRESH_RUNS
    from tests.conftest import run_cli

    recorded = (Path(__file__).parent.parent / "data" / "fio" / "randread.json").read_text()
    source = Store(store_path)
    try:
        set_series(source, [add_run(source, recorded, label=str(i))
                            for i in range(REFRESH_RUNS + 2)], "long")
        set_series(source, [add_run(source, recorded, label="s")], "short")
    finally:
        source.close()
    dst = tmp_path / "copy.db"
    env = {"XDG_CACHE_HOME": str(tmp_path / "copier")}
    copied = run_cli("db", "copy", str(store_path), str(dst), db=dst, env=env)
    assert copied.returncode == 0, copied.stderr
    assert "Finding the change points of 1 series" in copied.stderr, copied.stderr
    store = Store(dst)
    try:
        rows = store.db.execute("SELECT key, answer FROM kept_answers", ()).fetchall()
        assert len(rows) == 2
        for key, text in rows:  # the gate's words, changed by hand: read, not found again
            doc = json.loads(text)
            if isinstance(doc, list):
                for _, said, _ in doc:
                    said["said"] = "as the copy kept it"
                with store._tx() as tx:
                    tx.execute("UPDATE kept_answers SET answer = ? WHERE key = ?",
                               (json.dumps(doc), key))
    finally:
        store.close()
    gate = run_cli("check", "long", "--no-change", db=dst,
                   env={"XDG_CACHE_HOME": str(tmp_path / "elsewhere")})
    assert gate.returncode == 0 and "as the copy kept it" in gate.stdout, gate.stdout
    again = run_cli("db", "copy", str(store_path), str(dst), db=dst, env=env)
    assert again.returncode == 0 and "Finding" not in again.stderr, again.stderr
    # a run moved out of it (`storbench series`): its answers found again and kept
    moved = run_cli("series", "other", "1", db=dst, env=env)
    assert moved.returncode == 0, moved.stderr
    assert "Finding the change points of 1 series whose runs moved" in moved.stderr
    # and its latest run deleted (`storbench rm`): likewise
    deleted = run_cli("rm", str(REFRESH_RUNS + 2), db=dst, env=env)
    assert deleted.returncode == 0, deleted.stderr
    assert "Finding the change points of 1 series runs were deleted from" in deleted.stderr
    store = Store(dst)
    try:
        after = store.db.execute("SELECT key FROM kept_answers", ()).fetchall()
        assert len(after) == 2 and not {r[0] for r in after} & {r[0] for r in rows}
        # each kept answer is the one a reader asks for now: read, not found again
        assert run_cli("check", "long", "--no-change", db=dst,
                       env={"XDG_CACHE_HOME": str(tmp_path / "third")}).returncode == 0
        kept_here = {p.name for p in (tmp_path / "third" / "storbench" / "changes").iterdir()}
        assert kept_here <= {r[0] for r in after}, (kept_here, after)
    finally:
        store.close()


def _recorded_run(store, name: str, i: int, scale: float, suite: str = "quick",
                  status: str = "completed", test: str | None = None) -> int:
    """A run of recorded real fio output (tests/data/fio/NAME.json), its IOPS scaled by
    ``scale`` (a series' level) and varied a little from run to run (its jobs named
    ``test``, when given: a test of its suite)."""
    doc = json.loads((Path(__file__).parent.parent / "data" / "fio" / f"{name}.json")
                     .read_text())
    for job in doc["jobs"]:
        job["jobname"] = test or job["jobname"]
        for d in ("read", "write"):
            job[d]["iops"] *= scale * (1 + 0.003 * ((i * 7) % 5 - 2))
    return add_run(store, json.dumps(doc), label=f"{name}{i}", suite=suite, status=status)


def test_a_cold_gate_keeps_its_answer_and_the_change_points_not_the_history(store_path,
                                                                          tmp_path):
    """`check --no-change` with nothing kept keeps its own answer and each figure's
    change points, not the series' whole history (6.5 MB at 100,000 runs: ~40 ms of a
    0.5 s gate). `history` then finds the change points kept (none searched again), keeps
    its own answer, and says what a reader that kept nothing says; one kept before is
    read by the gate."""
    from storbench.store.changes import question_key
    from tests.conftest import run_cli

    store = Store(store_path)
    try:
        ids = [_recorded_run(store, "randread", i, 0.5 if i >= 20 else 1.0)
               for i in range(40)]
        set_series(store, ids, "s")
    finally:
        store.close()
    cache = tmp_path / "gate"
    kept = cache / "storbench" / "changes"
    env = {"XDG_CACHE_HOME": str(cache)}

    def asked(*args: str, where: dict[str, str] = env) -> str:
        proc = run_cli(*args, "--json", db=store_path, env=where)
        assert proc.returncode in (0, 3), proc.stderr
        return proc.stdout

    gate = json.loads(asked("check", "s", "--no-change"))
    iops = next(c for c in gate if c.get("figure") == "randread.read.iops")
    assert iops["run"] == ids[20] and iops["passed"] is False, iops
    history_question = question_key(["history", 0.05], "s")
    after_gate = {p.name for p in kept.iterdir()}
    assert not any(n.startswith(history_question) for n in after_gate), after_gate
    assert len(after_gate) >= 2  # the gate's answer and the IOPS' change points, at least
    told = json.loads(asked("history", "s"))
    new = {p.name for p in kept.iterdir()} - after_gate
    assert len(new) == 1 and new.pop().startswith(history_question)  # nothing searched
    assert told == json.loads(asked("history", "s", where={"XDG_CACHE_HOME": str(
        tmp_path / "elsewhere")}))
    # the history kept (here, by `history`): the gate asked again of another limit reads
    # it, and finds nothing more
    before = {p.name for p in kept.iterdir()}
    asked("check", "s", "--no-change", "--max-regression", "60%")
    assert len({p.name for p in kept.iterdir()} - before) == 1  # its own answer


@two_cpus
@pytest.mark.parametrize(("command", "part"), [("check", 10), ("check", 5000),
                                               ("history", 10), ("history", 5000)])
def test_a_cold_answer_makes_its_copy_before_it_opens_the_store(store_path, tmp_path,
                                                                monkeypatch, command, part):
    """`check --no-change` and `history SERIES` make the copy that searches a long series
    as it is read (analysis/ahead.py) as they begin, before their store is opened (and
    PostgreSQL's client imported: its imports take the other CPU meanwhile): a series of
    ahead.PART runs or more has it taken by the Reading; a shorter one ends it before the
    read. None is left behind."""
    import click

    from storbench.analysis import ahead
    from storbench.cli.common import cli, load_command
    from storbench.store import sqlite

    store = Store(store_path)
    try:
        set_series(store, [_recorded_run(store, "randread", i, 1.0) for i in range(40)], "s")
    finally:
        store.close()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(ahead, "PART", part)
    seen: dict[str, int] = {}
    opened, entered = sqlite.Store.__init__, ahead.Reading.__enter__

    def opening(self, *args, **kwargs):
        seen.setdefault("at open", ahead._early[0] if ahead._early else 0)
        opened(self, *args, **kwargs)

    def reading(self):
        seen.setdefault("before the read", ahead._early[0] if ahead._early else 0)
        got = entered(self)
        seen.setdefault("read by", got.pid)
        return got

    monkeypatch.setattr(sqlite.Store, "__init__", opening)
    monkeypatch.setattr(ahead.Reading, "__enter__", reading)
    load_command(command)
    args = ["check", "s", "--no-change"] if command == "check" else ["history", "s"]
    try:
        cli.main([*args, "--json", "--db", str(store_path)], standalone_mode=False)
    except click.exceptions.Exit as done:
        assert done.exit_code == 0
    early = seen["at open"]
    assert early and _gone(early) and ahead._early is None
    if part == 10:
        assert seen["read by"] == early
    else:  # ended before the read (histories reads this series without a Reading)
        assert seen.get("before the read", 0) == 0


@two_cpus
def test_one_figures_history_is_searched_as_it_is_read(store_path, tmp_path, monkeypatch,
                                                       capsys):
    """`history SERIES --metric FIGURE`, cold, over a long series: the figure's values are
    searched by the copy as they are read (analysis/ahead.py), and its answer is the
    one found without a copy: the same change point, points and workloads."""
    import click

    from storbench.analysis import ahead, forked
    from storbench.cli.common import cli, load_command

    store = Store(store_path)
    try:
        set_series(store, [_recorded_run(store, "randread", i, 1.0 if i < 30 else 0.5)
                           for i in range(60)], "s")
    finally:
        store.close()
    monkeypatch.setattr(ahead, "PART", 10)
    given = _answers_given(monkeypatch)
    load_command("history")

    def asked(cache: str) -> dict:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / cache))
        capsys.readouterr()
        try:
            cli.main(["history", "s", "--metric", "randread.read.iops", "--json", "--db",
                      str(store_path)], standalone_mode=False)
        except click.exceptions.Exit as done:
            assert done.exit_code == 0
        return json.loads(capsys.readouterr().out)

    ahead_of = asked("first")
    assert given == [True]  # the copy's answer, taken
    monkeypatch.setattr(forked, "may_copy", lambda: False)
    alone = asked("second")
    assert given == [True]  # no copy, none asked of it
    assert ahead_of == alone
    assert [c["run"] for c in alone["change_points"]] == [alone["points"][30]["run"]]


@pytest.mark.parametrize("later", [None, "randwrite-2jobs", "randwrite-2jobs as randread"])
def test_a_series_is_read_narrowed_to_what_its_first_run_measured(any_store, monkeypatch,
                                                                  tmp_path, later):
    """A series whose first run read only is read without the other directions' columns
    (histories._narrowed: one column says whether a result has any of them), and gives
    the histories read with every column; when a later run wrote (another test, or the
    same test's name), the series is read again with every column."""
    from storbench.cli import histories as found
    from storbench.render.history import history_dict

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = any_store
    # (a job file of the user's: no suite names its figures, each test's are its own)
    ids = [_recorded_run(store, "randread", i, 0.5 if i >= 20 else 1.0, suite="mine")
           for i in range(30)]
    if later is not None:
        ids += [_recorded_run(store, later.split()[0], i, 1.0, suite="mine", test=(
            "randread" if later.endswith("as randread") else None)) for i in range(30, 34)]
    set_series(store, ids, "s")
    reads: list[int] = []
    values = found.series_values

    def spied(*args, **kwargs):
        reads.append(len(kwargs.get("others", ())))
        return values(*args, **kwargs)

    monkeypatch.setattr(found, "series_values", spied)
    narrowed = [history_dict(h) for h in found._histories(store, "s")]
    assert reads == ([7] if later is None else [7, 0]), reads  # write, trim, sync: 7
    monkeypatch.setattr(found, "_narrowed", lambda store, first, metrics, suite: (metrics, []))
    reads.clear()
    assert [history_dict(h) for h in found._histories(store, "s")] == narrowed
    assert reads == [0]
    iops = next(h for h in narrowed if h["metric"] == "randread.read.iops")
    assert [c["run"] for c in iops["change_points"]] == [ids[20]]
    if later is not None:  # the writes' figures are there, as read with every column
        assert any(h["metric"].endswith("write.iops") for h in narrowed), narrowed


@pytest.mark.parametrize(("cpus", "ahead_rows"), [(1, 40), (2, 40), (2, 10**9)])
def test_the_series_list_finds_every_series_at_once_as_each_alone(any_store, monkeypatch,
                                                                  tmp_path, cpus, ahead_rows):
    """`history` over a store of many series, nothing kept, reads every series' figures
    in one query (every_series_values): each series' answer is the one it gets alone
    (its suite its first run's, one without figures included; a failed run left out;
    runs interleaved), and it is kept where `history NAME` then reads it. With 2 CPUs
    the change points are found alike: of each series' first figure that varies, by a
    copy of this process as they are read (analysis/ahead.py), or (with a first part
    too small for that, and the least work to share made none) in this process and a
    copy of it after the read (analysis/forked.py)."""
    import shutil

    from storbench.analysis import ahead, forked
    from storbench.cli import histories as found
    from storbench.cli.kept import read_kept
    from storbench.render.history import history_dict
    from storbench.store import series
    from storbench.store.series import series_list

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # this test's answers
    store = any_store
    runs: dict[str, list[int]] = {"drop": [], "writes": [], "late": [], "synced": []}
    # 'late' begins with a run of another suite that has no figures (nothing ran)
    first = store.begin_run(uid="nothing", suite="etcd", target="/mnt/x",
                            environment={"hostname": "h"}, settings={"workload": "etcd"},
                            storbench_version="0", fio_version="fio-3.33")
    store.finish_run(first, "completed")
    runs["late"].append(first)
    for i in range(24):  # interleaved, as nightly runs of three series are
        runs["drop"].append(_recorded_run(store, "randread", i, 0.6 if i >= 14 else 1.0))
        runs["writes"].append(_recorded_run(store, "randwrite-2jobs", i,
                                            1.3 if i >= 8 else 1.0, suite="dbench"))
        if i % 2:
            runs["late"].append(_recorded_run(store, "randread", i, 1.0))
        if i < 6:  # a quick suite's test whose headline figure only its suite names
            runs["synced"].append(_recorded_run(store, "randwrite-2jobs", i, 1.0,
                                                test="synclat"))
    failed = _recorded_run(store, "randread", 24, 0.1, status="failed")
    for name, ids in runs.items():
        set_series(store, [*ids, failed] if name == "drop" else ids, name)
    for i, rid in enumerate(runs["writes"]):  # each with an application's answer too
        app = {"profile": "postgresql", "estimates": [
            {"metric": "tps", "unit": "transactions/s", "value": 1000 if i < 12 else 700,
             "decided_by": "the cap", "label": "TPS, 1 client"}]}
        with store._tx() as db:
            db.execute("INSERT INTO run_data VALUES (?, ?, ?)", (rid, "app", json.dumps(app)))
    listed = [(name, n) for name, n, _, _ in series_list(store)]
    assert listed == [("late", 13), ("drop", 24), ("writes", 24), ("synced", 6)]
    alone = {name: [history_dict(h) for h in found._histories(store, name)]
             for name, _ in listed}

    copies: list[bool] = []  # each copy made: whether it gave its answers
    given: list[bool] = []  # each answer asked of the copy that searched as it read
    # read in parts of 50 rows (as a long store's in parts of 10,000): 'drop' and
    # 'writes' have moved within the first part (of 66 rows in all), and are searched as
    # they are read (analysis/ahead.py)
    monkeypatch.setattr(series, "PARTS", 50)
    monkeypatch.setattr(ahead, "PART", ahead_rows)
    if cpus == 2:
        if forked.cpus() < 2:
            pytest.skip("a copy is made only with 2 CPUs")
        shutil.rmtree(tmp_path / "cache")  # the change points found alone: found again
        monkeypatch.setattr(forked, "MIN_WORK", 0)
        copy = forked._in_a_copy

        def counted(*args):
            answers = copy(*args)
            copies.append(answers is not None)
            return answers

        monkeypatch.setattr(forked, "_in_a_copy", counted)
        given = _answers_given(monkeypatch)
    read: list[set[str]] = []

    def spy(store_, names, paths, part=None):  # every_series_values itself, its calls counted
        read.append(set(names))
        return every_series_values(store_, names, paths, part)

    monkeypatch.setattr(found, "every_series_values", spy)
    at_once = found.every_history(store, listed)
    assert read == [{"drop", "writes", "late", "synced"}]  # one query for all
    assert "randwrite.write.clat_p50" not in {h["metric"] for h in alone["writes"]}
    assert "synclat.write.clat_p50" in {h["metric"] for h in alone["synced"]}
    [tps] = [h for h in alone["writes"] if h["metric"] == "postgresql.tps"]
    assert len(tps["points"]) == 24 and tps["change_points"]
    assert {n: [history_dict(h) for h in hs] for n, hs in at_once.items()} == alone
    ahead_used = cpus == 2 and ahead_rows < 50
    assert copies == ([True] if cpus == 2 and not ahead_used else [])
    assert given == ([True, True] if ahead_used else [])  # 'drop' and 'writes' IOPS
    assert any(h["change_points"] for h in alone["drop"])  # a history with a change
    assert any(h["change_points"] for h in alone["writes"])
    for name, _ in listed:  # kept under the key each series' own question reads
        kept = read_kept(store, ["history", hist.MIN_CHANGE], name)
        assert kept is not None and [history_dict(h) for h in kept] == alone[name]
    # asked again, every answer is read: no series' figures read at all
    assert found.every_history(store, listed).keys() == alone.keys() and len(read) == 1


def _answers_given(monkeypatch) -> list[bool]:
    """Each answer asked of a copy that searched as a read went (analysis/ahead.py):
    whether it gave it (appended as they are asked)."""
    from storbench.analysis import ahead

    given: list[bool] = []
    answer = ahead.Reading.answer

    def asked(reading: ahead.Reading, key: str) -> Any:
        got = answer(reading, key)
        given.append(got is not None)
        return got

    monkeypatch.setattr(ahead.Reading, "answer", asked)
    return given


def test_a_series_version_follows_its_completed_runs(any_store):
    """The digest a series' answers are kept under (store/changes.series_runs: its
    version, which the database's own triggers make anew) changes whenever its completed
    runs do, however they change, and never to one it had: a run that completes in it, a
    completed run put in it or moved out of it and back, a run deleted, rows written by
    hand. A run that starts in it, or fails, a label, another series' run, change
    nothing."""
    from storbench.store.changes import series_runs as digest
    from storbench.store.series import set_label

    store = any_store
    recorded = (Path(__file__).parent.parent / "data" / "fio" / "randread.json").read_text()
    seen = [digest(store, "s")]  # no run yet: the empty digest

    def changed() -> bool:
        now = digest(store, "s")
        new = now not in seen
        assert new or now == seen[-1]  # never back to one it had
        seen.append(now)
        return new

    def begun(label: str) -> int:
        return store.begin_run(uid=f"u{label}", suite="quick", target="/x",
                               environment={}, settings={}, storbench_version="0",
                               fio_version=None, label=label, series="s")

    a = add_run(store, recorded, label="a")
    assert not changed()  # in no series yet
    set_series(store, [a], "s")
    assert changed()
    b = begun("b")  # a run that starts in it
    assert not changed()
    store.finish_run(b, "completed")
    assert changed()
    store.finish_run(begun("c"), "failed")
    assert not changed()
    set_label(store, a, "renamed")
    other = add_run(store, recorded, label="other")
    set_series(store, [other], "t")
    assert not changed()
    t = digest(store, "t")
    set_series(store, [a], "t")  # moved out of it: both series change
    assert changed() and digest(store, "t") != t
    set_series(store, [a], "s")  # and back: the same runs, a version never given
    assert changed()
    store.delete_run(b)
    assert changed()
    with store._tx() as db:  # as another program would write them
        db.execute("DELETE FROM run_series WHERE run_id = ?", (a,))
    assert changed()
    with store._tx() as db:
        db.execute("INSERT INTO run_series VALUES (?, ?)", (a, "s"))
    assert changed()
    with store._tx() as db:
        db.execute("UPDATE run_series SET name = ? WHERE run_id = ?", ("t", a))
    assert changed()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_store_made_before_versions_gives_each_series_its_first(request, store_path,
                                                                  dialect):
    """A store made before series had versions (migration 0017) gives each series with a
    completed run one, each its own; a series of running runs only, none (the empty
    digest, as before: no completed run)."""
    from storbench.store import MIGRATIONS
    from storbench.store.changes import series_runs as digest

    before = MIGRATIONS[:-1]
    assert MIGRATIONS[-1][0] == "0017_series_versions"
    if dialect == "sqlite":
        from tests.store.test_schema import as_shipped

        where: str = str(store_path)
        db = as_shipped(where, before)
        run = db.execute
    else:
        from storbench.store import postgres

        where = request.getfixturevalue("postgres_db")
        conn = postgres.Connection(where)
        postgres.migrate(conn, before, "t", "old")
        run = conn.execute
    for i, (status, series) in enumerate([("completed", "a"), ("completed", "a"),
                                          ("completed", "b"), ("running", "c")]):
        run("INSERT INTO runs (id, uid, created_at, status, suite, target, environment,"
            " settings, storbench_version) VALUES (?, ?, 't', ?, 'quick', '/x', '{}', '{}',"
            " '0')", (i + 1, f"u{i}", status))
        run("INSERT INTO run_series VALUES (?, ?)", (i + 1, series))
    if dialect == "sqlite":
        db.commit()
        db.close()
    else:
        conn.close()
    store = Store(where)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        got = {name: digest(store, name) for name in "abcd"}
        assert got["c"] == got["d"] and len(set(got.values())) == 3
    finally:
        store.close()


def test_finding_a_history_pauses_the_collector_and_puts_it_back(store, monkeypatch,
                                                                tmp_path):
    """histories and every_history find with Python's cycle collector paused (its passes
    scan 100,000 runs' figures again and again) and leave it as they found it: on, or
    off when their caller had turned it off."""
    import gc

    from storbench.cli import histories as found

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ids = [_recorded_run(store, "randread", i, 1.0) for i in range(6)]
    set_series(store, ids, "s")
    during: list[bool] = []
    each_history = found._each_history

    def seen(*args):
        during.append(gc.isenabled())
        return each_history(*args)

    monkeypatch.setattr(found, "_each_history", seen)
    assert gc.isenabled()
    assert found.histories(store, "s", up_to=ids[-1])
    assert found.every_history(store, [("s", 6)])["s"]
    assert during == [False, False] and gc.isenabled()
    gc.disable()
    try:
        found.histories(store, "s", up_to=ids[2])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_answer_keeps_each_run_column_once(tmp_path):
    """A kept answer holds each distinct column of runs and times once: a test's figures
    (the same lists), another test's of the same runs (equal lists), and one of other
    runs (its own); read back, every history is the one kept."""
    from storbench.analysis import history as hist
    from storbench.analysis.metrics import metric
    from storbench.cli.kept import _keep, _read

    runs, ats = list(range(1000, 1100)), [f"t{i:04d}" for i in range(100)]
    fewer = (runs[::2], ats[::2])
    found = [hist.History("s", hist.Figure(test, metric(m)),
                          hist.Points(*cols, [float(i * k) for i in range(len(cols[0]))]), [])
             for test, m, cols, k in [("a", "read.iops", (runs, ats), 1),
                                      ("a", "read.bw", (runs, ats), 2),
                                      ("b", "read.iops", (list(runs), list(ats)), 3),
                                      ("c", "read.iops", fewer, 4),
                                      ("b", "read.bw", (list(runs), list(ats)), 5)]]
    cache = ChangeCache(tmp_path / "changes")
    _keep(cache, "q1-k", ["history"], "s", found)
    kept = cache.get("q1-k")
    assert len(kept["columns"]) == 4, kept["columns"]  # a's (b's equal them) and c's
    assert [(h["runs"], h["ats"]) for h in kept["histories"]] == [(0, 1)] * 3 + [(2, 3),
                                                                               (0, 1)]
    assert [(h.figure, list(h.points)) for h in _read(cache, "q1-k") or []] == [
        (h.figure, list(h.points)) for h in found]


@pytest.mark.parametrize("column", [[], ["2026-12-05T10:00:00Z"], ["a", "b", ""], [""],
                                    ["a\nb", "c"], ["a", "b\n"], ["a", 1]])
def test_a_column_of_times_is_kept_as_it_was(column):
    """A history's times, kept joined by newlines (cli/kept.packed); one with a newline of
    its own, or a column not all text, kept as a list: read back, the same column."""
    from storbench.cli.kept import packed, unpacked

    kept = json.loads(json.dumps(packed(column, "s")))
    assert unpacked(kept) == column
    assert ("l" in kept) == (any(not isinstance(v, str) or "\n" in v for v in column)
                             or column == [""])


def test_many_series_digests_are_each_ones_own(any_store):
    """each_series_runs (PostgreSQL: one query for all) gives each series the digest its
    own query gives, which its answers are kept under; a name with no run, the empty
    digest."""
    from storbench.store.changes import each_series_runs
    from storbench.store.changes import series_runs as digest

    store = any_store
    recorded = (Path(__file__).parent.parent / "data" / "fio" / "randread.json").read_text()
    ids = [add_run(store, recorded, label=str(i)) for i in range(9)]
    set_series(store, ids[0::3], "a")
    set_series(store, [ids[4], ids[1], ids[7]], "b")  # named out of their order
    set_series(store, [ids[2]], "c")
    names = ["a", "b", "c", "none"]
    got = each_series_runs(store, names)
    assert got == {n: digest(store, n) for n in names}
    assert len(set(got.values())) == 4


@pytest.mark.parametrize("cpus", [1, 2])
def test_a_long_series_is_searched_as_it_is_read(any_store, monkeypatch, tmp_path, cpus):
    """A series read in parts (store.series.PARTS rows: here 6, as 10,000 are of a long
    one): with 2 CPUs a figure of each of its tests is searched by a copy of this process
    as they are read (analysis/ahead.py), and their answers are taken; the histories are
    the ones found with one CPU, where no copy is made."""
    import shutil

    from storbench.analysis import ahead, forked
    from storbench.cli import histories as found
    from storbench.render.history import history_dict
    from storbench.store import series

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # this test's answers
    monkeypatch.setattr(series, "PARTS", 6)
    monkeypatch.setattr(ahead, "PART", 6)
    store = any_store
    # each run two tests: randread, and 'steady' (the same job) whose IOPS rose at run 9
    recorded = json.loads((Path(__file__).parent.parent / "data" / "fio" / "randread.json")
                          .read_text())
    ids = []
    for i in range(30):
        doc = json.loads(json.dumps(recorded))
        doc["jobs"].append(json.loads(json.dumps(doc["jobs"][0])))
        doc["jobs"][1]["jobname"] = "steady"
        doc["jobs"][0]["read"]["iops"] *= (0.5 if i >= 20 else 1.0) * (1.08 if i % 3 else 1.0)
        doc["jobs"][1]["read"]["iops"] *= (1.3 if i >= 9 else 1.0) * (1.001 if i % 2 else 1.0)
        ids.append(add_run(store, json.dumps(doc), label=f"long{i}"))
    set_series(store, ids, "long")
    cpus_here = forked.cpus()
    monkeypatch.setattr(forked, "cpus", lambda: 1)
    alone = [history_dict(h) for h in found._histories(store, "long")]
    assert {h["metric"]: [c["run"] for c in h["change_points"]] for h in alone
            if h["metric"].endswith("read.iops")} == {"randread.read.iops": [ids[20]],
                                                       "steady.read.iops": [ids[9]]}
    given: list[bool] = []
    if cpus == 2:
        if cpus_here < 2:
            pytest.skip("a copy is made only with 2 CPUs")
        monkeypatch.setattr(forked, "cpus", lambda: 2)
        shutil.rmtree(tmp_path / "cache")  # the change points found alone: found again
        given = _answers_given(monkeypatch)
    assert [history_dict(h) for h in found._histories(store, "long")] == alone
    assert given == ([True, True] if cpus == 2 else [])  # a figure of each test
    # a series of fewer runs than ahead.PART is not searched ahead: no copy made for it
    assert series.series_holds(store, "long", 30) and not series.series_holds(store, "long", 31)
    monkeypatch.setattr(ahead, "PART", 31)
    monkeypatch.setattr(ahead, "_fork", lambda: pytest.fail("a copy made"))
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    assert [history_dict(h) for h in found._histories(store, "long")] == alone
    # nor early, before its digest (`history SERIES`, `check --no-change`)
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    assert [history_dict(h) for h in found.histories(store, "long")] == alone


def test_two_moves_between_two_series_in_opposite_directions_both_end(postgres_db):
    """On a real PostgreSQL, one move (`storbench series`) from A to B and one from B to A
    at the same moment: each series' version row is taken as a move reaches it, so the
    two would each hold the row the other waits for, and the server would end one
    (a deadlock). Moves wait for each other instead, and both end. A trigger the test
    adds makes each move pause between leaving its series and joining the other, the
    second begun while the first pauses."""
    import threading
    import time

    import psycopg

    recorded = (Path(__file__).parent.parent / "data" / "fio" / "randread.json").read_text()
    store = Store(postgres_db)
    one, two = (add_run(store, recorded, label=label) for label in ("one", "two"))
    set_series(store, [one], "a")
    set_series(store, [two], "b")
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION paused() RETURNS trigger LANGUAGE plpgsql AS"
                     " $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$")
        conn.execute("CREATE TRIGGER paused BEFORE INSERT ON run_series FOR EACH ROW"
                     " EXECUTE FUNCTION paused()")
        failed: list[BaseException] = []

        def move(run: int, name: str) -> None:
            mover = Store(postgres_db)
            try:
                set_series(mover, [run], name)
            except BaseException as e:  # (said below)
                failed.append(e)
            finally:
                mover.close()

        first = threading.Thread(target=move, args=(two, "a"))
        first.start()
        deadline = time.monotonic() + 30
        while not conn.execute(  # the first left b: it holds b's row
                "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
                " AND datname = current_database()").fetchone():
            assert time.monotonic() < deadline and first.is_alive()
            time.sleep(0.01)
        second = threading.Thread(target=move, args=(one, "b"))
        second.start()
        first.join(60)
        second.join(60)
        conn.execute("DROP TRIGGER paused ON run_series")
    assert not failed, failed
    assert [(r.id, r.series) for r in (store.get_run(i, with_results=False)
                                       for i in (one, two))] == [(one, "b"), (two, "a")]
    store.close()
