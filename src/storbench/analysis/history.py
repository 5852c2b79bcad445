"""A history that notices: the runs of one storage and suite form a series, and a change
in one of its figures is found where it began (E-Divisive means with a t-test, Apache
Otava's implementation of Fleming et al., "Hunter", ICPE 2023), never in the noise.

A series is named when its run starts: ``--series NAME``, else the suite and where the
I/O went (``quick@host1:/mnt/vol``, ``etcd@ctx:storageclass/fast``). A figure is named
``TEST.DIRECTION.FIGURE`` (``randread.read.iops``, ``etcd.sync.lat_p99``); a run's value
is the median over its repeats.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from storbench.analysis.metrics import Metric, default_metrics, metric, value
from storbench.errors import ConfigError
from storbench.result.facts import TargetFacts
from storbench.result.model import DIRECTIONS, TestResult

MAX_PVALUE = 0.001  # Otava's default: a change this unlikely to be chance
MIN_CHANGE = 0.05  # below 5% a storage figure's change is not worth a word
MIN_RUNS = 2  # runs on each side of a change: a single odd run is an outlier, not a change


def auto_series(suite: str, target: str, facts: TargetFacts) -> str:
    """The series a run joins when nobody names one: its suite @ where its I/O went."""
    if facts.place == "here" and facts.hostname:
        return f"{suite}@{facts.hostname}:{target}"
    if facts.place == "pods" and facts.kube_context:
        return f"{suite}@{facts.kube_context}:{target}"
    return f"{suite}@{target}"


@dataclass(frozen=True)
class Figure:
    """``randread.read.iops``: a test and one of its metrics."""

    test: str
    metric: Metric

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
class Point:
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

    def segment(self, index: int) -> list[float]:
        """The values of the segment (between changes) that holds point ``index``."""
        cuts = [0, *(c.index for c in self.changes), len(self.points)]
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

    def change_at(self, run: int) -> Change | None:
        return next((c for c in self.changes if c.run == run), None)

    def last_change_before(self, index: int) -> Change | None:
        """The change that began the segment holding point ``index``."""
        before = [c for c in self.changes if c.index <= index]
        return before[-1] if before else None


def points(rows: Sequence[tuple[int, str, TestResult]], fig: Figure) -> list[Point]:
    """One point per run that has the figure: the median over its repeats."""
    by_run: dict[int, tuple[str, list[float]]] = {}
    for run, at, result in rows:
        if result.name != fig.test:
            continue
        v = value(result, fig.metric)
        if v is not None:
            by_run.setdefault(run, (at, []))[1].append(v)
    return [Point(run, at, statistics.median(vs)) for run, (at, vs) in by_run.items()]


def figures_of(rows: Sequence[tuple[int, str, TestResult]], suite: str | None = None
               ) -> list[Figure]:
    """Every headline figure the series' runs measured (its suite's, else what each test
    did), in the order first seen."""
    from storbench.workload.suites import SUITES

    spec = SUITES.get(suite) if suite else None
    headline = {t.name: [metric(k) for k in t.metrics] for t in spec.tests} if spec else {}
    out: list[Figure] = []
    for _, _, result in rows:
        for m in headline.get(result.name) or default_metrics(result):
            f = Figure(result.name, m)
            if f not in out:
                out.append(f)
    return out


def history(series: str, fig: Figure, pts: list[Point], *, min_change: float = MIN_CHANGE,
            max_pvalue: float = MAX_PVALUE, min_runs: int = MIN_RUNS) -> History:
    return History(series, fig, pts,
                   find_changes([p.value for p in pts], [p.run for p in pts],
                                fig.metric.higher_is_better, min_change=min_change,
                                max_pvalue=max_pvalue, min_runs=min_runs))


def find_changes(values: Sequence[float], runs: Sequence[int], higher_is_better: bool, *,
                 min_change: float = MIN_CHANGE, max_pvalue: float = MAX_PVALUE,
                 min_runs: int = MIN_RUNS) -> list[Change]:
    """Otava's change points, kept only where each side has ``min_runs`` runs, the
    change is significant at ``max_pvalue`` and at least ``min_change`` (relative)."""
    if len(values) < 2 * min_runs:
        return []
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo - 1 <= min_change:
        return []  # no two stretches' means can differ by more: nothing to look for
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
