"""How `show` prints each kind's section of a run (result/sections.py): one registry,
``SHOW``, key -> printer; a new kind adds one line (and its printer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape

from storbench.render import units
from storbench.render.richtable import rich_table
from storbench.render.table import (
    app_caveats,
    app_table,
    curve_table,
    replay_counts,
    replay_lag,
)
from storbench.result import sections
from storbench.result.record import Run
from storbench.result.sections import (
    AppSection,
    CurveSection,
    FailoverSection,
    LifecycleSection,
    ReplaySection,
    RoundsEntry,
)
from storbench.workload.sizes import format_bytes_iec


def print_curve(console: Console, run: Run, curve: CurveSection) -> None:
    """A curve's steps and its answers."""
    from storbench.analysis.curve import describe, knee_why

    console.print(rich_table(curve_table(curve), f"IOPS-latency curve of {curve['workload']}"))
    if curve.get("max_iops") is not None:
        console.print(f"closed loop: at most {units.figure('iops', curve['max_iops'])}"
                      f" ({escape(str(curve['max_at']))})")
    for answer in curve["answers"]:
        console.print(escape(describe(answer, units.latency)), soft_wrap=True)
    floor = curve.get("floor_ns") or {}
    if floor:
        console.print(f"latency floor at the lowest rate: p50 {units.latency(floor.get('50'))},"
                      f" p99 {units.latency(floor.get('99'))}")
    if curve.get("knee_iops") is not None:
        console.print(f"knee: {units.figure('iops', curve['knee_iops'])} ({knee_why(curve)})")
    if curve.get("cpu_bound"):
        console.print(f"[yellow]warning (cpu_bound):[/yellow] fio used"
                      f" {curve['max_cpu_percent']:.0f}% of a core: the CPU, not the storage,"
                      " may be what limits this curve", soft_wrap=True)


def print_rounds(console: Console, run: Run, rounds: dict[str, RoundsEntry]) -> None:
    for test, r in rounds.items():
        where = (f"steady state reached in round {r['reached_round']}" if r.get("reached_round")
                 else f"steady state NOT reached in {len(r['values'])} rounds")
        figures = " ".join(f"{v:,.0f}" for v in r["values"])
        console.print(f"{escape(test)}: {where} ({escape(r['criterion'])}); each round's"
                      f" {'bandwidth [B/s]' if r.get('kind') == 'bw' else 'IOPS'}: {figures};"
                      f" the figures above are those of rounds {r['window'][0] + 1}–"
                      f"{r['window'][-1] + 1}", soft_wrap=True)


def print_lifecycle(console: Console, run: Run, life: LifecycleSection) -> None:
    from storbench.render.lifecycle import lifecycle_table

    console.print(rich_table(lifecycle_table(life), f"Lifecycle of {run.target.split('/')[-1]}"
                                                    f" ({life['binding_mode']})"))


def print_failover(console: Console, run: Run, found: FailoverSection) -> None:
    from storbench.render.lifecycle import failover_table

    mode = (run.environment.get("target") or {}).get("access_mode")
    console.print(rich_table(failover_table(found), f"Failover on {run.target.split('/')[-1]}"
                                                    + (f" ({mode})" if mode else "")))


def print_app(console: Console, run: Run, app: AppSection) -> None:
    console.print(rich_table(app_table(app), f"{app['application']}: what this storage gives it"
                             + ("" if app["validated"] else " (not validated)")))
    console.print(f"[bold]{escape(app['verdict'])}[/bold]", soft_wrap=True)
    flagged = app_caveats(run, app)
    if flagged:
        console.print(escape(f"⚠ from figures storbench flagged: {'; '.join(flagged)}"),
                      soft_wrap=True)
    for note in app["notes"]:
        console.print(escape(note), soft_wrap=True)


def replay_lines(replay: ReplaySection) -> list[str]:
    """What a replay issued of what was recorded, how it kept time, what it cannot hold."""
    lines = [f"replay of {replay['workload']} ({replay['method']}, {replay['engine']}):"
             f" {replay_counts(replay['issued'], named=True)} issued of"
             f" {replay_counts(replay['recorded'])} recorded"
             + (f" × {replay.get('workers', 1)} hosts" if replay.get("workers", 1) > 1
                else "")]
    if replay["timed"]:
        lag = replay_lag(replay) or 0.0
        lines.append(f"timed: the recorded {replay['recorded_s']:.3f} s took"
                     f" {replay['replay_s']:.3f} s ("
                     + (f"{lag:.3f} s behind the recorded timeline" if lag > 0
                        else f"{-lag:.3f} s ahead of the recorded timeline: fio did not wait"
                        " as recorded" if lag < 0 else "on the recorded timeline") + ")")
    else:
        lines.append(f"as fast as possible: {replay['replay_s']:.3f} s for what took"
                     f" {replay['recorded_s']:.3f} s when recorded")
    if replay["prefilled"]:
        lines.append(f"written before the replay (what it reads): {len(replay['prefilled'])}"
                     f" file(s), {format_bytes_iec(sum(replay['prefilled'].values()))}")
    return lines + list(replay["notes"])


def print_replay(console: Console, run: Run, replay: ReplaySection) -> None:
    for line in replay_lines(replay):
        console.print(escape(line), soft_wrap=True)


SHOW: dict[str, Callable[[Console, Run, Any], None]] = {
    sections.CURVE.key: print_curve,
    sections.ROUNDS.key: print_rounds,
    sections.LIFECYCLE.key: print_lifecycle,
    sections.FAILOVER.key: print_failover,
    sections.APP.key: print_app,
    sections.REPLAY.key: print_replay,
}


def show_sections(console: Console, run: Run) -> None:
    """Each kind's section ``run`` holds, printed by its own printer."""
    for section in sections.KINDS:
        value = section.of(run)
        if value:
            SHOW[section.key](console, run, value)
