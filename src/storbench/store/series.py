"""What people name runs after the fact: their series (`storbench history` reads only
the figures it follows from a series' results, in one query), label and tags. SQLite and
PostgreSQL alike."""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from storbench.errors import ConfigError
from storbench.store.schema import FIGURES, STATUSES
from storbench.store.sqlite import RUN_ID

if TYPE_CHECKING:
    from storbench.store.sqlite import Store

# pg_advisory_xact_lock key of a move of runs between series (postgres.py's _LOCK is
# migrations')
MOVING = 7_202_612


def set_series(store: Store, run_ids: Sequence[int], name: str) -> None:
    """Put runs in the series ``name`` (out of the one they were in); a run given twice
    is put there once. On PostgreSQL one move at a time: a move takes each series'
    version row (series_versions' triggers) as it reaches it, so two moves between the
    same series in opposite directions would each hold the row the other waits for."""
    run_ids = list(dict.fromkeys(run_ids))
    for run_id in run_ids:
        store.get_run(run_id, with_results=False)
    with store._tx() as db:
        if store.postgres:
            db.execute("SELECT pg_advisory_xact_lock(?)", (MOVING,))
        db.executemany("DELETE FROM run_series WHERE run_id = ?", [(i,) for i in run_ids])
        db.executemany("INSERT INTO run_series VALUES (?, ?)", [(i, name) for i in run_ids])


def check_label(label: str | None) -> None:
    """ConfigError for a label typed for a run that nobody could type back to name it:
    blank, with control characters, or one that reads as a run (a number, ``#12``,
    ``last``: `show 12` is run 12). None or "" is no label."""
    if not label:
        return
    if not label.strip() or any(not c.isprintable() for c in label):
        raise ConfigError(f"a label must be printable text, not {label!r}")
    if label == "last" or RUN_ID.fullmatch(label):
        raise ConfigError(f"a label {label!r} reads as a run (`storbench show {label}` is"
                          f" {'the last run' if label == 'last' else 'run ' + label.lstrip('#')},"
                          " not the run labelled so): give another")


def set_label(store: Store, run_id: int, label: str | None) -> None:
    check_label(label)
    store.get_run(run_id, with_results=False)
    with store._tx() as db:
        db.execute("UPDATE runs SET label = ? WHERE id = ?", (label, run_id))


def set_tags(store: Store, run_id: int, tags: dict[str, str], remove: Sequence[str]) -> None:
    """Add or change ``tags`` of a run, and remove the keys in ``remove``."""
    store.get_run(run_id, with_results=False)
    with store._tx() as db:
        db.executemany("DELETE FROM run_tags WHERE run_id = ? AND key = ?",
                       [(run_id, k) for k in [*remove, *tags]])
        db.executemany("INSERT INTO run_tags VALUES (?, ?, ?)",
                       [(run_id, k, v) for k, v in tags.items()])


def series_list(store: Store) -> list[tuple[str, int, str, str]]:
    """Every series: (name, completed runs, first and last run's start), in the order
    of their first runs: a series' place (`history N`) does not move when another
    series begins (by name, a new series moved `walk` from #9 to #12)."""
    return [(r[0], int(r[1]), r[2], r[3]) for r in store.db.execute(
        "SELECT s.name, count(*), min(r.created_at), max(r.created_at)"
        " FROM run_series s JOIN runs r ON r.id = s.run_id"
        " WHERE r.status = 'completed' GROUP BY s.name ORDER BY min(r.id), s.name", ())]


def series_exists(store: Store, name: str) -> bool:
    """Whether ``name`` is a series with a completed run: found from its own runs (the
    series' index), not from every series' list (50 ms at 100,000 runs)."""
    return store.db.execute(
        "SELECT 1 FROM run_series s WHERE s.name = ? AND EXISTS (SELECT 1 FROM runs r"
        " WHERE r.id = s.run_id AND r.status = 'completed') LIMIT 1", (name,)
    ).fetchone() is not None


def series_holds(store: Store, name: str, runs: int) -> bool:
    """Whether series ``name`` holds ``runs`` runs or more (of any status): counted from
    its index up to that many (0.1 ms for 5,000 on SQLite)."""
    (held,) = store.db.execute("SELECT count(*) FROM (SELECT 1 FROM run_series"
                               " WHERE name = ? LIMIT ?) AS s", (name, runs)).fetchone()
    return bool(held >= runs)


def series_of(store: Store, run_id: int) -> str | None:
    row = store.db.execute("SELECT name FROM run_series WHERE run_id = ?",
                           (run_id,)).fetchone()
    return str(row[0]) if row else None


