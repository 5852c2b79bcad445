"""Tables shaped the way the studies published them, for Markdown and wikis.

- ``wide``: one table, runs as rows, every figure a column (caveats and verdicts first).
- ``per-metric``: a table per figure, runs as rows (study 5's tables per metric).
- ``read-write``: a table per figure pair, Read and Write side by side, a row per
  target (study 5's write-up: "read_iops" beside "write_iops").
- ``rows``: one row per platform with its figures and its verdict (study 3's wiki).

A table holds only the runs that have its figure (a rated test only one run has gets
no rows of empty cells for the others), and no table is empty; a run that ended before
its first figure is in a table of its own, with how it ended.
"""

from __future__ import annotations

import re
from html import escape

from storbench.analysis.blocks import ident_cells, ident_heads
from storbench.analysis.compare import Comparison, ended, verdict_brief
from storbench.render import units
from storbench.render.formats import LAYOUTS
from storbench.render.markdown import inert
from storbench.render.markdown import table as md_table
from storbench.render.table import (
    Table,
    cell_text,
    comparison_table,
    probe_comparison_table,
    probe_comparison_title,
)

Titled = tuple[str | None, Table]


def tables(comp: Comparison, layout: str) -> list[Titled]:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    out: list[Titled]
    if layout == "wide":
        out = [(None, comparison_table(comp))]
    elif layout == "rows":
        out = [(None, _rows(comp))]
    else:
        groups = [[j] for j in range(len(comp.columns))] if layout == "per-metric" else _pairs(
            comp)
        out = [t for g in groups if (t := _group_table(comp, g)) is not None]
        # a run in no table (it ended before its first figure) is said, not left out
        gone = [i for i, r in enumerate(comp.runs)
                if ended(r) and all(c.value is None and not c.failed for c in comp.cells[i])]
        if gone:
            heads = ident_heads(comp.runs)
            out.append(("Runs without figures", Table(
                [*heads, "how it ended"],
                [[*ident_cells(comp.runs[i], heads), "; ".join(ended(comp.runs[i]))]
                 for i in gone],
                [False] * (len(heads) + 1))))
    probes = probe_comparison_table(comp)
    if probes is not None:
        out.append((probe_comparison_title(comp), probes))
    return out


def _judging(comp: Comparison, i: int, columns: list[int]) -> list[str]:
    """The run's verdicts on these columns' figures (a rated copy judges its test)."""
    out = []
    for v in comp.runs[i].judged:
        test = v.assertion.split(".", 1)[0]
        if any(v.metric == comp.columns[j].metric.key and test in (
                comp.columns[j].test, f"{comp.columns[j].test}_rated") for j in columns):
            out.append(verdict_brief(v))
    return out


def _group_table(comp: Comparison, columns: list[int]) -> Titled | None:
    """Runs as rows, these columns side by side, then caveats and verdicts."""
    present = [i for i in range(len(comp.runs))
               if any(comp.cells[i][j].value is not None or comp.cells[i][j].failed
                      for j in columns)]
    if not present:
        return None
    cols = [comp.columns[j] for j in columns]
    heads, unit_of = [], {}
    for j, col in zip(columns, cols, strict=True):
        # one unit for the figures side by side (Read and Write), never [µs] beside [ms]
        alike = [k for k, c in zip(columns, cols, strict=True) if c.metric.kind == col.metric.kind]
        unit_of[j] = units.choose(col.metric.kind, [comp.cells[i][k].value for i in present
                                                    for k in alike])
        label = (col.metric.direction.capitalize() if len(columns) > 1 else col.title)
        heads.append(units.header(label, col.metric.kind, unit_of[j]))
    idents = ident_heads(comp.runs)
    rows = [ident_cells(comp.runs[i], idents) + [cell_text(comp, i, j, unit_of[j])
                                                 for j in columns] for i in present]
    headers = [*idents, *heads]
    caveats = [sorted({c for j in columns for c in comp.cells[i][j].caveats}) for i in present]
    judged = [_judging(comp, i, columns) for i in present]
    for title, per_run in (("caveats", caveats), ("verdict", judged)):
        if any(per_run):
            headers.append(title)
            for row, items in zip(rows, per_run, strict=True):
                row.append("; ".join(items))
    title = cols[0].title if len(cols) == 1 else _pair_title(cols[0].test, cols[1].test,
                                                              cols[0].metric.label)
    unit = units.header("", cols[0].metric.kind, unit_of[columns[0]]).strip()
    if len(cols) == 1:
        title = units.header(title, cols[0].metric.kind, unit_of[columns[0]])
    elif unit:
        title = f"{title} {unit}"
    right = [False] * len(idents) + [True] * len(columns)
    return title, Table(headers, rows, right + [False] * (len(headers) - len(right)))


