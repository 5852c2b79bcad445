"""`storbench neighbours`: how much another tenant's I/O hurts yours."""

from __future__ import annotations

import click

from storbench.cli.common import NUMBER, cli, naming_options, only_with, parse_tags
from storbench.cli.measuring import measure_and_report, measuring_options
from storbench.cli.targets import TargetFlags, choose_targets
from storbench.errors import ConfigError
from storbench.pipeline.kinds.neighbours import AGGRESSORS, VICTIMS, NeighboursSpec
from storbench.pipeline.spec import RunSpec
from storbench.store import Store


@cli.command()
@click.option("--victim", "victims", multiple=True, metavar="NAME|SUITE:TEST|JOBFILE",
              help="Your workload (repeatable; default: randread and fdatasync): "
                   + ", ".join(VICTIMS) + ": 4k random reads or writes, direct, Poisson"
                   " arrivals at 200 IOPS; fdatasync: an etcd-like writer, a 4k write and its"
                   " fdatasync 50 times a second. Or a suite's test (quick:randread) or a job"
                   " file with one job, paced at --rate (or its own rate_iops).")
@click.option("--rate", "rate_iops", type=NUMBER, metavar="IOPS",
              help="Every victim's rate, open loop (default: each its own, as above).")
@click.option("--aggressor", default="seqwrite", show_default=True,
              metavar="NAME|SUITE:TEST|JOBFILE",
              help="What each neighbour does, each on its own files: " + ", ".join(AGGRESSORS)
                   + " (seqwrite: 1M sequential writes at qd32), a suite's test or a job file"
                     " with one job (as fast as it goes).")
@click.option("--max-aggressors", type=int, default=4, show_default=True,
              help="The most neighbours beside the victim: it is measured alone, then"
                   " beside 1, 2, 4, ... up to this many.")
@click.option("--limit", metavar="pNN<=LIMIT",
              help="The victim's objective, e.g. 'p99<=10ms' (any percentile: p95,"
                   " p99.9, ...): the run stops at the first step that misses it (or falls"
                   " behind its rate).")
@click.option("--isolate", metavar="LIMITS",
              help="Measure each step beside aggressors again with the aggressors in a"
                   " cgroup of their own held to LIMITS, as io.max and io.weight name them:"
                   " riops, wiops (I/Os a second), rbps, wbps (bytes a second), weight (1 to"
                   " 1000, where the device's scheduler is bfq), e.g. 'wbps=20M'. What a limit"
                   " on the other tenant buys you. Root, cgroup v1's blkio, a directory or"
                   " device on this machine with a block device beneath it.")
@click.option("--step-time", "step_s", type=NUMBER, default=5.0, show_default=True,
              metavar="SECONDS",
              help="Each step's runtime, after a 1 s ramp (a step of 1 s or less: half).")
@naming_options
@measuring_options
def neighbours(store: Store, where: TargetFlags, victims: tuple[str, ...],
               rate_iops: float | None,
               aggressor: str, max_aggressors: int, limit: str | None, isolate: str | None,
               step_s: float,
               label: str | None, tags: tuple[str, ...], series: str | None,
               assertions: tuple[str, ...], baseline: str | None, max_regression: str,
               fio_path: str | None, as_json: bool, push_to: str | None) -> None:
    """How much other tenants' I/O hurts yours: a workload at its rate, alone, then
    beside more and more aggressors on the same storage.

    The victims (default: 4k random reads at 200 IOPS, and an etcd-like writer, a 4k
    write and its fdatasync 50 times a second; open loop) run alone, then beside 1, 2,
    4, ... aggressors (default: 1M sequential writes at queue depth 32), each job on its
    own file, all at once in one fio per step (with --hosts or --clients, the victims
    on the first host or pod, the aggressors on the others). Each step gives each
    victim's p50 and p99, how much each grew over alone (×), whether its rate was kept,
    and the aggressors'
    IOPS and bandwidth (with --isolate, each step again with the aggressors held to a
    limit in a cgroup of their own); then one sentence ("your 4k random reads' p99 went from 0.4 ms
    alone to 31 ms beside 1 aggressor (78×) ..."). Stored as a run (each step is a
    test); exits 3 when an --assert fails (neighbours.randread.most.growth <= 10).

    \b
    Example:
      storbench neighbours /mnt/data
      storbench neighbours /mnt/data --aggressor randwrite --limit "p99<=10ms"
      storbench neighbours /mnt/data --isolate "wbps=20M"
      storbench neighbours /mnt/nfs --hosts ssh://app1,ssh://app2,ssh://app3
      storbench neighbours --storage-class gp3 --clients 4 \\
          --node-selector kubernetes.io/hostname=node-1
      storbench neighbours /var/lib/etcd-test --victim fdatasync --rate 100 \\
          --assert "neighbours.fdatasync.most.p99 < 10ms"
      storbench neighbours /mnt/data --victim my-app.fio --rate 500 \\
          --aggressor dbench:write_bw
    """
    if where.dry_run:
        raise ConfigError("--dry-run applies to `run`")
    if baseline is not None:
        raise ConfigError("--baseline applies to `run`; judge neighbours with --assert"
                          " (e.g. neighbours.randread.most.growth <= 10)")
    only_with(("max_regression", "--max-regression", False, "`run --baseline`"))
    spec = RunSpec(suite="quick", label=label, tags=parse_tags(tags), series=series,
                   fio=fio_path, assertions=assertions, timeout_s=where.timeout_s,
                   probe_metadata=False,
                   kind_spec=NeighboursSpec(victims or ("randread", "fdatasync"), rate_iops,
                                            aggressor, max_aggressors, step_s,
                                            where.size or "256m", limit, isolate))
    spec.check()
    targets = choose_targets(where)
    measure_and_report(targets, spec, store, as_json=as_json, push_to=push_to)