def series_from(store: Store, name: str) -> str:
    """The FROM of a query of series ``name``'s runs: ``s`` its rows of run_series, ``r``
    their runs. SQLite's planner reads them from the index of completed runs by start,
    each looked up in run_series (~0.3 µs a run of the store), whatever the series'
    size; read from the series' own rows instead, each run looked up by id (~0.7 µs a
    run of the series), a series of 2,000 runs among 100,000 answers in a third of the
    time (`history` over 50 such series: 44 ms a series, most of 3 s). So a series of
    a third of the store's runs or less (the store's size read as its highest run id:
    one row, not a count; runs removed since only favour this plan) is read from its
    own rows (SQLite's CROSS
    JOIN keeps the order of the tables as written), its runs from the runs_of_id index
    (their rows, each with its environment, are most of the store's pages: read from
    the disk, they took longer than the whole index); PostgreSQL's planner picks for
    itself. Either way the same rows: only their order before a sort depends on it.
    Chosen once per series and open store (a command asks ~5 questions of a series:
    counted each time, 64 ms of `history` over 50 series, 18 ms over one of 100,000)."""
    chosen = _FROM.setdefault(store, {})
    if name not in chosen:
        chosen[name] = "run_series s JOIN runs r ON r.id = s.run_id"
        if not store.postgres:
            (top,) = store.db.execute("SELECT max(id) FROM runs").fetchone()
            third = (top or 0) // 3
            (n,) = store.db.execute("SELECT count(*) FROM (SELECT 1 FROM run_series"
                                    " WHERE name = ? LIMIT ?)", (name, third + 1)).fetchone()
            if n <= third:
                chosen[name] = ("run_series s CROSS JOIN runs r INDEXED BY runs_of_id"
                                " ON r.id = s.run_id")
    return chosen[name]


# series_from's choice per open store and series (gone with the store)
_FROM: weakref.WeakKeyDictionary[Store, dict[str, str]] = weakref.WeakKeyDictionary()


def series_runs(store: Store, name: str) -> list[int]:
    """The completed runs of a series, oldest first."""
    return [int(r[0]) for r in store.db.execute(
        f"SELECT r.id FROM {series_from(store, name)}"
        " WHERE s.name = ? AND r.status = 'completed' ORDER BY r.created_at, r.id", (name,))]


def series_last(store: Store, name: str) -> int | None:
    """The latest completed run of a series, None when it has none (or is no series):
    of a series that is most of the store one row read, not its runs; of a small one
    its runs' ids and starts, from the runs_of_id index (series_from)."""
    row = store.db.execute(
        f"SELECT r.id FROM {series_from(store, name)}"
        " WHERE s.name = ? AND r.status = 'completed' ORDER BY r.created_at DESC, r.id DESC"
        " LIMIT 1", (name,)).fetchone()
    return int(row[0]) if row else None


def series_workloads(store: Store, name: str) -> dict[int, str]:
    """What each completed run of a series ran (its stored ``settings.workload``: the
    suite or job file and what shaped it), by run id; runs stored before it was kept
    have none."""
    # (kept with each result's figures: a run's settings are read past, 0.25 s at 100,000)
    return {r[0]: r[1] for r in _tuples(
        store, f"SELECT f.run_id, f.workload FROM {series_from(store, name)}"
        " JOIN result_figures f ON f.run_id = r.id WHERE s.name = ? AND r.status = 'completed'"
        " AND f.workload IS NOT NULL", (name,))}


def series_left_out(store: Store, name: str) -> list[tuple[int, str]]:
    """The runs of a series that did not complete (id, status), oldest first: history
    follows completed runs only."""
    # from the few runs of those statuses (runs_when), not from the series' 100,000 runs
    # each looked up (0.13-0.2 s, and more on a busy machine, for none)
    return [(int(r[0]), str(r[1])) for r in store.db.execute(
        "SELECT r.id, r.status FROM runs r WHERE r.status IN (" + ", ".join(
            f"'{x}'" for x in STATUSES if x != "completed")
        + ") AND EXISTS (SELECT 1 FROM run_series s WHERE s.run_id = r.id AND s.name = ?)"
        " ORDER BY r.created_at, r.id", (name,))]


def completed_suites(store: Store) -> list[str]:
    """The suites of the store's completed runs (SQLite: from its index of them by start,
    ~8 ms at 100,000 runs)."""
    runs = "runs r" if store.postgres else "runs r INDEXED BY runs_when"
    return [str(r[0]) for r in store.db.execute(
        f"SELECT DISTINCT r.suite FROM {runs} WHERE r.status = 'completed'", ())]


COLUMNS = {path: name for name, path in FIGURES.items()}  # a figure's path -> its column


def all_columns(paths: Sequence[Sequence[str]]) -> bool:
    """Whether every one of ``paths`` is read from a column of result_figures."""
    return all(tuple(p) in COLUMNS for p in paths)


