"""A chart as data: what to draw, in base units (IOPS, bytes/s, ns), for any backend
(render/svg.py, render/png.py); analysis/charts.py and the kinds' views
(analysis/views/) build them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from storbench.analysis.metrics import Kind

ChartKind = Literal["bar", "line", "percentile"]
YKind = Kind | Literal["share"]  # share: percent of all I/Os (a histogram)


@dataclass(frozen=True)
class Line:
    name: str  # the run's label: the legend entry
    xs: list[float]
    ys: list[float | None]
    marked: list[bool] = field(default_factory=list)  # points drawn hollow (saturated)


@dataclass(frozen=True)
class Chart:
    id: str  # stable, file-name safe: "bar-randread-read-iops"
    title: str
    kind: ChartKind
    y_kind: YKind  # what the values are: iops, bw, latency (base units) or share (%)
    x_label: str = ""
    y_label: str = ""  # set with the display unit by render/units.for_display
    names: list[str] = field(default_factory=list)  # bar: one bar per run
    values: list[float | None] = field(default_factory=list)  # bar heights
    marks: list[float | None] = field(default_factory=list)  # bar: a marker each (p99)
    mark_label: str = ""
    bar_label: str = ""
    lines: list[Line] = field(default_factory=list)  # line / percentile charts
    log_y: bool = False
    section: str = ""  # run-timeline (probe and I/O on one clock), histogram, sweep
    x_range: tuple[float, float] | None = None  # shared by charts drawn beside each other
    log_x: bool = False
    x_kind: Kind | None = None  # xs are latency (base units): scaled like the values
    x_ticks: list[float] = field(default_factory=list)  # label exactly these xs
    rules: list[tuple[float, str]] = field(default_factory=list)  # y lines: objectives
    hollow_means: str = "not at its rate: fell behind it (saturated) or ran faster"

    @property
    def empty(self) -> bool:
        if self.kind == "bar":
            return all(v is None for v in self.values)
        return not any(any(y is not None for y in ln.ys) for ln in self.lines)


def slug(*parts: str) -> str:
    """A chart's id from its parts: stable and file-name safe."""
    text = "-".join(parts).lower()
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")
