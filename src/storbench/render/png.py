"""Charts (analysis/charts.py) as PNG files with matplotlib: the report's charts, for
tickets and chat. 760 x 330 pixels each, like the report's SVG viewBox."""

from __future__ import annotations

import math
import multiprocessing
import os
from pathlib import Path
from typing import Any

from storbench.analysis.charts import CURVE, Chart
from storbench.render import units
from storbench.render.svg import bar_keys, color

WIDTH_PX, HEIGHT_PX, DPI = 760, 330, 100
IN_AXES_LEGEND = 4  # lines: more than this, and the legend goes below the chart


def write_all(charts: list[Chart], directory: Path) -> list[Path]:
    """Every chart as a PNG file, drawn on all CPU cores (matplotlib draws on one:
    ~0.4 s a chart), in their order."""
    _load()
    workers = min(len(charts) // 2, os.cpu_count() or 1)
    if workers < 2:
        return [write(c, directory) for c in charts]
    directory.mkdir(parents=True, exist_ok=True)
    # forked after matplotlib is loaded: each worker starts drawing at once
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.starmap(write, [(c, directory) for c in charts])


def _load() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def write(chart: Chart, directory: Path) -> Path:
    plt = _load()

    chart = units.for_display(chart)
    fig, ax = plt.subplots(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI)
    try:
        ax.set_title(chart.title, fontsize=10)
        ax.set_ylabel(chart.y_label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="y", color="#e5e5e5")
        legend_px = 0
        if chart.kind == "bar":
            legend_px = _bars(fig, ax, chart)
        else:
            pct = chart.kind == "percentile"
            if chart.log_x:
                ax.set_xscale("log")
            for i, ln in enumerate(chart.lines):
                pts = [(-math.log10(1 - x / 100) if pct else x, y)
                       for x, y in zip(ln.xs, ln.ys, strict=False) if y is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color(i),
                            label=ln.name, marker="o" if pct or ln.marked else None,
                            markersize=3, linewidth=1.5)
                hollow = [(x, y) for x, y, m in zip(ln.xs, ln.ys, ln.marked, strict=False)
                          if m and y is not None]
                if hollow:  # saturated steps: fell behind their rate
                    ax.scatter([x for x, _ in hollow], [y for _, y in hollow], s=40,
                               facecolors="white", edgecolors=color(i), zorder=3)
            for v, text in chart.rules:
                ax.axhline(v, color="#b00", linestyle="--", linewidth=1)
                ax.annotate(text, (0.01, v), xycoords=("axes fraction", "data"), fontsize=7,
                            color="#b00", va="bottom")
            if pct:
                ax.set_xticks([-math.log10(1 - p / 100) for p in CURVE],
                              [f"p{p:g}" for p in CURVE])
            elif chart.x_ticks:
                ax.set_xticks(chart.x_ticks, [f"{t:g}" for t in chart.x_ticks])
                ax.minorticks_off()
            if chart.log_y:
                ax.set_yscale("log")
            if chart.x_range is not None:
                ax.set_xlim(*chart.x_range)
            ax.set_xlabel(chart.x_label, fontsize=9)
            if len(chart.lines) > IN_AXES_LEGEND:  # below the axes, never over the lines
                handles, labels = ax.get_legend_handles_labels()
                legend_px = _legend_below(fig, handles, labels)
            elif chart.lines:
                ax.legend(fontsize=7, ncol=min(4, len(chart.lines)))
        # the legend of keys below the axes: the axes and their labels fit above it
        fig.tight_layout(pad=0.6, rect=(0, legend_px / (HEIGHT_PX + legend_px), 1, 1))
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{chart.id}.png"
        fig.savefig(path, dpi=DPI)
        return path
    finally:
        plt.close(fig)


def _bars(fig: Any, ax: Any, chart: Chart) -> int:
    """Bars (p50 with p99 marked); a log scale for values spanning more than 10x; run
    names too long for the axis become keys 1..n with a legend below the chart."""
    xs = range(len(chart.names))
    heights = [v if v is not None else 0.0 for v in chart.values]
    if chart.log_y:
        ax.set_yscale("log")
    ax.bar(xs, heights, color=[color(i) for i in xs], label=chart.bar_label or None)
    marks = [(i, m) for i, m in enumerate(chart.marks) if m is not None]
    if marks:
        ax.scatter([i for i, _ in marks], [m for _, m in marks], marker="_", s=600,
                   color="#111", linewidths=3, label=chart.mark_label, zorder=3)
        ax.legend(fontsize=8)
    keys = bar_keys(chart.names)
    ax.set_xticks(list(xs), keys or chart.names)
    if not keys:
        return 0
    from matplotlib.patches import Patch

    labels = [f"{k}: {n}" for k, n in zip(keys, chart.names, strict=True)]
    return _legend_below(fig, [Patch(color=color(i)) for i in range(len(labels))], labels)


def _legend_below(fig: Any, handles: list[Any], labels: list[str]) -> int:
    """A legend in columns below the axes; the figure grows by its height (returned)."""
    columns = max(1, min(4, int(WIDTH_PX / (7 * max(map(len, labels)) + 30))))
    legend_px = 16 * math.ceil(len(labels) / columns) + 10
    fig.set_size_inches(WIDTH_PX / DPI, (HEIGHT_PX + legend_px) / DPI)
    fig.legend(handles=handles, labels=labels, loc="lower center", ncol=columns, fontsize=7,
               frameon=False)
    return legend_px
