"""A series' histories (every headline figure and application answer, with its change
points): found from its runs' figures, or read where an earlier command kept them
(cli/kept.py); `history` over a store of many series reads their figures at once."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from storbench.analysis import history as hist
from storbench.analysis.changepoints import find_each
from storbench.analysis.metrics import Metric, value_path
from storbench.cli.kept import kept, kept_each
from storbench.store import Store
from storbench.store.changes import ChangeCache
from storbench.store.series import (
    all_columns,
    completed_suites,
    every_series_sections,
    every_series_values,
    series_from,
    series_holds,
    series_sections,
    series_values,
)

if TYPE_CHECKING:
    from storbench.analysis.ahead import Chosen, Groups, Reading

# a series' first run's suite, its rows, the metrics they hold and its runs' sections
# (series_sections' rows: every_history)
Read = tuple[str | None, list[tuple[Any, ...]], list[Metric], list[tuple[int, str, str, Any]]]


def histories(store: Store, series: str, *, up_to: int | None = None,
              min_change: float = hist.MIN_CHANGE, runs: str | None = None,
              keep: bool = True) -> list[hist.History]:
    """Every headline figure of a series (its runs up to run ``up_to``), with its changes
    and the runs whose workload changed. A whole series' answer is kept (store/changes.py)
    under a digest of its runs (``runs``, when the caller has it) and ``min_change``:
    asked again, or after the run that kept it (refresh), it is read, not found again
    from 100,000 runs' figures. Not ``keep``: read where it was kept, else found and not
    kept (its figures' change points are: `check --no-change` keeps its own answer, not
    the 6.5 MB of 100,000 runs' history, ~40 ms, that `history` then finds in a moment)."""
    with collector_paused():
        if up_to is not None:
            return _histories(store, series, up_to=up_to, min_change=min_change)
        from storbench.analysis.ahead import PART, made_early

        # a long series' search made ready as `history` began (searched_early), or now
        with made_early(series_holds(store, series, PART)):
            return kept(store, ["history", min_change], series,
                        lambda: _histories(store, series, min_change=min_change), runs, keep)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while histories are found (and kept): each of its
    full passes scans every object alive, and 100,000 runs' figures are millions of them
    (50-70 ms of a cold `history` over 50 series, 30-40 ms over one series). What the
    finding made is then moved to the oldest generation at once (gc.freeze, unfreeze:
    two splices of lists), where only a full pass looks at it: the first young pass
    after it would have scanned every row read (57 ms of a cold `check --no-change`
    over 100,000 runs of 5 tests). What it leaves in cycles is collected by that pass
    (which looks again at what __main__ froze as storbench started, too: rarely run)."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


# every_history reads the store's figures at once when the series it must find hold
# this share of its runs or more (the store's runs in one query: ~3.4 µs a run; a series'
# own in one query each: ~4.8 µs a run and 3 ms for its first run's suite; measured at
# 100,000 runs in 50 series, docs/history.md)
AT_ONCE = 0.5


def every_history(store: Store, series: list[tuple[str, int]],
                  min_change: float = hist.MIN_CHANGE) -> dict[str, list[hist.History]]:
    """``histories`` of each of ``series`` (name, completed runs: series_list's): those
    nobody kept found from the store's figures read at once (every_series_values) when
    they are most of the store's runs (a cold `history` over 100,000 runs in 50 series),
    else one series at a time (one alone searched as it is read: _histories)."""
    counts = dict(series)

    def found(names: list[str]) -> dict[str, list[hist.History]]:
        if len(names) == 1:
            return {names[0]: _histories(store, names[0], min_change=min_change)}
        from storbench.analysis.ahead import PART, Reading

        reads: dict[str, Read] = {}
        with ExitStack() as closing:
            reading, size = None, sum(counts[n] for n in names)
            if len(names) > 1 and size >= AT_ONCE * sum(counts.values()):
                metrics = _every_metric(completed_suites(store))
                paths = hist.figure_paths(metrics)
                if all_columns(paths):
                    from storbench.analysis.views import VIEWS

                    if size >= PART:
                        reading = closing.enter_context(
                            Reading(min_change, hist.MAX_PVALUE, hist.MIN_RUNS))
                    sections = every_series_sections(store, set(names), list(VIEWS))
                    reads = {name: (suite, rows, metrics, sections.get(name, []))
                             for name, (suite, rows) in every_series_values(
                                 store, set(names), paths,
                                 part=None if reading is None else _sent(reading, metrics)
                             ).items()}
                    if reading is not None:
                        reading.end()  # (the copy's last step while the rest is made here)
            asked = {name: _asked(store, name, read=reads.get(name)) for name in names}
            found = iter(_each_history([a for name in names for a in asked[name]],
                                       min_change, reading))
            return {name: [next(found) for _ in asked[name]] for name in names}

    with collector_paused():
        return kept_each(store, ["history", min_change], list(counts), found)


def _every_metric(suites: list[str]) -> list[Metric]:
    """Every metric a series of any of ``suites`` may name (hist.candidates): what a
    series of each names is among them, and read as they are (``metrics`` of
    hist.figures_of and hist.points_of is where to read each figure, not which to show).
    Those of the store's suites only: 7 columns of nothing more took 80 ms of 0.37 s to
    read at 100,000 runs."""
    return list(dict.fromkeys(m for suite in [None, *suites] for m in hist.candidates(suite)))


def _histories(store: Store, series: str, *, up_to: int | None = None,
               min_change: float = hist.MIN_CHANGE) -> list[hist.History]:
    """histories, found from the series' figures: a figure of each test searched as they
    are read (analysis/ahead.py), where all the runs of a long series are asked for."""
    from storbench.analysis.ahead import PART, Reading

    if up_to is not None or not series_holds(store, series, PART):
        return _each_history(_asked(store, series, up_to=up_to), min_change)
    with Reading(min_change, hist.MAX_PVALUE, hist.MIN_RUNS) as reading:
        return _each_history(_asked(store, series, reading=reading), min_change, reading)


def figure_history(store: Store, series: str, fig: hist.Figure, min_change: float
                   ) -> hist.History:
    """The history of one measured figure of a series (`history SERIES --metric`): its
    values and what each run ran, read in one query, and searched as they are read
    where the series is long (analysis/ahead.py; read, then searched, a cold answer over
    100,000 runs took longer than `history SERIES`'s of all its figures: 1.50 s against
    1.10 s, docs/history.md)."""
    from storbench.analysis.ahead import PART, Reading

    assert isinstance(fig.metric, Metric)
    metrics = [fig.metric]
    with ExitStack() as closing:
        reading = (closing.enter_context(Reading(min_change, hist.MAX_PVALUE, hist.MIN_RUNS))
                   if series_holds(store, series, PART) else None)
        values = hist.values_of(metrics, fig)
        chosen = [(lambda rows: values(hist.by_test(rows, {fig.test})[fig.test]),
                   fig.metric.higher_is_better)]
        rows = series_values(store, series, hist.figure_paths(metrics), fig.test,
                             workload=True, part=None if reading is None else (
                                 lambda rows: reading.part({series: (None, rows)},
                                                           lambda *_: chosen)))
        if reading is not None:
            reading.end()  # (the copy's last step while the rest is made here)
        # (the workloads of the figure's own runs, in the same query: the series' all
        # read apart, 0.05-0.1 s more at 100,000 runs; a shift is between its points)
        ran = {r[0]: r[-1] for r in rows if r[-1] is not None}
        return _each_history([(series, fig, hist.points_of(rows, metrics, [fig])[fig], ran)],
                             min_change, reading)[0]


# a history to find: its series, figure, points and what each run ran (run id -> workload)
Asked = tuple[str, hist.Figure, Sequence[hist.Point], dict[int, str]]


def _asked(store: Store, series: str, *, up_to: int | None = None, read: Read | None = None,
           reading: Reading | None = None) -> list[Asked]:
    """The histories of a series to find: each headline figure and answer of its runs
    (up to run ``up_to``), from its figures (``read``: its first run's suite, its rows,
    the metrics they hold and its sections, as every_history reads them, when the caller
    has them; else read, each part given to ``reading``, which sends a figure of each test
    on to be searched as it comes)."""
    sections = None
    if read is not None:
        suite, rows, metrics, sections = read
    else:
        first = store.db.execute(
            f"SELECT r.suite, r.id FROM {series_from(store, series)} WHERE s.name = ?"
            " AND r.status = 'completed' ORDER BY r.created_at, r.id LIMIT 1",
            (series,)).fetchone()
        suite = first[0] if first else None
        every = hist.candidates(suite)
        metrics, others = _narrowed(store, first[1], every, suite) if first else (every, [])
        rows = series_values(store, series, hist.figure_paths(metrics), workload=True,
                             part=None if reading is None else _sent_alone(
                                 reading, metrics, series, suite), others=others)
        if reading is not None:
            reading.end()  # (the copy's last step while the rest is made here)
        if others and any(map(operator.itemgetter(-2), rows)):  # a later run has more
            metrics = every
            rows = series_values(store, series, hist.figure_paths(every), workload=True)
    answers = answered(store, series, len(rows), sections)
    if up_to is not None:
        # the series' runs up to that one, in the series' order (its start, then its id),
        # without reading the series' runs again (100,000 of them: 0.3 s)
        at = store.db.execute(
            "SELECT r.created_at FROM run_series s JOIN runs r ON r.id = s.run_id"
            " WHERE s.name = ? AND r.id = ? AND r.status = 'completed'",
            (series, up_to)).fetchone()
        if at is None:  # not a completed run of the series: nothing up to it
            rows, answers = [], {}
        else:
            last = (at[0], up_to)
            rows = [r for r in rows if (r[1], r[0]) <= last]
            answers = {f: [p for p in pts if (p.at, p.run) <= last]
                       for f, pts in answers.items()}
    # what each run ran, where its runs ran two or more (History.workload_shifts; one
    # workload all along, as most series: no dict of 100,000 runs, ~12 ms)
    ran = ({r[0]: r[-1] for r in rows if r[-1] is not None}
           if len({r[-1] for r in rows} - {None}) > 1 else {})
    measured = hist.points_of(rows, metrics, hist.figures_of(rows, metrics, suite))
    return [(series, f, pts, ran) for f, pts in [*measured.items(), *answers.items()]
            if pts]


def _narrowed(store: Store, first: int, metrics: list[Metric], suite: str | None
              ) -> tuple[list[Metric], list[tuple[str, ...]]]:
    """Of ``metrics`` (a series' candidates), those figures_of can name from its runs if
    they measured what its first run (``first``) did: its suite's, and the headline
    figures of each direction it measured (and sync's if it synced); and the figure
    columns of the rest, read as one (series_values' ``others``): a randread series'
    100,000 runs, 7 columns fewer, ~25 ms sooner. A run that measured more has one of
    them, and the series is read again with every metric."""
    from storbench.analysis.metrics import headline_metrics, metric
    from storbench.result.model import DIRECTIONS
    from storbench.store.series import COLUMNS
    from storbench.workload.suites import SUITES

    keys = [*(f"{d}.iops" for d in DIRECTIONS), "sync.lat_p99"]
    if not {metric(k) for k in keys} <= set(metrics):
        return metrics, []
    counts = store.db.execute(
        "SELECT " + ", ".join(f"count(f.{COLUMNS[value_path(metric(k))]})" for k in keys)
        + " FROM result_figures f WHERE f.run_id = ? AND f.host = ''", (first,)).fetchone()
    spec = SUITES.get(suite) if suite else None
    held = {*(metric(k) for t in (spec.tests if spec else ()) for k in t.metrics),
            *headline_metrics([d for d, n in zip(DIRECTIONS, counts[:3], strict=True) if n],
                              bool(counts[-1]))}
    rest = [value_path(m) for m in metrics if m not in held]
    if not all_columns(rest):
        return metrics, []
    return [m for m in metrics if m in held], rest


def _sent(reading: Reading, metrics: list[Metric]) -> Callable[[Groups], None]:
    """What gives ``reading`` each part of a read, by series (each its suite and rows):
    a figure of each test of each series is sent on to be searched (_to_search)."""
    floor = reading.min_change
    return lambda groups: reading.part(
        groups, lambda suite, rows: _to_search(rows, metrics, suite, floor))


def _sent_alone(reading: Reading, metrics: list[Metric], series: str, suite: str | None
                ) -> Callable[[list[tuple[Any, ...]]], None]:
    """_sent's, for a read of one series' rows."""
    sent = _sent(reading, metrics)
    return lambda rows: sent({series: (suite, rows)})


def _to_search(rows: Sequence[tuple[Any, ...]], metrics: list[Metric], suite: str | None,
               min_change: float) -> list[Chosen]:
    """The figures of a series to search as it is read, from its first rows: of each
    test, the first (figures_of's) whose values there vary by more than ``min_change``
    (so that it will be searched: find_each), else its first (searched once it does:
    analysis/ahead.py); each with what gives its values in rows, and whether it is
    better higher. One a test: each test's rows lengthen the read by about what the
    search of one figure takes."""
    tests: dict[str, list[hist.Figure]] = {}
    for fig in hist.figures_of(rows, metrics, suite):
        tests.setdefault(fig.test, []).append(fig)
    mine = hist.by_test(rows, set(tests))
    split = _split(set(tests), rows, mine)  # (this part's split is made: kept for it)
    chosen: list[Chosen] = []
    for test, figures in tests.items():
        fig = next((f for f in figures if _varies(hist.values_of(metrics, f)(mine[test]),
                                                   min_change)), figures[0])
        assert isinstance(fig.metric, Metric)
        values = hist.values_of(metrics, fig)
        chosen.append((lambda part, v=values, t=test: v(split(part)[t]),  # type: ignore[misc]
                       fig.metric.higher_is_better))
    return chosen


def _split(tests: set[str], rows: Sequence[tuple[Any, ...]], made: dict[str, list[Any]]
           ) -> Callable[[Sequence[tuple[Any, ...]]], dict[str, list[Any]]]:
    """hist.by_test of a part of rows, made once for every figure sent of it (each test's
    figure asks in turn: a run of 5 tests, 2 passes over a part, not 5); ``rows``' is
    ``made``."""
    last: list[Any] = [rows, made]

    def split(rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
        if last[0] is not rows:
            last[:] = [rows, hist.by_test(rows, tests)]
        return last[1]  # type: ignore[no-any-return]

    return split


def _varies(values: list[float], min_change: float) -> bool:
    """Whether find_each searches these values: they vary by more than ``min_change``."""
    return bool(values) and ((lo := min(values)) <= 0 or max(values) / lo - 1 > min_change)


def _each_history(asked: list[Asked], min_change: float, reading: Reading | None = None
                  ) -> list[hist.History]:
    """The history of each of ``asked``, with its change points: those of many figures
    found on two CPUs (changepoints.find_each), those ``reading`` sent searched as they
    were read."""
    points = [hist.Points.of(pts) for _, _, pts, _ in asked]
    found = find_each([(p.values, p.runs, fig.metric.higher_is_better)
                       for p, (_, fig, _, _) in zip(points, asked, strict=True)],
                      min_change=min_change, cache=ChangeCache(), ahead=reading)
    return [hist.History(series, fig, p, changes, ran) for p, changes, (series, fig, _, ran)
            in zip(points, found, asked, strict=True)]


def answered(store: Store, series: str, size: int | None = None,
             sections: list[tuple[int, str, str, Any]] | None = None
             ) -> dict[hist.Figure, list[hist.Point]]:
    """The answers of a kind's view in the series' runs (an application's
    ``postgresql.tps``, a curve's ``curve.max.iops``), each a figure over the runs that
    gave it, oldest first (``size``: about how many runs the series has, when known;
    ``sections``: its runs' as series_sections reads them, when the caller has them)."""
    from storbench.analysis.views import VIEWS, answers_of

    data: dict[int, tuple[str, dict[str, Any]]] = {}
    if sections is None:
        sections = series_sections(store, series, list(VIEWS), size)
    for run, at, key, value in sections:
        data.setdefault(run, (at, {}))[1][key] = value
    found: dict[hist.Figure, list[hist.Point]] = {}
    for run, (at, held) in data.items():
        for (prefix, name), a in answers_of(held).items():
            fig = hist.Figure(prefix, hist.Answered(name, a.kind, a.label or name))
            found.setdefault(fig, []).append(  # measured: answers_of leaves out the rest
                hist.Point(run, at, float(a.value or 0)))
    return found
