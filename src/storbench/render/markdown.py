"""Markdown (GitHub / wiki pipe tables)."""

from __future__ import annotations

from storbench.analysis.compare import Comparison
from storbench.render.table import Table, comparison_table


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(t: Table) -> str:
    lines = ["| " + " | ".join(_escape(h) for h in t.headers) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in t.align_right) + "|")
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in t.rows]
    return "\n".join(lines) + "\n"


def render(comp: Comparison) -> str:
    return table(comparison_table(comp))
