"""Noisy neighbours (`storbench neighbours`): how much another tenant's I/O hurts yours.

The victim is a workload at a fixed rate, open loop (fio's ``rate_iops`` with Poisson
arrivals): by default 4k random reads at 200 IOPS. It runs alone, then beside 1, 2, 4, …
aggressors (by default 1M sequential writes at queue depth 32, each on its own file),
all in one fio invocation per step, the victim in its own reporting group. Each step
says the victim's p50 and p99, how much each grew over alone (×), whether its rate was
kept, and the aggressors' throughput; a step past the victim's objective (``--limit
p99<=10ms``) ends the run there. The answer is one sentence: alone, beside the first
aggressor, beside the most.

Every step is a test of the run (``victim-0``, ``victim-2``, ``aggressors-2``); its
record (result/sections.NEIGHBOURS) keeps each step's figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from storbench.analysis import rates
from storbench.analysis.curve import Objective
from storbench.analysis.stats import times
from storbench.errors import ConfigError
from storbench.execute.base import Executor
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.model import TestResult
from storbench.result.sections import NEIGHBOURS, NeighboursSection
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import fio_seconds, format_latency

RAMP_S = 1
VICTIMS = {  # name -> (in words, options): Poisson arrivals and a queue deep enough for
    # their bursts; a synchronous writer (one write at a time, as etcd's) evenly spaced:
    # fio 3.33 pacing psync by Poisson issued one I/O, or died of SIGFPE, here
    "randread": ("4k random reads", "rw=randread\nbs=4k\niodepth=32\nrate_process=poisson"),
    "randwrite": ("4k random writes",
                  "rw=randwrite\nbs=4k\niodepth=32\nrate_process=poisson"),
    "fdatasync": ("4k writes each followed by fdatasync (etcd's WAL)",
                  "rw=write\nbs=4k\nfdatasync=1\nioengine=psync\ndirect=0"
                  "\nrate_process=linear"),
}
AGGRESSORS = {
    "seqwrite": ("1M sequential writes, qd32", "rw=write\nbs=1m\niodepth=32"),
    "randwrite": ("4k random writes, qd32", "rw=randwrite\nbs=4k\niodepth=32"),
    "randread": ("4k random reads, qd32", "rw=randread\nbs=4k\niodepth=32"),
    "seqread": ("1M sequential reads, qd32", "rw=read\nbs=1m\niodepth=32"),
}


@dataclass(frozen=True)
class NeighboursSpec:
    """What `storbench neighbours` asks: the victim and its rate, the aggressor, how
    many at most, each step's time, and the victim's objective."""

    victim: str = "randread"
    rate_iops: float = 200.0
    aggressor: str = "seqwrite"
    max_aggressors: int = 4
    step_s: float = 5.0
    size: str = "256m"  # each job's file
    limit: str | None = None  # p99<=10ms

    def counts(self) -> list[int]:
        """The aggressor counts measured: 0, 1, 2, 4, … up to the most (which is in)."""
        out, n = [0], 1
        while n < self.max_aggressors:
            out.append(n)
            n *= 2
        return [*out, self.max_aggressors]

    def check(self) -> None:
        if self.victim not in VICTIMS:
            raise ConfigError(f"--victim {self.victim!r}: one of {', '.join(VICTIMS)}")
        if self.aggressor not in AGGRESSORS:
            raise ConfigError(f"--aggressor {self.aggressor!r}: one of"
                              f" {', '.join(AGGRESSORS)}")
        if not 1 <= self.max_aggressors <= 64:
            raise ConfigError(f"--max-aggressors must be 1 to 64, not {self.max_aggressors}")
        if not 1 <= self.rate_iops <= 1_000_000:
            raise ConfigError(f"--rate must be 1 to 1,000,000 IOPS, not {self.rate_iops:g}")
        if self.step_s < 1:
            raise ConfigError(f"--step-time must be at least 1 s, not {self.step_s:g}")
        if self.limit is not None and Objective.parse(self.limit).percentile not in (
                50.0, 90.0, 99.0, 99.9):
            raise ConfigError(f"--limit {self.limit!r}: of p50, p90, p99 or p99.9")

    def pace(self) -> tuple[int, float]:
        """The victim's rate_iops= and the rate fio offers with it (Poisson arrivals:
        fio's whole-microsecond gaps make some rates only; evenly spaced: as written)."""
        if "rate_process=poisson" in VICTIMS[self.victim][1]:
            return rates.poisson_pace(self.rate_iops)
        return round(self.rate_iops), float(round(self.rate_iops))

    def plan_tests(self, scratch: Path) -> Plan:
        """One test per step: the victim (and the aggressors beside it), time based."""
        written, _ = self.pace()
        runtime = fio_seconds(self.step_s)
        victim = VICTIMS[self.victim][1]
        aggressor = AGGRESSORS[self.aggressor][1]
        tests = []
        for n in self.counts():
            text = (f"[global]\nioengine=libaio\ndirect=1\nsize={self.size}\ntime_based\n"
                    f"runtime={runtime}\nramp_time={RAMP_S}\nrandrepeat=0\n"
                    f"[victim-{n}]\n{victim}\nfilename=victim.data\n"
                    f"rate_iops={written}\n")
            if n:
                text += f"[aggressors-{n}]\nnew_group\n{aggressor}\nnumjobs={n}\n"
            jobfile = parse_jobfile(text, "neighbours").prepared(scratch)
            what = (f"{VICTIMS[self.victim][0]} at {written:,} IOPS"
                    + (f" beside {n} × {AGGRESSORS[self.aggressor][0]}" if n else ", alone"))
            tests.append(PlannedTest(f"step-{n}", what, jobfile, self.step_s + RAMP_S,
                                     paced=True))
        return Plan("neighbours", tests,
                    workload_name=f"neighbours:{self.victim}@{written}:{self.aggressor}")


