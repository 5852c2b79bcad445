"""Charts (analysis/charts.py) as inline SVG: no script of their own, no font or
network request; every text escaped. Points carry ``data-tip`` for the report's
tooltip, lines ``data-series`` for its legend toggles."""

from __future__ import annotations

import math
from html import escape

from storbench.analysis.chart import Chart
from storbench.analysis.charts import PERCENTILE_POINTS
from storbench.render import units

W, H = 760, 330
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 34, 58
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
           "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363")
MAX_POINTS = 600  # per line: longer series are thinned (min and max of each bucket kept)
CHAR_W = 6.6  # px per character of an 11 px tick label, at the widest (digits, capitals)
EDGE_PX = 16.0  # an x label closer than this to an end of the axis is anchored there
MIN_BAR_PX = 2.0  # a bar lower than this is drawn this high, and its value written on it
# the charts' own style: the report's page and the PNG files (render/png.py) share it
STYLE = """svg .title { font-size: 14px; font-weight: 600; }
svg .tick { font-size: 11px; fill: #444; } svg .label { font-size: 12px; fill: #333; }
svg .axis { stroke: #333; }
svg .grid { stroke: #e5e5e5; } svg .line { fill: none; stroke-width: 1.8; }
svg .mark { stroke: #111; stroke-width: 3; }
svg .rule { stroke: #b00; stroke-dasharray: 6 4; }"""


def bar_keys(names: list[str]) -> list[str] | None:
    """When the run names do not fit under their bars (many runs, long labels): short
    keys 1..n for the axis, the names going to a legend. None: the names fit."""
    slot = (W - LEFT - RIGHT) / max(len(names), 1)
    if all(len(n) * CHAR_W <= slot - 6 for n in names):
        return None
    return [str(i + 1) for i in range(len(names))]


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def legend(chart: Chart) -> list[tuple[str, str]]:
    """What a chart's legend names, (colour, text) each: which run each key 1..n of a
    bar chart is, or each line's name; empty when the bars carry the run names."""
    if chart.kind == "bar":
        keys = bar_keys(chart.names)
        return [(color(i), f"{k}: {n}") for i, (k, n) in enumerate(
            zip(keys, chart.names, strict=True))] if keys else []
    return [(color(i), ln.name) for i, ln in enumerate(chart.lines)]


def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [start]
    while ticks[-1] < hi - step * 1e-9:  # up to the first tick at or above hi
        ticks.append(start + len(ticks) * step)
    return ticks


def render(chart: Chart) -> str:
    """The chart as an <svg> element, scaled to its place on a page."""
    return (f'<svg class="chart" id="{escape(chart.id)}" viewBox="0 0 {W} {H}" role="img"'
            f' xmlns="http://www.w3.org/2000/svg" aria-label="{escape(chart.title)}">'
            f"{drawing(chart)}</svg>")


def drawing(chart: Chart) -> str:
    """What the chart draws, in a W x H pixel frame, as SVG elements (no <svg> around)."""
    chart = units.for_display(chart)
    body = _bars(chart) if chart.kind == "bar" else _lines(chart)
    return (f'<text class="title" x="{W / 2}" y="20" text-anchor="middle">'
            f"{escape(chart.title)}</text>{body}")


def _frame(y_ticks: list[tuple[float, str]], y_label: str, x_label: str) -> list[str]:
    out = [f'<line class="axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}"'
           f' y2="{H - BOTTOM}"/>',
           f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}"/>']
    for y, text in y_ticks:
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{escape(text)}</text>")
    out.append(f'<text class="label" transform="translate(14 {(TOP + H - BOTTOM) / 2})'
               f' rotate(-90)" text-anchor="middle">{escape(y_label)}</text>')
    if x_label:
        out.append(f'<text class="label" x="{(LEFT + W - RIGHT) / 2}" y="{H - 8}"'
                   f' text-anchor="middle">{escape(x_label)}</text>')
    return out


def _log_range(values: list[float]) -> tuple[float, float]:
    lo = 10 ** math.floor(math.log10(min(values))) if values else 1.0
    hi = 10 ** math.ceil(math.log10(max(values))) if values else 10.0
    return lo, (hi if hi > lo else lo * 10)


