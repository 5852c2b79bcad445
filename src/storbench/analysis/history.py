"""A history that notices: the runs of one storage and suite form a series, and a change
in one of its figures is found where it began (E-Divisive means with a t-test, Apache
Otava's implementation of Fleming et al., "Hunter", ICPE 2023), never in the noise.

A series is named when its run starts: ``--series NAME``, else the suite and where the
I/O went (``quick@host1:/mnt/vol``, ``etcd@ctx:storageclass/fast``). A figure is named
``TEST.DIRECTION.FIGURE`` (``randread.read.iops``, ``etcd.sync.lat_p99``); a run's value
is the median over its repeats.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, overload

from storbench.analysis.changepoints import MAX_PVALUE as MAX_PVALUE
from storbench.analysis.changepoints import MIN_CHANGE as MIN_CHANGE
from storbench.analysis.changepoints import MIN_RUNS as MIN_RUNS
from storbench.analysis.changepoints import Cache, find_changes
from storbench.analysis.changepoints import Change as Change
from storbench.analysis.metrics import (
    Metric,
    headline_metrics,
    higher_is_better,
    metric,
    value_path,
)
from storbench.analysis.stats import floats
from storbench.errors import ConfigError
from storbench.result.model import DIRECTIONS


@dataclass(frozen=True)
class Figure:
    """``randread.read.iops``: a test and one of its metrics."""

    test: str  # or an answer's prefix (postgresql)
    metric: Metric | Answered

    @property
    def name(self) -> str:
        return f"{self.test}.{self.metric.key}"

    @classmethod
    def parse(cls, text: str) -> Figure:
        """The last direction word splits the test's name (which may hold dots) from
        the figure (which may too: ``clat_p99.9``)."""
        parts = text.split(".")
        for i in range(len(parts) - 2, 0, -1):
            if parts[i] in (*DIRECTIONS, "sync"):
                try:
                    return cls(".".join(parts[:i]), metric(".".join(parts[i:])))
                except ValueError:
                    break
        raise ConfigError(
            f"--metric {text!r} is not TEST.DIRECTION.FIGURE (e.g. randread.read.iops,"
            " etcd.sync.lat_p99, seqwrite.write.bw, randread.read.clat_p99.9)")


@dataclass(frozen=True)
class Answered:
    """A kind's named answer followed over a series' runs (an application's ``tps``: its
    figure ``postgresql.tps``), as ``Metric`` is a test's figure: in the base unit of its
    ``kind`` (views.base.Answer)."""

    key: str
    kind: str
    label: str

    @property
    def higher_is_better(self) -> bool:
        return higher_is_better(self.kind)


class Point(NamedTuple):
    run: int
    at: str  # when the run started (ISO 8601, UTC)
    value: float  # the median over its repeats, in base units (IOPS, bytes/s, ns)


class Points(Sequence[Point]):
    """A figure's points, oldest first, kept as three columns (100,000 of them: three
    lists, not 100,000 tuples made for the few that are shown); an index gives a Point,
    a slice Points."""

    __slots__ = ("ats", "runs", "values")

    def __init__(self, runs: list[int], ats: list[str], values: list[float]) -> None:
        self.runs, self.ats, self.values = runs, ats, values

    @classmethod
    def of(cls, points: Iterable[Point]) -> Points:
        if isinstance(points, Points):
            return points
        pts = list(points)
        return cls([p.run for p in pts], [p.at for p in pts], [p.value for p in pts])

    def __len__(self) -> int:
        return len(self.runs)

    @overload
    def __getitem__(self, i: int) -> Point: ...

    @overload
    def __getitem__(self, i: slice) -> Points: ...

    def __getitem__(self, i: int | slice) -> Point | Points:
        if isinstance(i, slice):
            return Points(self.runs[i], self.ats[i], self.values[i])
        return Point(self.runs[i], self.ats[i], self.values[i])

    def index_of(self, run: int) -> int | None:
        """Where run ``run``'s point is (None: it has none)."""
        try:
            return self.runs.index(run)
        except ValueError:
            return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Points({list(self)!r})"


