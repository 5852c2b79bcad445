"""`storbench run`: measure (cli/checking.py gates what was stored)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from storbench.cli.common import (
    NUMBER,
    cli,
    given,
    naming_options,
    none_with,
    only_with,
    parse_tags,
    percent,
)
from storbench.cli.measuring import measure_and_report, measuring_options
from storbench.cli.targets import TargetFlags, choose_targets
from storbench.errors import ConfigError
from storbench.pipeline.loop import plan_run
from storbench.pipeline.spec import STEADY_CRITERION, RunSpec
from storbench.store import Store
from storbench.target.base import Target


def _check_criterion(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not STEADY_CRITERION.match(value):
        raise click.BadParameter(
            f"{value!r} is not a fio steady-state criterion (iops:2%, iops_slope:0.5%, bw:2%,"
            " bw_slope:0.5%); write --until-steady=CRITERION, or put a bare --until-steady"
            " after the target", ctx, param)
    return value


@cli.command()
@click.option("--suite", "-s", default="quick", show_default=True,
              help="Built-in suite to run (see `storbench suites`); on s3:// TARGETs alone,"
                   " s3 unless given.")
@click.option("--job", "job_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Run this fio job file instead of a suite (I/O goes to storbench's scratch"
                   " directory under TARGET).")
@click.option("--runtime", type=NUMBER, metavar="SECONDS",
              help="Seconds per test (caps size-bound tests). Default: the suite's.")
@click.option("--ramp", type=NUMBER, metavar="SECONDS",
              help="Seconds each test runs before fio measures it (fio's ramp_time: caches"
                   " and queues fill first). Default: the suite's (its ramp_time in"
                   " `storbench suites NAME`) or the job file's; 0 for none.")
@naming_options
@click.option("--threshold", "threshold_ms", type=NUMBER, metavar="MS",
              help="Verdict limit in ms (etcd suite: fdatasync p99; default 10 ms).")
@click.option("--profile", metavar="NAME",
              help="The suite's verdict profile (etcd: upstream = 10 ms, openshift = 20 ms).")
@click.option("--rate", "rate_iops", type=NUMBER, metavar="WRITES/S",
              help="etcd suite: also run the job open loop at this write rate, evenly spaced"
                   " (e.g. 150, as `etcdctl check perf`); the verdict then judges that run.")
@click.option("--repeat", "-r", type=int, default=1, show_default=True, metavar="N",
              help="Run each test N times, interleaved; report medians and 95% CIs.")
@click.option("--until-steady", "until_steady", is_flag=False, flag_value="iops_slope:0.5%",
              default=None, metavar="[CRITERION]", callback=_check_criterion,
              help="Stop each test once fio's steady-state criterion holds (default"
                   " iops_slope:0.5%); --runtime is then the maximum (default 120 s).")
@click.option("--steady-window", "steady_window_s", type=NUMBER, default=5.0,
              show_default=True, metavar="SECONDS",
              help="With --until-steady: the window the criterion must hold over (fio"
                   " samples once a second: 2 s at least).")
@click.option("--probe-metadata/--no-probe-metadata", default=None,
              help="Time stat, ls -la and create+unlink every 0.5 s, idle and under load"
                   " (default: on for network file systems); on an S3 bucket, a HEAD, a"
                   " LIST and a GET's first byte (default: on).")
@click.option("--explain", is_flag=True,
              help="Split each test's latency into the layers that spent it (file"
                   " system, cgroup throttle, block queue, device, completion) from the"
                   " kernel's tracepoints (bpftrace), and name the limit that bound it in"
                   " one sentence (docs/explain.md). Root, here or on each ssh:// host"
                   " (bpftrace and python3 there).")
@click.option("--allow-exec", is_flag=True,
              help="Let the job file run commands (exec_prerun=, exec_postrun=, the exec"
                   " engine, external engines). Default: refused; paths outside the"
                   " scratch directory are refused always.")
@click.option("--reads-only", is_flag=True,
              help="Block devices (here, on --hosts, a --volume-mode Block volume): run"
                   " only the tests that only read (the read half of dbench), with fio"
                   " --readonly; no --destructive needed.")
@click.option("--precondition", is_flag=True,
              help="Block devices (here, on --hosts, a --volume-mode Block volume), as"
                   " the SNIA PTS does it: write the device twice"
                   " sequentially (128 KiB blocks), then run each test in rounds until"
                   " steady state (last 5 rounds within 20%, slope within 10%); the figures"
                   " are those 5 rounds'. A device here or on --hosts needs --destructive"
                   " (a Block volume: a blank one).")
@click.option("--precondition-size", metavar="SIZE",
              help="With --precondition: write at most this much (default: twice the"
                   " device).")
@click.option("--round", "round_s", type=NUMBER, default=60.0, show_default=True,
              metavar="SECONDS", help="With --precondition: the length of each round.")
@click.option("--max-rounds", type=int, default=25, show_default=True,
              help="With --precondition: rounds before giving up on steady state.")
@click.option("--replay", "replay", metavar="NAME", default=None,
              help="Replay the recorded workload NAME (`storbench record`) instead of a"
                   " suite: the application's own I/O, on its recorded timeline.")
@click.option("--replay-fast", is_flag=True,
              help="With --replay: as fast as fio can (the storage's capacity for this"
                   " pattern), not on the recorded timeline.")
@measuring_options
def run(
    store: Store, where: TargetFlags, suite: str, job_file: Path | None,
    runtime: float | None, ramp: float | None, label: str | None, tags: tuple[str, ...],
    series: str | None,
    threshold_ms: float | None, profile: str | None, rate_iops: float | None, repeat: int,
    until_steady: str | None, steady_window_s: float, probe_metadata: bool | None,
    assertions: tuple[str, ...], baseline: str | None, max_regression: str,
    fio_path: str | None, as_json: bool, explain: bool, allow_exec: bool, reads_only: bool,
    precondition: bool, precondition_size: str | None, round_s: float, max_rounds: int,
    push_to: str | None, replay: str | None, replay_fast: bool,
) -> None:
    """Run a suite (or a fio job file) on the directory TARGET and store the results.

    TARGET may also be a block device (/dev/sdX, /dev/disk/by-id/...): fio works on the
    device itself, with direct I/O over its whole size (or --size). A device that is
    mounted or in use is never touched; tests that write need --destructive DEVICE.

    Files are written only inside a scratch directory storbench-<id> that storbench
    creates under TARGET and removes at the end, on errors and on Ctrl-C. Exits 3
    when a verdict fails (etcd suite: fdatasync p99 above the threshold) or a figure
    got worse than --baseline allows. Several TARGETs run one after the other and
    end with a comparison table.

    With --storage-class instead of TARGET, storbench creates a PVC of that class and
    a pod that mounts it, runs each test's fio in the pod, and deletes both (and the
    ConfigMap with the job files) at the end, on errors and on Ctrl-C. Several
    classes run one after the other and end with a comparison table.

    TARGET may name where as well as what: k8s://CLASS is --storage-class CLASS, and
    ssh://[USER@]HOST[:PORT][,HOST...]/PATH is PATH on those hosts (--hosts ssh://...).

    \b
    Example:
      storbench run /mnt/data
      storbench run /mnt/data --suite dbench --label gp3 --tag zone=a
      storbench run /mnt/data --suite postgresql      # will PostgreSQL be happy here?
      storbench run /mnt/data --replay appdb          # a recorded application's I/O
      storbench run /mnt/data --series nightly-gp3    # a history of your own naming
      storbench run /mnt/nvme /mnt/nfs --suite quick
      storbench run /var/lib/etcd-test --suite etcd --threshold 20
      storbench run /mnt/data --job my.fio --runtime 30
      storbench run /mnt/data --repeat 3 --assert "randread.iops >= 3000"
      storbench run /mnt/data --until-steady --runtime 60 --baseline gp3
      storbench run /var/lib/etcd-test --suite etcd --rate 150
      storbench run /mnt/shared --hosts node1,node2,node3:8766 --suite randrw75
      storbench run --storage-class gp3 --storage-class efs-sc --suite quick
      storbench run k8s://gp3 k8s://efs-sc --suite quick
      storbench run ssh://db1,db2/data --suite randrw75
      storbench run --storage-class fast --namespace bench --capacity 100Gi --dry-run
      storbench run /dev/nvme1n1 --suite quick --destructive /dev/nvme1n1
      storbench run /mnt/data --push http://pushgateway:9091
      storbench run /mnt/data --suite quick --explain
    """
    only_with(("max_regression", "--max-regression", baseline is not None, "--baseline"),
              ("steady_window_s", "--steady-window", until_steady is not None,
               "--until-steady"),
              ("round_s", "--round", precondition, "--precondition"),
              ("max_rounds", "--max-rounds", precondition, "--precondition"))
    if replay is not None:  # ignored, unsaid: a replay issues the recorded I/O as it was
        none_with("--replay NAME (it issues the recorded I/O as it was)",
                  ("suite", "--suite"), ("size", "--size"), ("runtime", "--runtime"),
                  ("ramp", "--ramp"))
    limit = percent(max_regression, "--max-regression", "10%")
    if not given("suite") and where.words and all(w.startswith("s3://") for w in where.words):
        suite = "s3"  # objects: PUT, GET, DELETE (quick's reads would read objects never PUT)
    spec = RunSpec(suite=suite, job_file=job_file, size=where.size, runtime=runtime,
                   ramp=ramp, label=label,
                   tags=parse_tags(tags), series=series, threshold_ms=threshold_ms, fio=fio_path,
                   repeat=repeat, until_steady=until_steady, steady_window_s=steady_window_s,
                   probe_metadata=probe_metadata, explain=explain, assertions=assertions,
                   rate_iops=rate_iops, profile=profile, baseline=baseline, max_regression=limit,
                   timeout_s=where.timeout_s, allow_exec=allow_exec,
                   precondition=precondition,
                   precondition_size=precondition_size, round_s=round_s,
                   max_rounds=max_rounds, kind_spec=_replay(store, replay, replay_fast))
    spec.check()
    targets = choose_targets(replace(where, probe_metadata=probe_metadata,
                                     precondition=precondition, reads_only=reads_only))
    if where.dry_run:
        _dry_run(spec, targets)
        return
    measure_and_report(targets, spec, store, as_json=as_json, push_to=push_to)


def _replay(store: Store, name: str | None, fast: bool) -> object | None:
    """--replay NAME: the stored workload, checked, as the run's kind (pipeline/kinds/replay)."""
    if name is None:
        if fast:
            raise ConfigError("--replay-fast applies to --replay NAME")
        return None
    from storbench.pipeline.kinds.replay import ReplaySpec
    from storbench.store import workloads
    from storbench.workload.trace import Trace

    found = workloads.get(store, name)
    return ReplaySpec(name, found.method, Trace.stored(found.iolog(store), found.facts), fast)


def _dry_run(spec: RunSpec, targets: list[Target]) -> None:
    """--dry-run: the manifests every class's run would create, as YAML."""
    from storbench.cli.k8s import manifests_yaml
    from storbench.target.kubernetes.storageclass import KubeTarget

    docs = []
    for t in targets:
        assert isinstance(t, KubeTarget)
        planned = plan_run(spec, t)
        docs += t.plan_layout(planned.uid, planned.plan, [s.jobs for s in planned.steps],
                              t.namespace_offline()).manifests
    click.echo(manifests_yaml(docs), nl=False)