_DIRECTION = re.compile(r"(^|_)(read|write)(_|$)")


def _pair_key(test: str) -> str:
    return _DIRECTION.sub(lambda m: m[1] + "*" + m[3], test)


def _pair_title(read_test: str, write_test: str, label: str) -> str:
    figure = label.split(" ", 1)[1]  # "read IOPS" -> "IOPS"
    if read_test == write_test:
        return f"{read_test}: {figure}"
    return f"{read_test} / {write_test}: {figure}"


def _pairs(comp: Comparison) -> list[list[int]]:
    """Columns grouped as Read/Write pairs: the same figure of one test (rw_mix) or of
    two tests named alike but for read/write (read_iops, write_iops)."""
    groups: list[list[int]] = []
    used: set[int] = set()
    for j, col in enumerate(comp.columns):
        if j in used:
            continue
        used.add(j)
        group = [j]
        if col.metric.direction == "read":
            for k, other in enumerate(comp.columns):
                if k in used or other.metric.direction != "write":
                    continue
                same_figure = other.metric.key.split(".", 1)[1] == col.metric.key.split(".", 1)[1]
                same_test = other.test == col.test or (
                    _pair_key(other.test) == _pair_key(col.test) and "*" in _pair_key(col.test))
                if same_figure and same_test:
                    group.append(k)
                    used.add(k)
                    break
        groups.append(group)
    return groups


def _rows(comp: Comparison) -> Table:
    """One row per platform: its name, its figures, its verdict, its caveats."""
    heads, unit_of = [], []
    for j, col in enumerate(comp.columns):
        unit = units.choose(col.metric.kind, [row[j].value for row in comp.cells])
        unit_of.append(unit)
        heads.append(units.header(col.title, col.metric.kind, unit))
    rows = []
    for i, run in enumerate(comp.runs):
        # an unlabelled run is known by its number and where it ran
        name = run.label or (f"#{run.id} {run.target}" if run.origin != "published"
                             else run.target)
        rows.append([name] + [cell_text(comp, i, j, u) for j, u in enumerate(unit_of)]
                    + ["; ".join(comp.outcomes[i]), "; ".join(comp.caveats[i])])
    headers = ["platform", *heads, "verdict", "caveats"]
    keep = [k for k in range(len(headers)) if k < len(headers) - 2 or any(r[k] for r in rows)]
    return Table([headers[k] for k in keep], [[r[k] for k in keep] for r in rows],
                 [0 < k < len(heads) + 1 for k in keep])


def render_markdown(comp: Comparison, layout: str = "per-metric") -> str:
    return "\n".join((f"### {inert(title)}\n\n" if title else "") + md_table(t)
                     for title, t in tables(comp, layout))


def render_html(comp: Comparison, layout: str = "per-metric") -> str:
    parts = []
    for title, t in tables(comp, layout):
        head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
        right_td = '<td align="right">'
        rows = "".join("<tr>" + "".join(
            f"{right_td if right else '<td>'}{escape(c)}</td>"
            for c, right in zip(row, t.align_right, strict=True)) + "</tr>" for row in t.rows)
        heading = f"<h3>{escape(title)}</h3>\n" if title else ""
        parts.append(f"{heading}<table>\n<tr>{head}</tr>\n{rows}\n</table>\n")
    return "\n".join(parts)
