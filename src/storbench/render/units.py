"""The only place numbers are scaled into display units. One unit per column."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from storbench.analysis.metrics import Kind
from storbench.workload.sizes import LATENCY_UNITS, format_latency

if TYPE_CHECKING:  # a type only: the terminal's units need not load the charts
    from storbench.analysis.chart import Chart

_LATENCY = LATENCY_UNITS
_BW = (("B/s", 1.0), ("KiB/s", 1024.0), ("MiB/s", 1024.0**2), ("GiB/s", 1024.0**3))


@dataclass(frozen=True)
class Unit:
    name: str
    divisor: float

    def fmt(self, v: float | None, *, grouping: bool = True, decimals: int | None = None) -> str:
        """``decimals``: as many as given (a published figure's own precision)."""
        if v is None:
            return ""
        x = v / self.divisor
        if decimals is not None:
            return f"{x:,.{decimals}f}" if grouping else f"{x:.{decimals}f}"
        # far below or above the column's unit: in its own, never "0.00" nor
        # "2,930,577 µs" (a 2.9 s listing in a column of microseconds)
        if 0 < abs(x) < 0.005 or abs(x) >= 100_000:
            for scale in (_LATENCY, _BW):
                if (self.name, self.divisor) in scale:
                    own = choose("latency" if scale is _LATENCY else "bw", [v])
                    if own != self:
                        return f"{own.fmt(v, grouping=grouping)} {own.name}"
        if abs(x) >= 100:
            return f"{x:,.0f}" if grouping else f"{x:.0f}"
        if abs(x) >= 10:
            return f"{x:.1f}"
        decimals = 1 - math.floor(math.log10(abs(x))) if x else 2
        if abs(round(x, decimals)) < 0.1:  # two significant digits: 11.5 µs and
            # 14.7 µs in a column of ms are 0.011 and 0.015, not both "0.01"
            return f"{x:.{decimals}f}"
        return f"{x:.2f}"


IOPS = Unit("IOPS", 1.0)
SECONDS = Unit("s", 1.0)
SHARE = Unit("% of I/Os", 1.0)
RATES = {"tps": Unit("TPS", 1.0), "ops": Unit("ops/s", 1.0)}  # an application's own


def choose(kind: Kind | str, values: Iterable[float | None], *, by_largest: bool = False) -> Unit:
    """A unit that suits a column's values (by their median), or a chart axis' (by the
    largest value)."""
    present = [abs(v) for v in values if v is not None and not math.isnan(v)]
    if kind == "iops":
        return IOPS
    if kind == "share":
        return SHARE
    if kind in RATES:
        return RATES[kind]
    scale = _LATENCY if kind == "latency" else _BW
    if not present:
        return Unit(*scale[1 if kind == "latency" else 2])
    mid = max(present) if by_largest else statistics.median(present)
    at = 0
    for i, (_, divisor) in enumerate(scale):
        if mid >= divisor:
            at = i
    # a column's figures in its unit, not some in their own beside it ("3.13 µs │ 0.0060"
    # under [ms]): a smaller unit while its largest figure stays readable in it
    while (not by_largest and at > 0 and 0 < min(present) / scale[at][1] < 0.005
           and max(present) / scale[at - 1][1] < 100_000):
        at -= 1
    return Unit(*scale[at])


def latency(ns: float | None) -> str:
    """One latency with its own unit, for sentences ('4.20 ms')."""
    return format_latency(ns)


def plain(v: float | None) -> str:
    """A figure in its own unit (an application's transactions/s): 1,150; 12.5; 0.024."""
    return Unit("", 1.0).fmt(v)


def header(title: str, kind: Kind, unit: Unit) -> str:
    return title if kind == "iops" else f"{title} [{unit.name}]"


def figure(kind: Kind | str, v: float | None) -> str:
    """One figure with its own unit, for sentences: '4.20 ms', '3,000 IOPS', '125 MiB/s'."""
    if v is None:
        return "n/a"
    if kind == "latency":
        return latency(v)
    if kind == "seconds":  # a lifecycle or failover verdict's
        return latency(v * 1e9)
    if kind == "count":  # accelerators fed, a growth (×), aggressors held: no unit
        return Unit("", 1.0).fmt(v)
    unit = choose(kind, [v])
    return f"{unit.fmt(v)} {unit.name}"


def for_display(chart: Chart) -> Chart:
    """The chart in one display unit (a bar chart: its table column's; a line chart:
    by its largest value), its y axis labelled with it."""
    if chart.kind == "bar":
        # the unit of the table's column for the same figure (a latency chart's p99
        # marks are the p99 column): one unit per figure across table and chart
        shown = [v for v in (chart.marks if any(m is not None for m in chart.marks)
                             else chart.values) if v is not None and math.isfinite(v)]
        unit = choose(chart.y_kind, shown)
    else:
        # a linear axis in its table's unit (by the median, as a column's): never GiB/s
        # beside a table in MiB/s; a logarithmic one spans decades, named by its largest
        values = [y for ln in chart.lines for y in ln.ys if y is not None and math.isfinite(y)]
        unit = choose(chart.y_kind, values, by_largest=chart.log_y)

    def scale(vs: list[float | None]) -> list[float | None]:
        """In the display unit; a figure that is not a finite number is not drawn."""
        return [None if v is None or not math.isfinite(v) else v / unit.divisor for v in vs]

    label = f"latency [{unit.name}]" if chart.y_kind == "latency" else unit.name
    chart = replace(chart, y_label=label, values=scale(chart.values), marks=scale(chart.marks),
                    lines=[replace(ln, ys=scale(ln.ys)) for ln in chart.lines],
                    rules=[(v / unit.divisor, text) for v, text in chart.rules])
    if chart.x_kind is None:
        return chart
    x_unit = choose(chart.x_kind, [x for ln in chart.lines for x in ln.xs], by_largest=False)
    return replace(chart, x_label=f"latency [{x_unit.name}]" if chart.x_kind == "latency"
                   else x_unit.name, x_ticks=[x / x_unit.divisor for x in chart.x_ticks],
                   lines=[replace(ln, xs=[x / x_unit.divisor for x in ln.xs])
                          for ln in chart.lines])
