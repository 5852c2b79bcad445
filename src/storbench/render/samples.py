"""A run's figures as labelled samples in base units: what the time-series formats
(OpenMetrics, Prometheus text, InfluxDB line protocol, NDJSON) write.

One sample per run, test, direction (read, write, trim, sync), host (a many-host
run's hosts each, and all together) and figure; a figure that was not measured is no
sample at all, never a zero. Figures are medians over the run's repeats, as in
`storbench show`. A sample's time is the run's end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from storbench.analysis.summary import SummaryRow, summarize_tests
from storbench.result.model import Latency, TestResult
from storbench.result.record import Run

if TYPE_CHECKING:
    from storbench.analysis.history import History

PREFIX = "storbench_"


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


@dataclass(frozen=True)
class Family:
    name: str  # without PREFIX; its unit is its suffix
    unit: str  # OpenMetrics UNIT ("" for a count per second)
    help: str
    type: str = "gauge"


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("iops", "", "I/O operations per second (median over the run's repeats)."),
    Family("bandwidth_bytes_per_second", "bytes_per_second",
           "Bandwidth in bytes per second (median over the run's repeats)."),
    Family("latency_seconds", "seconds",
           "Completion latency in seconds: percentiles (median over the run's repeats),"
           " and the sum and count of every completion measured (direction=sync: the"
           " sync calls').", "summary"),
    Family("latency_mean_seconds", "seconds", "Mean completion latency in seconds."),
    Family("latency_max_seconds", "seconds", "Largest completion latency in seconds."),
    Family("run_info", "", "One per run: its status and versions in labels; value 1."),
    Family("run_end_timestamp_seconds", "seconds",
           "When the run ended (it started, while running), in seconds since the epoch."),
    Family("warning", "",
           "One per warning of the run and test, value 1: how a figure was measured that"
           " a reader must know (label kind: page-cache, burst-then-throttle,"
           " rate-not-reached, ...; storbench show RUN says it in words)."),
    Family("change_point", "",
           "A change point of the run's series begins at this run (storbench history;"
           " annotate it in Grafana): the figure's relative change, after/before - 1;"
           " labels series, figure and change (worse or better)."),
)}
QUANTILES = (("0.5", "p50_ns"), ("0.99", "p99_ns"), ("0.999", "p999_ns"))


@dataclass(frozen=True)
class Sample:
    family: str  # a FAMILIES key
    labels: dict[str, str]
    value: float
    suffix: str = ""  # a summary's "_sum" or "_count" (Prometheus formats only)


def end_seconds(run: Run) -> int:
    """The run's end (its start while it runs), whole seconds since the epoch."""
    stamp = run.finished_at or run.created_at
    return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
               .timestamp())


def run_labels(run: Run) -> dict[str, str]:
    """What names the run in every sample: uid, label, suite, target kind and name,
    storage class. Empty values are left out (Prometheus reads them as absent)."""
    target = run.environment.get("target") or {}
    labels = {
        "run_uid": run.uid, "label": run.label or "", "suite": run.suite,
        "target_kind": str(target.get("kind") or ""), "target": run.target,
        "storage_class": str(target.get("storage_class") or ""),
    }
    return {k: v for k, v in labels.items() if v}


def samples(run: Run) -> Iterator[Sample]:
    """Every figure of ``run`` (published reference figures are not measurements of a
    time: a run of origin 'published' has none)."""
    base = run_labels(run)
    yield Sample("run_info", {**base, "status": run.status,
                              "storbench_version": run.storbench_version,
                              "fio_version": run.fio_version or ""}, 1.0)
    yield Sample("run_end_timestamp_seconds", base, float(end_seconds(run)))
    if run.origin == "published":
        return
    yield from _rows(base, run.results_by_test())
    said = dict.fromkeys((w.test, str(w.kind)) for w in run.warnings)
    for test, kind in said:
        yield Sample("warning", {**base, **({"test": test} if test else {}), "kind": kind}, 1.0)
    for test, by_host in run.results_by_host().items():
        for host, results in sorted(by_host.items()):
            yield from _rows({**base, "host": host}, {test: results})


def _latencies(results: list[TestResult], direction: str) -> list[Latency]:
    if direction == "sync":
        return [r.sync.lat for r in results if r.sync is not None]
    found = [getattr(r, direction) for r in results]
    return [d.clat for d in found if d is not None and d.clat is not None]


def _rows(base: dict[str, str], by_test: dict[str, list[TestResult]]) -> Iterator[Sample]:
    rows: list[SummaryRow] = summarize_tests(by_test)
    for row in rows:
        if row.failed:
            continue
        labels = {**base, "test": row.test, "direction": row.direction}
        if row.iops is not None:
            yield Sample("iops", labels, row.iops)
        if row.bw_bytes_per_s is not None:
            yield Sample("bandwidth_bytes_per_second", labels, row.bw_bytes_per_s)
        for q, field in QUANTILES:
            ns = getattr(row, field)
            if ns is not None:
                yield Sample("latency_seconds", {**labels, "quantile": q}, ns / 1e9)
        measured = [lat for lat in _latencies(by_test[row.test], row.direction) if lat.samples]
        if measured:
            yield Sample("latency_seconds", labels,
                         sum(lat.samples * lat.mean_ns for lat in measured) / 1e9, "_sum")
            yield Sample("latency_seconds", labels,
                         float(sum(lat.samples for lat in measured)), "_count")
        if row.mean_ns is not None:
            yield Sample("latency_mean_seconds", labels, row.mean_ns / 1e9)
        if row.max_ns is not None:
            yield Sample("latency_max_seconds", labels, row.max_ns / 1e9)


def by_family(runs: list[Run], marks: Mapping[int, list[Mark]] | None = None
              ) -> dict[str, list[tuple[Run, Sample]]]:
    """All runs' samples, grouped by family in FAMILIES order (a family's samples must
    be together in the Prometheus formats); ``marks``: the change points that begin at
    each run (by its id)."""
    out: dict[str, list[tuple[Run, Sample]]] = {name: [] for name in FAMILIES}
    for run in runs:
        for s in samples(run):
            out[s.family].append((run, s))
        for m in (marks or {}).get(run.id, []):
            out["change_point"].append((run, Sample(
                "change_point", {**run_labels(run), "series": m.series, "figure": m.figure,
                                 "change": "worse" if m.worse else "better"}, m.relative)))
    return {k: v for k, v in out.items() if v}
