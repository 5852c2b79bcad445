"""Apache Otava's change point detection (E-Divisive means in sliding windows, then the
merge of weak change points: Fleming et al., "Hunter", ICPE 2023), over long series in
a fraction of its time and without importing scipy.

Otava's own `compute_change_points` runs its detector on every window of 50 points,
half a window apart: 4,000 windows and 1.7-2.8 s over 100,000 runs, and scipy.stats is
imported for its t-test (0.3-0.5 s). Here the same windows are visited in the same
order, and a window is handed to Otava's detector (`detect`: its `ChangePointDetector`
with its `PairDistanceCalculator`, their operations bit for bit, without computing an
interval's Q-hat twice) unless it cannot hold a change: the detector's first candidate
in a window is the split that maximises Q-hat over the whole window, and it stops there
unless that split's t-test has p <= the first pass's limit. So a window is skipped when
no split at all has a |t| that reaches the limit's (a hair below it: MARGIN), computed
for many windows at once. In noise ~18% of the windows are searched, and ~12% hold a
weak change point at the first pass's p <= 0.01. The t-test is Otava's
(Student's, pooled variances, from numpy's population standard deviations, as its
`TTestSignificanceTester` calls scipy's `ttest_ind_from_stats`), its p from
analysis/ttest.py (no scipy). The answers are Otava's:
tests/analysis/test_edivisive.py compares them on many series, bench/history.py times
both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
from numpy.typing import NDArray
from otava.change_point_divisive.base import (
    BaseStats,
    CandidateChangePoint,
    ChangePoint,
    SignificanceTester,
)

from storbench.analysis.ttest import critical_t, pvalue, t_of

Arr = NDArray[Any]  # of floats, or of bools
WINDOW = 50  # Otava's default window_len
MARGIN = 1.001  # a split is screened against the limit and a little more: this t-test's
# p and scipy's differ in their last bits (1e-12 relative in the tests)
AHEAD = 16  # windows screened at once (in noise ~8 in a row cannot hold a change: more
# would be screened for nothing; doubling them while none held one gained nothing)


@dataclass
class Stats(BaseStats):  # type: ignore[misc]  # Otava is untyped
    """Otava's TTestStats: the two sides' means and population standard deviations."""

    mean_1: float
    mean_2: float
    std_1: float
    std_2: float

    def forward_rel_change(self, value_if_nan: float = 0) -> float:
        return value_if_nan if self.mean_1 == 0 else self.mean_2 / self.mean_1 - 1.0

    def backward_rel_change(self, value_if_nan: float = 0) -> float:
        return value_if_nan if self.mean_2 == 0 else self.mean_1 / self.mean_2 - 1.0

    def change_magnitude(self) -> float:
        return max(abs(self.forward_rel_change()), abs(self.backward_rel_change()))


class Point(Protocol):
    """Otava's ChangePoint (untyped) with Stats."""

    index: int
    qhat: float
    stats: Stats

    def to_candidate(self) -> CandidateChangePoint: ...


_sum = np.add.reduce


def _mean_std(x: Arr) -> tuple[float, float]:
    """np.mean(x) and np.std(x) (0 for one value) of a 1-d array of floats, bit for bit:
    numpy's own reductions (pairwise sums) in the order np.mean and np.std make them,
    without their wrappers (a tenth of a millisecond a call, thousands of calls)."""
    n = len(x)
    mean = _sum(x) / n
    if n < 2:
        return float(mean), 0.0
    d = x - mean
    return float(mean), math.sqrt(_sum(d * d) / n)


