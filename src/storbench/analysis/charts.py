"""The charts of a report, as data: what to draw, in base units (IOPS, bytes/s, ns),
for any backend.

Built once from a Comparison (and the runs' series and latency percentiles); the
HTML report draws them as inline SVG, ``--png`` the same SVG drawn by resvg: the same charts,
both scaled into one display unit per chart by render/units.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import TYPE_CHECKING

from storbench.analysis.chart import Chart, Line, slug
from storbench.analysis.history import Answered
from storbench.analysis.metrics import Kind
from storbench.result import sections
from storbench.result.model import Latency, Series, TestResult
from storbench.result.record import Run

if TYPE_CHECKING:
    from storbench.analysis.compare import Comparison

PERCENTILE_POINTS = (50.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)
LOG_SPAN = 10.0  # latency bars whose values span more than this: a log scale
HISTOGRAM_STEPS = 10  # buckets per decade of latency
# Options that do not make two tests different workloads (where fio put files and
# logs, names): tests that differ only in iodepth or numjobs beyond these are a sweep.
NOT_THE_WORKLOAD = {"name", "filename", "directory", "filename_format", "description",
                    "write_bw_log", "write_iops_log", "write_lat_log", "write_hist_log",
                    "log_avg_msec", "log_hist_msec", "group_reporting", "output",
                    "output-format", "iodepth", "numjobs", "stonewall", "new_group"}


def _name(run: Run) -> str:
    return run.label or f"#{run.id}"


def _clean(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else v


def build(comp: Comparison) -> list[Chart]:
    """Bars per IOPS/bandwidth column; p50 bars with p99 marked per test and direction;
    percentile curves; IOPS and bandwidth timelines where runs have series."""
    from storbench.analysis.views import VIEWS, tabulated

    kinds = [c for view in VIEWS.values() for c in view.charts(comp.runs)]
    if not tabulated(comp.runs):
        return kinds  # a curve's steps are not tests to chart one by one
    names = [_name(r) for r in comp.runs]
    charts: list[Chart] = []
    for j, col in enumerate(comp.columns):
        if col.metric.kind == "latency" and col.metric.field.split("_", 1)[1] in ("p50", "p99"):
            continue  # drawn with the p50/p99 latency chart below (published figures too)
        values = [_clean(comp.cells[i][j].value) for i in range(len(comp.runs))]
        charts.append(Chart(slug("bar", col.test, col.metric.key), col.title, "bar",
                            col.metric.kind, names=names, values=values))
    for test, direction in _latency_keys(comp):
        lats = [_latency(run, test, direction) for run in comp.runs]
        p50 = [lat.percentile(50.0) if lat else None for lat in lats]
        p99 = [lat.percentile(99.0) if lat else None for lat in lats]
        shown = [v for v in (*p50, *p99) if v is not None and v > 0]
        charts.append(Chart(
            slug("latency", test, direction), f"{test} {direction} completion latency",
            "bar", "latency", names=names, values=p50, marks=p99, bar_label="p50",
            mark_label="p99", log_y=bool(shown) and max(shown) > LOG_SPAN * min(shown)))
        curves = [Line(n, list(PERCENTILE_POINTS),
                       [lat.percentile(p) if lat else None for p in PERCENTILE_POINTS])
                  for n, lat in zip(names, lats, strict=True)]
        charts.append(Chart(
            slug("percentiles", test, direction), f"{test} {direction} latency percentiles",
            "percentile", "latency", x_label="percentile", log_y=True, lines=curves))
    for test, direction in _series_keys(comp):
        pairs: tuple[tuple[Kind, str], ...] = (("iops", "IOPS"), ("bw", "bandwidth"))
        for kind, label in pairs:
            lines = []
            for run in comp.runs:
                s = _series(run, test, direction)
                if s is not None:
                    ys: list[float | None] = list(s.iops if kind == "iops" else s.bw_bytes_per_s)
                    lines.append(Line(_name(run), list(s.t_s), ys))
            charts.append(Chart(
                slug("timeline", test, direction, kind), f"{test} {direction} {label} over time",
                "line", kind, x_label="time [s]", lines=lines, log_y=apart(lines)))
    charts += histograms(comp) + sweeps(comp) + run_timelines(comp) + kinds + history_charts(comp)
    return [c if c.kind == "bar" else replace(c, lines=[ln for ln in c.lines if any(
        y is not None for y in ln.ys)]) for c in charts if not c.empty]


def history_charts(comp: Comparison) -> list[Chart]:
    """The series the compared runs share (storbench history): each headline figure over
    the series' runs, oldest first, a change point's first run hollow."""
    out = []
    for series, found in comp.histories.items():
        for name, h in found.items():
            if len(h.points) < 3 or isinstance(h.figure.metric, Answered):
                continue  # an application's answer: in the history table, not charted
            starts = {c.run for c in h.changes}
            said = "; ".join(f"{100 * c.relative:+.0f}% at run #{c.run}" for c in h.changes)
            out.append(Chart(
                slug("history", series, name),
                f"{series}: {name} over its runs ({said or 'no change point'})", "line",
                h.figure.metric.kind, x_label="run", section="history",
                lines=[Line(series, [float(run) for run in h.points.runs],
                            list(h.points.values),
                            [run in starts for run in h.points.runs])],
                hollow_means="a change point begins here"))
    return out


def histograms(comp: Comparison) -> list[Chart]:
    """Per test and direction, each run's completion latency as a histogram from
    fio's json+ bins: the share of I/Os per tenth of a decade."""
    out = []
    for test, direction in _latency_keys(comp):
        lines = []
        for run in comp.runs:
            lat = _latency(run, test, direction)
            if lat is not None and lat.bins:
                lines.append(Line(_name(run), *_histogram(lat.bins)))
        if lines:
            out.append(Chart(slug("histogram", test, direction),
                             f"{test} {direction} latency histogram", "line", "share",
                             lines=lines, log_x=True, x_kind="latency", section="histogram"))
    return out


