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
import hashlib
import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from storbench.analysis.metrics import (
    Metric,
    headline_metrics,
    higher_is_better,
    metric,
    value_path,
)
from storbench.errors import ConfigError
from storbench.result.facts import TargetFacts
from storbench.result.model import DIRECTIONS

MAX_PVALUE = 0.001  # Otava's default: a change this unlikely to be chance
MIN_CHANGE = 0.05  # below 5% a storage figure's change is not worth a word
MIN_RUNS = 2  # runs on each side of a change: a single odd run is an outlier, not a change


def check_series_name(name: str | None) -> None:
    """ConfigError for a series name nobody could type or see (empty, control
    characters) or that reads as a run (digits, 'last'); None is no name (the run's own
    series)."""
    if name is not None and (not name.strip() or any(not c.isprintable() for c in name)):
        raise ConfigError(f"a series name must be printable text, not {name!r}")
    if name is not None and (name.isdigit() or name == "last"):
        raise ConfigError(f"a series name of digits alone, or 'last', reads as a run: {name!r}"
                          f" would be run #{name} to `check {name} --assert` and the series"
                          f" to `check {name} --no-change`; name it in words"
                          f" (e.g. {'nightly-' + name!r})")


def auto_series(suite: str, target: str, facts: TargetFacts) -> str:
    """The series a run joins when nobody names one: its suite @ where its I/O went
    (hosts: which ones, in any order; beyond three, the first and a digest of all)."""
    if facts.place == "here" and facts.hostname:
        return f"{suite}@{facts.hostname}:{target}"
    if facts.place == "pods" and facts.kube_context:
        return f"{suite}@{facts.kube_context}:{target}"
    if facts.place == "hosts" and facts.hosts:
        hosts = sorted(facts.hosts)
        digest = hashlib.sha256("\n".join(hosts).encode()).hexdigest()[:6]
        named = (", ".join(hosts) if len(hosts) <= 3 else
                 f"{hosts[0]} and {len(hosts) - 1} more #{digest}")
        return f"{suite}@{target} ({named})"
    return f"{suite}@{target}"


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


class Point(NamedTuple):  # a tuple: 100,000 of them are made at once
    run: int
    at: str  # when the run started (ISO 8601, UTC)
    value: float  # the median over its repeats, in base units (IOPS, bytes/s, ns)


@dataclass(frozen=True)
class Change:
    """A change point: the figure's level moved at ``run`` and stayed there."""

    index: int  # of the first point after the change
    run: int
    before: float  # the mean of the segment before
    after: float  # and after (up to the next change)
    pvalue: float  # that both segments have one mean (two-sided t-test)
    worse: bool  # for this metric (IOPS fell, latency rose)

    @property
    def relative(self) -> float:
        """after / before - 1: -0.29 is 29% lower."""
        return self.after / self.before - 1 if self.before else 0.0


