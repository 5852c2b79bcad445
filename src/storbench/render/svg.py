"""Charts (analysis/charts.py) as inline SVG: no script of their own, no font or
network request; every text escaped. Points carry ``data-tip`` for the report's
tooltip, lines ``data-series`` for its legend toggles."""

from __future__ import annotations

import math
from html import escape

from storbench.analysis.charts import CURVE, Chart
from storbench.render import units

W, H = 760, 330
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 34, 58
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39",
           "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363")
MAX_POINTS = 600  # per line: longer series are thinned (min and max of each bucket kept)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


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
    chart = units.for_display(chart)
    body = _bars(chart) if chart.kind == "bar" else _lines(chart)
    return (f'<svg class="chart" id="{escape(chart.id)}" viewBox="0 0 {W} {H}" role="img"'
            f' xmlns="http://www.w3.org/2000/svg" aria-label="{escape(chart.title)}">'
            f'<text class="title" x="{W / 2}" y="20" text-anchor="middle">'
            f"{escape(chart.title)}</text>{body}</svg>")


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


def _bars(c: Chart) -> str:
    top = max([v for v in (*c.values, *c.marks) if v is not None] or [1.0])
    ticks = _ticks(0, top)
    hi = ticks[-1] if ticks else top
    plot_h = H - TOP - BOTTOM

    def y(v: float) -> float:
        return H - BOTTOM - v / hi * plot_h

    out = _frame([(y(t), _fmt(t)) for t in ticks], c.y_label, "")
    n = len(c.names)
    slot = (W - LEFT - RIGHT) / max(n, 1)
    bar = min(60.0, slot * 0.6)
    for i, name in enumerate(c.names):
        cx = LEFT + slot * (i + 0.5)
        v = c.values[i] if i < len(c.values) else None
        label = name if len(name) <= 14 else name[:13] + "…"
        out.append(f'<text class="tick" x="{cx:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">'
                   f"{escape(label)}</text>")
        if v is None:
            out.append(f'<text class="tick" x="{cx:.1f}" y="{H - BOTTOM - 6}"'
                       ' text-anchor="middle">n/a</text>')
            continue
        tip = f"{name}: {c.bar_label + ' ' if c.bar_label else ''}{_fmt(v)} {c.y_label}"
        out.append(f'<rect class="bar" x="{cx - bar / 2:.1f}" y="{y(v):.1f}" width="{bar:.1f}"'
                   f' height="{max(0.5, H - BOTTOM - y(v)):.1f}" fill="{color(i)}"'
                   f' data-tip="{escape(tip)}"><title>{escape(tip)}</title></rect>')
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
    lines = [(ln.name, _thin([_px(x) for x in ln.xs] if pct else ln.xs, ln.ys))
             for ln in c.lines]
    xs = [x for _, pts in lines for x, _ in pts]
    ys = [y for _, pts in lines for _, y in pts if not (c.log_y and y <= 0)]
    x_lo, x_hi = c.x_range or ((min(xs), max(xs)) if xs else (0.0, 1.0))
    if x_hi <= x_lo:
        x_hi = x_lo + 1
    if c.log_y:
        lo = 10 ** math.floor(math.log10(min(ys))) if ys else 1.0
        hi = 10 ** math.ceil(math.log10(max(ys))) if ys else 10.0
        hi = hi if hi > lo else lo * 10
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
    x_ticks = [(_px(p), f"p{p:g}") for p in CURVE] if pct else [
        (t, _fmt(t)) for t in _ticks(x_lo, x_hi)]
    for x, text in x_ticks:
        if x_lo - 1e-9 <= x <= x_hi + 1e-9:
            out.append(f'<text class="tick" x="{px(x):.1f}" y="{H - BOTTOM + 16}"'
                       f' text-anchor="middle">{escape(text)}</text>')
    for i, (name, pts) in enumerate(lines):
        if not pts:
            continue
        d = " ".join(f"{'M' if k == 0 else 'L'}{px(x):.1f},{py(y):.1f}"
                     for k, (x, y) in enumerate(pts))
        out.append(f'<g class="series" data-series="{i}"><path class="line" d="{d}"'
                   f' stroke="{color(i)}"/>')
        if pct or len(pts) <= 60:
            for x, y in pts:
                at = f"p{100 - 100 * 10 ** -x:.4g}" if pct else f"{x:g} s"
                tip = f"{name}: {at}: {_fmt(y)} {c.y_label}"
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color(i)}"'
                           f' data-tip="{escape(tip)}"><title>{escape(tip)}</title></circle>')
        out.append("</g>")
    return "".join(out)