def _histogram(bins: dict[int, int]) -> tuple[list[float], list[float | None]]:
    total = sum(bins.values())
    buckets: dict[int, int] = {}
    for ns, count in bins.items():
        b = math.floor(math.log10(max(ns, 1)) * HISTOGRAM_STEPS)
        buckets[b] = buckets.get(b, 0) + count
    span = range(min(buckets), max(buckets) + 1)
    return ([10 ** ((b + 0.5) / HISTOGRAM_STEPS) for b in span],
            [100.0 * buckets.get(b, 0) / total for b in span])


def sweeps(comp: Comparison) -> list[Chart]:
    """IOPS and p99 latency against queue depth, and against numjobs, from the
    compared tests that differ only in those (a sweep such as bench-fio's)."""
    groups: dict[tuple[str, ...], dict[tuple[int, int], tuple[float, float | None]]] = {}
    for run in comp.runs:
        for results in run.results_by_test().values():
            r = results[0]
            options = {k: v for k, v in r.options.items() if k not in NOT_THE_WORKLOAD}
            qd, jobs = _count(r.options.get("iodepth")), _count(r.options.get("numjobs"))
            for direction, d in r.directions():
                key = (direction, *sorted(f"{k}={v}" for k, v in options.items()))
                p99 = d.clat.percentile(99.0) if d.clat is not None else None
                groups.setdefault(key, {}).setdefault((qd, jobs), (d.iops, p99))
    out = []
    for key, points in groups.items():
        direction, opts = key[0], dict(o.split("=", 1) for o in key[1:])
        what = " ".join(x for x in (opts.get("rw") or opts.get("readwrite"), opts.get("bs")
                                    or opts.get("blocksize"), direction) if x)
        for axis, other, label in ((0, 1, "queue depth (iodepth)"), (1, 0, "numjobs")):
            xs = sorted({p[axis] for p in points})
            series = sorted({p[other] for p in points})
            if len(xs) < 2:
                continue
            name = "numjobs" if axis == 0 else "iodepth"
            figures: tuple[tuple[int, Kind, str], ...] = ((0, "iops", "IOPS"),
                                                          (1, "latency", "p99 latency"))
            for y, kind, title in figures:
                lines = [Line(f"{name} {v}", [float(x) for x in xs],
                              [_at(points, x, v, axis, y) for x in xs]) for v in series]
                out.append(Chart(slug("sweep", what, label.split()[0], kind),
                                 f"{what}: {title} against {label}", "line", kind,
                                 x_label=label, lines=lines, log_x=True,
                                 x_ticks=[float(x) for x in xs], log_y=kind == "latency",
                                 section="sweep"))
    return out