@dataclass(frozen=True)
class History:
    series: str
    figure: Figure
    points: list[Point]
    changes: list[Change]
    workloads: dict[int, str] = field(default_factory=dict)  # run id -> what it ran

    def workload_shifts(self) -> dict[int, tuple[str, str]]:
        """Runs that ran another workload than the run before them (an edited job file,
        another --size in a series named with --series): run id -> (before, after). A
        change of a figure there may be the workload's, not the storage's. Runs with no
        stored workload (stored before it was kept) are passed over."""
        out: dict[int, tuple[str, str]] = {}
        last: str | None = None
        for p in self.points:
            now = self.workloads.get(p.run)
            if now is None:
                continue
            if last is not None and now != last:
                out[p.run] = (last, now)
            last = now
        return out

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
        values = [p.value for p in self.points]
        n = len(values)
        if self.changes or n < 2 * MIN_RUNS:
            return None
        # each split in one pass (a 10,000-run overview asks every figure): running
        # sums of the values (about their mean: no cancellation) and of their squares,
        # and the extremes of each side
        mid = statistics.fmean(values)
        centred = [v - mid for v in values]
        sums, squares = [0.0], [0.0]
        for v in centred:
            sums.append(sums[-1] + v)
            squares.append(squares[-1] + v * v)
        low, high = list(itertools.accumulate(values, min)), list(
            itertools.accumulate(values, max))
        after_low = list(itertools.accumulate(reversed(values), min))[::-1]
        after_high = list(itertools.accumulate(reversed(values), max))[::-1]
        best: tuple[float, int] | None = None
        for k in range(MIN_RUNS, n - MIN_RUNS + 1):
            if not (high[k - 1] < after_low[k] or low[k - 1] > after_high[k]):
                continue
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
                return [p.value for p in self.points[lo:hi]]
        return []

    def noise(self, index: int) -> float | None:
        """The relative spread (2 standard deviations over the mean) of the segment
        that holds point ``index``: what this storage varies by from run to run."""
        values = self.segment(index)
        if len(values) < 3 or not statistics.fmean(values):
            return None
        return 2 * statistics.stdev(values) / abs(statistics.fmean(values))

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


Row = tuple[int, str, str, list[Any]]  # run id, its start, test, values at figure_paths


def figure_paths(metrics: Sequence[Metric]) -> list[tuple[str, ...]]:
    """What to read of each stored result for ``metrics``: its error, then each figure
    (`store.series.series_values`); ``points`` reads the rows in this order."""
    return [("error",), *(value_path(m) for m in metrics)]


def points(rows: Sequence[Row], metrics: Sequence[Metric], fig: Figure) -> list[Point]:
    """One point per run that has the figure: the median over its repeats. ``rows`` hold
    the values of ``metrics`` (read with their ``figure_paths``)."""
    return points_of(rows, metrics, [fig])[fig]


