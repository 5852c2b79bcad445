"""Terminal output with rich: tables, the run summary, verdicts, environment."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from storbench.analysis.summary import HostSpread, host_spread, summarize
from storbench.render import units
from storbench.render.richtable import longest_words, rich_table
from storbench.render.table import (
    Table,
    comparison_table,
    cost_table,
    probe_comparison_table,
    probe_comparison_title,
    probe_phases,
    summary_table,
)
from storbench.result import sections
from storbench.result.facts import TargetFacts
from storbench.result.record import Regression, Run, Verdict, Warning
from storbench.workload.sizes import format_bytes_iec, format_took

if TYPE_CHECKING:  # types only: `list` and `show` need not load the comparison (or suites)
    from storbench.analysis.compare import Comparison
    from storbench.analysis.cost import Priced
    from storbench.workload.suite import Suite


def verdict_told(v: Verdict) -> str:
    """What was measured, with its unit (and what to know about it), or why nothing was;
    an application's answer is said to be estimated, not measured."""
    from storbench.analysis.views.app import ESTIMATED

    if v.measured is None or v.kind is None:
        return v.note
    figure = units.figure(v.kind, v.measured)
    if v.note.startswith(ESTIMATED):
        return f"estimated {figure} from {v.note[len(ESTIMATED):]}"
    return f"measured {figure}" + (f"; {v.note}" if v.note else "")


def outcome_line(v: Verdict) -> str:
    """'PASS etcd.fdatasync.p99 < 10ms: measured 4.20 ms (source)', in rich markup."""
    word = "[green]PASS[/green]" if v.passed else "[red]FAIL[/red]"
    source = f" ({escape(v.source)})" if v.source else ""
    return f"{word} {escape(v.assertion)}: {escape(verdict_told(v))}{source}"


def change_line(c: Regression) -> str:
    if c.unlike:
        return (f"[red]UNLIKE[/red] {escape(c.figure)}: another workload than"
                f" {escape(c.baseline_name)}'s ({escape(c.unlike)}): no baseline for it")
    noise = f", noise ± {100 * c.noise:.1f}%" if c.noise is not None else ", no repeats"
    how = (f"{100 * c.worse_by:.1f}% worse" if c.worse_by > 0
           else f"{100 * -c.worse_by:.1f}% better")
    word = ("[red]WORSE[/red]" if c.failed else
            "[green]ok[/green]" if c.worse_by <= c.max_regression else "[yellow]noise[/yellow]")
    return (f"{word} {escape(c.figure)}: {units.figure(c.kind, c.value)} vs"
            f" {units.figure(c.kind, c.baseline_value)} in {escape(c.baseline_name)}: {how}"
            f" (limit {100 * c.max_regression:g}%{noise})")


