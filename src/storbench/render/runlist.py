"""The list of stored runs for the terminal: `storbench list`. Its own module, kept
light (rich alone): listing runs needs no results, summaries or units."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console

    from storbench.result.record import Run


def print_run_list(console: Console, runs: list[Run]) -> None:
    t = Table(header_style="bold")
    for col in ("run", "created (UTC)", "label", "suite", "status", "target", "tags"):
        t.add_column(col)
    for r in runs:
        status = Text(r.status, style="" if r.status == "completed" else "red")
        t.add_row(Text(f"#{r.id}"), Text(r.created_at), Text(r.label or ""), Text(r.suite),
                  status, Text(r.target), Text(" ".join(f"{k}={v}" for k, v in r.tags.items())))
    console.print(t)
