"""Commands over stored runs one at a time: list, show, rm. Kept light: they answer
at once (compare and export live in cli/compare.py, with what they need)."""

from __future__ import annotations

import click

from storbench.cli.common import (
    cli,
    err,
    json_option,
    load_run,
    out,
    parse_tags,
    print_json,
    read_db_option,
)
from storbench.errors import ConfigError
from storbench.render.json import run_dict
from storbench.store import Store


@cli.command(name="list")
@click.option("--label", "-l", help="Only runs with this label.")
@click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
              help="Only runs with this tag (repeatable: all must match).")
@click.option("--suite", "-s", help="Only runs of this suite.")
@click.option("--limit", "-n", type=click.IntRange(1, 10**9), default=None,
              help="Show at most N runs, newest first.")
@json_option
@read_db_option
def list_(store: Store, label: str | None, tags: tuple[str, ...], suite: str | None,
          limit: int | None, as_json: bool) -> None:
    """List stored runs, newest first.

    \b
    Example:
      storbench list --suite etcd --tag zone=a
    """
    runs = store.list_runs(label=label, suite=suite, tags=parse_tags(tags), limit=limit)
    if as_json:
        print_json([{k: v for k, v in run_dict(r).items() if k not in ("tests", "verdicts",
                                                                        "job_files")}
                     for r in runs])
        return
    if not runs:
        asked = [f"--{k} {v}" for k, v in (("label", label), ("suite", suite)) if v] + [
            f"--tag {t}" for t in tags]
        err.print(f"No runs stored in {store.path} match {' '.join(asked)}." if asked else
                  f"No runs stored in {store.path} yet: `storbench run DIR` stores one.",
                  markup=False)
        return
    from storbench.render.runlist import print_run_list

    print_run_list(out, runs)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--jobs", is_flag=True, help="Also print each fio job file as it ran.")
@click.option("--timeline", is_flag=True,
              help="Also print each test's per-second IOPS, bandwidth and latency.")
@click.option("--raw", is_flag=True, help="With --json: include fio's raw JSON output.")
@json_option
@read_db_option
def show(store: Store, run_ref: str, jobs: bool, timeline: bool, raw: bool,
         as_json: bool) -> None:
    """Show one run: results, verdicts and the environment it ran in.

    RUN is a run id from `storbench list`, or `last`.

    \b
    Example:
      storbench show 12 --jobs
      storbench show 12 --timeline
      storbench show last --json
    """
    from storbench.render import terminal
    from storbench.render.timeline import render_timeline

    if raw and not as_json:
        raise ConfigError("--raw adds fio's raw JSON to --json: give both")
    r = load_run(store, store.resolve(run_ref))
    if as_json:
        print_json(run_dict(r, raw=raw))
        return
    terminal.print_run(out, r)
    terminal.print_time_spent(out, r)
    if timeline:
        out.print(render_timeline(r), markup=False)
    terminal.print_environment(out, r.environment)
    if jobs:
        for inv in r.invocations:
            out.print(f"[bold]fio job file {inv.ordinal + 1}[/bold]")
            out.print(inv.job_text, markup=False)


@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@read_db_option
def rm(store: Store, run_refs: tuple[str, ...]) -> None:
    """Delete stored runs (results, environment and fio output). Every RUN is found
    before any is deleted: one that does not exist deletes nothing.

    \b
    Example:
      storbench rm 12 13
    """
    from storbench.cli.trend import refresh_series
    from storbench.store.series import series_of

    ids = list(dict.fromkeys(store.resolve(ref) for ref in run_refs))
    for run_id in ids:  # each found before any goes (a number is resolved as it is)
        store.get_run(run_id, with_results=False)
    was = {series_of(store, run_id) for run_id in ids}
    for run_id in ids:
        store.delete_run(run_id)
        err.print(f"Deleted run #{run_id}")
    # the answers of the series they left, kept as a run keeps its series'
    refresh_series(store, {name for name in was if name},
                   lambda n: f"Finding the change points of {n} series runs were deleted from")


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.argument("label", required=False)
@click.option("--clear", is_flag=True, help="Remove the run's label.")
@read_db_option
def label(store: Store, run_ref: str, label: str | None, clear: bool) -> None:
    """Give a stored run a new label (its name in tables); its results never change.

    \b
    Example:
      storbench label 12 gp3-us-east-1a
      storbench label last --clear
    """
    from storbench.store.series import set_label

    if (label is None) == (not clear):
        raise ConfigError("give the new LABEL, or --clear")
    run_id = store.resolve(run_ref)
    set_label(store, run_id, label)
    err.print(f"Run #{run_id} is now labelled {label!r}." if label else
              f"Run #{run_id} has no label now.", markup=False)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.argument("tags", nargs=-1, metavar="KEY=VALUE...")
@click.option("--remove", "-r", "remove", multiple=True, metavar="KEY",
              help="Remove this tag (repeatable).")
@read_db_option
def tag(store: Store, run_ref: str, tags: tuple[str, ...], remove: tuple[str, ...]) -> None:
    """Add, change or remove tags of a stored run; its results never change.

    \b
    Example:
      storbench tag 12 zone=a tier=gold
      storbench tag 12 --remove tier
    """
    from storbench.store.series import set_tags

    if not tags and not remove:
        raise ConfigError("give KEY=VALUE tags to set, or --remove KEY")
    given = parse_tags(tags, given="tag ")
    run_id = store.resolve(run_ref)
    set_tags(store, run_id, given, remove)
    now = store.get_run(run_id, with_results=False).tags
    err.print(f"Run #{run_id} tags: " + (" ".join(f"{k}={v}" for k, v in now.items())
                                          or "none"), markup=False)