@dataclass(frozen=True)
class History:
    series: str
    figure: Figure
    points: Points  # (a list of Point is taken, and kept as Points)
    changes: list[Change]
    workloads: dict[int, str] = field(default_factory=dict)  # run id -> what it ran

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", Points.of(self.points))

    def workload_shifts(self) -> dict[int, tuple[str, str]]:
        """Runs that ran another workload than the run before them (an edited job file,
        another --size in a series named with --series): run id -> (before, after), where
        a change may be the workload's. Runs with no stored workload are passed over."""
        return self._workload_shifts.copy()

    @functools.cached_property
    def _workload_shifts(self) -> dict[int, tuple[str, str]]:
        out: dict[int, tuple[str, str]] = {}
        if len(set(self.workloads.values())) < 2:
            return out  # one workload all along (100,000 runs: nothing to walk)
        last: str | None = None
        for run in self.points.runs:
            now = self.workloads.get(run)
            if now is None:
                continue
            if last is not None and now != last:
                out[run] = (last, now)
            last = now
        return out

    def stored(self) -> dict[str, Any]:
        """As kept between commands (cli/kept.py): plain values, the workloads' changes."""
        m = self.figure.metric
        return {"series": self.series, "test": self.figure.test,
                "metric": [m.key, m.kind] + ([m.label] if isinstance(m, Answered) else []),
                "runs": self.points.runs, "ats": self.points.ats, "values": self.points.values,
                "changes": [[c.index, c.run, c.before, c.after, c.pvalue, c.worse]
                            for c in self.changes],
                "shifts": [[run, *pair] for run, pair in self.workload_shifts().items()]}

    @classmethod
    def of_stored(cls, d: dict[str, Any]) -> History:
        """A history as ``stored`` kept it (KeyError, TypeError or ValueError: not one)."""
        key, kind, *label = d["metric"]
        fig = Figure(str(d["test"]), Answered(key, kind, label[0]) if label
                     else Metric(key, kind))
        h = cls(str(d["series"]), fig, Points(d["runs"], d["ats"], d["values"]),
                [Change(int(i), int(run), float(a), float(b), float(pv), bool(w))
                 for i, run, a, b, pv, w in d["changes"]])
        h.__dict__["_workload_shifts"] = {int(run): (str(was), str(now))
                                          for run, was, now in d["shifts"]}
        return h

    @property
    def too_short(self) -> bool:
        """Too few runs for any change to be found (MIN_RUNS on each side of one)."""
        return len(self.points) < 2 * MIN_RUNS

    @functools.cached_property
    def shift(self) -> Change | None:
        """Where no change point was found: a step too clear to be the runs' noise, though
        too few or too noisy runs to prove it (p under MAX_PVALUE): every run after it on
        one side of every run before it, by MIN_CHANGE or more and by 3 standard
        deviations of the runs about their own side's mean (pvalue: NaN, not tested).
        257–477 MiB/s and then 105–115 MiB/s was "runs vary by ±124.6%" and "within
        noise"; a spread that holds a step is not noise. None where there is none."""
        values = self.points.values
        n = len(values)
        if self.changes or n < 2 * MIN_RUNS:
            return None
        first, last = values[:MIN_RUNS], values[n - MIN_RUNS:]
        if not (max(first) < min(last) or min(first) > max(last)):
            return None  # each side holds one of its ends' MIN_RUNS runs: they overlap
        lo, hi = min(values), max(values)
        if lo > 0 and hi / lo - 1 < MIN_CHANGE:
            return None  # no two sides' means can differ by MIN_CHANGE: no step
        # each split in one pass (a 10,000-run overview asks every figure): the extremes
        # of each side, the splits where one side is wholly above the other (in C), and
        # only where there are some, running sums of the values (about their mean: no
        # cancellation) and of their squares (a noisy figure of 100,000 runs whose ends
        # do not overlap: 52 ms to 43 ms; of those whose ends overlap, 2 in 3, none)
        low, high = list(itertools.accumulate(values, min)), list(
            itertools.accumulate(values, max))
        after_low = list(itertools.accumulate(reversed(values), min))[::-1]
        after_high = list(itertools.accumulate(reversed(values), max))[::-1]
        cut = slice(MIN_RUNS, n - MIN_RUNS + 1)
        before = slice(MIN_RUNS - 1, n - MIN_RUNS)
        splits = list(itertools.compress(range(cut.start, cut.stop), map(
            operator.or_, map(operator.lt, high[before], after_low[cut]),
            map(operator.gt, low[before], after_high[cut]))))
        if not splits:
            return None
        mid = statistics.fmean(values)
        sums = [0.0, *itertools.accumulate(v - mid for v in values)]
        squares = [0.0, *itertools.accumulate(d * d for d in (v - mid for v in values))]
        best: tuple[float, int] | None = None
        for k in splits:
            sa, sb = sums[k], sums[n] - sums[k]
            a, b = mid + sa / k, mid + sb / (n - k)
            within = (squares[k] - sa * sa / k) + (squares[n] - squares[k] - sb * sb / (n - k))
            spread = math.sqrt(max(within, 0.0) / (n - 2))
            if not a or abs(b / a - 1) < MIN_CHANGE or abs(b - a) < 3 * spread:
                continue
            score = abs(b - a) / spread if spread else math.inf
            if best is None or score > best[0]:
                best = (score, k)
        if best is None:
            return None
        k = best[1]
        a, b = statistics.fmean(values[:k]), statistics.fmean(values[k:])
        return Change(k, self.points[k].run, a, b, math.nan,
                      (b < a) == self.figure.metric.higher_is_better)

    def segment(self, index: int) -> list[float]:
        """The values of the segment (between changes, or either side of a ``shift``)
        that holds point ``index``."""
        steps = self.changes or ([self.shift] if self.shift else [])
        cuts = [0, *(c.index for c in steps), len(self.points)]
        for lo, hi in itertools.pairwise(cuts):
            if lo <= index < hi:
                return self.points.values[lo:hi]
        return []

    def noise(self, index: int) -> float | None:
        """The relative spread (2 standard deviations over the mean) of the segment
        that holds point ``index``: what this storage varies by from run to run."""
        values = self.segment(index)
        mean = statistics.fmean(values) if len(values) >= 3 else 0.0
        if not mean:
            return None
        # (statistics.stdev computes in exact fractions: 0.1 s a figure of 100,000 runs)
        spread = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
        return 2 * spread / abs(mean)

    def pair_noise(self, index: int) -> float | None:
        """How far apart two runs of the stretch that holds point ``index`` may be and
        still be one level: 3 standard deviations of the difference of two runs (3·√2·σ
        over the mean), which 99.7% of such pairs stay within. (2σ of one run would call
        one pair in twenty of a steady volume better or worse.)"""
        one = self.noise(index)
        return None if one is None else one * 1.5 * math.sqrt(2)

    def change_at(self, run: int) -> Change | None:
        return next((c for c in self.changes if c.run == run), None)

    def last_change_before(self, index: int) -> Change | None:
        """The change that began the segment holding point ``index``."""
        before = [c for c in self.changes if c.index <= index]
        return before[-1] if before else None


