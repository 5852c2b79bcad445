"""Merging latency of several jobs (or hosts) exactly, from fio's json+ histogram bins.

Percentiles are never averaged: bins are summed, then each percentile is read off
the merged histogram with fio's own rule (the first bucket whose cumulative count
reaches p% of all samples), so one job's percentiles come out exactly as fio's.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from storbench.result.model import Latency

FIO_PERCENTILES = (
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0,
    90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99,
)


def percentiles_from_bins(
    bins: Mapping[int, int], percentiles: Iterable[float] = FIO_PERCENTILES
) -> dict[float, float]:
    """Percentiles (ns) from a histogram, with fio's rule (``calc_clat_percentiles``)."""
    total = sum(bins.values())
    if total == 0:
        return {}
    ordered = sorted(bins.items())
    out: dict[float, float] = {}
    for p in sorted(percentiles):
        threshold = p / 100.0 * total
        cumulative = 0
        for value, count in ordered:
            cumulative += count
            if cumulative >= threshold:
                out[p] = float(value)
                break
    return out


def merge_latency(parts: Sequence[Latency]) -> Latency | None:
    """One Latency for all parts: counts and bins summed, mean weighted, stdev pooled.

    Percentiles are merged from the bins; without bins (plain json) a single part
    keeps fio's percentiles and several parts get none (they cannot be merged).
    """
    parts = [p for p in parts if p.samples > 0]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    n = sum(p.samples for p in parts)
    mean = sum(p.mean_ns * p.samples for p in parts) / n
    variance = sum(p.samples * (p.stdev_ns**2 + (p.mean_ns - mean) ** 2) for p in parts) / n
    has_bins = all(p.bins for p in parts)
    bins: Counter[int] = Counter()
    if has_bins:
        for p in parts:
            bins.update(p.bins)
    wanted = sorted({k for p in parts for k in p.percentiles_ns} or FIO_PERCENTILES)
    return Latency(
        samples=n,
        min_ns=min(p.min_ns for p in parts),
        max_ns=max(p.max_ns for p in parts),
        mean_ns=mean,
        stdev_ns=math.sqrt(variance),
        percentiles_ns=percentiles_from_bins(bins, wanted) if has_bins else {},
        bins=dict(sorted(bins.items())),
    )