def _count(text: str | None) -> int:
    try:
        return max(1, int(text or "1"))
    except ValueError:
        return 1


def _at(points: dict[tuple[int, int], tuple[float, float | None]], x: int, v: int,
        axis: int, y: int) -> float | None:
    point = points.get((x, v) if axis == 0 else (v, x))
    return None if point is None else point[y]


def apart(lines: list[Line]) -> bool:
    """Lines whose levels (their medians) differ by more than LOG_SPAN: on one linear
    axis the lower ones lie flat on zero (a run's burst hidden under another's page-cache
    spike), so the axis is logarithmic."""
    levels = [statistics.median(ys) for ln in lines
              if (ys := [y for y in ln.ys if y is not None and y > 0])]
    return len(levels) > 1 and max(levels) > LOG_SPAN * min(levels)


def run_timelines(comp: Comparison) -> list[Chart]:
    """Per run that probed its metadata: each operation's latency over the run, and
    beside it (the same time axis) each test's IOPS placed where it ran."""
    out = []
    for run in comp.runs:
        timeline = sections.PROBE_TIMELINE.of(run)
        if not timeline:
            continue
        offset = float(sections.PROBE_START.of(run) or 0.0)
        probe = [Line(sections.probe_op(op), [offset + t for o, t, _ in timeline if o == op],
                      [float(ns) for o, _, ns in timeline if o == op])
                 for op in dict.fromkeys(str(item[0]) for item in timeline)]
        io = []
        for phase in sections.PHASES.of(run) or []:
            if "io_start_s" not in phase:
                continue
            for t in run.tests:
                r = t.result
                if t.host or r.name not in phase.get("results", []) or t.repeat != phase.get(
                        "repeat"):
                    continue
                for direction, s in r.series.items():
                    io.append(Line(f"{r.name} {direction}" + (
                        f" #{t.repeat + 1}" if t.repeat else ""),
                        [float(phase["io_start_s"]) + x for x in s.t_s], list(s.iops)))
        xs = [x for ln in (*probe, *io) for x in ln.xs]
        span = (0.0, max(xs)) if xs else None
        axis = "time since the run began [s]"
        out.append(Chart(slug("probe", _name(run)), f"{_name(run)}: metadata latency",
                         "line", "latency", x_label=axis, lines=probe, log_y=True,
                         section="run-timeline", x_range=span))
        if io:
            out.append(Chart(slug("run-io", _name(run)), f"{_name(run)}: IOPS at the same"
                             " time", "line", "iops", x_label=axis, lines=io,
                             section="run-timeline", x_range=span))
    return out


def _latency_keys(comp: Comparison) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = []
    for run in comp.runs:
        for test, results in run.results_by_test().items():
            for direction, d in results[0].directions():
                if d.clat is not None and d.clat.percentiles_ns and (test, direction) not in keys:
                    keys.append((test, direction))
            if results[0].sync is not None and (test, "sync") not in keys:
                keys.append((test, "sync"))
    return keys


def _latency(run: Run, test: str, direction: str) -> Latency | None:
    results = run.results_by_test().get(test)
    if not results:
        return None
    r: TestResult = results[0]  # the first repeat: percentiles are per run of fio
    if direction == "sync":
        return r.sync.lat if r.sync is not None else None
    d = r.direction(direction)
    return d.clat if d is not None and d.clat is not None and d.clat.percentiles_ns else None


def _series_keys(comp: Comparison) -> list[tuple[str, str]]:
    keys: list[tuple[str, str]] = []
    for run in comp.runs:
        for test, results in run.results_by_test().items():
            for direction in results[0].series:
                if (test, direction) not in keys:
                    keys.append((test, direction))
    return keys


def _series(run: Run, test: str, direction: str) -> Series | None:
    results = run.results_by_test().get(test)
    if not results:
        return None
    return results[0].series.get(direction)