def series_values(store: Store, name: str, paths: Sequence[Sequence[str]],
                  test: str | None = None, workload: bool = False,
                  part: Callable[[list[tuple[Any, ...]]], None] | None = None,
                  others: Sequence[Sequence[str]] = ()) -> list[tuple[Any, ...]]:
    """Figures of a series' results without loading them: per result (one per test and
    repeat) of its completed runs, oldest run first, a flat tuple (run id, its start, the
    test, then the value at each path of the stored result, None where it has none, then
    with ``others`` (figure columns not read) whether the result has any of them, then
    with ``workload`` what the run ran, as series_workloads); only ``test``'s when given.
    One query that leaves everything else of a result in the database: a series of
    100,000 runs answers at once. Paths are keys from the result's top, as
    `analysis.metrics.value_path` gives them. ``part`` is given the rows as they are
    read, a part at a time (analysis/ahead.py), when they are columns' figures."""
    if not paths:
        return []
    for path in paths:
        if not all(k.replace("_", "").replace(".", "").isalnum() for k in path):
            raise ValueError(f"not a path of a stored result: {path!r}")
    # a figure of a suite, or a headline one, from its column (store/schema.py): SQLite
    # extracting three figures from 100,000 results' JSON took 1 s of a 1.3 s answer;
    # another from the result
    def read(p: Sequence[str]) -> str:
        if tuple(p) in COLUMNS:
            return f"f.{COLUMNS[tuple(p)]}"
        if store.postgres:
            return f"res.result #> '{{{','.join(p)}}}'"
        return "json_extract(res.result, '$" + "".join(f'."{k}"' for k in p) + "')"

    whole = not all_columns(paths)
    if not all_columns(others):
        raise ValueError(f"not all figure columns: {others!r}")
    # (others: one column, not an item of each row's tuple for each: ~5 ms a 100,000)
    held = ", ".join(read(p) for p in others)
    cols = [read(p) for p in paths] + (
        [f"coalesce({held}) IS NOT NULL" if len(others) > 1 else f"{held} IS NOT NULL"]
        if others else []) + (["f.workload"] if workload else [])
    sql = (f"SELECT r.id, r.created_at, f.test, {', '.join(cols)}"
           f" FROM {series_from(store, name)}"
           " JOIN result_figures f ON f.run_id = r.id"
           + (" JOIN results res ON res.run_id = f.run_id AND res.ordinal = f.ordinal"
              if whole else "")
           + " WHERE s.name = ? AND r.status = 'completed' AND f.host = ''")
    params: list[Any] = [name]
    if test is not None:
        sql += " AND f.test = ?"
        params.append(test)
    sql += " ORDER BY r.created_at, r.id, f.ordinal"
    # (streamed: one series' figure searched as it is read is what its reader waits for)
    rows = _tuples(store, sql, params, None if whole else part, streamed=True,
                   binary=not whole)
    decoded = [3 + i for i, p in enumerate(paths) if store.postgres and tuple(p) not in COLUMNS]
    if decoded:  # PostgreSQL's JSONB values, read as their text
        rows = [tuple(_json(v) if i in decoded else v for i, v in enumerate(r)) for r in rows]
    return rows


def every_series_values(store: Store, names: set[str], paths: Sequence[Sequence[str]],
                        part: Callable[[dict[str, tuple[str, list[tuple[Any, ...]]]]], None]
                        | None = None) -> dict[str, tuple[str, list[tuple[Any, ...]]]]:
    """series_values of many series at once (with the workload; ``paths`` of figure
    columns only): for each of ``names`` with a completed run, its first run's suite and
    its rows. One query over the store's completed runs in their order (SQLite: its
    index of them by start), each run's series looked up: 100,000 runs in 50 series in
    ~0.34 s with every suite's columns (0.24 s with those of the store's suites), where
    50 queries of a series each took ~0.48 s and their first runs' suites 0.15 s more
    (each series' own rows; on PostgreSQL each a hash join over every figure, ~22 ms).
    ``part`` is given each part's new rows as they are read, by series (analysis/ahead.py)."""
    if not all_columns(paths):
        raise ValueError(f"not all figure columns: {paths!r}")
    cols = ", ".join(f"f.{COLUMNS[tuple(p)]}" for p in paths)
    runs = "runs r" if store.postgres else "runs r INDEXED BY runs_when"
    # (a run without figures gives a row of NULLs: a series' first run names its suite)
    out: dict[str, tuple[str, list[tuple[Any, ...]]]] = {}

    def add(rows: list[tuple[Any, ...]]) -> None:
        had = {name: len(mine) for name, (_, mine) in out.items()} if part else {}
        for row in rows:
            if row[0] in names:
                mine = out.setdefault(row[0], (row[1], []))[1]
                if row[4] is not None:
                    mine.append(row[2:])
        if part:
            part({name: (suite, mine[had.get(name, 0):]) for name, (suite, mine)
                  in out.items() if len(mine) > had.get(name, 0)})

    sql = (f"SELECT s.name, r.suite, r.id, r.created_at, f.test, {cols}, f.workload"
           f" FROM {runs} JOIN run_series s ON s.run_id = r.id LEFT JOIN result_figures f"
           " ON f.run_id = r.id AND f.host = '' WHERE r.status = 'completed'"
           " ORDER BY r.created_at, r.id, f.ordinal")
    if part is None:
        add(_tuples(store, sql, (), binary=True))
    else:
        _tuples(store, sql, (), add, binary=True)
    return out