class Tester(SignificanceTester):  # type: ignore[misc]  # Otava is untyped
    """Otava's TTestSignificanceTester, its p from analysis/ttest.py."""

    def compare(self, left: Arr, right: Arr) -> Stats:
        if len(left) == 0 or len(right) == 0:
            raise ValueError
        mean_l, std_l = _mean_std(left)
        mean_r, std_r = _mean_std(right)
        p = (pvalue(mean_l, std_l, len(left), mean_r, std_r, len(right))
             if len(left) + len(right) > 2 else 1.0)
        return Stats(mean_1=mean_l, mean_2=mean_r, std_1=std_l, std_2=std_r, pvalue=p)

    def significant(self, left: Arr, right: Arr) -> Stats | None:
        """compare's stats where their p <= max_pvalue, else None. Where |t| is below the
        limit's (critical_t: a hair below it) p is not computed: its continued fraction
        was ~20% of a search's time, and most windows searched hold no change."""
        n_l, n_r = len(left), len(right)
        if n_l and n_r and n_l + n_r > 2:
            mean_l, std_l = _mean_std(left)
            mean_r, std_r = _mean_std(right)
            t = t_of(mean_l, std_l, n_l, mean_r, std_r, n_r)
            if t is not None and abs(t) < critical_t(n_l + n_r - 2, self.max_pvalue):
                return None
            stats = Stats(mean_1=mean_l, mean_2=mean_r, std_1=std_l, std_2=std_r,
                          pvalue=pvalue(mean_l, std_l, n_l, mean_r, std_r, n_r))
        else:
            stats = self.compare(left, right)
        return stats if stats.pvalue <= self.max_pvalue else None

    def change_point(self, candidate: CandidateChangePoint, series: Any,
                     intervals: list[slice]) -> Point:
        """The candidate's statistics: a new split of the interval it falls in, or (as
        the merge asks) the two intervals it already ends and begins."""
        for i, interval in enumerate(intervals):
            if interval.stop == candidate.index:
                left_interval, right_interval = interval, intervals[i + 1]
                break
            if ((interval.start is None or interval.start < candidate.index)
                    and (interval.stop is None or candidate.index < interval.stop)):
                left_interval = slice(interval.start, candidate.index)
                right_interval = slice(candidate.index, interval.stop)
                break
        else:
            raise ValueError(f"no interval of {intervals} holds index {candidate.index}")
        stats = self.compare(np.asarray(series[left_interval], dtype=float),
                             np.asarray(series[right_interval], dtype=float))
        return cast(Point, ChangePoint.from_candidate(candidate, stats))


def compute_change_points(series: Sequence[float], max_pvalue: float = 0.001,
                          min_magnitude: float = 0.0, weak: list[Point] | None = None
                          ) -> list[Point]:
    """otava.analysis.compute_change_points(series, WINDOW, max_pvalue, min_magnitude)'s
    change points (the first of what it returns); ``weak``: the series' split at
    first_pvalue(max_pvalue), when a Splitter made it as the series was read."""
    values = as_array(series)
    if weak is None:
        weak = split(values, first_pvalue(max_pvalue))
    return merge(weak, values, max_pvalue, min_magnitude)


def first_pvalue(max_pvalue: float) -> float:
    """The limit of Otava's first pass (split) for a ``max_pvalue``."""
    return max_pvalue * 10 if max_pvalue < 0.05 else (
        max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue)


def as_array(series: Sequence[float]) -> Arr:
    """The series as this module's functions take it."""
    return np.asarray(series, dtype=float)


def split(values: Arr, max_pvalue: float) -> list[Point]:
    """Otava's split step (analysis.split, not incremental): its windows in its order,
    those that cannot hold a change skipped."""
    splitter = Splitter(max_pvalue)
    splitter.feed(values)
    return splitter.end()


class Splitter:
    """``split`` of a series given in parts, as it is read (analysis/ahead.py): each
    window searched once its points have all come, the last ones (shorter than a window)
    at the end. Its answer is split's of the whole series: a window's answer depends on
    its own points only, and which windows are visited on those answers."""

    def __init__(self, max_pvalue: float) -> None:
        self.max_pvalue = max_pvalue
        self.tester = Tester(max_pvalue)
        self.values = np.empty(1 << 12)
        self.n = 0  # of values given
        self.start = 0  # the next window
        # windows screened ahead, by start: AHEAD from here on; a change moves the windows
        # off them
        self.skip: dict[int, bool] = {}
        self.found: list[Point] = []
        self.seen: set[int] = set()

    def feed(self, values: Arr | Sequence[float]) -> None:
        """The series' next values: the windows they complete searched."""
        more = np.asarray(values, dtype=float)
        if self.n + len(more) > len(self.values):
            grown = np.empty(max(2 * len(self.values), self.n + len(more)))
            grown[:self.n] = self.values[:self.n]
            self.values = grown
        self.values[self.n:self.n + len(more)] = more
        self.n += len(more)
        self._walk(ended=False)

    def end(self) -> list[Point]:
        """The series is whole: its last windows searched, and split's answer."""
        self._walk(ended=True)
        values = self.values[:self.n]
        self.found.sort(key=lambda cp: cp.index)
        return [restated(self.tester, values, self.found, i) for i in range(len(self.found))]

    def _walk(self, ended: bool) -> None:
        n, step, values = self.n, WINDOW // 2, self.values[:self.n]
        while self.start < n:
            start = self.start
            end = min(start + WINDOW, n)
            if end - start < WINDOW:
                if not ended:  # its points are yet to come
                    return
                cannot = _cannot_change(values, [start], self.max_pvalue, end - start)[0]
            else:
                if start not in self.skip:
                    starts = list(range(start, min(n - WINDOW, start + (AHEAD - 1) * step)
                                        + 1, step))
                    self.skip = dict(zip(starts, _cannot_change(values, starts,
                                                                self.max_pvalue),
                                         strict=True))
                cannot = self.skip[start]
            new = [] if cannot else detect(values[start:end], self.tester)
            for cp in new:
                cp.index += start
            last = new[-1].index if new else 0
            self.start = max(last, start + step)
            # Otava's `cp not in`: by index
            self.found += [cp for cp in new if cp.index not in self.seen]
            self.seen.update(cp.index for cp in new)