def points_of(rows: Sequence[Row], metrics: Sequence[Metric], figs: Sequence[Figure]
              ) -> dict[Figure, list[Point]]:
    """``points`` of each figure, in one pass over the rows (an overview of 100,000
    runs read them once a figure)."""
    by_run: list[dict[int, tuple[str, list[float]]]] = [{} for _ in figs]
    wanted: dict[str, list[tuple[dict[int, tuple[str, list[float]]], int]]] = {}
    for fig, found in zip(figs, by_run, strict=True):
        assert isinstance(fig.metric, Metric)
        wanted.setdefault(fig.test, []).append((found, 1 + metrics.index(fig.metric)))
    for run, started, test, values in rows:
        of = wanted.get(test)
        if of is None or values[0]:
            continue
        for found, at in of:
            v = values[at]
            if isinstance(v, (int, float)) and not math.isnan(v):
                found.setdefault(run, (started, []))[1].append(float(v))
    return {fig: [Point(run, started, vs[0] if len(vs) == 1 else statistics.median(vs))
                  for run, (started, vs) in found.items()]
            for fig, found in zip(figs, by_run, strict=True)}


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
    the values of ``metrics``, which are ``candidates(suite)``."""
    from storbench.workload.suites import SUITES

    spec = SUITES.get(suite) if suite else None
    headline = {t.name: [metric(k) for k in t.metrics] for t in spec.tests} if spec else {}
    has = {m.key: 1 + i for i, m in enumerate(metrics)}
    at = [(d, has[f"{d}.iops"]) for d in DIRECTIONS]
    sync = has["sync.lat_p99"]
    out: dict[Figure, None] = {}
    done: set[tuple[str, tuple[str, ...], bool]] = set()  # a test's shape, once
    for _, _, test, values in rows:
        shape = (tuple(d for d, i in at if values[i] is not None), values[sync] is not None)
        if (test, *shape) in done:
            continue  # 100,000 runs of one test: its figures are known from the first
        done.add((test, *shape))
        found = headline.get(test) or headline_metrics(list(shape[0]), shape[1])
        out.update((Figure(test, m), None) for m in found)
    return list(out)


class Cache(Protocol):
    """Answers kept between commands (`store.changes.ChangeCache`)."""

    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...


def history(series: str, fig: Figure, pts: list[Point], *, min_change: float = MIN_CHANGE,
            max_pvalue: float = MAX_PVALUE, min_runs: int = MIN_RUNS,
            cache: Cache | None = None, workloads: dict[int, str] | None = None) -> History:
    return History(series, fig, pts,
                   find_changes([p.value for p in pts], [p.run for p in pts],
                                fig.metric.higher_is_better, min_change=min_change,
                                max_pvalue=max_pvalue, min_runs=min_runs, cache=cache),
                   workloads or {})


def find_changes(values: Sequence[float], runs: Sequence[int], higher_is_better: bool, *,
                 min_change: float = MIN_CHANGE, max_pvalue: float = MAX_PVALUE,
                 min_runs: int = MIN_RUNS, cache: Cache | None = None) -> list[Change]:
    """Otava's change points, kept only where each side has ``min_runs`` runs, the
    change is significant at ``max_pvalue`` and at least ``min_change`` (relative).
    With a ``cache``, an answer found before for the same values is not sought again."""
    if len(values) < 2 * min_runs:
        return []
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo - 1 <= min_change:
        return []  # no two stretches' means can differ by more: nothing to look for
    key = _key(values, higher_is_better, min_change, max_pvalue, min_runs)
    known = cache.get(key) if cache else None
    if isinstance(known, list):
        return [Change(i, runs[i], before, after, p, worse)
                for i, before, after, p, worse in known]
    out = _otava(values, runs, higher_is_better, min_change, max_pvalue, min_runs)
    if cache:
        cache.put(key, [[c.index, c.before, c.after, c.pvalue, c.worse] for c in out])
    return out


def _key(*question: object) -> str:
    """A digest of a question to the detector: its data, settings and version."""
    import hashlib
    import json
    from importlib.metadata import version

    text = json.dumps([version("apache-otava"), *question])
    return hashlib.sha256(text.encode()).hexdigest()


def _otava(values: Sequence[float], runs: Sequence[int], higher_is_better: bool,
           min_change: float, max_pvalue: float, min_runs: int) -> list[Change]:
    from otava.analysis import TTestSignificanceTester, compute_change_points, merge

    series = [float(v) for v in values]
    found, _ = compute_change_points(series, window_len=50, max_pvalue=max_pvalue,
                                     min_magnitude=min_change)
    # a change whose side holds fewer than min_runs runs is an outlier: dropped, and the
    # others' statistics recomputed over the segments that remain, then merged again
    tester = TTestSignificanceTester(max_pvalue)
    while True:
        cuts = [0, *(int(c.index) for c in found), len(series)]
        short = [i for i, c in enumerate(found)
                 if cuts[i + 1] - cuts[i] < min_runs or cuts[i + 2] - cuts[i + 1] < min_runs]
        if not short:
            break
        del found[short[0]]
        intervals = tester.get_intervals(found)
        found = [tester.change_point(c.to_candidate(), series, intervals) for c in found]
        found = merge(found, series, max_pvalue, min_change)
    out = []
    for c in found:
        before, after = float(c.stats.mean_1), float(c.stats.mean_2)
        out.append(Change(int(c.index), runs[int(c.index)], before, after,
                          float(c.stats.pvalue),
                          after < before if higher_is_better else after > before))
    return out


@dataclass(frozen=True)
class Mark:
    """A change point where it begins, for a time series (Grafana annotates it)."""

    series: str
    figure: str
    relative: float
    worse: bool


def marks(histories: Iterable[History]) -> dict[int, list[Mark]]:
    """Per run id, the change points that begin at that run."""
    out: dict[int, list[Mark]] = {}
    for h in histories:
        for c in h.changes:
            out.setdefault(c.run, []).append(Mark(h.series, h.figure.name, c.relative, c.worse))
    return out
