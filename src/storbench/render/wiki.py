"""Tables for wikis: one table per metric, runs as rows, the unit in the header (the
way study 5 published its figures). Markdown, or HTML for wikis that take HTML."""

from __future__ import annotations

from html import escape

from storbench.analysis.compare import Comparison, verdict_brief
from storbench.render import units
from storbench.render.markdown import inert
from storbench.render.markdown import table as md_table
from storbench.render.table import PROBE_TITLE, Table, cell_text, probe_comparison_table


def tables(comp: Comparison) -> list[tuple[str, Table]]:
    """(metric title, table) per column of the comparison."""
    out = []
    for j, col in enumerate(comp.columns):
        values = [comp.cells[i][j].value for i in range(len(comp.runs))]
        unit = units.choose(col.metric.kind, values)
        header = units.header(col.title, col.metric.kind, unit)
        rows = []
        for i, run in enumerate(comp.runs):
            rows.append(["published" if run.origin == "published" else f"#{run.id}",
                         run.label or "", cell_text(comp, i, j, unit)])
        headers = ["run", "label", header]
        # beside the figure: the run's warnings on this test, and the verdicts judging it
        judged = [[verdict_brief(v) for v in run.judged
                   if v.metric == col.metric.key and v.assertion.split(".", 1)[0]
                   in (col.test, col.test.removesuffix("_rated"))] for run in comp.runs]
        for title, per_run in (("caveats", [list(comp.cells[i][j].caveats)
                                            for i in range(len(comp.runs))]),
                               ("verdict", judged)):
            if any(per_run):
                headers.append(title)
                for row, items in zip(rows, per_run, strict=True):
                    row.append("; ".join(items))
        out.append((header, Table(headers, rows, [False, False, True] + [False] * (
            len(headers) - 3))))
    probes = probe_comparison_table(comp)
    if probes is not None:
        out.append((PROBE_TITLE, probes))
    return out


def render_markdown(comp: Comparison) -> str:
    return "\n".join(f"### {inert(title)}\n\n{md_table(t)}" for title, t in tables(comp))


def render_html(comp: Comparison) -> str:
    parts = []
    for title, t in tables(comp):
        head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
        right_td = '<td align="right">'
        rows = "".join("<tr>" + "".join(
            f"{right_td if right else '<td>'}{escape(c)}</td>"
            for c, right in zip(row, t.align_right, strict=True)) + "</tr>" for row in t.rows)
        parts.append(f"<h3>{escape(title)}</h3>\n<table>\n<tr>{head}</tr>\n{rows}\n</table>\n")
    return "\n".join(parts)
