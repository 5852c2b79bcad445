"""CSV: one row per run, one column per metric, the unit in each header.

Numbers are written without thousands separators; a figure that was not
measured is an empty cell, never 0. Text from users (labels, caveats) is written so
that a spreadsheet shows it and never runs it (render/text.py).
"""

from __future__ import annotations

import csv
import io

from storbench.analysis.compare import Comparison, ratio_word
from storbench.render import units
from storbench.render.text import spreadsheet_cell
from storbench.result.sections import PROBE


def render(comp: Comparison) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    headers = ["run", "label", "suite", "target", "status", "created_at"]
    column_units = []
    for j, col in enumerate(comp.columns):
        unit = units.choose(col.metric.kind, [row[j].value for row in comp.cells])
        column_units.append(unit)
        headers.append(units.header(col.title, col.metric.kind, unit))
        if comp.baseline is not None:
            headers.append(f"{col.title} ratio to #{comp.runs[comp.baseline].id}")
            headers.append(f"{col.title} vs #{comp.runs[comp.baseline].id}")
    # metadata latency (the probe), in ms: each operation's p99 idle and under load, max
    probe_cols = sorted({(op, phase, stat) for run in comp.runs
                         for op, by in (PROBE.of(run) or {}).items()
                         for phase in by for stat in ("p99_ns", "max_ns")})
    probe_head = [f"metadata {op} {phase} {stat[:-3]} [ms]" for op, phase, stat in probe_cols]
    writer.writerow([*map(spreadsheet_cell, headers), *probe_head, "caveats", "verdicts"])
    for k, (run, row) in enumerate(zip(comp.runs, comp.cells, strict=True)):
        ident = "published" if run.origin == "published" else str(run.id)
        line: list[str] = [ident, spreadsheet_cell(run.label or ""), spreadsheet_cell(run.suite),
                           spreadsheet_cell(run.target), run.status, run.created_at]
        for j, (cell, unit) in enumerate(zip(row, column_units, strict=True)):
            line.append("" if cell.value is None else f"{cell.value / unit.divisor:.6g}")
            if comp.baseline is not None:
                line.append("" if cell.ratio is None else f"{cell.ratio.value:.4f}")
                line.append(spreadsheet_cell(ratio_word(comp, k, j) or ""))
        probe = PROBE.of(run) or {}
        line += [f"{v / 1e6:.6g}" if (v := probe.get(op, {}).get(phase, {}).get(stat))
                 is not None else "" for op, phase, stat in probe_cols]
        writer.writerow([*line, spreadsheet_cell("; ".join(comp.caveats[k])),
                         spreadsheet_cell("; ".join(comp.outcomes[k]))])
    return out.getvalue()
