"""A table (render/table.py's plain data) as rich draws it on a terminal."""

from __future__ import annotations

from rich.cells import cell_len
from rich.table import Table as RichTable
from rich.text import Text

from storbench.render.table import Table


def rich_table(t: Table, title: str | None = None) -> RichTable:
    table = RichTable(title=title, title_justify="left", header_style="bold")
    for header, right, word in zip(t.headers, t.align_right, longest_words(t), strict=True):
        # Text, not markup: "[ms]" in a header or a label like "[red]" stays literal.
        # Never narrower than its longest word; and fold, not "…", if the terminal is
        # narrower than even that (print_comparison then prints blocks instead).
        table.add_column(Text(header), justify="right" if right else "left", overflow="fold",
                         min_width=word)
    for row in t.rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def longest_words(t: Table) -> list[int]:
    """Per column, its longest word (header or cell): what it cannot be narrower than."""
    return [max((cell_len(w) for cell in (h, *(row[j] for row in t.rows)) for w in cell.split()),
                default=1) for j, h in enumerate(t.headers)]


