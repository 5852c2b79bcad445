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
from storbench.analysis.assertions import Assertion, Outcome
from storbench.analysis.compare import compare as build_comparison
from storbench.analysis.regression import regressions
from storbench.analysis.verdicts import evaluate
from storbench.errors import EXIT_CODES_HELP, ConfigError, StorbenchError, ThresholdExceeded
from storbench.progress import ConsoleReporter
from storbench.render import FORMATS, terminal
from storbench.render.json import outcome_dict, run_dict
from storbench.render.timeline import render_timeline
from storbench.runner import RunSpec, run_benchmark
from storbench.store import Run, Store, default_db_path
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


def assert_options(f: F) -> F:
    f = click.option("--max-regression", default="10%", show_default=True, metavar="PERCENT",
                     help="With --baseline: how much worse a figure may get (beyond the"
                          " noise, when repeats measure it).")(f)
    f = click.option("--baseline", "-b", metavar="RUN|LABEL",
                     help="Fail when a headline figure got worse than in this run (an id,"
                          " or the latest run with this label).")(f)
    return click.option("--assert", "assertions", multiple=True, metavar="EXPR",
                        help="Fail (exit 3) unless EXPR holds, e.g. 'randread.iops >= 3000',"
                             " 'etcd.fdatasync.p99 < 10ms' (repeatable).")(f)


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
@click.option("--profile", metavar="NAME",
              help="The suite's verdict profile (etcd: upstream = 10 ms, openshift = 20 ms).")
@click.option("--rate", "rate_iops", type=float, metavar="WRITES/S",
              help="etcd suite: also run the job open loop at this write rate (e.g. 150, as"
                   " `etcdctl check perf`); the verdict then judges that run.")
@click.option("--repeat", "-r", type=int, default=1, show_default=True, metavar="N",
              help="Run each test N times, interleaved; report medians and 95% CIs.")
@click.option("--until-steady", "until_steady", is_flag=False, flag_value="iops_slope:0.5%",
              default=None, metavar="[CRITERION]",
              help="Stop each test once fio's steady-state criterion holds (default"
                   " iops_slope:0.5%); --runtime is then the maximum (default 120 s).")
@click.option("--steady-window", "steady_window_s", type=float, default=5.0,
              show_default=True, metavar="SECONDS",
              help="With --until-steady: the window the criterion must hold over.")
@click.option("--probe-metadata/--no-probe-metadata", default=None,
              help="Time stat, ls -la and create+unlink every 0.5 s, idle and under load"
                   " (default: on for network file systems).")
@assert_options
@click.option("--fio", "fio_path", envvar="STORBENCH_FIO", show_envvar=True,
              help="fio binary to run (default: fio on PATH).")
@json_option
@db_option
def run(
    store: Store, target: Path, suite: str, job_file: Path | None, size: str | None,
    runtime: float | None, label: str | None, tags: tuple[str, ...],
    threshold_ms: float | None, profile: str | None, rate_iops: float | None, repeat: int,
    until_steady: str | None, steady_window_s: float, probe_metadata: bool | None,
    assertions: tuple[str, ...], baseline: str | None, max_regression: str,
    fio_path: str | None, as_json: bool,
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
      storbench run /mnt/data --repeat 3 --assert "randread.iops >= 3000"
      storbench run /mnt/data --until-steady --runtime 60 --baseline gp3
      storbench run /var/lib/etcd-test --suite etcd --rate 150
    """
    if threshold_ms is not None and threshold_ms <= 0:
        raise ConfigError(f"--threshold must be a positive number of ms, not {threshold_ms}")
    if rate_iops is not None and rate_iops <= 0:
        raise ConfigError(f"--rate must be a positive number of writes/s, not {rate_iops}")
    for text in assertions:
        Assertion.parse(text)  # syntax errors before any I/O
    limit = _parse_percent(max_regression)
    if profile is not None:
        profiles = get_suite(suite).profiles or {}
        if profile not in profiles:
            raise ConfigError(f"suite {suite} has no profile {profile!r}"
                              + (f"; choose one of: {', '.join(profiles)}" if profiles else ""))
    spec = RunSpec(target=target, suite=suite, job_file=job_file, size=size, runtime=runtime,
                   label=label, tags=_parse_tags(tags), threshold_ms=threshold_ms, fio=fio_path,
                   repeat=repeat, until_steady=until_steady, steady_window_s=steady_window_s,
                   probe_metadata=probe_metadata, assertions=assertions, rate_iops=rate_iops,
                   profile=profile)
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
    _gate(store, stored, evaluate(stored), baseline, limit, quiet=as_json)


def _parse_percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise ConfigError(f"--max-regression {text!r} is not a percentage (e.g. 10%)") from None
    if value < 0:
        raise ConfigError(f"--max-regression must not be negative, not {text}")
    return value / 100


def _gate(store: Store, run: Run, outcomes: list[Outcome], baseline: str | None,
          max_regression: float, *, quiet: bool = False) -> None:
    """Regression lines against a baseline; exit 3 (ThresholdExceeded) when anything failed."""
    failed = [o.assertion.text for o in outcomes if not o.passed]
    if baseline is not None:
        base = store.get_run(store.resolve_baseline(baseline, exclude=run.id))
        changes = regressions(run, base, max_regression)
        if not changes:
            raise ConfigError(f"run #{run.id} and baseline #{base.id} share no figure to compare"
                              " (different suites or tests)")
        for c in changes:
            if not quiet:
                out.print(terminal.change_line(c, max_regression, base))
        failed += [f"{c.column.title} {100 * c.worse_by:.1f}% worse than #{base.id}"
                   for c in changes if c.failed]
    if failed:
        raise ThresholdExceeded(f"{len(failed)} check(s) failed: {'; '.join(failed)}")


@cli.command()
@click.argument("run_ref", metavar="RUN")
@assert_options
@json_option
@db_option
def check(store: Store, run_ref: str, assertions: tuple[str, ...], baseline: str | None,
          max_regression: str, as_json: bool) -> None:
    """Check a stored run against assertions and/or a baseline; exit 3 if one fails.

    Prints every assertion with the measured value. The run's own verdicts (its
    suite's profile, assertions given to `run`) are checked too.

    \b
    Example:
      storbench check 12 --assert "etcd.fdatasync.p99 < 10ms"
      storbench check last --assert "randread.iops >= 3000" --assert "seqread.bw > 100MiB/s"
      storbench check last --baseline gp3 --max-regression 10%
    """
    r = store.get_run(store.resolve(run_ref))
    limit = _parse_percent(max_regression)
    outcomes = evaluate(r, [Assertion.parse(t) for t in assertions])
    if as_json:
        _print_json([outcome_dict(o) for o in outcomes])
    else:
        for o in outcomes:
            out.print(terminal.outcome_line(o))
        if not outcomes and baseline is None:
            raise ConfigError("nothing to check: give --assert EXPR or --baseline RUN")
    _gate(store, r, outcomes, baseline, limit, quiet=as_json)


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
                       for t, jf in s.jobfiles()]}
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
