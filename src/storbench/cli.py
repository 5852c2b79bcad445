"""The command layer: flags -> one library call -> a renderer. No fio, SQL or formatting here."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from storbench import __version__
from storbench.analysis.compare import compare as build_comparison
from storbench.analysis.verdicts import evaluate
from storbench.errors import EXIT_CODES_HELP, ConfigError, StorbenchError, ThresholdExceeded
from storbench.progress import ConsoleReporter
from storbench.render import FORMATS, terminal
from storbench.render.json import run_dict
from storbench.render.timeline import render_timeline
from storbench.render.units import latency
from storbench.runner import RunSpec, run_benchmark
from storbench.store import Store, default_db_path
from storbench.workload import SUITES, get_suite

F = TypeVar("F", bound=Callable[..., Any])

out = Console(highlight=False, soft_wrap=False)
if not out.is_terminal:
    out = Console(highlight=False, width=200)  # pipes and CI: never truncate a table
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _parse_tags(values: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise ConfigError(f"--tag {v!r} is not key=value (example: --tag zone=us-east-1a)")
        tags[key.strip()] = val.strip()
    return tags


def db_option(f: F) -> F:
    @click.option("--db", "db", type=click.Path(dir_okay=False), envvar="STORBENCH_DB",
                  default=None, show_envvar=True,
                  help="Results database (default: $XDG_DATA_HOME/storbench/results.db).")
    @functools.wraps(f)
    def wrapper(*args: Any, db: str | None, **kwargs: Any) -> Any:
        store = Store(db or default_db_path())
        try:
            return f(*args, store=store, **kwargs)
        finally:
            store.close()

    return wrapper  # type: ignore[return-value]


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _print_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2))


@click.group(
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="storbench")
@click.option("--debug", is_flag=True, envvar="STORBENCH_DEBUG",
              help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Benchmark storage with fio, keep every result, compare runs.

    \b
    Example:
      storbench run /mnt/data                     # the `quick` suite
      storbench run /mnt/data --suite etcd --label nvme
      storbench list; storbench compare 1 2
    """
    ctx.obj = {"debug": debug}


@cli.command()
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--suite", "-s", default="quick", show_default=True,
              help="Built-in suite to run (see `storbench suites`).")
@click.option("--job", "job_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Run this fio job file instead of a suite (I/O goes to storbench's scratch"
                   " directory under TARGET).")
@click.option("--size", metavar="SIZE",
              help="File size per test, fio syntax (e.g. 256m, 2g). Default: the suite's.")
@click.option("--runtime", type=float, metavar="SECONDS",
              help="Seconds per test (caps size-bound tests). Default: the suite's.")
@click.option("--label", "-l", help="Name of this run in tables (e.g. gp3, nvme0).")
@click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
              help="Attach a tag (repeatable), e.g. --tag zone=a.")
@click.option("--threshold", "threshold_ms", type=float, metavar="MS",
              help="Verdict limit in ms (etcd suite: fdatasync p99; default 10 ms).")
@click.option("--fio", "fio_path", envvar="STORBENCH_FIO", show_envvar=True,
              help="fio binary to run (default: fio on PATH).")
@json_option
@db_option
def run(
    store: Store, target: Path, suite: str, job_file: Path | None, size: str | None,
    runtime: float | None, label: str | None, tags: tuple[str, ...],
    threshold_ms: float | None, fio_path: str | None, as_json: bool,
) -> None:
    """Run a suite (or a fio job file) on the directory TARGET and store the results.

    Files are written only inside a scratch directory storbench-<id> that storbench
    creates under TARGET and removes at the end, on errors and on Ctrl-C. Exits 3
    when a verdict fails (etcd suite: fdatasync p99 above the threshold).

    \b
    Example:
      storbench run /mnt/data
      storbench run /mnt/data --suite dbench --label gp3 --tag zone=a
      storbench run /var/lib/etcd-test --suite etcd --threshold 20
      storbench run /mnt/data --job my.fio --runtime 30
    """
    if threshold_ms is not None and threshold_ms <= 0:
        raise ConfigError(f"--threshold must be a positive number of ms, not {threshold_ms}")
    spec = RunSpec(target=target, suite=suite, job_file=job_file, size=size, runtime=runtime,
                   label=label, tags=_parse_tags(tags), threshold_ms=threshold_ms, fio=fio_path)
    reporter = ConsoleReporter(err)
    try:
        run_id = run_benchmark(spec, store, reporter)
    except StorbenchError as exc:
        reporter.close()
        failed_id: int | None = getattr(exc, "run_id", None)
        if failed_id is not None and not as_json:
            terminal.print_run(out, store.get_run(failed_id))
        raise
    reporter.close()
    stored = store.get_run(run_id)
    if as_json:
        _print_json(run_dict(stored))
    else:
        terminal.print_run(out, stored)
    failed = [v for v in evaluate(stored) if not v.passed]
    if failed:
        v = failed[0]
        raise ThresholdExceeded(
            f"verdict failed: {v.test} {v.metric} = {latency(v.measured)}, limit"
            f" {latency(v.limit)} ({v.rule})"
        )