def _bars(c: Chart) -> str:
    shown = [v for v in (*c.values, *c.marks) if v is not None]
    plot_h = H - TOP - BOTTOM
    if c.log_y:  # values spanning more than 10x: decades, every bar above the floor
        lo, hi = _log_range([v for v in shown if v > 0])
        ticks = [lo * 10**i for i in range(round(math.log10(hi / lo)) + 1)]

        def y(v: float) -> float:
            return H - BOTTOM - math.log10(max(v, lo) / lo) / math.log10(hi / lo) * plot_h
    else:
        ticks = _ticks(0, max(shown or [1.0]))
        top = ticks[-1] if ticks else 1.0

        def y(v: float) -> float:
            return H - BOTTOM - v / top * plot_h

    out = _frame([(y(t), _fmt(t)) for t in ticks], c.y_label + (" (log scale)" if c.log_y
                                                                  else ""), "")
    n = len(c.names)
    slot = (W - LEFT - RIGHT) / max(n, 1)
    bar = min(60.0, slot * 0.6)
    keys = bar_keys(c.names)
    for i, name in enumerate(c.names):
        cx = LEFT + slot * (i + 0.5)
        v = c.values[i] if i < len(c.values) else None
        label = keys[i] if keys else name
        out.append(f'<text class="tick" x="{cx:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">'
                   f"{escape(label)}</text>")
        if v is None:
            out.append(f'<text class="tick" x="{cx:.1f}" y="{H - BOTTOM - 6}"'
                       ' text-anchor="middle">n/a</text>')
            continue
        tip = f"{name}: {c.bar_label + ' ' if c.bar_label else ''}{_fmt(v)} {c.y_label}"
        height = H - BOTTOM - y(v)
        drawn = max(height, MIN_BAR_PX)
        out.append(f'<rect class="bar" x="{cx - bar / 2:.1f}" y="{H - BOTTOM - drawn:.1f}"'
                   f' width="{bar:.1f}" height="{drawn:.1f}" fill="{color(i)}"'
                   f' data-tip="{escape(tip)}"><title>{escape(tip)}</title></rect>')
        if height < MIN_BAR_PX:  # too low to see: its value written above it
            out.append(f'<text class="tick low" x="{cx:.1f}" y="{H - BOTTOM - 6}"'
                       f' text-anchor="middle">{escape(_fmt(v))}</text>')
        m = c.marks[i] if i < len(c.marks) else None
        if m is not None:
            mtip = f"{name}: {c.mark_label} {_fmt(m)} {c.y_label}"
            out.append(f'<line class="mark" x1="{cx - bar / 2 - 4:.1f}" y1="{y(m):.1f}"'
                       f' x2="{cx + bar / 2 + 4:.1f}" y2="{y(m):.1f}" data-tip="{escape(mtip)}">'
                       f"<title>{escape(mtip)}</title></line>")
    if c.marks:
        out.append(f'<text class="tick" x="{W - RIGHT}" y="{TOP - 4}" text-anchor="end">'
                   f"bar: {escape(c.bar_label)}, line: {escape(c.mark_label)}</text>")
    return "".join(out)


