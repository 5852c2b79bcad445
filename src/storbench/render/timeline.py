"""Per-second series as compact sparklines: one line per test, direction and figure."""

from __future__ import annotations

import statistics

from storbench.render import units
from storbench.result.model import Series
from storbench.result.record import Run

BARS = "▁▂▃▄▅▆▇█"
MAX_WIDTH = 60  # characters of sparkline; longer series are averaged into buckets


def sparkline(values: list[float], width: int = MAX_WIDTH) -> str:
    if not values:
        return ""
    if len(values) > width:
        size = len(values) / width
        values = [
            statistics.fmean(values[int(i * size): max(int((i + 1) * size), int(i * size) + 1)])
            for i in range(width)
        ]
    low, high = min(values), max(values)
    if high == low:
        return BARS[len(BARS) // 2] * len(values)
    return "".join(BARS[round((v - low) / (high - low) * (len(BARS) - 1))] for v in values)


def _line(name: str, values: list[float], unit: units.Unit) -> str:
    return (f"  {name:<9} {sparkline(values)}  min {unit.fmt(min(values))}"
            f" · median {unit.fmt(statistics.median(values))} · max {unit.fmt(max(values))}"
            f" {unit.name}")


def series_lines(direction: str, s: Series) -> list[str]:
    lines = [f" {direction}: {len(s.t_s)} s"]
    lines.append(_line("IOPS", s.iops, units.IOPS))
    lines.append(_line("BW", s.bw_bytes_per_s, units.choose("bw", s.bw_bytes_per_s)))
    lats = [v for v in s.clat_mean_ns if v is not None]
    if lats:
        lines.append(_line("clat mean", lats, units.choose("latency", lats)))
    return lines


def render_timeline(run: Run) -> str:
    if not run.tests:  # a run that ended before its first test: say so, not a blank line
        return f"no per-second series: run #{run.id} has no test results ({run.status})\n"
    out = []
    for stored in run.tests:
        r = stored.result
        if not r.series:
            out.append(f"{r.name}: no per-second series recorded")
            continue
        out.append(f"{r.name}")
        for direction, s in r.series.items():
            out += series_lines(direction, s)
    return "\n".join(out) + "\n"
