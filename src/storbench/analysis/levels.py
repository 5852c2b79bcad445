"""Levels in a per-second series: a plateau that drops for good (burst credits running
out), or a dip that comes back (a stall), told apart and timed.

The series is first smoothed by a running median of 3 (a single odd second is
noise, not a level), then cut where it changes: once (a drop) or twice (a dip and
its end), each cut placed where the levels on both sides fit the samples best
(least squares over the smoothed series). The levels themselves are the medians of
the raw samples between the cuts, and two levels count only when they are clearly
apart (the quartiles of their samples do not overlap): noise around one level
never makes a plateau.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

DROP = 0.30  # a level at least this much lower than the one before it
BACK = 0.85  # a dip is over when the series is back to this share of its earlier level
MIN_SAMPLES = 6
GRID = 150  # the cuts are searched on at most this many positions (long series)


@dataclass(frozen=True)
class Shift:
    kind: Literal["drop", "dip"]
    before: float  # the level before the change
    low: float  # the lower level
    start_s: float  # when the lower level began: the plateau's length for a drop
    end_s: float | None = None  # a dip: when the series came back
    back: float | None = None  # a dip: the level it came back to

    @property
    def length_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


def smooth(values: list[float]) -> list[float]:
    """Running median of 3 (the ends keep their own value)."""
    if len(values) < 3:
        return list(values)
    inner = [statistics.median(values[i - 1:i + 2]) for i in range(1, len(values) - 1)]
    return [values[0], *inner, values[-1]]


def find(t_s: list[float], values: list[float]) -> Shift | None:
    """The drop or dip in the series, or None when it holds one level."""
    n = len(values)
    if n < MIN_SAMPLES or n != len(t_s):
        return None
    sm = smooth(values)
    sums = [0.0, *accumulate(sm)]
    squares = [0.0, *accumulate(x * x for x in sm)]

    def cost(i: int, j: int) -> float:
        s = sums[j] - sums[i]
        return squares[j] - squares[i] - s * s / (j - i)

    step = max(1, n // GRID)
    cuts = range(2, n - 1, step)
    start0 = t_s[0] - (t_s[1] - t_s[0])  # the series' first interval began here

    def at(k: int) -> float:
        """Seconds into the series when sample k began (the end of the one before)."""
        return t_s[k - 1] - start0

    pairs = ((i, j) for i in cuts for j in range(i + 2, n - 1, step))
    best2 = min(pairs, key=lambda p: cost(0, p[0]) + cost(*p) + cost(p[1], n), default=None)
    if best2 is not None:
        i, j = best2
        first, mid, last = values[:i], values[i:j], values[j:]
        m0, m1, m2 = (statistics.median(x) for x in (first, mid, last))
        if (m0 > 0 and m1 <= (1 - DROP) * m0 and m2 >= BACK * m0
                and _apart(first, mid) and _apart(last, mid)):
            return Shift("dip", m0, m1, at(i), at(j), m2)
    k = min(cuts, key=lambda c: cost(0, c) + cost(c, n))
    before, after = values[:k], values[k:]
    b, a = statistics.median(before), statistics.median(after)
    if b > 0 and a <= (1 - DROP) * b and _apart(before, after):
        return Shift("drop", b, a, at(k))
    return None


def _apart(high: list[float], low: list[float]) -> bool:
    """The two sets of samples are two levels: high's lower quartile above low's upper."""
    return _quantile(high, 0.25) > _quantile(low, 0.75)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
