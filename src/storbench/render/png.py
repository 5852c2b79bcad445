"""Charts (analysis/charts.py) as PNG files, for tickets and chat: the report's own SVG
charts (render/svg.py), each with its legend below, drawn by resvg (50-70 ms a chart).
760 pixels wide, 330 high plus the legend's rows."""

from __future__ import annotations

import multiprocessing
import os
from html import escape
from pathlib import Path
from typing import Any

from storbench.analysis.chart import Chart
from storbench.errors import StorbenchError
from storbench.render import svg

ROW_PX, SWATCH_PX = 16, 10
FONT = "DejaVu Sans"  # the font the charts' text widths (svg.CHAR_W) were measured in
FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts")
FONT_FILES = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf")
FONT_SUFFIXES = (".ttf", ".otf", ".ttc")


def write_all(charts: list[Chart], directory: Path) -> list[Path]:
    """Every chart as a PNG file, in their order; drawn on every core (resvg holds
    Python's lock while it draws: processes, not threads)."""
    fonts = find_fonts()
    directory.mkdir(parents=True, exist_ok=True)
    import resvg_py  # noqa: F401  (loaded once, before the workers fork)

    workers = min(len(charts) // 4, os.cpu_count() or 1)
    if workers < 2:
        return [write(c, directory, fonts) for c in charts]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.starmap(write, [(c, directory, fonts) for c in charts])


def write(chart: Chart, directory: Path, fonts: dict[str, Any]) -> Path:
    import resvg_py

    path = directory / f"{chart.id}.png"
    path.write_bytes(bytes(resvg_py.svg_to_bytes(svg_string=standalone(chart), **fonts)))
    return path


def standalone(chart: Chart) -> str:
    """The chart as one SVG document: a white page, the charts' style, and the legend
    in columns below the chart (the page grows by its rows)."""
    entries = svg.legend(chart)
    longest = max((len(text) for _, text in entries), default=0)
    columns = max(1, min(4, int((svg.W - 20) // (svg.CHAR_W * longest + SWATCH_PX + 24))))
    rows = -(-len(entries) // columns)
    height = svg.H + (ROW_PX * rows + 10 if rows else 0)
    col_w = (svg.W - 20) / columns
    fits = int((col_w - SWATCH_PX - 12) // svg.CHAR_W)  # characters a column holds
    legend = []
    for n, (colour, text) in enumerate(entries):
        x, y = 10 + col_w * (n % columns), svg.H + ROW_PX * (n // columns)
        shown = text if len(text) <= fits else text[:max(fits - 1, 1)] + "…"
        legend.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{SWATCH_PX}" height="{SWATCH_PX}"'
                      f' fill="{colour}"/><text class="tick" x="{x + SWATCH_PX + 5:.1f}"'
                      f' y="{y + 11}">{escape(shown)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{svg.W}" height="{height}"'
            f' viewBox="0 0 {svg.W} {height}"><style>svg {{ font-family: "{FONT}", sans-serif; }}'
            f' {svg.STYLE}</style><rect width="{svg.W}" height="{height}" fill="#fff"/>'
            f'<g>{svg.drawing(chart)}</g>{"".join(legend)}</svg>')


def find_fonts() -> dict[str, Any]:
    """resvg's font options: DejaVu Sans when it is installed (the charts' text widths
    are measured in it), else the system's fonts; none at all is an error, since every
    label would be missing from the PNGs without a word."""
    found: dict[str, str] = {}
    any_font = False
    for top in FONT_DIRS:
        for folder, _, files in os.walk(os.path.expanduser(top)):
            for f in files:
                any_font = any_font or f.endswith(FONT_SUFFIXES)
                if f in FONT_FILES:
                    found.setdefault(f, os.path.join(folder, f))
    if len(found) == len(FONT_FILES):
        return {"skip_system_fonts": True, "font_files": [found[f] for f in FONT_FILES],
                "font_family": FONT, "sans_serif_family": FONT}
    if any_font:
        return {}
    raise StorbenchError(f"PNG charts need a font, and none was found in {', '.join(FONT_DIRS)}:"
                         " install one (Debian: apt-get install fonts-dejavu-core)")
