"""`storbench history` for the terminal and for scripts: the series, a figure's runs as a
table with a bar chart, each change point marked where it began."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from storbench.render import units
from storbench.render.text import harmless

if TYPE_CHECKING:
    from rich.console import Console

    from storbench.analysis.history import Change, History

BAR = 40  # characters of the longest bar
BAR_MIN = 10  # on a narrow terminal the bars are scaled down to this, never cut
OTHER_COLUMNS = 60  # what the run, its start and its figure take beside the bars
SHORT = 60  # a series this long is shown run by run


def change_text(c: Change, kind: str) -> str:
    """'-29.4% (2,996 IOPS → 2,115 IOPS, p<1e-9): worse'."""
    word = "worse" if c.worse else "better"
    p = f"p={c.pvalue:.1g}" if c.pvalue >= 1e-9 else "p<1e-9"
    return (f"{100 * c.relative:+.1f}% ({units.figure(kind, c.before)} →"
            f" {units.figure(kind, c.after)}, {p}): {word}")


def shift_words(h: History, run: int) -> str:
    """'' or, for a run that ran another workload than the run before it, what changed:
    a change of a figure there may be the workload's, not the storage's."""
    shift = h.workload_shifts().get(run)
    if shift is None:
        return ""
    return (f"the workload changed at run #{run} ({shift[0]} → {shift[1]}): the change may"
            " be the workload's, not the storage's")


def print_shifts(console: Console, histories: list[History]) -> None:
    """A line per run of the series that ran another workload than the one before it."""
    shifts: dict[int, tuple[str, str]] = {}
    for h in histories:
        shifts.update(h.workload_shifts())
    for run, (was, now) in sorted(shifts.items())[:5]:  # (a job file's name: user text)
        console.print(f"Run #{run} ran another workload than the runs before it"
                      f" ({harmless(was)} → {harmless(now)}): figures before and after it"
                      " are of different workloads.", markup=False, highlight=False)
    if len(shifts) > 5:
        console.print(f"… and {len(shifts) - 5} more runs that changed the workload"
                      " (`--json`: workload_changes).", markup=False, highlight=False)


def print_series_list(console: Console, rows: list[tuple[str, int, str, str, str]]) -> None:
    t = Table(header_style="bold")
    for col in ("#", "series", "runs", "first (UTC)", "last (UTC)", "last change"):
        t.add_column(col, justify="right" if col in ("#", "runs") else "left")
    for i, (name, n, first, last, change) in enumerate(rows, 1):
        t.add_row(str(i), Text(harmless(name)), str(n), first, last, Text(harmless(change)))
    console.print(t)


def print_overview(console: Console, histories: list[History]) -> None:
    """Every figure of a series: its latest value, its noise and its change points (or
    too few runs for one)."""
    t = Table(header_style="bold", title=escape(harmless(histories[0].series)))
    for col in ("figure", "runs", "latest", "noise", "change points"):
        t.add_column(col, justify="right" if col in ("runs", "latest", "noise") else "left")
    for h in histories:
        kind = h.figure.metric.kind
        noise = h.noise(len(h.points) - 1)
        shifts = h.workload_shifts()
        step = h.shift
        changes = "; ".join(f"run #{c.run}: {change_text(c, kind)}"
                            + (" (another workload from this run)" if c.run in shifts else "")
                            for c in h.changes) or (
            "too few runs to tell" if h.too_short else
            f"none proven; a step at run #{step.run}: {100 * step.relative:+.1f}%" if step
            else "none")
        t.add_row(Text(harmless(h.figure.name)), str(len(h.points)),
                  units.figure(kind, h.points[-1].value),
                  f"±{100 * noise:.1f}%" if noise is not None else "",
                  Text(changes, style="red" if any(c.worse for c in h.changes)
                       else ""))
    console.print(t)
    print_shifts(console, histories)


def shown_rows(h: History, every: bool = False) -> list[int | tuple[int, int]]:
    """Which points get a row: all of a short series (or with ``every``); of a long one
    the first, two runs either side of each change and the last ten, each stretch
    between them as one (first, last) index pair."""
    n = len(h.points)
    if every or n <= SHORT:
        return list(range(n))
    keep = {0, *range(max(0, n - 10), n)}
    shifts = h.workload_shifts()
    at = [c.index for c in h.changes] + [i for i, run in enumerate(h.points.runs)
                                         if run in shifts]
    for i in at:
        keep |= set(range(max(0, i - 2), min(n, i + 3)))
    out: list[int | tuple[int, int]] = []
    for i in sorted(keep):
        last = out[-1] if out else None
        prev = last if isinstance(last, int) else last[1] if last else -1
        if i > prev + 1:
            out.append((prev + 1, i - 1))
        out.append(i)
    return out


def print_history(console: Console, h: History, every: bool = False) -> None:
    """One figure over the runs: a row per run with a bar, change points marked (a long
    series: the runs around each change and the latest; the stretches between, summed
    up in a row each)."""
    kind = h.figure.metric.kind
    top = max(map(abs, h.points.values), default=0.0) or 1.0
    # the longest bar fits the terminal: a bar cut short ("…") would lie about its length
    longest = max(BAR_MIN, min(BAR, console.width - OTHER_COLUMNS))
    t = Table(header_style="bold",
              title=f"{escape(harmless(h.series))}: {escape(harmless(h.figure.name))}")
    for col in ("run", "started (UTC)", h.figure.metric.label, "", "change"):
        bars = col == ""
        t.add_column(col, justify="right" if col == h.figure.metric.label else "left",
                     no_wrap=bars, min_width=longest if bars else None)
    shifts = h.workload_shifts()
    for row in shown_rows(h, every):
        if isinstance(row, tuple):
            values = h.points.values[row[0]:row[1] + 1]
            mean = sum(values) / len(values)
            t.add_row("…", f"{len(values):,} runs (#{h.points[row[0]].run}–"
                           f"#{h.points[row[1]].run})",
                      units.figure(kind, mean), Text("mean", style="dim"), Text(""))
            continue
        p = h.points[row]
        c = h.change_at(p.run)
        bar = "█" * max(1, round(longest * abs(p.value) / top))
        said = Text(f"▲ {change_text(c, kind)}", style="red" if c.worse else "green") \
            if c else Text("")
        step = h.shift
        if step is not None and step.run == p.run:
            said = Text(f"△ {100 * step.relative:+.1f}%: a step, unproven", style="yellow")
        if p.run in shifts:
            said.append(("; " if c or (step and step.run == p.run) else "")
                        + "⚑ another workload from this run", style="yellow")
        t.add_row(f"#{p.run}", p.at, units.figure(kind, p.value),
                  Text(bar, style="red" if c and c.worse else "cyan"), said)
    console.print(t)
    print_shifts(console, [h])
    if not h.changes:
        noise = h.noise(len(h.points) - 1)
        spread = f" (runs vary by ±{100 * noise:.1f}%)" if noise is not None else ""
        runs = f"{len(h.points)} run{'s' if len(h.points) != 1 else ''}"
        if h.too_short:  # "no change" would claim what so few runs cannot tell
            from storbench.analysis.history import MIN_RUNS

            console.print(f"Too few runs to tell a change: {runs}{spread}; a change needs"
                          f" {MIN_RUNS} runs or more on each side of it.")
        elif h.shift is not None:  # the spread is either side of it, not across it
            console.print(f"No change point in {runs}, but {step_text(h)}. Runs vary by"
                          f" ±{100 * noise:.1f}% since." if noise is not None else
                          f"No change point in {runs}, but {step_text(h)}.")
        else:
            console.print(f"No change point in {runs}{spread}.")


def history_dict(h: History) -> dict[str, Any]:
    """--json: base units (IOPS, bytes/s, ns), each change point with its run; the runs
    that ran another workload than the one before them."""
    shifts = h.workload_shifts()
    return {
        "series": h.series, "metric": h.figure.name, "kind": h.figure.metric.kind,
        "higher_is_better": h.figure.metric.higher_is_better,
        "points": [{"run": run, "started": at, "value": value} for run, at, value
                   in zip(h.points.runs, h.points.ats, h.points.values, strict=True)],
        "change_points": [
            {"run": c.run, "index": c.index, "mean_before": c.before, "mean_after": c.after,
             "relative_change": c.relative, "pvalue": c.pvalue, "worse": c.worse,
             "workload_changed": c.run in shifts}
            for c in h.changes],
        "workload_changes": [{"run": run, "from": was, "to": now}
                             for run, (was, now) in shifts.items()],
        "noise": h.noise(len(h.points) - 1) if h.points else None,
        "unproven_step": None if (c := h.shift) is None else {
            "run": c.run, "index": c.index, "mean_before": c.before, "mean_after": c.after,
            "relative_change": c.relative, "worse": c.worse},
    }


def step_text(h: History) -> str:
    """'' or, where no change point was proven, the step the runs still show: 'every run
    from #9 is lower than every run before it: -69.2% (358 MiB/s → 110 MiB/s), not yet
    a change point (too few runs, or too noisy, to prove at p < 0.001)'."""
    c = h.shift
    if c is None:
        return ""
    from storbench.analysis.history import MAX_PVALUE

    way = "lower" if c.after < c.before else "higher"
    kind = h.figure.metric.kind
    return (f"every run from #{c.run} is {way} than every run before it:"
            f" {100 * c.relative:+.1f}% ({units.figure(kind, c.before)} →"
            f" {units.figure(kind, c.after)}): {'worse' if c.worse else 'better'}, not yet a"
            f" change point (too few runs, or too noisy, to prove at p < {MAX_PVALUE:g})")
