"""The kinds' sections, drawn: each view's blocks (analysis/blocks.py) on a terminal, in
HTML and in Markdown, and the comparison's tables of every kind the runs hold. The
registry (analysis/views) says what there is; nothing here names a kind."""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from rich.console import Console
from rich.text import Text as RichText

from storbench.analysis.blocks import Block, Table, Text, Timeline, Titled
from storbench.analysis.views import VIEWS, found_in, json_block
from storbench.render import units
from storbench.render.richtable import rich_table
from storbench.result.record import Run

STYLES = {"": "", "bold": "bold", "warning": "yellow"}


def shown(run: Run) -> list[Block]:
    """Every section the run holds, as its view shows it, with the names `--assert` may
    use of its answers."""
    out: list[Block] = []
    for view in VIEWS.values():
        value = view.section.of(run)
        if value:
            out += view.shown(run, value, units)
            named = [f"{view.prefix(value)}.{name}" for name in view.answers(value)]
            if named:
                out.append(Text(f"for --assert and check: {', '.join(named)}"))
    return out


def compared(runs: list[Run]) -> list[tuple[str, Table, list[str]]]:
    """Each kind the runs hold: (title, its table of them side by side, what the report
    says beneath it)."""
    out = []
    for view in VIEWS.values():
        found = found_in(view, runs)
        if found:
            out.append((view.title, view.compared(found, units),
                        [line for run, value in found for line in view.said(run, value)]))
    return out


def json_blocks(runs: list[Run]) -> dict[str, list[dict[str, object]]]:
    """Each kind's block of `compare --json` and the JSON export: the runs holding it."""
    return {view.json_key: [json_block(view, run, value) for run, value in found]
            for view in VIEWS.values() if (found := found_in(view, runs))}


def chart_sections() -> dict[str, str]:
    """The kinds' chart sections and the report's headings for them."""
    return {key: title for view in VIEWS.values() for key, title in view.chart_sections.items()}


def print_blocks(console: Console, blocks: list[Block]) -> None:
    for b in blocks:
        if isinstance(b, Titled):
            console.print(rich_table(b.table, b.title))
        elif isinstance(b, Text):
            console.print(RichText(b.text, style=STYLES[b.style]), soft_wrap=True)
        # a Timeline is a picture: the report draws it


def html(blocks: list[Block], table: Callable[[Table], str]) -> str:
    """The blocks in HTML; ``table`` draws a Table (the report's own, escaped)."""
    parts = []
    for b in blocks:
        if isinstance(b, Titled):
            parts.append(f"<h4>{escape(b.title)}</h4>" + table(b.table))
        elif isinstance(b, Text):
            tag = {"bold": "strong", "warning": "em"}.get(b.style)
            text = escape(b.text)
            parts.append(f"<p><{tag}>{text}</{tag}></p>" if tag else f"<p>{text}</p>")
        elif isinstance(b, Timeline):
            parts.append(timeline_svg(b))
    return "".join(parts)


COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#9c755f", "#e15759", "#76b7b2")


def timeline_svg(t: Timeline) -> str:
    """A row per item, its phases as bars on one time axis (seconds from its start), a
    title on each bar, the legend beneath."""
    rows = [(name, spans) for name, spans in t.rows if spans]
    if not rows:
        return ""
    colour = {phase: COLOURS[i % len(COLOURS)] for i, phase in enumerate(
        dict.fromkeys([*t.legend, *(s.phase for _, spans in rows for s in spans)]))}
    end = max(s.stop_s for _, spans in rows for s in spans) or 1.0
    width, left, row = 640, 40, 18
    height = row * len(rows) + 28
    scale = (width - left - 10) / end
    parts = [f'<div class="timeline"><svg xmlns="http://www.w3.org/2000/svg" width="{width}"'
             f' height="{height}" role="img" aria-label="timelines">']
    for i, (name, spans) in enumerate(rows):
        y = 10 + i * row
        parts.append(f'<text x="0" y="{y + 11}" font-size="11">{escape(name)}</text>')
        for s in spans:
            x0, x1 = left + s.start_s * scale, left + s.stop_s * scale
            parts.append(
                f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1):.1f}" height="12"'
                f' fill="{colour[s.phase]}"><title>{escape(t.legend.get(s.phase, s.phase))}:'
                f' {s.stop_s - s.start_s:.2f} s</title></rect>')
    axis = 20 + row * len(rows)
    parts.append(f'<text x="{left}" y="{axis}" font-size="11">0 s</text>'
                 f'<text x="{width - 10}" y="{axis}" font-size="11" text-anchor="end">'
                 f'{end:.1f} s</text></svg>')
    legend = " · ".join(f'<span style="color:{colour[p]}">■</span> {escape(text)}'
                        for p, text in t.legend.items())
    return "".join(parts) + f'<div class="muted">{legend}</div></div>'
