"""Prometheus formats: OpenMetrics text (`export --format openmetrics`: every sample at
its run's end, for `promtool tsdb create-blocks-from openmetrics`) and the Prometheus
text format 0.0.4 a Pushgateway takes (`storbench push`: no timestamps, which it
refuses)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from storbench.render.samples import FAMILIES, PREFIX, Mark, by_family, end_seconds, marks
from storbench.result.record import Run

if TYPE_CHECKING:
    from storbench.analysis.compare import Comparison

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape(value: str) -> str:
    """A label value: backslash, double quote and line feed escaped (both formats)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(v: float) -> str:
    return repr(float(v))


def text(runs: list[Run], *, openmetrics: bool,
         changes: Mapping[int, list[Mark]] | None = None) -> str:
    """``changes``: the change points that begin at each run (storbench_change_point)."""
    lines: list[str] = []
    for name, found in by_family(runs, changes).items():
        family = FAMILIES[name]
        full = PREFIX + name
        lines.append(f"# TYPE {full} {family.type}")
        if openmetrics and family.unit:
            lines.append(f"# UNIT {full} {family.unit}")
        lines.append(f"# HELP {full} {family.help}")
        for run, s in found:
            labels = ",".join(f'{k}="{escape(v)}"' for k, v in s.labels.items())
            stamp = f" {end_seconds(run)}" if openmetrics else ""
            lines.append(f"{full}{s.suffix}{{{labels}}} {_number(s.value)}{stamp}")
    if openmetrics:
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def render(comp: Comparison) -> str:
    return text(comp.runs, openmetrics=True,
                changes=marks(h for series in comp.histories.values() for h in series.values()))