Row = tuple[Any, ...]  # run id, its start, test, then the values at figure_paths
FIRST = 3  # a row's first value: the result's error


def figure_paths(metrics: Sequence[Metric]) -> list[tuple[str, ...]]:
    """What to read of each stored result for ``metrics``: its error, then each figure
    (`store.series.series_values`); ``points_of`` reads the rows in this order."""
    return [("error",), *(value_path(m) for m in metrics)]


def points_of(rows: Sequence[Row], metrics: Sequence[Metric], figs: Sequence[Figure]
              ) -> dict[Figure, Points]:
    """Each figure's points, one per run that has it: the median over its repeats, from
    ``rows`` of ``metrics``' ``figure_paths``. A column at a time (100,000 runs: a pass over
    the rows a figure, in comprehensions; runs of one result each, the most, no median)."""
    out: dict[Figure, Points] = {}
    mine = by_test(rows, {f.test for f in figs})
    whole: dict[str, tuple[list[int], list[str], bool]] = {}  # a test's runs, times, unique
    for fig in figs:  # (shared by each figure all its rows have: not once a figure)
        assert isinstance(fig.metric, Metric)
        at, every = FIRST + 1 + metrics.index(fig.metric), mine[fig.test]
        values = floats(list(map(operator.itemgetter(at), every)))  # no test of each
        found = every if values is not None else [
            r for r in every if (v := r[at]).__class__ in _NUMBERS and v == v]  # no NaN
        cols = whole.get(fig.test) if len(found) == len(every) else None
        if cols is None:
            ids = list(map(_RUN, found))
            cols = (ids, list(map(_AT, found)), len(set(ids)) == len(ids))
            whole.update({fig.test: cols} if len(found) == len(every) else {})
        if cols[2]:
            out[fig] = Points(cols[0], cols[1],
                              [float(r[at]) for r in found] if values is None else values)
            continue
        by_run: dict[int, tuple[str, list[float]]] = {}
        for r in found:
            by_run.setdefault(r[0], (r[1], []))[1].append(float(r[at]))
        out[fig] = Points(list(by_run), [started for started, _ in by_run.values()],
                          [vs[0] if len(vs) == 1 else statistics.median(vs)
                           for _, vs in by_run.values()])
    return out