@cli.command(name="list")
@click.option("--label", "-l", help="Only runs with this label.")
@click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
              help="Only runs with this tag (repeatable: all must match).")
@click.option("--suite", "-s", help="Only runs of this suite.")
@click.option("--limit", "-n", type=int, default=None, help="Show at most N runs, newest first.")
@json_option
@db_option
def list_(store: Store, label: str | None, tags: tuple[str, ...], suite: str | None,
          limit: int | None, as_json: bool) -> None:
    """List stored runs, newest first.

    \b
    Example:
      storbench list --suite etcd --tag zone=a
    """
    runs = store.list_runs(label=label, suite=suite, tags=_parse_tags(tags), limit=limit)
    if as_json:
        _print_json([{k: v for k, v in run_dict(r).items() if k not in ("tests", "verdicts",
                                                                        "job_files")}
                     for r in runs])
        return
    if not runs:
        err.print(f"No runs stored in {store.path} (match your filters).")
        return
    terminal.print_run_list(out, runs)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--jobs", is_flag=True, help="Also print each fio job file as it ran.")
@click.option("--timeline", is_flag=True,
              help="Also print each test's per-second IOPS, bandwidth and latency.")
@click.option("--raw", is_flag=True, help="With --json: include fio's raw JSON output.")
@json_option
@db_option
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
    r = store.get_run(store.resolve(run_ref))
    if as_json:
        _print_json(run_dict(r, raw=raw))
        return
    terminal.print_run(out, r)
    if timeline:
        out.print(render_timeline(r), markup=False)
    terminal.print_environment(out, r.environment)
    if jobs:
        for inv in r.invocations:
            out.print(f"[bold]fio job file {inv.ordinal + 1}[/bold]")
            out.print(inv.job_text, markup=False)


def _comparison(store: Store, refs: tuple[str, ...], baseline: str | None) -> Any:
    if not refs:
        raise ConfigError("name at least one run (see `storbench list`)")
    ids = [store.resolve(r) for r in refs]
    base_index = None
    if baseline is not None:
        base_id = store.resolve(baseline)
        if base_id not in ids:
            ids.insert(0, base_id)
        base_index = ids.index(base_id)
    return build_comparison([store.get_run(i) for i in ids], base_index)


@cli.command(name="compare")
@click.argument("run_refs", nargs=-1, metavar="RUN...")
@click.option("--baseline", "-b", metavar="RUN",
              help="Show each figure as a ratio to this run (× the baseline).")
@json_option
@db_option
def compare_cmd(store: Store, run_refs: tuple[str, ...], baseline: str | None,
                as_json: bool) -> None:
    """Compare runs side by side: one row per run, one column per metric.

    \b
    Example:
      storbench compare 12 13 14
      storbench compare 13 14 --baseline 12
    """
    comp = _comparison(store, run_refs, baseline)
    if as_json:
        click.echo(FORMATS["json"](comp), nl=False)
        return
    terminal.print_comparison(out, comp)


@cli.command()
@click.argument("run_refs", nargs=-1, metavar="RUN...")
@click.option("--format", "-f", "fmt", type=click.Choice(sorted(FORMATS)), default="md",
              show_default=True, help="Output format.")
@click.option("--baseline", "-b", metavar="RUN", help="Add ratios to this run.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@db_option
def export(store: Store, run_refs: tuple[str, ...], fmt: str, baseline: str | None,
           output: Path | None) -> None:
    """Export runs as a Markdown table, CSV or JSON (the full model, base units).

    \b
    Example:
      storbench export 12 13 --format md >> wiki.md
      storbench export 12 --format json -o run12.json
    """
    text = FORMATS[fmt](_comparison(store, run_refs, baseline))
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        err.print(f"Wrote {output}")


@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@db_option
def rm(store: Store, run_refs: tuple[str, ...]) -> None:
    """Delete stored runs (results, environment and fio output).

    \b
    Example:
      storbench rm 12 13
    """
    for ref in run_refs:
        run_id = store.resolve(ref)
        store.delete_run(run_id)
        err.print(f"Deleted run #{run_id}")


@cli.command()
@click.argument("name", required=False)
@json_option
def suites(name: str | None, as_json: bool) -> None:
    """List the built-in suites, or show one suite's tests and fio job files.

    \b
    Example:
      storbench suites
      storbench suites dbench
    """
    chosen = [get_suite(name)] if name else list(SUITES.values())
    if as_json:
        _print_json([
            {"name": s.name, "description": s.description, "study": s.study,
             "tests": [{"name": t.name, "description": t.description,
                        "job": jf.render(), "metrics": list(t.metrics)}
                       for t, jf in zip(s.tests, s.jobfiles(), strict=True)]}
            for s in chosen
        ])
        return
    terminal.print_suites(out, chosen, detailed=name is not None)


def main(argv: list[str] | None = None) -> None:
    """Entry point: the only place that prints errors and exits."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="storbench", standalone_mode=False)
    except StorbenchError as exc:
        if debug:
            raise
        err.print(f"storbench: error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("storbench: interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("storbench: interrupted")
        sys.exit(130)