def step_record(n: int, results: list[TestResult], alone: dict[str, Any] | None,
                offered: float) -> dict[str, Any]:
    """One step: the victim's p50/p99 (ns), achieved IOPS and whether its rate was kept,
    growth over alone (×), and the aggressors' IOPS and bandwidth (all directions)."""
    victim = next(r for r in results if r.name == f"victim-{n}")
    (_, d), *_ = victim.directions()
    percentiles = {f"{p:g}": d.clat.percentile(p) if d.clat else None
                   for p in (50.0, 90.0, 99.0, 99.9)}
    p50, p99 = percentiles["50"], percentiles["99"]
    theirs = [r for r in results if r.name == f"aggressors-{n}"]
    growth: dict[str, float | None] = {"p50": None, "p99": None}
    if alone is not None:
        for key, now in (("p50", p50), ("p99", p99)):
            before = alone[f"{key}_ns"]
            growth[key] = now / before if now and before else None
    return {
        "aggressors": n, "test": f"step-{n}",
        "p50_ns": p50, "p99_ns": p99, "percentiles_ns": percentiles,
        "growth_p50": 1.0 if alone is None else growth["p50"],
        "growth_p99": 1.0 if alone is None else growth["p99"],
        "achieved_iops": d.iops, "requested_iops": offered,
        "rate_kept": not rates.shortfalls(victim),  # within Poisson arrivals' chance
        "aggressor_iops": sum(x.iops for r in theirs for _, x in r.directions()),
        "aggressor_bw_bytes_per_s": sum(x.bw_bytes_per_s for r in theirs
                                        for _, x in r.directions()),
    }


@dataclass
class NeighboursKind(Plain):
    """``storbench neighbours``: the victim alone, then beside more and more aggressors."""

    kind: ClassVar[str] = "neighbours"
    section: ClassVar[RecordSection] = NEIGHBOURS
    fixed_schedule: ClassVar[bool] = True
    spec: NeighboursSpec
    steps: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""

    @classmethod
    def from_spec(cls, spec: RunSpec) -> NeighboursKind | None:
        return cls(spec.kind_spec) if isinstance(spec.kind_spec, NeighboursSpec) else None

    def check(self) -> None:
        self.spec.check()

    def settings(self) -> dict[str, Any]:
        s = self.spec
        return {"neighbours": {"victim": s.victim, "rate_iops": s.rate_iops,
                               "aggressor": s.aggressor, "max_aggressors": s.max_aggressors,
                               "step_s": s.step_s, "size": s.size, "limit": s.limit}}

    def plan(self, plan: Plan) -> Plan:
        return replace(plan, repeat=1)

    def measure(self, ctx: RunContext, executor: Executor) -> None:
        _, offered = self.spec.pace()
        limit = Objective.parse(self.spec.limit) if self.spec.limit else None
        alone: dict[str, Any] | None = None
        for step in ctx.planned.steps:
            n = int(step.test.name.split("-")[1])
            results = ctx.run_step(executor, step, {"victim.data"})
            record = step_record(n, results, alone, offered)
            self.steps.append(record)
            alone = alone or record
            record["missed"] = limit is not None and not _meets(record, limit)
            if record["missed"] and n:
                self.stopped = f"beside {n}, the victim missed {self.spec.limit}"
                ctx.note(f"the victim missed {self.spec.limit} beside {n} aggressor"
                         f"{'s' if n > 1 else ''}: no more aggressors")
                break

    def record(self) -> NeighboursSection | None:
        if not self.steps:
            return None
        return {"victim": VICTIMS[self.spec.victim][0],
                "aggressor": AGGRESSORS[self.spec.aggressor][0],
                "rate_iops": self.steps[0]["requested_iops"], "limit": self.spec.limit,
                "steps": self.steps, "said": said(self.steps, VICTIMS[self.spec.victim][0],
                                                  self.spec.limit)}


def _meets(step: dict[str, Any], objective: Objective) -> bool:
    """The victim kept its rate and its percentile is within the objective's limit."""
    value = step["percentiles_ns"].get(f"{objective.percentile:g}")
    return bool(step["rate_kept"]) and value is not None and value <= objective.limit_ns


def _ms(ns: float | None) -> str:
    return "?" if ns is None else format_latency(ns)


def said(steps: list[dict[str, Any]], victim: str, limit: str | None) -> str:
    """The answer in one sentence: the victim's p99 alone, beside the first aggressor and
    beside the most, with how much it grew; a rate not kept, and the objective missed."""
    alone = steps[0]
    parts = [f"your {victim}' p99 went from {_ms(alone['p99_ns'])} alone"]
    for s in ([steps[1]] if len(steps) > 1 else []) + ([steps[-1]] if len(steps) > 2 else []):
        n = s["aggressors"]
        grew = f" ({times(s['growth_p99'])}×)" if s["growth_p99"] is not None else ""
        lost = "" if s["rate_kept"] else (f", its rate not kept: {s['achieved_iops']:,.0f}"
                                          f" of {s['requested_iops']:,.0f} IOPS")
        parts.append(f"to {_ms(s['p99_ns'])} beside {n} aggressor{'s' if n > 1 else ''}"
                     f"{grew}{lost}")
    text = ", ".join(parts[:1]) + (" " + ", then ".join(parts[1:]) if parts[1:] else "")
    if limit is not None:
        missed = next((s for s in steps if s.get("missed")), None)
        text += f"; {limit} " + (
            "held at every step" if missed is None else "missed even alone"
            if not missed["aggressors"] else f"missed beside {missed['aggressors']}")
    return text
