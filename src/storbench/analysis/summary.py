"""A run's results as rows: one per test and direction (read, write, trim, sync).

With repeats, every figure is the median over the repeats; IOPS also carry the
95% confidence interval half-width.
"""

from __future__ import annotations

from dataclasses import dataclass

from storbench.analysis import rates
from storbench.analysis.metrics import metric, value
from storbench.analysis.stats import estimate
from storbench.result.model import TestResult
from storbench.result.record import Run


@dataclass(frozen=True)
class SummaryRow:
    test: str
    direction: str  # read, write, trim, sync
    repeats: int
    failed: bool
    iops: float | None
    iops_ci95: float | None
    bw_bytes_per_s: float | None
    mean_ns: float | None  # completion latency (sync: the sync call's latency)
    p50_ns: float | None
    p99_ns: float | None
    p999_ns: float | None
    max_ns: float | None
    rate_asked: float | None = None  # a rate fio was asked for and did not keep (IOPS):
    # it fell behind (a saturated figure) or ran faster
    operation: str = ""  # what a direction is called where it is not fio's: "GET" (S3)


# an s3:// TARGET's (fio's http engine): each I/O one request on one whole object
OBJECT_OPERATIONS = {"read": "GET", "write": "PUT", "trim": "DELETE"}


_LAT_FIELDS = (("mean_ns", "mean"), ("p50_ns", "p50"), ("p99_ns", "p99"),
               ("p999_ns", "p99.9"), ("max_ns", "max"))


def summarize(run: Run) -> list[SummaryRow]:
    return summarize_tests(run.results_by_test())


def summarize_tests(by_test: dict[str, list[TestResult]]) -> list[SummaryRow]:
    """The rows of tests given as {test: results, one per repeat} (a run's, a host's)."""
    rows: list[SummaryRow] = []
    for name, results in by_test.items():
        if any(r.error for r in results):
            rows.append(SummaryRow(name, "-", len(results), True, None, None, None, None,
                                   None, None, None, None))
            continue
        directions = [d for d, _ in results[0].directions()]
        if results[0].sync is not None:
            directions.append("sync")
        for d in directions:
            def med(key: str, results: list[TestResult] = results) -> float | None:
                est = estimate(value(r, metric(key)) for r in results)
                return est.center if est else None

            asked = [rate.requested for rate in rates.off_rate(results[0])
                     if rate.direction == d and rate.unit == "IOPS"]
            lat = "sync.lat" if d == "sync" else f"{d}.clat"
            iops = None if d == "sync" else estimate(value(r, metric(f"{d}.iops"))
                                                     for r in results)
            operation = (OBJECT_OPERATIONS.get(d, "")
                         if results[0].options.get("ioengine") == "http" else "")
            rows.append(SummaryRow(
                name, d, len(results), False,
                iops.center if iops else None, iops.ci95 if iops else None,
                None if d == "sync" or operation == "DELETE" else med(f"{d}.bw"),
                rate_asked=asked[0] if asked else None, operation=operation,
                **{field: med(f"{lat}_{stat}") for field, stat in _LAT_FIELDS},
            ))
    return rows


@dataclass(frozen=True)
class HostRow:
    test: str
    host: str
    iops: float  # all directions together (median over repeats)
    bw_bytes_per_s: float
    clat_p99_ns: float | None  # the worst direction's
    runtime_s: float  # the host's longest job: when it finished, from the test's start


@dataclass(frozen=True)
class HostSpread:
    test: str
    rows: list[HostRow]
    first: HostRow  # first to finish
    last: HostRow  # last to finish
    slowest: HostRow  # fewest IOPS


def _host_row(test: str, host: str, results: list[TestResult]) -> HostRow:
    def med(values: list[float]) -> float:
        est = estimate(values)
        return est.center if est else 0.0

    iops = med([sum(d.iops for _, d in r.directions()) for r in results])
    bw = med([sum(d.bw_bytes_per_s for _, d in r.directions()) for r in results])
    p99s = [d.clat.percentile(99.0) for r in results for _, d in r.directions() if d.clat]
    runtime = med([max((d.runtime_ms for _, d in r.directions()), default=0) / 1000
                   for r in results])
    return HostRow(test, host, iops, bw, max((p for p in p99s if p is not None), default=None),
                   runtime)


def host_spread(run: Run) -> list[HostSpread]:
    """Per test of a many-host run: each host's share, and who finished first and last."""
    out = []
    for test, by_host in run.results_by_host().items():
        rows = [_host_row(test, host, results) for host, results in sorted(by_host.items())
                if not any(r.error for r in results)]
        if not rows:
            continue
        out.append(HostSpread(test, rows, min(rows, key=lambda r: r.runtime_s),
                              max(rows, key=lambda r: r.runtime_s),
                              min(rows, key=lambda r: r.iops)))
    return out