def print_run(console: Console, run: Run) -> None:
    """The summary of one run: header line, results table, verdicts, error."""
    tags = " ".join(f"{k}={v}" for k, v in run.tags.items())
    console.print(
        f"[bold]Run #{run.id}[/bold] {escape(run.label or '')} suite={escape(run.suite)}"
        f" target={escape(run.target)} status={run.status} {run.created_at}"
        + (f" tags: {escape(tags)}" if tags else "")
    )
    from storbench.analysis.views import tabulates
    from storbench.render.blocks import print_blocks, shown

    rows = summarize(run) if tabulates(run) else []
    print_blocks(console, shown(run))
    if run.repeats > 1 and rows:
        console.print(f"{run.repeats} repeats per test: medians, IOPS ± 95% confidence interval")
    if rows:
        console.print(rich_table(summary_table(rows)))
    for v in run.judged:
        console.print(outcome_line(v))
    for c in run.regressions:
        console.print(change_line(c))
    for w, count, tests in grouped_warnings(run):
        per_repeat = run.repeats > 1 and "repeats" not in w.details
        times = f" (in {count} of {run.repeats} repeats)" if per_repeat else ""
        text = w.message
        if len(tests) > 1:  # one line for the same warning on many tests (a curve's steps)
            named = ", ".join(tests[:4]) + (", …" if len(tests) > 4 else "")
            # "each of": a test's words ("moved its data") said of several
            text = f"each of {len(tests)} tests ({named}): {text.removeprefix(f'{w.test}: ')}"
        console.print(f"[yellow]warning ({w.kind}):[/yellow] {escape(text)}{times}",
                      soft_wrap=True)
    worker = "pod" if TargetFacts.of(run.environment).place == "pods" else "host"
    for spread in host_spread(run):
        console.print(rich_table(host_table(spread, worker), f"{spread.test}: per {worker}"))
        first, last = format_took(spread.first.runtime_s), format_took(spread.last.runtime_s)
        finished = (f"every {worker} ran {first}" if first == last else
                    f"first to finish {escape(spread.first.host)} after {first}, last"
                    f" {escape(spread.last.host)} after {last}")
        console.print(
            f"{escape(spread.test)}: {finished}; slowest {escape(spread.slowest.host)}"
            f" ({units.figure('iops', spread.slowest.iops)})", soft_wrap=True)
    sources = sections.IMPORT_SOURCES.of(run)
    if sources and len(sources) > 1:
        source_rows = [[s["test"], f"lines {s['lines'][0]}–{s['lines'][1]}", s["named_from"]]
                for s in sources]
        console.print(rich_table(Table(["test", "from", "named by"], source_rows,
                                       [False, False, False]),
                                 f"Imported from {run.target}"))
    for left in sections.IMPORT_LEFT_OUT.of(run) or []:
        console.print(f"[yellow]left out[/yellow] lines {left['lines'][0]}–{left['lines'][1]}"
                      f" of {escape(run.target)}: {escape(left['why'])}", soft_wrap=True)
    probe = sections.PROBE.of(run)
    if probe:
        what, ops = sections.probe_names([probe])
        console.print(rich_table(probe_table(probe), f"{what} beside the load ({ops})"))
    if run.error:
        console.print(f"[red]error:[/red] {escape(run.error)}")


def grouped_warnings(run: Run) -> list[tuple[Warning, int, list[str]]]:
    """distinct_warnings(), those that say the same of several tests once, with the
    tests' names (and as many repeats: "in 2 of 3 repeats" is said of each test)."""
    groups: dict[tuple[str, str, int], tuple[Warning, int, list[str]]] = {}
    for w, count in distinct_warnings(run):
        key = (w.kind, w.message.removeprefix(f"{w.test}: "), count)
        if key in groups:
            groups[key][2].append(w.test)
        else:
            groups[key] = (w, count, [w.test])
    return list(groups.values())


def distinct_warnings(run: Run) -> list[tuple[Warning, int]]:
    """Each (test, kind) once, with how many times it was raised (repeats)."""
    seen: dict[tuple[str, str, str], list[Any]] = {}
    for w in run.warnings:
        key = (w.test, w.kind, str(w.details.get("direction", "")))
        if key in seen:
            seen[key][1] += 1
        else:
            seen[key] = [w, 1]
    return [(w, n) for w, n in seen.values()]


def host_table(spread: HostSpread, worker: str = "host") -> Table:
    bw = units.choose("bw", [r.bw_bytes_per_s for r in spread.rows])
    lat = units.choose("latency", [r.clat_p99_ns for r in spread.rows])
    rows = [[r.host, units.IOPS.fmt(r.iops), bw.fmt(r.bw_bytes_per_s), lat.fmt(r.clat_p99_ns),
             units.SECONDS.fmt(r.runtime_s)] for r in spread.rows]
    return Table([worker, "IOPS", f"BW [{bw.name}]", f"clat p99 [{lat.name}]", "runtime [s]"],
                 rows, [False, True, True, True, True])


def print_time_spent(console: Console, run: Run) -> None:
    """Where the run's time went: each phase, a test's layout and start-up apart from
    its I/O, and how busy this machine was (load average, CPU steal)."""
    phases = sections.PHASES.of(run)
    if not phases:
        return
    rows = []
    for p in phases:
        took = float(p["end_s"]) - float(p["start_s"])
        name = p["name"] + (f" (repeat {p['repeat'] + 1})" if p.get("repeat") else "")
        detail = ""
        if "io_s" in p:
            ramp = f", ramp {p['ramp_s']:g} s" if p.get("ramp_s") else ""
            detail = f"I/O {p['io_s']:.1f} s{ramp}, layout and start-up {p['setup_s']:.1f} s"
        rows.append([name, f"{p['start_s']:.1f}", f"{took:.1f}", detail])
    total = max(float(p["end_s"]) for p in phases)
    console.print(rich_table(Table(["phase", "at [s]", "took [s]", "of which"], rows,
                                   [False, True, True, False]),
                             f"Where the time went ({total:.1f} s)"))
    load = sections.HOST_LOAD.of(run) or {}
    said = []
    if load.get("loadavg"):
        said.append(f"load average {load['loadavg'][0]:.2f} at the end"
                    f" ({load.get('cpus') or '?'} CPUs)")
    if "cpu_busy_percent" in load:
        said.append(f"CPU busy {load['cpu_busy_percent']:.0f}%")
    if "cpu_steal_percent" in load:
        said.append(f"CPU steal {load['cpu_steal_percent']:.1f}%")
    if said:
        console.print("This machine during the run: " + ", ".join(said), markup=False)


