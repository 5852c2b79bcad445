"""`storbench curve`: how much load before the latency breaks."""

from __future__ import annotations

from pathlib import Path

import click

from storbench.cli.common import (
    NUMBER,
    cli,
    naming_options,
    only_with,
    parse_tags,
)
from storbench.cli.measuring import measure_and_report, measuring_options
from storbench.cli.targets import TargetFlags, choose_targets
from storbench.errors import ConfigError
from storbench.pipeline.kinds.curve import CurveSpec
from storbench.pipeline.spec import RunSpec
from storbench.store import Store


def _steps(ctx: click.Context, param: click.Parameter, value: str) -> int | None:
    if value == "adaptive":
        return None
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: a number of steps (3 to 50) or adaptive",
                                 ctx, param) from None


@cli.command()
@click.option("--workload", "-w", default="quick:randread", show_default=True,
              metavar="SUITE:TEST|JOBFILE",
              help="What to load the target with: a suite's test, or a job file with one job.")
@click.option("--slo", "objectives", multiple=True, metavar="pNN<=LIMIT",
              help="A latency objective, e.g. 'p99<=2ms', 'p95<=1ms' (any percentile;"
                   " repeatable): the answer is the highest rate that met it.")
@click.option("--steps", default="adaptive", show_default=True, callback=_steps,
              metavar="N|adaptive",
              help="Open-loop steps: N evenly from 10% to 110% of the closed-loop maximum,"
                   " or adaptive (with --slo: a search for each objective's highest rate,"
                   " within 3%; without: 9 steps, then up to 3 more where latency bends).")
@click.option("--step-time", "step_s", type=NUMBER, default=5.0, show_default=True,
              metavar="SECONDS",
              help="Each step's runtime, after a 1 s ramp (a step of 1 s or less: half).")
@click.option("--max-depth", type=int, default=256, show_default=True,
              help="Closed loop: the deepest queue (or most jobs) tried.")
@naming_options
@measuring_options
def curve(store: Store, where: TargetFlags, workload: str, objectives: tuple[str, ...],
          steps: int | None, step_s: float, max_depth: int, label: str | None,
          tags: tuple[str, ...], series: str | None, assertions: tuple[str, ...],
          baseline: str | None, max_regression: str, fio_path: str | None,
          as_json: bool, push_to: str | None) -> None:
    """Measure an IOPS-latency curve: the highest rate that meets a latency objective.

    First closed loop: the workload at queue depth 1, 2, 4, ... (more jobs for a
    synchronous engine) until IOPS rise by less than 5%: the maximum. Then open loop,
    as real traffic arrives: fixed rates (fio rate_iops, Poisson arrivals), each with
    p50/p90/p99/p99.9 from fio's histogram bins (each step a rate fio really offers: it
    times Poisson gaps in whole microseconds). With --slo it searches: 10% of the
    maximum (the floor), the maximum, then halfway between the highest rate that met
    each objective and the lowest that missed it, until they are within 3%; without,
    from 10% to 110% of the maximum, more steps where latency bends. A step
    that fell behind its rate (achieved < 95%, and short by more than the chance of
    Poisson arrivals) is saturated and never counts as meeting an objective, nor does
    one that ran faster (one that fell behind while a faster step kept its rate was
    paused: measured again). The answer per --slo: "max N IOPS at p99<=2ms", the next
    step that missed it, the knee (where p99 doubles) and the latency floor at low
    load. Stored as a run (its steps are its tests); exits 3 when an --assert fails.

    \b
    Example:
      storbench curve /mnt/data --slo "p99<=2ms"
      storbench curve /mnt/data --workload quick:randwrite --slo "p99.9<=10ms" \\
          --assert "curve.p99_9_10ms.iops >= 2000"
      storbench curve /dev/nvme1n1 --workload quick:randread --slo "p99<=500us"
      storbench curve /mnt/a /mnt/b --slo "p99<=5ms"     # two targets, then compared
      storbench curve --storage-class gp3 --slo "p99<=10ms"
    """
    if where.dry_run:
        raise ConfigError("--dry-run applies to `run`: a curve's steps are chosen as it"
                          " measures")
    if baseline is not None:
        raise ConfigError("--baseline applies to `run`; a curve is judged by --assert"
                          " (e.g. curve.p99_2ms.iops >= 2500)")
    only_with(("max_regression", "--max-regression", False, "`run --baseline`"))
    suite, test, job_file = _workload(workload)
    spec = RunSpec(suite=suite, job_file=job_file, size=where.size, label=label,
                   tags=parse_tags(tags), series=series, fio=fio_path, assertions=assertions,
                   timeout_s=where.timeout_s, probe_metadata=False,
                   kind_spec=CurveSpec(test, objectives, step_s, steps, max_depth))
    spec.check()
    targets = choose_targets(where)
    measure_and_report(targets, spec, store, as_json=as_json, push_to=push_to)


def _workload(text: str) -> tuple[str, str | None, Path | None]:
    """SUITE:TEST, SUITE (its only test), or a job file."""
    path = Path(text)
    if path.suffix == ".fio" or path.is_file():
        return "quick", None, path
    suite, _, test = text.partition(":")
    return suite, test or None, None
