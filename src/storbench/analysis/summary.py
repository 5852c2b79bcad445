"""A run's results as rows: one per test and direction (read, write, trim, sync)."""

from __future__ import annotations

from dataclasses import dataclass

from storbench.result.model import Latency
from storbench.store import Run


@dataclass(frozen=True)
class SummaryRow:
    test: str
    direction: str  # read, write, trim, sync
    jobs: int
    failed: bool
    iops: float | None
    bw_bytes_per_s: float | None
    mean_ns: float | None  # completion latency (sync: the sync call's latency)
    p50_ns: float | None
    p99_ns: float | None
    p999_ns: float | None
    max_ns: float | None


def _lat_fields(lat: Latency | None) -> dict[str, float | None]:
    if lat is None:
        return dict(mean_ns=None, p50_ns=None, p99_ns=None, p999_ns=None, max_ns=None)
    return dict(
        mean_ns=lat.mean_ns,
        p50_ns=lat.percentile(50.0),
        p99_ns=lat.percentile(99.0),
        p999_ns=lat.percentile(99.9),
        max_ns=lat.max_ns,
    )


def summarize(run: Run) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    for stored in run.tests:
        r = stored.result
        if r.error:
            rows.append(SummaryRow(r.name, "-", r.jobs, True, None, None,
                                   **_lat_fields(None)))
            continue
        for name, d in r.directions():
            rows.append(SummaryRow(r.name, name, r.jobs, False, d.iops, d.bw_bytes_per_s,
                                   **_lat_fields(d.clat or d.lat)))
        if r.sync is not None:
            rows.append(SummaryRow(r.name, "sync", r.jobs, False, None, None,
                                   **_lat_fields(r.sync.lat)))
    return rows
