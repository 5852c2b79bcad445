"""Markdown (GitHub / wiki pipe tables)."""

from __future__ import annotations

from storbench.analysis.compare import Comparison, sentences
from storbench.render.blocks import compared
from storbench.render.table import (
    Table,
    comparison_table,
    probe_comparison_table,
    probe_comparison_title,
)


def inert(text: str) -> str:
    """A cell's text, inert: wikis render HTML inside Markdown, so <, > and & are
    entities; pipes would end the cell."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def table(t: Table) -> str:
    lines = ["| " + " | ".join(inert(h) for h in t.headers) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in t.align_right) + "|")
    lines += ["| " + " | ".join(inert(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines) + "\n"


def render(comp: Comparison) -> str:
    from storbench.analysis.views import tabulated

    # a curve's steps, a lifecycle's volumes: no tests to tabulate one by one
    text = table(comparison_table(comp)) if tabulated(comp.runs) else ""
    probes = probe_comparison_table(comp)
    if probes is not None:
        text += f"\n**{inert(probe_comparison_title(comp))}**\n\n{table(probes)}"
    for title, kind_table, _ in compared(comp.runs):  # each kind's (curves, apps, ...)
        text += f"\n**{inert(title)}**\n\n{table(kind_table)}"
    text = text.removeprefix("\n")
    said = sentences(comp)  # each ratio, and whether it is beyond the noise
    if said:
        text += "\n" + "".join(f"- {inert(s)}\n" for s in said)
    return text
