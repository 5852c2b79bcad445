"""Tables as plain data (headers + text cells), shared by every text format."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storbench.analysis.stats import times

if TYPE_CHECKING:  # types only: a run's own tables need not load the comparison
    from storbench.analysis.compare import Comparison
    from storbench.analysis.cost import Priced
    from storbench.analysis.summary import SummaryRow
from storbench.analysis.blocks import Table as Table
from storbench.analysis.blocks import ident_cells, ident_heads
from storbench.render import units
from storbench.result.sections import PROBE, probe_names, probe_op
from storbench.workload.sizes import format_bytes_iec


def transposed(t: Table, key_columns: int = 2) -> Table:
    """The table turned: a column per row (headed by its first ``key_columns`` cells,
    "#1 tmpfs"), a row per other column. A comparison of many figures and few runs
    reads (and fits a page) that way without cutting a word."""
    heads = [" ".join(c for c in row[:key_columns] if c) for row in t.rows]
    rows = [[t.headers[j], *(row[j] for row in t.rows)]
            for j in range(key_columns, len(t.headers))]
    numeric = any(t.align_right)
    return Table(["", *heads], rows, [False, *([numeric] * len(heads))])


def comparison_table(comp: Comparison, *, grouping: bool = True, sep: str = " ") -> Table:
    """Runs as rows, metrics as columns. ``sep`` joins test name and metric in headers."""
    heads = ident_heads(comp.runs)
    headers = [*heads, "suite"]
    rows: list[list[str]] = [[*ident_cells(r, heads), r.suite] for r in comp.runs]
    # what a reader must know before the figures: each run's warnings and verdicts
    for title, per_run in (("caveats", comp.caveats), ("verdicts", comp.outcomes)):
        if any(per_run):
            headers.append(title)
            for row, items in zip(rows, per_run, strict=True):
                row.append("; ".join(items))
    left = len(headers)
    for j, col in enumerate(comp.columns):
        # a test's read and write figure of one kind share a unit (p99 [µs] beside p99 [µs])
        alike = [k for k, c in enumerate(comp.columns) if c.test == col.test
                 and c.metric.kind == col.metric.kind and c.metric.field == col.metric.field]
        unit = units.choose(col.metric.kind, [comp.cells[i][k].value for k in alike
                                              for i in range(len(comp.runs))])
        title = f"{col.test}{sep}{col.metric.label}"
        headers.append(units.header(title, col.metric.kind, unit))
        for i, row in enumerate(rows):
            row.append(cell_text(comp, i, j, unit, grouping=grouping))
    return Table(headers, rows, [False] * left + [True] * len(comp.columns))


def cell_text(comp: Comparison, i: int, j: int, unit: units.Unit, *,
              grouping: bool = True) -> str:
    """One cell: the figure (a published one with the precision its study printed),
    its confidence interval, its ratio to the baseline."""
    cell = comp.cells[i][j]
    decimals = cell.printed.decimals_in(unit.divisor) if cell.printed else None
    text = "failed" if cell.failed else unit.fmt(cell.value, grouping=grouping,
                                                   decimals=decimals)
    if cell.estimate is not None and cell.estimate.ci95 is not None:
        text += f" ± {unit.fmt(cell.estimate.ci95, grouping=grouping)}"
    if comp.baseline not in (None, i) and cell.ratio is not None:
        text += f" ({times(cell.ratio.value)}×)"
    if cell.caveats and not cell.failed:
        text += " ⚠"  # see the row's caveats
    return text


def summary_table(rows: list[SummaryRow]) -> Table:
    iops = units.IOPS
    bw = units.choose("bw", [r.bw_bytes_per_s for r in rows])
    lat = units.choose("latency", [r.p99_ns for r in rows])
    headers = ["test", "dir", "IOPS", f"BW [{bw.name}]", f"clat mean [{lat.name}]",
               f"p50 [{lat.name}]", f"p99 [{lat.name}]", f"p99.9 [{lat.name}]"]
    out = []
    for r in rows:
        if r.failed:
            out.append([r.test, "FAILED", "", "", "", "", "", ""])
            continue
        iops_text = iops.fmt(r.iops)
        if r.iops_ci95 is not None:
            iops_text += f" ± {iops.fmt(r.iops_ci95)}"
        if r.rate_asked is not None:  # not at its rate (behind it, or faster): say it
            iops_text += f" (of {iops.fmt(r.rate_asked)} asked)"
        out.append([r.test, r.operation or r.direction, iops_text, bw.fmt(r.bw_bytes_per_s),
                    lat.fmt(r.mean_ns), lat.fmt(r.p50_ns), lat.fmt(r.p99_ns),
                    lat.fmt(r.p999_ns)])
    return Table(headers, out, [False, False] + [True] * 6)


PROBE_STATS = ("p50_ns", "p99_ns", "max_ns")


def probe_comparison_title(comp: Comparison) -> str:
    what, ops = probe_names([probe for run in comp.runs if (probe := PROBE.of(run))])
    return f"{what}, idle and under load ({ops})"


def probe_comparison_table(comp: Comparison) -> Table | None:
    """Metadata latency per run and operation, idle beside under load (p50, p99, max):
    study 1's `ls` that took 11.3 s while fio ran. None when no run probed."""
    probed = [(run, probe) for run in comp.runs if (probe := PROBE.of(run))]
    if not probed:
        return None
    values = [ph[k] for _, probe in probed for by_phase in probe.values()
              for ph in by_phase.values() for k in PROBE_STATS if ph[k] is not None]
    unit = units.choose("latency", values)
    phases = probe_phases([probe for _, probe in probed])
    heads = ident_heads([run for run, _ in probed])
    headers = [*heads, "operation"] + [
        f"{phase} {stat[:-3]} [{unit.name}]" for phase in phases for stat in PROBE_STATS]
    rows = []
    for run, probe in probed:
        for op, by_phase in probe.items():
            row = [*ident_cells(run, heads), probe_op(op)]
            for phase in phases:
                d = by_phase.get(phase)
                row += [unit.fmt(d[k]) if d and d[k] is not None else "" for k in PROBE_STATS]
            rows.append(row)
    return Table(headers, rows, [False] * (len(heads) + 1) + [True] * (len(phases) * 3))