def _decades(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks from ``lo`` to ``hi`` on a log axis (1, 2, 5 each decade; only the
    decades when there are many)."""
    first = math.floor(math.log10(lo))
    steps = (1.0,) if math.log10(hi / lo) > 3 else (1.0, 2.0, 5.0)
    return [m * 10.0**e for e in range(first, math.ceil(math.log10(hi)) + 1) for m in steps
            if lo <= m * 10.0**e <= hi]


def _thin(xs: list[float], ys: list[float | None]) -> list[tuple[float, float]]:
    pts = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
    if len(pts) <= MAX_POINTS:
        return pts
    size = math.ceil(len(pts) / (MAX_POINTS / 2))
    out: list[tuple[float, float]] = []
    for i in range(0, len(pts), size):
        bucket = pts[i:i + size]
        lo, hi = min(bucket, key=lambda p: p[1]), max(bucket, key=lambda p: p[1])
        out += sorted({lo, hi})
    return out


def _px(p: float) -> float:
    """Percentile -> position on a 'nines' axis: p50 -> 0.3, p90 -> 1, p99 -> 2."""
    return -math.log10(1 - p / 100)


def _lines(c: Chart) -> str:
    pct = c.kind == "percentile"

    def at(x: float) -> float:
        """A value's position on the x axis: nines, a log scale, or itself."""
        return _px(x) if pct else math.log10(x) if c.log_x and x > 0 else x

    lines = [(ln.name, _thin([at(x) for x in ln.xs], ln.ys)) for ln in c.lines]
    xs = [x for _, pts in lines for x, _ in pts]
    ys = [y for _, pts in lines for _, y in pts if not (c.log_y and y <= 0)]
    ys += [v for v, _ in c.rules if not (c.log_y and v <= 0)]  # objectives in view
    x_lo, x_hi = c.x_range or ((min(xs), max(xs)) if xs else (0.0, 1.0))
    if x_hi <= x_lo:
        x_hi = x_lo + 1
    if c.log_y:
        lo, hi = _log_range(ys)
        y_ticks = [lo * 10**i for i in range(round(math.log10(hi / lo)) + 1)]

        def fy(v: float) -> float:
            return math.log10(max(v, lo) / lo) / math.log10(hi / lo)
    else:
        y_ticks = _ticks(0, max(ys or [1.0]))
        hi = y_ticks[-1] if y_ticks else 1.0

        def fy(v: float) -> float:
            return v / hi

    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(v: float) -> float:
        return H - BOTTOM - fy(v) * plot_h

    out = _frame([(py(t), _fmt(t)) for t in y_ticks], c.y_label, c.x_label)
    if pct:
        x_ticks = [(_px(p), f"p{p:g}") for p in PERCENTILE_POINTS]
    elif c.x_ticks:
        x_ticks = [(at(t), _fmt(t)) for t in c.x_ticks]
    elif c.log_x:
        x_ticks = [(math.log10(t), _fmt(t)) for t in _decades(10 ** x_lo, 10 ** x_hi)]
    else:
        x_ticks = [(t, _fmt(t)) for t in _ticks(x_lo, x_hi)]
    for x, text in x_ticks:
        if x_lo - 1e-9 <= x <= x_hi + 1e-9:
            # at the ends, the label starts (ends) at its tick: clear of the y axis'
            # labels, and not cut at the right edge
            at_x = px(x)
            anchor = ("start" if at_x - LEFT < EDGE_PX else "end" if W - RIGHT - at_x < EDGE_PX
                      else "middle")
            out.append(f'<text class="tick" x="{at_x:.1f}" y="{H - BOTTOM + 16}"'
                       f' text-anchor="{anchor}">{escape(text)}</text>')
    for v, text in c.rules:  # an objective: a dashed line across, named at its left
        out.append(f'<line class="rule" x1="{LEFT}" y1="{py(v):.1f}" x2="{W - RIGHT}"'
                   f' y2="{py(v):.1f}"/><text class="tick" x="{LEFT + 4}" y="{py(v) - 4:.1f}">'
                   f"{escape(text)}</text>")
    for i, (name, pts) in enumerate(lines):
        if not pts:
            continue
        ln = c.lines[i]
        hollow = {(at(x), y) for x, y, m in zip(ln.xs, ln.ys, ln.marked, strict=False)
                  if m and y is not None}
        d = " ".join(f"{'M' if k == 0 else 'L'}{px(x):.1f},{py(y):.1f}"
                     for k, (x, y) in enumerate(pts))
        out.append(f'<g class="series" data-series="{i}"><path class="line" d="{d}"'
                   f' stroke="{color(i)}"/>')
        if pct or len(pts) <= 60:
            for x, y in pts:
                where = f"p{100 - 100 * 10 ** -x:.4g}" if pct else (
                    f"{_fmt(10 ** x)}" if c.log_x else f"{x:g} s" if "time" in c.x_label
                    else f"run #{x:.0f}" if c.section == "history"
                    else f"{_fmt(x)} {c.x_label.split()[-1]}")
                tip = f"{name}: {where}: {_fmt(y)} {c.y_label}"
                fill = ('fill="#fff" stroke-width="1.5"' if (x, y) in hollow
                        else f'fill="{color(i)}"')
                if (x, y) in hollow:
                    tip += f" ({c.hollow_means})"
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" {fill}'
                           f' stroke="{color(i)}" data-tip="{escape(tip)}"><title>'
                           f"{escape(tip)}</title></circle>")
        out.append("</g>")
    return "".join(out)
