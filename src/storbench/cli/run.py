"""`storbench run` and `storbench check`: measure, then gate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from storbench.analysis.assertions import Assertion, Outcome
from storbench.analysis.regression import regressions
from storbench.analysis.verdicts import evaluate
from storbench.cli.common import (
    assert_options,
    cli,
    db_option,
    err,
    json_option,
    out,
    parse_tags,
    print_json,
)
from storbench.cli.k8s import kube_options, run_classes
from storbench.errors import ConfigError, StorbenchError, ThresholdExceeded
from storbench.execute import find_fio
from storbench.hosts import DEFAULT_PORT, Host, parse_hosts
from storbench.progress import ConsoleReporter
from storbench.render import terminal
from storbench.render.json import outcome_dict, run_dict
from storbench.runner import STEADY_CRITERION, RunSpec, run_benchmark
from storbench.store import Run, Store
from storbench.workload import get_suite


def _check_criterion(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not STEADY_CRITERION.match(value):
        raise click.BadParameter(
            f"{value!r} is not a fio steady-state criterion (iops:2%, iops_slope:0.5%, bw:2%,"
            " bw_slope:0.5%); write --until-steady=CRITERION, or put a bare --until-steady"
            " after the target", ctx, param)
    return value


@cli.command()
@click.argument("target", type=click.Path(path_type=Path), required=False)
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
              default=None, metavar="[CRITERION]", callback=_check_criterion,
              help="Stop each test once fio's steady-state criterion holds (default"
                   " iops_slope:0.5%); --runtime is then the maximum (default 120 s).")
@click.option("--steady-window", "steady_window_s", type=float, default=5.0,
              show_default=True, metavar="SECONDS",
              help="With --until-steady: the window the criterion must hold over.")
@click.option("--probe-metadata/--no-probe-metadata", default=None,
              help="Time stat, ls -la and create+unlink every 0.5 s, idle and under load"
                   " (default: on for network file systems).")
@click.option("--hosts", "hosts_text", metavar="H1,H2[:PORT],...",
              help="Run on these hosts at once through fio's client/server mode (each runs"
                   " `storbench agent`); TARGET is the path on the hosts.")
@click.option("--hosts-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Hosts, one HOST[:PORT] per line (# comments).")
@click.option("--shared-file", is_flag=True,
              help="With --hosts (or --clients on an RWX volume): every host works on one"
                   " file (default: a file per host).")
@kube_options
@assert_options
@click.option("--fio", "fio_path", envvar="STORBENCH_FIO", show_envvar=True,
              help="fio binary to run (default: fio on PATH).")
@json_option
@db_option
def run(
    store: Store, target: Path | None, suite: str, job_file: Path | None, size: str | None,
    runtime: float | None, label: str | None, tags: tuple[str, ...],
    threshold_ms: float | None, profile: str | None, rate_iops: float | None, repeat: int,
    until_steady: str | None, steady_window_s: float, probe_metadata: bool | None,
    assertions: tuple[str, ...], baseline: str | None, max_regression: str,
    hosts_text: str | None, hosts_file: Path | None, shared_file: bool,
    fio_path: str | None, as_json: bool, storage_classes: tuple[str, ...], dry_run: bool,
    **kube_params: Any,
) -> None:
    """Run a suite (or a fio job file) on the directory TARGET and store the results.

    Files are written only inside a scratch directory storbench-<id> that storbench
    creates under TARGET and removes at the end, on errors and on Ctrl-C. Exits 3
    when a verdict fails (etcd suite: fdatasync p99 above the threshold).

    With --storage-class instead of TARGET, storbench creates a PVC of that class and
    a pod that mounts it, runs each test's fio in the pod, and deletes both (and the
    ConfigMap with the job files) at the end, on errors and on Ctrl-C. Several
    classes run one after the other and end with a comparison table.

    \b
    Example:
      storbench run /mnt/data
      storbench run /mnt/data --suite dbench --label gp3 --tag zone=a
      storbench run /var/lib/etcd-test --suite etcd --threshold 20
      storbench run /mnt/data --job my.fio --runtime 30
      storbench run /mnt/data --repeat 3 --assert "randread.iops >= 3000"
      storbench run /mnt/data --until-steady --runtime 60 --baseline gp3
      storbench run /var/lib/etcd-test --suite etcd --rate 150
      storbench run /mnt/shared --hosts node1,node2,node3:8766 --suite randrw75
      storbench run --storage-class gp3 --storage-class efs-sc --suite quick
      storbench run --storage-class fast --namespace bench --capacity 100Gi --dry-run
    """
    if threshold_ms is not None and threshold_ms <= 0:
        raise ConfigError(f"--threshold must be a positive number of ms, not {threshold_ms}")
    if rate_iops is not None and rate_iops <= 0:
        raise ConfigError(f"--rate must be a positive number of writes/s, not {rate_iops}")
    if rate_iops is not None and (job_file is not None
                                  or not any(t.rated for t in get_suite(suite).tests)):
        raise ConfigError("--rate applies to suites with an open-loop variant (etcd);"
                          " in a job file, set rate_iops= yourself")
    for text in assertions:
        Assertion.parse(text)  # syntax errors before any I/O
    limit = _parse_percent(max_regression)
    if profile is not None:
        profiles = get_suite(suite).profiles or {}
        if profile not in profiles:
            raise ConfigError(f"suite {suite} has no profile {profile!r}"
                              + (f"; choose one of: {', '.join(profiles)}" if profiles else ""))
    hosts: list[Host] = []
    if hosts_text is not None:
        hosts += parse_hosts(hosts_text)
    if hosts_file is not None:
        hosts += parse_hosts(hosts_file.read_text(), str(hosts_file))
    if shared_file and not hosts and not storage_classes:
        raise ConfigError("--shared-file needs --hosts, --hosts-file or --storage-class with"
                          " --clients")
    if hosts and probe_metadata:
        raise ConfigError("--probe-metadata runs on this machine; it cannot run with --hosts")
    if storage_classes:
        if target is not None:
            raise ConfigError("give a directory TARGET or --storage-class, not both")
        if hosts:
            raise ConfigError("--hosts and --storage-class cannot be combined yet")
        if probe_metadata:
            raise ConfigError("--probe-metadata runs on this machine; it cannot run in a pod")
    elif target is None:
        raise ConfigError("give a directory TARGET (or --storage-class CLASS); see"
                          " `storbench run --help`")
    elif dry_run:
        raise ConfigError("--dry-run applies to --storage-class runs")
    spec = RunSpec(target=target, suite=suite, job_file=job_file, size=size, runtime=runtime,
                   label=label, tags=parse_tags(tags), threshold_ms=threshold_ms, fio=fio_path,
                   repeat=repeat, until_steady=until_steady, steady_window_s=steady_window_s,
                   probe_metadata=probe_metadata, assertions=assertions, rate_iops=rate_iops,
                   profile=profile, hosts=tuple(hosts), shared_file=shared_file)
    if storage_classes:
        for done in run_classes(store, spec, storage_classes, kube_params, dry_run=dry_run,
                                as_json=as_json):
            _gate(store, done, evaluate(done), baseline, limit, quiet=as_json)
        return
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
        print_json(run_dict(stored))
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
        print_json([outcome_dict(o) for o in outcomes])
    else:
        for o in outcomes:
            out.print(terminal.outcome_line(o))
        if not outcomes and baseline is None:
            raise ConfigError("nothing to check: give --assert EXPR or --baseline RUN")
    _gate(store, r, outcomes, baseline, limit, quiet=as_json)




@cli.command()
@click.option("--bind", default="0.0.0.0", show_default=True, metavar="ADDR",
              help="Address fio's server listens on (an IPv4 or IPv6 address).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int,
              help="TCP port fio's server listens on.")
@click.option("--fio", "fio_path", envvar="STORBENCH_FIO", show_envvar=True,
              help="fio binary to run (default: fio on PATH).")
def agent(bind: str, port: int, fio_path: str | None) -> None:
    """Serve this host to `storbench run --hosts`: runs `fio --server` in the foreground.

    Every host must run the same fio version as the machine that runs storbench.
    fio's server runs what clients send it: listen only on a network you trust.
    See docs/cli.md for a systemd unit.

    \b
    Example:
      storbench agent                       # 0.0.0.0:8765
      storbench agent --bind 10.0.0.5 --port 8766
    """
    fio = find_fio(fio_path)
    family = "ip6" if ":" in bind else "ip"
    argv = [fio.path, f"--server={family}:{bind},{port}"]
    err.print(f"storbench agent: {' '.join(argv)} ({fio.version_text}); Ctrl-C stops it")
    os.execv(fio.path, argv)