_NUMBERS = (int, float)


def by_test(rows: Sequence[Row], tests: set[str]) -> dict[str, list[Row]]:
    """Each test's rows that did not fail: where each run holds the same k tests in one
    order, every k-th row (tested in C: a run of 5 tests, 2 passes over the rows, not 5)."""
    k = next((i for i, r in enumerate(rows) if r[0] != rows[0][0]), len(rows))
    cycle = [r[2] for r in rows[:k]]
    every = ({t: rows[i::k] for i, t in enumerate(cycle)} if rows and len(rows) % k == 0
             and len(set(cycle)) == k else {})
    if every and all(set(map(_TEST, got)) == {t} for t, got in every.items()):
        return {t: list(got) if set(map(_ERROR, got := every.get(t, []))) <= {0, None}
                else [r for r in got if not r[FIRST]] for t in tests}
    return {t: [r for r in rows if r[2] == t and not r[FIRST]] for t in tests}


_RUN, _AT, _TEST, _ERROR = (operator.itemgetter(i) for i in (0, 1, 2, FIRST))


def values_of(metrics: Sequence[Metric], fig: Figure) -> Callable[[Sequence[Row]], list[float]]:
    """``fig``'s values in its test's rows (by_test's): points_of's where a run has one
    result (analysis/ahead.py)."""
    assert isinstance(fig.metric, Metric)
    get = operator.itemgetter(FIRST + 1 + metrics.index(fig.metric))
    return lambda mine: (floats(got := list(map(get, mine)))
                         or [float(v) for v in got if v.__class__ in _NUMBERS and v == v])


def candidates(suite: str | None) -> list[Metric]:
    """Every metric ``figures_of`` may name for a series of ``suite``: its tests' headline
    metrics and what any test that no suite describes shows (``default_metrics``)."""
    from storbench.workload.suites import SUITES

    spec = SUITES.get(suite) if suite else None
    named = [metric(k) for t in spec.tests for k in t.metrics] if spec else []
    return list(dict.fromkeys([*named, *headline_metrics(DIRECTIONS, True)]))


def figures_of(rows: Sequence[Row], metrics: Sequence[Metric], suite: str | None = None
               ) -> list[Figure]:
    """Every headline figure the series' runs measured (its suite's, else what each test
    did: each direction it has, and sync latency), in the order first seen. ``rows`` hold
    the values of ``metrics``: ``candidates(suite)``, or those the rows can have."""
    from storbench.workload.suites import SUITES

    spec = SUITES.get(suite) if suite else None
    headline = {t.name: [metric(k) for k in t.metrics] for t in spec.tests} if spec else {}
    has = {m.key: FIRST + 1 + i for i, m in enumerate(metrics)}
    keys = [*(f"{d}.iops" for d in DIRECTIONS), "sync.lat_p99"]
    # (a figure ``metrics`` leave out, none of ``rows`` has: its place is the test's, never
    # None, and said False below)
    r, w, t, sync = (has.get(k, 2) for k in keys)
    # each test's shapes (which directions, whether it synced), in the order first seen:
    # 100,000 runs of one test have one
    shapes = dict.fromkeys((row[2], row[r] is not None, row[w] is not None,
                            row[t] is not None, row[sync] is not None) for row in rows)
    out: dict[Figure, None] = {}
    for test, *shape in shapes:
        *has_direction, synced = (yes and k in has for yes, k in zip(shape, keys, strict=True))
        directions = [d for d, yes in zip(DIRECTIONS, has_direction, strict=True) if yes]
        found = headline.get(test) or headline_metrics(directions, synced)
        out.update((Figure(test, m), None) for m in found)
    return list(out)


def history(series: str, fig: Figure, pts: Sequence[Point], *,
            min_change: float = MIN_CHANGE, max_pvalue: float = MAX_PVALUE,
            min_runs: int = MIN_RUNS, cache: Cache | None = None,
            workloads: dict[int, str] | None = None) -> History:
    points = Points.of(pts)
    return History(series, fig, points,
                   find_changes(points.values, points.runs, fig.metric.higher_is_better,
                                min_change=min_change, max_pvalue=max_pvalue,
                                min_runs=min_runs, cache=cache),
                   workloads or {})