def _tuples(store: Store, sql: str, params: Sequence[Any],
            part: Callable[[list[tuple[Any, ...]]], None] | None = None,
            streamed: bool = False, binary: bool = False) -> list[tuple[Any, ...]]:
    """The rows of a query as plain tuples (100,000 of them: no row objects made), each
    part of them (PARTS rows) given to ``part`` as it is read, when given (PostgreSQL:
    ``streamed``, as its server sends them, for a reader that is waited for; else once
    it has sent them all; ``binary``, columns of numbers and text as their bytes)."""
    if store.postgres:
        return store.db.tuples(  # type: ignore[no-any-return]
            sql, params, part, PARTS, streamed, binary)
    cursor = store.db.cursor()
    cursor.row_factory = None
    cursor.execute(sql, params)
    if part is None:
        return cursor.fetchall()  # type: ignore[no-any-return]
    rows: list[tuple[Any, ...]] = []
    while more := cursor.fetchmany(PARTS):
        part(more)
        rows += more
    return rows


PARTS = 10_000  # rows read at a time for a caller that takes them in parts


def series_sections(store: Store, name: str, keys: Sequence[str], size: int | None = None
                    ) -> list[tuple[int, str, str, Any]]:
    """The sections (``Run.data``'s keys: an application's answer, a curve) of a series'
    completed runs, oldest run first: (run id, its start, the key, its value). One query;
    nothing else of a run is read. SQLite: when the store holds no more rows of these
    keys than ``size`` (about the series' runs, when the caller knows it; else the
    store's, read as its highest run id), they are read from the run_data_key index,
    each looked up in the series; else each of the series' runs is looked up in run_data
    (where a measured run keeps its phases and the host's load: 100,000 runs' rows
    looked up took 0.15 s)."""
    if not keys:
        return []
    marks = ", ".join("?" for _ in keys)
    if not store.postgres:
        if size is None:
            (top,) = store.db.execute("SELECT max(id) FROM runs").fetchone()
            size = top or 0
        (held,) = store.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM run_data INDEXED BY run_data_key"
            f" WHERE key IN ({marks}) LIMIT ?)", [*keys, size + 1]).fetchone()
        if held <= size:
            return every_series_sections(store, {name}, keys).get(name, [])
    sql = (f"SELECT r.id, r.created_at, d.key, d.value FROM {series_from(store, name)}"
           " JOIN run_data d ON d.run_id = r.id"
           f" WHERE s.name = ? AND r.status = 'completed' AND d.key IN ({marks})"
           " ORDER BY r.created_at, r.id")
    return [(int(r[0]), r[1], r[2], _json(r[3]))
            for r in store.db.execute(sql, [name, *keys])]


def every_series_sections(store: Store, names: set[str], keys: Sequence[str]
                          ) -> dict[str, list[tuple[int, str, str, Any]]]:
    """series_sections of many series at once: the store's rows of ``keys`` (SQLite: from
    the run_data_key index), each looked up in its series; for series that hold no fewer
    runs than the store holds rows of these keys (every_series_values' series, most of
    the store's runs; series_sections' one that does). One query, where one a series
    took 40 ms of `history` over 50 series on PostgreSQL."""
    if not keys:
        return {}
    marks = ", ".join("?" for _ in keys)
    data, join, runs = (("run_data d", "JOIN", "runs r") if store.postgres else
                        ("run_data d INDEXED BY run_data_key", "CROSS JOIN",  # (its order
                         "runs r INDEXED BY runs_of_id"))  # kept as written)
    out: dict[str, list[tuple[int, str, str, Any]]] = {}
    for name, run, at, key, value in store.db.execute(
            f"SELECT s.name, r.id, r.created_at, d.key, d.value FROM {data}"
            f" {join} run_series s ON s.run_id = d.run_id {join} {runs}"
            f" ON r.id = d.run_id WHERE d.key IN ({marks}) AND r.status = 'completed'"
            " ORDER BY r.created_at, r.id", list(keys)):
        if name in names:
            out.setdefault(name, []).append((int(run), at, key, _json(value)))
    return out


def _json(value: Any) -> Any:
    """A JSON column's value: text (SQLite; PostgreSQL's JSONB is read as text too)."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value