def detect(window: Arr, tester: Tester) -> list[Point]:
    """Otava's ChangePointDetector(tester, PairDistanceCalculator).get_change_points over
    one window: the same candidates in the same order (each interval's Q-hat computed
    with its calculator's operations, bit for bit, once: Otava computes every interval's
    again at each step) and the same t-tests; the change points, by index."""
    n = len(window)
    # (PairDistanceCalculator's np.power(..., 1.0) gives each value as it is: left out;
    # np.triu's mask made once a length)
    distances = np.abs(np.subtract.outer(window, window))
    triu = np.where(_upper(n), distances, 0.0)[:-1, 1:]
    v, h = triu.sum(axis=0), triu.cumsum(axis=1)
    best: dict[tuple[int, int], tuple[int, float]] = {}
    cuts: list[int] = []
    found: list[Point] = []
    while True:
        top: tuple[int, float, int, int] | None = None
        for start, end in zip([0, *cuts], [*cuts, n], strict=True):
            if end - start < 2:
                continue
            if (start, end) not in best:
                best[start, end] = _candidate(distances, v, h, start, end)
            index, qhat = best[start, end]
            if top is None or qhat > top[1]:  # the first of equals, as max() picks
                top = (index, qhat, start, end)
        if top is None:
            break
        index, qhat, start, end = top
        stats = tester.significant(window[start:index], window[index:end])
        if stats is None:
            break
        found.append(cast(Point, ChangePoint(index=index, qhat=qhat, stats=stats)))
        cuts = sorted([*cuts, index])
    return sorted(found, key=lambda cp: cp.index)


_UPPER: dict[int, Arr] = {}


def _upper(n: int) -> Arr:
    """Where np.triu(..., k=1) of an n x n array keeps its values."""
    if n not in _UPPER:
        _UPPER[n] = ~np.tri(n, n, k=0, dtype=bool)
    return _UPPER[n]


_COEFS: dict[int, tuple[Arr, Arr, Arr, Arr]] = {}


def _coefficients(length: int) -> tuple[Arr, Arr, Arr, Arr]:
    """PairDistanceCalculator._get_Q_vals's coefficients of A, B and C for an interval of
    ``length`` points, computed as it computes them (they depend on the length only), and
    where np.triu(..., k=0) zeroes."""
    if length not in _COEFS:
        taus = np.arange(1, length)[:, None]
        kappas = np.arange(2, length + 1)[None, :]
        a = 2 / kappas
        b_den = kappas * (taus - 1)
        b_mask = np.triu(np.ones_like(b_den, dtype=bool), k=0)
        b = np.divide(2 * (kappas - taus), b_den, out=np.zeros_like(b_den, dtype=float),
                      where=b_mask & (b_den != 0))
        c_den = kappas * (kappas - taus - 1)
        c_mask = np.triu(np.ones_like(c_den, dtype=bool), k=1)
        c = np.divide(2 * taus, c_den, out=np.zeros_like(c_den, dtype=float),
                      where=c_mask & (c_den != 0))
        below = np.tri(length - 1, length - 1, k=-1, dtype=bool)
        _COEFS[length] = (a, b[1:, 1:], c[:-1, 1:], below)
    return _COEFS[length]