def probe_phases(probes: list[dict[str, Any]]) -> list[str]:
    """The metadata probe's phases shown: idle, layout (fio laying out its files and
    starting: runs stored before it was told apart have none) and load."""
    found = {ph for probe in probes for by_phase in probe.values() for ph in by_phase}
    return [ph for ph in ("idle", "layout", "load") if ph in found or ph != "layout"]


def cost_table(comp: Comparison, priced: list[Priced]) -> tuple[str, Table, list[str]]:
    """(title, table, notes) for the prices of the compared runs: the capacity in the
    title when every row has the same, else a column; a row priced from a figure
    storbench flagged says so beside its price."""
    from storbench.analysis.cost import unpriced

    sizes = {p.capacity_bytes for p in priced}
    one = sizes.pop() if len(sizes) == 1 else None
    title = "Cost per month" if one is None else f"Cost per month at {_capacity(one)}"
    marked = any(p.caveats or p.iops_caveats or p.bw_caveats for p in priced)
    flagged = marked or any(p.limits for p in priced)  # a caveats column
    rows = []
    for p in priced:
        run = comp.runs[p.run]
        name = f"#{run.id} {run.label or ''}".strip() if run.id else run.label or ""
        prov = ", ".join(x for x in (
            f"{p.provisioned_iops:,.0f} IOPS" if p.sheet.per_iops_month else "",
            f"{p.provisioned_mbps:,.0f} MB/s" if p.sheet.per_mbps_month else "",
            f"fixed {p.sheet.fixed_month:,.2f}/month" if p.sheet.fixed_month else "") if x)
        row = [name, f"{p.sheet.name} ({p.sheet.date})"]
        if one is None:
            row.append(_capacity(p.capacity_bytes))
        iops_mark, bw_mark = (" ⚠" if p.iops_caveats else ""), (" ⚠" if p.bw_caveats else "")
        row += [prov or "-", f"{p.monthly:,.2f}" + (" ⚠" if p.caveats else ""),
                f"{p.iops:,.0f}{iops_mark} ({p.iops_column})" if p.iops else "",
                f"{p.per_kiops:,.2f}{iops_mark}" if p.per_kiops is not None else "",
                f"{p.bw_bytes_per_s / 1e6:,.1f}{bw_mark} ({p.bw_column})" if p.bw_bytes_per_s
                else "",
                f"{p.per_mbps:,.3f}{bw_mark}" if p.per_mbps is not None else ""]
        if flagged:
            shown = [c for c in dict.fromkeys((*p.iops_caveats, *p.bw_caveats))
                     if c not in p.caveats]
            row.append("; ".join(x for x in (
                f"priced from a flagged figure: {'; '.join(p.caveats)}" if p.caveats else "",
                f"flagged figures: {'; '.join(shown)}" if shown else "", *p.limits) if x))
        rows.append(row)
    headers = ["run", "sheet", *(["capacity"] if one is None else []), "provisioned",
               "$/month", "best IOPS", "$ / 1k IOPS", "best BW [MB/s]", "$ / MB/s",
               *(["caveats"] if flagged else [])]
    notes = [f"Provisioned: what the run achieved (its best test's IOPS and bandwidth, read"
             f" and write added up) beyond what the sheet includes, up to the sheet's"
             f" maximum, unless --provisioned-iops / --provisioned-mbps say otherwise."
             f" Prices in {priced[0].sheet.currency}."
             + (" ⚠: a figure storbench flagged (a cache, a burst, a cap...), and what is"
                " divided by it; a ⚠ price comes from such a figure: it is what that figure"
                " would cost, not what this storage needs; give --provisioned-iops /"
                " --provisioned-mbps to price the volume you would buy." if marked else "")
             + (f" Not priced (no sheet given to them; --cost NAME=SHEET):"
                f" {', '.join(left)}." if (left := unpriced(comp, priced)) else "")
             + " Sheets:"]
    notes += [f"{sheet.name}: {sheet.title or sheet.name}, {sheet.date}; {sheet.source}"
              for sheet in {p.sheet.name: p.sheet for p in priced}.values()]
    notes += [_requests(comp, p) for p in priced if p.requests]
    right = [False, False, *([False] if one is None else []), False] + [True] * 5
    return title, Table(headers, rows, right + ([False] if flagged else [])), notes


def _requests(comp: Comparison, p: Priced) -> str:
    """An object store's requests at the rates the run measured, as $ an hour of each
    test's load."""
    run = comp.runs[p.run]
    name = f"#{run.id} {run.label or ''}".strip() if run.id else run.label or ""
    parts = [f"{r.test} {r.per_s:,.0f} {r.operation}s/s "
             + (f"${r.per_hour:,.2f} (${r.per_1000:g} per 1,000)" if r.per_1000
                else "not charged") for r in p.requests]
    return (f"{name}: requests on {p.sheet.name}, an hour at the rates measured"
            f" ({p.sheet.currency}): " + "; ".join(parts))


def _capacity(size: float) -> str:
    """A capacity as sheets bill it (decimal GB) beside its binary size."""
    return f"{format_bytes_iec(int(size))} ({size / 1e9:,.0f} GB)"
