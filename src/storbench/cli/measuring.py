"""What `run` and `curve` share once their targets are chosen: run them one after the
other, print each run, push it (--push), compare several, and exit as they ended."""

from __future__ import annotations

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
from storbench.cli.kubeflags import apply, kube_options
from storbench.cli.progress import ConsoleReporter
from storbench.errors import Interrupted, StorbenchError, ThresholdExceeded
from storbench.pipeline.loop import TargetOutcome, run_all
from storbench.pipeline.spec import RunSpec
from storbench.render import terminal
from storbench.render.json import run_dict
from storbench.result.record import Run
from storbench.store import Store
from storbench.target.base import Target

push_option = click.option(
    "--push", "push_to", metavar="URL",
    help="When each run ends, push its figures to this Prometheus Pushgateway (as"
         " `storbench push`); a failed push is an error after the run is stored.")


def measuring_options(f: F) -> F:
    """The tail every command that measures shares: Kubernetes targets, verdicts, fio,
    --push, --json, --db."""
    return apply(f, (kube_options, assert_options, fio_option, push_option, json_option,
                     db_option))


def measure_and_report(targets: list[Target], spec: RunSpec, store: Store, *,
                       as_json: bool, push_to: str | None) -> None:
    """Raises the first target's error (Ctrl-C first), a failed push, or
    ThresholdExceeded when a stored run failed a check."""
    reporters: list[ConsoleReporter] = []
    pushed: list[StorbenchError] = []

    def reporter_for(target: Target) -> ConsoleReporter:
        reporters.append(ConsoleReporter(err))
        return reporters[-1]

    def on_done(done: TargetOutcome) -> None:
        reporters[-1].close()
        if push_to is not None and done.outcome is not None:
            pushed.extend(_push(push_to, done.outcome.run, store))
        if done.outcome is not None and not as_json:
            terminal.print_run(out, done.outcome.run)
        if done.error is not None and len(targets) > 1 and not isinstance(done.error,
                                                                          Interrupted):
            err.print(f"storbench: {done.target.name}: {done.error}", markup=False)

    outcomes = run_all(targets, spec, store, reporter_for, on_done)
    runs = [o.outcome.run for o in outcomes if o.outcome is not None and o.error is None]
    if as_json:
        if len(targets) == 1 and runs:
            print_json(run_dict(runs[0]))
        elif len(targets) > 1:
            print_json([run_dict(r) for r in runs])
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