def _candidate(distances: Arr, v_all: Arr, h_all: Arr, start: int, end: int
               ) -> tuple[int, float]:
    """PairDistanceCalculator.get_candidate_change_point(slice(start, end)): the index
    and Q-hat of the split that maximises Q-hat over series[start:end], the values bit for
    bit as its _get_Q_vals gives them (A - B - C; adding or taking 0 changes no value)."""
    a_coef, b_coef, c_coef, below = _coefficients(end - start)
    v = (v_all[start:end - 1] - distances[0:start, start + 1:end].sum(axis=0) if start
         else v_all[:end - 1])  # (less nought: the same values)
    h = h_all[start:end - 1, start:end - 1]
    cv = v.cumsum()  # (the methods: np.cumsum's wrapper cost more than a short sum)
    q = h.cumsum(axis=0)
    q[1:, :] -= cv[:-1, None]
    q[below] = 0.0  # (np.where(below, 0, A) times a_coef; in place: fewer arrays made)
    q *= a_coef
    q[1:, 1:] -= b_coef * cv[:-1, None]
    c = h[:0:-1, 1:].cumsum(axis=0)  # (from the last row up: its flipud's sums)
    c *= c_coef[::-1]
    q[:-1, 1:] -= c[::-1]
    i, j = divmod(int(q.argmax()), q.shape[1])
    return i + 1 + start, q[i, j]


def merge(points: list[Point], values: Arr, max_pvalue: float,
          min_magnitude: float) -> list[Point]:
    """Otava's merge step (analysis.merge): the weakest point dropped until every one is
    significant and large enough, its neighbours' statistics recomputed."""
    tester = Tester(max_pvalue)
    # each point's p and magnitude beside it, so that the weakest is found in C: the
    # first of the highest p (or of the least magnitude), as max()/min() with a key
    # find it (ps.index finds the same object first: a NaN is the highest only first)
    ps = [cp.stats.pvalue for cp in points]
    sizes = [cp.stats.change_magnitude() for cp in points]
    while points:
        at = ps.index(max(ps))
        if ps[at] < max_pvalue:
            at = sizes.index(min(sizes))
            if sizes[at] > min_magnitude:
                return points
        del points[at], ps[at], sizes[at]
        for i in (at, at + 1):
            if 0 <= i < len(points):
                points[i] = restated(tester, values, points, i)
                ps[i], sizes[i] = points[i].stats.pvalue, points[i].stats.change_magnitude()
    return points


def restated(tester: Tester, values: Arr, points: list[Point],
             i: int) -> Point:
    """points[i] with the statistics of the segments it ends and begins (between its
    neighbours): Otava's change_point of a point that is an interval's end."""
    cp = points[i]
    low = points[i - 1].index if i > 0 else 0
    high = points[i + 1].index if i + 1 < len(points) else len(values)
    # (ChangePoint.from_candidate(cp.to_candidate(), ...): to_candidate reads the
    # dataclass's fields by reflection, a tenth of the merge's time)
    return cast(Point, ChangePoint(index=cp.index, qhat=cp.qhat, stats=tester.compare(
        values[low:cp.index], values[cp.index:high])))


def _cannot_change(values: Arr, starts: list[int], max_pvalue: float,
                   width: int = WINDOW) -> list[bool]:
    """For each window values[s:s + width], whether Otava's detector surely finds no
    change in it: no split is significant at MARGIN x max_pvalue. (Which split the
    detector picks first, the top of Q-hat, was screened here too: in noise it spared
    a third of the windows left, and cost more than searching them.)"""
    s = np.asarray(starts, dtype=np.intp)
    x = values[s[:, None] + np.arange(width)[None, :]]  # windows x points
    x = x - x.mean(axis=1, keepdims=True)
    significant = _split_t(x) >= critical_t(width - 2, MARGIN * max_pvalue)
    held = cast(Arr, significant.any(axis=1))
    return [not bool(a) for a in held]


def _split_t(x: Arr) -> Arr:
    """|t| of the t-test of x[:, :tau] against x[:, tau:] for tau = 1 .. width - 1 (each
    of df = width - 2), inf where it has no spread (so that the detector decides)."""
    width = x.shape[1]
    n1 = np.arange(1, width, dtype=float)[None, :]
    n2 = width - n1
    s1, q1 = x.cumsum(axis=1)[:, :-1], (x * x).cumsum(axis=1)[:, :-1]
    total, squares = x.sum(axis=1, keepdims=True), (x * x).sum(axis=1, keepdims=True)
    m1, m2 = s1 / n1, (total - s1) / n2
    # pooled as scipy pools what Otava gives it: ((n1 - 1) v1 + (n2 - 1) v2) / df, with
    # v the population variances (np.std's squared)
    v1 = np.maximum(q1 / n1 - m1 * m1, 0.0)
    v2 = np.maximum((squares - q1) / n2 - m2 * m2, 0.0)
    spread = (n1 - 1) * v1 + (n2 - 1) * v2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(m1 - m2) / np.sqrt(spread / (width - 2.0) * (1.0 / n1 + 1.0 / n2))
    return np.where(np.isnan(t), np.inf, t)
