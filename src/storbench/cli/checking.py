"""`storbench check`: gate a stored run (its assertions, a baseline, its series' changes),
apart from `run` so that a gate in CI loads nothing of the measuring."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape

from storbench.cli.common import (
    MAX_REGRESSION,
    assert_options,
    cli,
    err,
    json_option,
    load_run,
    only_with,
    out,
    percent,
    print_json,
    read_db_option,
    searched_early,
)
from storbench.errors import ConfigError, StorbenchError, StoreError, ThresholdExceeded
from storbench.render.text import harmless
from storbench.result.record import Run
from storbench.store import Store
from storbench.store.series import series_holds, series_last, series_of


def how_it_ended(r: Run) -> str:
    """'crashed (the storbench process ...)', 'failed (fio: ...)', 'was interrupted (by
    SIGINT)', 'is still running': the run's status and why, as a sentence."""
    verb = {"interrupted": "was interrupted", "running": "is still running"}.get(r.status,
                                                                                r.status)
    why = (r.error or "").removeprefix(f"{r.status}:").removeprefix(r.status).strip()
    return f"{verb} ({why})" if why else verb


@cli.command()
@click.argument("run_ref", metavar="RUN|SERIES")
@assert_options
@click.option("--no-change", is_flag=True,
              help="Fail when the run's series (`storbench history`) changed for the worse"
                   " and the run is after that change: a figure's level moved by more than"
                   " --max-regression, significantly, and stayed (RUN may be a series: its"
                   " newest run).")
@json_option
@searched_early(lambda no_change, **_: no_change)  # (a long series' gate, cold)
@read_db_option
def check(store: Store, run_ref: str, assertions: tuple[str, ...], baseline: str | None,
          max_regression: str, no_change: bool, as_json: bool) -> None:
    """Check a stored run against assertions and/or a baseline; exit 3 if one fails.

    Prints every assertion with the measured value. The run's own verdicts (its
    suite's profile, assertions given to `run`) are checked too.

    \b
    Example:
      storbench check 12 --assert "etcd.fdatasync.p99 < 10ms"
      storbench check last --assert "randread.iops >= 3000" --assert "seqread.bw > 100MiB/s"
      storbench check last --baseline gp3 --max-regression 10%
      storbench check nightly-gp3 --no-change
    """
    only_with(("max_regression", "--max-regression", baseline is not None or no_change,
               "--baseline or --no-change"))
    limit = percent(max_regression, "--max-regression", MAX_REGRESSION)
    series = None
    if no_change and (latest := series_last(store, run_ref)) is not None:
        series, run_ref = run_ref, str(latest)
    try:
        run_id = store.resolve(run_ref)
    except StoreError:
        if not no_change or run_ref == "last":
            raise
        raise ConfigError(f"{run_ref!r} is neither a series, a run id nor a label;"
                          " `storbench history` lists the series, `storbench list` the runs"
                          ) from None
    r = load_run(store, run_id)
    if r.status != "completed":
        raise StorbenchError(f"run {r.id} {how_it_ended(r)}: no verdict; a run that did not"
                             " complete passes no check")
    verdicts = list(r.judged)
    if assertions:
        from storbench.analysis.assertions import Assertion
        from storbench.analysis.assertions import check as check_assertion

        verdicts += [check_assertion(r, Assertion.parse(t)) for t in assertions]
    changes = []
    if baseline is not None:
        from storbench.analysis.regression import regressions

        base = load_run(store, store.resolve_baseline(baseline, exclude=r.id))
        changes = regressions(r, base, limit)
        if not changes:
            raise ConfigError(f"run #{r.id} and baseline #{base.id} share no figure to compare"
                              " (different suites or tests)")
    shifts = _shifts(store, r, series, limit) if no_change else []
    from storbench.render import terminal
    from storbench.render.json import outcome_dict

    if as_json:
        print_json([outcome_dict(v) for v in verdicts]
                   + [{"check": "no-change", "passed": not bad, "figure": name, **change}
                      for name, change, bad in shifts])
    else:
        # what was checked: `check 3` may be series '3' (--no-change) or run #3
        err.print(f"Checking run #{r.id}" + (f" ({harmless(r.label)})" if r.label else "")
                  + (f", the latest of series {harmless(series)!r}" if series else "") + ":",
                  markup=False)
        for v in verdicts:
            out.print(terminal.outcome_line(v))
        if not verdicts and baseline is None and not no_change:
            raise ConfigError("nothing to check: give --assert EXPR, --baseline RUN or"
                              " --no-change")
        for c in changes:
            out.print(terminal.change_line(c))
        for name, change, bad in shifts:
            word = "[red]CHANGED[/red]" if bad else "[green]ok[/green]"
            out.print(f"{word} {escape(harmless(name))}: {escape(harmless(change['said']))}")
    failed = [v.assertion for v in verdicts if not v.passed]
    failed += [c.said for c in changes if c.failed]
    failed += [f"{name} changed at run #{change['run']}" for name, change, bad in shifts
               if bad]
    if failed:
        raise ThresholdExceeded(f"{len(failed)} check(s) failed: {'; '.join(failed)}")


def _shifts(store: Store, r: Run, series: str | None, limit: float
            ) -> list[tuple[str, dict[str, Any], bool]]:
    """--no-change: the answer kept for this question (cli/trend.no_change keeps it), or
    found now: nothing of the history's analysis is loaded to read a kept one."""
    from storbench.store.changes import ChangeCache, latest_runs, no_change_key

    name = series or series_of(store, r.id)
    if name is None:
        raise ConfigError(f"run #{r.id} is in no series: --no-change needs its history"
                          " (`storbench series NAME RUN...` puts it in one)")
    from storbench.analysis.ahead import PART, made_early

    # a long series' search made ready as the command began (searched_early): ended here
    # for a short one, and as the block ends if an answer was kept
    with made_early(series_holds(store, name, PART)):
        runs = latest_runs(store, name, r.id)
        key = no_change_key(store, name, r.id, limit, runs)
        known = kept_shifts(ChangeCache(store=store).get(key))
        if known is not None:
            return known
        from storbench.cli.trend import no_change

        return no_change(store, r, name, limit, key, runs, keep_history=False)


def kept_shifts(kept: Any) -> list[tuple[str, dict[str, Any], bool]] | None:
    """--no-change's answer as kept (cli/trend.no_change), or None: none, or not one (a
    store's answer is written by whoever may write runs there: it is found again)."""
    if not isinstance(kept, list):
        return None
    try:
        shifts = [(str(n), dict(c), bool(b)) for n, c, b in kept]
    except (TypeError, ValueError):
        return None
    if not all(isinstance(c.get("said"), str) and "run" in c for _, c, _ in shifts):
        return None
    return shifts
