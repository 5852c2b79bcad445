"""What every command that measures shares once its targets are chosen (`run`, `curve`,
`k8s lifecycle`, `k8s failover`): run them one after the other, print each run, push it
(--push), compare several, and exit as they ended."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from storbench.analysis.compare import compare as build_comparison
from storbench.cli.common import (
    F,
    assert_options,
    db_option,
    err,
    fio_option,
    json_option,
    out,
    print_json,
)
from storbench.cli.kubeflags import apply
from storbench.cli.progress import ConsoleReporter
from storbench.errors import Interrupted, StorbenchError, ThresholdExceeded
from storbench.pipeline.loop import TargetOutcome, run_all
from storbench.pipeline.reporter import Reporter
from storbench.pipeline.spec import RunSpec
from storbench.render import terminal
from storbench.render.json import run_dict
from storbench.result.record import Run
from storbench.store import Store
from storbench.target.base import Subject

push_option = click.option(
    "--push", "push_to", metavar="URL",
    help="When each run ends, push its figures to this Prometheus Pushgateway (as"
         " `storbench push`; http://USER:PASSWORD@HOST:PORT for basic auth); a failed"
         " push is an error after the run is stored.")


def measuring_options(f: F) -> F:
    """The tail every command that measures shares: its targets (targets.target_options),
    verdicts, fio, --push, --json, --db."""
    from storbench.cli.targets import target_options

    return apply(f, (target_options, assert_options, fio_option, push_option, json_option,
                     db_option))


def measure_and_report(targets: Sequence[Subject], spec: RunSpec, store: Store, *,
                       as_json: bool, push_to: str | None = None,
                       reporter_for: Callable[[Subject], Reporter] | None = None) -> None:
    """Every command that measures ends here (`run`, `curve`, `k8s lifecycle`, `k8s
    failover`): the targets through the run loop in turn (``run_all``), each run printed
    (and pushed: --push) as it ends, the comparison of several, --json of every stored
    run (one that failed too, with its status and error). Raises the first target's error
    (Ctrl-C first), a failed push, or ThresholdExceeded when a stored run failed a
    check. ``reporter_for``: what shows a run's progress (default: the console's bars)."""
    if push_to is not None:  # a URL it cannot push to is said now, not after the runs
        from storbench.cli.push import Gateway

        Gateway.parse(push_to, "--push")
    consoles: list[ConsoleReporter] = []
    pushed: list[StorbenchError] = []

    def console_for(target: Subject) -> Reporter:
        consoles.append(ConsoleReporter(err))
        return consoles[-1]

    def on_done(done: TargetOutcome) -> None:
        for c in consoles:
            c.close()
        if push_to is not None and done.outcome is not None:
            pushed.extend(_push(push_to, done.outcome.run, store))
        if done.outcome is not None and not as_json:
            terminal.print_run(out, done.outcome.run)
        if done.error is not None and len(targets) > 1 and not isinstance(done.error,
                                                                          Interrupted):
            err.print(f"storbench: {done.target.name}: {done.error}", markup=False)

    outcomes = run_all(targets, spec, store, reporter_for or console_for, on_done)
    stored = [o.outcome.run for o in outcomes if o.outcome is not None]
    runs = [o.outcome.run for o in outcomes if o.outcome is not None and o.error is None]
    if as_json:
        if len(targets) == 1 and stored:
            print_json(run_dict(stored[0]))
        elif len(targets) > 1:
            print_json([run_dict(r) for r in stored])
    elif len(runs) > 1:
        out.print()
        terminal.print_comparison(out, build_comparison(runs, None))
    from storbench.cli.trend import refresh

    refresh(store, runs)  # their series' change points kept: `history` answers at once
    errors = [o.error for o in outcomes if o.error is not None] + pushed
    if errors:
        raise next((e for e in errors if isinstance(e, Interrupted)), errors[0])
    failed = [text for r in runs for text in r.failed_checks]
    if failed:
        raise ThresholdExceeded(f"{len(failed)} check(s) failed: {'; '.join(failed)}")


def _push(gateway: str, run: Run, store: Store) -> list[StorbenchError]:
    """Push a stored run (--push); what went wrong is said now, raised at the end."""
    from storbench.cli.push import push_runs

    try:
        for url in push_runs(gateway, [run], store):
            err.print(f"Pushed run #{run.id} to {url}", markup=False)
    except StorbenchError as exc:
        err.print(f"storbench: run #{run.id} is stored, but: {exc}", markup=False)
        return [exc]
    return []
