"""A layer's figures from its histogram of the trace (execute/layers.py's buckets), and how
a layer's p99 is said beside fio's (analysis/explain.py).

Per call, a layer's time is within the call's, and the call's within fio's own timing of
it (fio reads its clock around the call). So a layer's p99 longer than fio's p99 is no
share of it: either the two are the same within a bucket of the trace's (12.5% wide:
each is said by its middle), or, at a few hundred calls, the p99 is one of their longest
few, and the trace's and fio's rank a call apart (the trace's window is of whole slices
of time, a partial first one left out: 198 syncs' p99 was their 2nd longest, 1.90 ms,
fio's of 200 its 3rd, 1.20 ms: Redis' aof_idle on the test-bed's cap, 2026-12-06).
Either is said so, never as "158% of p99"."""

from __future__ import annotations

import math
from typing import Any

from storbench.workload.sizes import format_latency

BUCKET = 1.125  # a bucket's top over its bottom (8 buckets per power of two)


def bucket_value(b: int) -> float:
    """The middle of histogram bucket ``b`` (execute/layers._bucket), in ns."""
    if b < 16:
        return float(b)
    m, sub = b // 8 + 2, b % 8
    low = (8 + sub) << (m - 3)
    return low + (1 << (m - 3)) / 2


def percentile(hist: dict[int, int], q: float) -> float | None:
    total = sum(hist.values())
    if not total:
        return None
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= q * total:
            return bucket_value(b)
    return bucket_value(max(hist))


def layer_figures(hist: dict[int, int]) -> dict[str, Any]:
    """A layer's count, p50, p99 and mean (from its buckets' middles: within 6%)."""
    n = sum(hist.values())
    total = sum(bucket_value(b) * c for b, c in hist.items())
    return {"n": n, "p50_ns": percentile(hist, 0.5), "p99_ns": percentile(hist, 0.99),
            "mean_ns": round(total / n, 1) if n else None}


def share(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 1)


def part_of(part: float | None, p99: float | None, n: int, whose: str = "fio's") -> str:
    """A layer's p99 ``part`` (of ``n`` calls) beside fio's ``p99`` (``whose``: how it is
    named): "58% of p99 (3.01 ms of fio's 5.21 ms)", or where it is longer, beyond()'s."""
    lat = format_latency
    return beyond(part, p99, n, whose) or \
        f"{share(part, p99) or 0:.0f}% of p99 ({lat(part)} of {whose} {lat(p99)})"


def beyond(part: float | None, p99: float | None, n: int, whose: str = "fio's") -> str | None:
    """What a layer's p99 ``part`` (of ``n`` calls) longer than fio's ``p99`` is (module
    docstring); None where it is not longer."""
    if part is None or not p99 or part <= p99:
        return None
    lat = format_latency
    figure = whose if whose.endswith("p99") else f"{whose} p99"
    said = f"{lat(part)} at p99, {figure} {lat(p99)}"
    if part <= p99 * BUCKET:
        return f"all of p99 ({said}: the same within the trace's buckets)"
    if n < 1000:
        rank = n - math.ceil(0.99 * n) + 1
        nth = {1: "longest", 2: "2nd longest", 3: "3rd longest"}.get(rank, f"{rank}th longest")
        return (f"as long as {figure} or longer ({said}: at {n:,} calls a p99 is their {nth},"
                " too few to set beside fio's)")
    return f"as long as {figure} or longer ({said})"