def probe_table(probe: dict[str, Any]) -> Table:
    phases = probe_phases([probe])
    values = [v for op in probe.values() for ph in op.values()
              for v in (ph["p50_ns"], ph["p99_ns"], ph["max_ns"]) if v is not None]
    unit = units.choose("latency", values)
    headers = ["operation"] + [f"{ph} {stat} [{unit.name}]" for ph in phases
                               for stat in ("p50", "p99", "max")] + [f"samples {'/'.join(phases)}"]
    rows = []
    for op, by_phase in probe.items():
        row = [sections.probe_op(op)]
        for ph in phases:
            d = by_phase.get(ph)
            row += [unit.fmt(d[k]) if d and d[k] is not None else ""
                    for k in ("p50_ns", "p99_ns", "max_ns")]
        row.append("/".join(str(by_phase.get(ph, {}).get("n", 0)) for ph in phases))
        failed = {ph: d["failed"] for ph, d in by_phase.items() if d.get("failed")}
        if failed:  # requests that failed are not timed: said beside the samples
            row[-1] += " (failed: " + ", ".join(f"{n} {ph}" for ph, n in failed.items()) + ")"
        rows.append(row)
    return Table(headers, rows, [False] + [True] * (len(phases) * 3 + 1))


def print_environment(console: Console, env: dict[str, Any]) -> None:
    t = RichTable(title="Environment", title_justify="left", show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value")
    for key, val in environment_rows(env):
        t.add_row(Text(key), Text(val))
    console.print(t)


def environment_rows(env: dict[str, Any]) -> list[tuple[str, str]]:
    """(dotted key, text) for every fact; byte counts also in IEC units."""
    rows = []
    for key, val in _flatten(env):
        if key.endswith("bytes") and isinstance(val, int):
            val = f"{format_bytes_iec(val)} ({val} bytes)"
        rows.append((key, str(val)))
    return rows


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Dotted keys; a list of sections (each host's facts) one key per fact, hosts[1].fs_type
    (not a line of Python's notation)."""
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}.")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                out += _flatten(x, f"{prefix}{k}[{i}].")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def fits(console: Console, t: Table) -> bool:
    """Whether the table fits the terminal with its words whole (wrapped between words):
    drawn once aside, uncropped, as rich would draw it (its own measure can say a table
    fits that it then draws wider, and the right-hand columns would be cut)."""
    if sum(longest_words(t)) + 3 * len(t.headers) + 1 > console.width:
        return False
    drawn = io.StringIO()
    Console(width=console.width, file=drawn, color_system=None).print(rich_table(t), crop=False)
    return max(map(cell_len, drawn.getvalue().splitlines()), default=0) <= console.width


def print_blocks(console: Console, t: Table, key_columns: int = 3) -> None:
    """A table too wide for the terminal: one block per row, a figure per line."""
    for row in t.rows:
        console.print(Text(" ".join(c for c in row[:key_columns] if c), style="bold"))
        for header, cell in zip(t.headers[key_columns:], row[key_columns:], strict=True):
            if cell:
                console.print(f"  {' '.join(header.split())}: {cell}", markup=False)


def print_comparison(console: Console, comp: Comparison) -> None:
    from storbench.analysis.compare import sentences
    from storbench.analysis.views import tabulated
    from storbench.render.blocks import compared

    for title, table_, _ in compared(comp.runs):
        console.print(rich_table(table_, title))
    if not tabulated(comp.runs):
        return  # a curve's steps, a lifecycle's volumes: no tests to compare one by one
    table = comparison_table(comp, sep="\n")
    if fits(console, table):
        console.print(rich_table(table))
    else:
        print_blocks(console, table, key_columns=table.headers.index("suite") + 1)
    probes = probe_comparison_table(comp)
    if probes is not None:
        console.print(rich_table(probes, probe_comparison_title(comp)))
    for line in sentences(comp):
        console.print(line, markup=False)
    if comp.baseline is not None:
        base = comp.runs[comp.baseline]
        label = f" {escape(base.label)}" if base.label else ""
        none = "" if any(c.value is not None for c in comp.cells[comp.baseline]) else (
            f" (it has no figures: the run {escape(base.status)}, so there are no ratios)")
        console.print(f"Ratios (×) are to the baseline, run #{base.id}{label}{none};"
                      " IOPS and BW: higher is better, latency: lower is better.")


def print_suites(console: Console, suites: list[Suite], *, detailed: bool,
                 answers: dict[str, tuple[tuple[str, str, str], ...]] | None = None) -> None:
    """The suites (a table), or each one in full: its tests' job files and where each
    option comes from, then the names `--assert`, `check` and `history --metric` take:
    its tests' figures (TEST.DIRECTION.FIGURE) and an application's answers (APP.NAME)."""
    from storbench.workload.suites import ALWAYS_ADDED

    if not detailed:
        t = RichTable(header_style="bold")
        for col in ("suite", "tests", "description"):
            t.add_column(col)
        for s in suites:
            t.add_row(Text(s.name), Text(", ".join(x.name for x in s.tests)),
                      Text(s.description))
        console.print(t)
        return
    for s in suites:
        console.print(f"[bold]{s.name}[/bold]: {s.description}\nsource: {s.study}")
        for test, jf in s.jobfiles():
            console.print(f"\n[bold]{test.name}[/bold]: {test.description}")
            t = RichTable(header_style="bold", box=None, pad_edge=False)
            for col in ("option", "value", "from"):
                t.add_column(col)
            for option, value, origin in s.provenance(test):
                t.add_row(Text(option), Text("(set)" if value is None else value), Text(origin))
            console.print(t)
            console.print(jf.render(), markup=False)
        for option, why in (s.dropped or {}).items():
            console.print(f"\nleft out of the study's job: {option}: {why}", markup=False)
        console.print("\nadded to every job by storbench:", markup=False)
        for option, why in ALWAYS_ADDED:
            console.print(f"  {option}: {why}", markup=False)
        console.print("\nfigures for --assert, check and history --metric:", markup=False)
        console.print("  " + ", ".join(f"{t.name}.{m}" for t in s.tests for m in t.metrics),
                      markup=False)
        for name, label, unit in (answers or {}).get(s.name, ()):
            console.print(f"  {s.name}.{name}: {label} ({unit})", markup=False)


def print_references(console: Console, refs: list[Any]) -> None:
    t = RichTable(header_style="bold")
    for col in ("name", "target", "suite", "figures", "study"):
        t.add_column(col)
    for r in refs:
        figures = ", ".join(f"{test}.{k}" for test, m in r.figures.items() for k in m)
        t.add_row(Text(r.name), Text(r.target), Text(r.suite), Text(figures), Text(r.study))
    console.print(t)


def print_costs(console: Console, comp: Comparison, priced: list[Priced]) -> None:
    """The cost table under a comparison: $/month, $ per 1,000 IOPS and per MB/s."""
    if not priced:
        return
    title, table, notes = cost_table(comp, priced)
    console.print(rich_table(table, title))
    console.print(notes[0], markup=False)
    for line in notes[1:]:
        console.print(f"  {line}", markup=False)


def print_sheets(console: Console, sheets: list[Any]) -> None:
    t = RichTable(header_style="bold")
    for col in ("name", "title", "date", "$/GB-month", "included", "$/IOPS-month",
                "$/MB/s-month", "source"):
        t.add_column(col)
    for s in sheets:
        included = ", ".join(x for x in (f"{s.included_iops:,.0f} IOPS" if s.included_iops
                                         else "", f"{s.included_mbps:,.0f} MB/s"
                                         if s.included_mbps else "") if x)
        t.add_row(Text(s.name), Text(s.title), Text(s.date), f"{s.per_gb_month:g}",
                  included or "-", f"{s.per_iops_month:g}" if s.per_iops_month else "-",
                  f"{s.per_mbps_month:g}" if s.per_mbps_month else "-", Text(s.source))
    console.print(t)
