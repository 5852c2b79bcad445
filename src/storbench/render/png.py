"""Charts (analysis/charts.py) as PNG files with matplotlib: the report's charts, for
tickets and chat. 760 x 330 pixels each, like the report's SVG viewBox."""

from __future__ import annotations

import math
from pathlib import Path

from storbench.analysis.charts import CURVE, Chart
from storbench.render import units
from storbench.render.svg import color

WIDTH_PX, HEIGHT_PX, DPI = 760, 330, 100


def write(chart: Chart, directory: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    chart = units.for_display(chart)
    fig, ax = plt.subplots(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    try:
        ax.set_title(chart.title, fontsize=10)
        ax.set_ylabel(chart.y_label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", color="#e5e5e5")
        if chart.kind == "bar":
            xs = range(len(chart.names))
            heights = [v if v is not None else 0.0 for v in chart.values]
            ax.bar(xs, heights, color=[color(i) for i in xs],
                   label=chart.bar_label or None)
            marks = [(i, m) for i, m in enumerate(chart.marks) if m is not None]
            if marks:
                ax.scatter([i for i, _ in marks], [m for _, m in marks], marker="_", s=600,
                           color="#111", linewidths=3, label=chart.mark_label, zorder=3)
                ax.legend(fontsize=8)
            ax.set_xticks(list(xs), [n if len(n) <= 14 else n[:13] + "…" for n in chart.names])
        else:
            pct = chart.kind == "percentile"
            for i, ln in enumerate(chart.lines):
                pts = [(-math.log10(1 - x / 100) if pct else x, y)
                       for x, y in zip(ln.xs, ln.ys, strict=False) if y is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color(i),
                            label=ln.name, marker="o" if pct else None, markersize=3,
                            linewidth=1.5)
            if pct:
                ax.set_xticks([-math.log10(1 - p / 100) for p in CURVE],
                              [f"p{p:g}" for p in CURVE])
            if chart.log_y:
                ax.set_yscale("log")
            if chart.x_range is not None:
                ax.set_xlim(*chart.x_range)
            ax.set_xlabel(chart.x_label, fontsize=9)
            if chart.lines:
                ax.legend(fontsize=7, ncol=min(4, len(chart.lines)))
        fig.tight_layout()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{chart.id}.png"
        fig.savefig(path, dpi=DPI)
        return path
    finally:
        plt.close(fig)
