"""Measuring an IOPS-latency curve on any target, through the run loop's own steps.

First closed loop: the test's job at iodepth 1, 2, 4, … (numjobs for a synchronous
engine) until IOPS rise by less than 5%; the highest is the maximum. Then open loop: fio
issues fixed rates (``rate_iops``, ``rate_process=poisson``), with a queue at least 32
deep (so that a Poisson burst finds room); a synchronous engine's jobs evenly spaced
(fio 3.33 pacing fdatasync'd psync writes by Poisson issued one I/O a job). With
objectives (``--slo``) it searches: 10% of that maximum (the latency floor), the
maximum, then for each objective halfway between the highest rate that met it and the
lowest that missed it, until the two are within 3% (beyond the maximum: 110% of it).
Without, from ~10% to ~110% of the maximum and then, where latency bends, steps halfway
between (adaptive); or ``--steps`` evenly spread. fio times Poisson gaps in whole
microseconds, so a step is the rate nearest the wanted one that fio really offers, named
and judged by it (analysis/rates.py: at 170,000 IOPS a job fio offers 153,567 or
181,360, never 170,000). A step that fell behind its rate while a faster one kept its
own is measured once more (``rate-900-again``): it was paused. Every step is a test of
the run (``qd4``, ``rate-2700``); analysis/curve.py turns them into the answers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from storbench.analysis import curve as answers
from storbench.analysis import rates
from storbench.analysis.assertions import Assertion
from storbench.analysis.curve import Objective
from storbench.errors import ConfigError
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.phases import CpuWait
from storbench.pipeline.spec import RunSpec
from storbench.result.model import TestResult
from storbench.result.sections import CURVE, CurveSection
from storbench.workload.jobfile import JobFile, Section
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import fio_seconds
from storbench.workload.suite import synchronous

COARSE = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.1)  # of the closed-loop maximum
REFINE = 3  # adaptive: at most this many steps placed halfway where the curve bends
FLOOR = 0.1  # the lowest open-loop step, of the closed-loop maximum: the latency floor
BEYOND = 1.1  # the highest a search goes, of the closed-loop maximum
TOLERANCE = 0.03  # a search ends when an objective's met and missed rates are this close
OPEN_DEPTH = 32  # open loop: at least this deep a queue (capped by --max-depth)


@dataclass(frozen=True)
class CurveSpec:
    """``storbench curve``: one test, measured closed loop then at fixed rates."""

    test: str | None = None  # the suite's test (None: a job file's only job)
    objectives: tuple[str, ...] = ()  # p99<=2ms, ...
    step_s: float = 5.0  # each step's runtime (plus its ramp: rates.ramp_s)
    steps: int | None = None  # open-loop steps; None: adaptive
    max_depth: int = 256

    @property
    def most_steps(self) -> int:
        """How many steps it may take: doubling up to max_depth, then the open loop."""
        return self.max_depth.bit_length() + 1 + (self.steps or 12)

    def check(self) -> None:
        for text in self.objectives:
            Objective.parse(text)
        if self.step_s < 1:
            raise ConfigError(f"--step-time must be at least 1 s, not {self.step_s:g}")
        if self.steps is not None and not 3 <= self.steps <= 50:
            raise ConfigError(f"--steps must be 3 to 50 (or adaptive), not {self.steps}")
        if not 1 <= self.max_depth <= 4096:
            raise ConfigError(f"--max-depth must be 1 to 4096, not {self.max_depth}")


@dataclass
class Curve:
    spec: CurveSpec
    test: PlannedTest
    objectives: list[Objective] = field(default_factory=list)
    closed: list[dict[str, Any]] = field(default_factory=list)
    opened: list[dict[str, Any]] = field(default_factory=list)
    index: int = 0
    written: dict[float, str] = field(default_factory=dict)  # a rate: its rate_iops=
    workers: int = 1  # hosts or pods that each run the job file (--hosts, --clients)

    def __post_init__(self) -> None:
        self.objectives = [Objective.parse(t) for t in self.spec.objectives]
        job = self.test.jobfile.jobs()[0]
        opts = dict(self.test.jobfile.effective())[job.name]
        self.sync_engine = synchronous(opts)
        self.poisson = not self.sync_engine  # evenly spaced: analysis/rates.paced
        self.depth = int(opts.get("iodepth", "1") or 1)
        self.jobs = int(opts.get("numjobs", "1") or 1)
        rw = opts.get("rw", opts.get("readwrite", "read"))
        self.mixed = rw in ("rw", "readwrite", "randrw")
        self.read_share = float(opts.get("rwmixread", "50")) / 100 if self.mixed else 1.0

    # --- measuring -------------------------------------------------------------------
    def measure(self, ctx: RunContext) -> None:
        """Run the steps through ``ctx`` (the run loop's): closed loop, then open."""
        depth, best = 1, 0.0
        while depth <= self.spec.max_depth:
            jobs, qd = (depth, 1) if self.sync_engine else (self.jobs, depth)
            name = f"jobs{jobs}" if self.sync_engine else f"qd{qd}"
            iops = self._step(ctx, name, None, qd, jobs)["achieved_iops"]
            if iops <= best * (1 + answers.RISING):
                break
            best = max(best, iops)
            depth *= 2
        top = max(self.closed, key=lambda s: s["achieved_iops"])
        if top["achieved_iops"] <= 0:
            raise ConfigError(f"{self.test.name}: fio did no I/O closed loop; no curve")
        if self.objectives and self.spec.steps is None:
            ctx.note(f"Closed loop: at most {top['achieved_iops']:,.0f} IOPS ({top['test']});"
                     " now at fixed rates, searching for the highest that meets"
                     f" {', '.join(o.text for o in self.objectives)} (within"
                     f" {TOLERANCE:.0%})")
            self._search(ctx, top)
            return
        ctx.note(f"Closed loop: at most {top['achieved_iops']:,.0f} IOPS ({top['test']});"
                      " now at fixed rates up to 110% of it")
        shares = COARSE if self.spec.steps is None else [
            0.1 + i * 1.0 / (self.spec.steps - 1) for i in range(self.spec.steps)]
        for share in shares:
            self._rate(ctx, share * top["achieved_iops"], top)
        self._measure_paused_again(ctx)
        if self.spec.steps is None:
            for _ in range(REFINE):
                rate = self._where_it_bends()
                if rate is None:
                    break
                self._rate(ctx, rate, top)
            self._measure_paused_again(ctx)

    def _search(self, ctx: RunContext, top: dict[str, Any]) -> None:
        """The floor, the maximum, then halving each objective's bracket (the highest
        rate that met it, the lowest above it that missed it) until it is within
        TOLERANCE; a step measured again (paused) may move a bracket: searched on."""
        most = top["achieved_iops"]
        for share in (FLOOR, 1.0):
            self._rate(ctx, share * most, top)
        for _ in range(2):
            while len(self.opened) < self.spec.most_steps:
                rate = self._next_searched(most)
                if rate is None or not self._rate(ctx, rate, top):
                    break
            if not self._measure_paused_again(ctx):
                return

    def _next_searched(self, most: float) -> float | None:
        """The next rate a search measures, the lowest of: halfway across each
        objective's bracket still wider than TOLERANCE, or 110% of the maximum where
        every rate so far met one; None when every objective is bracketed (or never
        met)."""
        steps = sorted(self.opened, key=lambda s: s["requested_iops"])
        wanted: list[float] = []
        for o in self.objectives:
            pct = f"{o.percentile:g}"
            met = [float(s["requested_iops"]) for s in steps if _meets(s, pct, o.limit_ns)]
            if not met:
                continue  # missed at the floor: never met, nothing to search
            low = max(met)
            high = next((float(s["requested_iops"]) for s in steps if s["requested_iops"] > low
                         and not _meets(s, pct, o.limit_ns)), None)
            if high is None:
                if low < BEYOND * most * (1 - TOLERANCE):
                    wanted.append(BEYOND * most)
            elif high > low * (1 + TOLERANCE):
                wanted.append((low + high) / 2)
        return min(wanted) if wanted else None

    def _measure_paused_again(self, ctx: RunContext) -> bool:
        """A step that fell behind its rate while a faster step kept its own was paused
        (the machine, or a hiccup of the storage), not saturated: it is measured once
        more and the second measurement stands, the first kept in it as ``first``. Whether
        one was."""
        measured = False
        for s in sorted(self.opened, key=lambda s: s["requested_iops"]):
            faster_kept = any(not answers.off_rate(t) and t["requested_iops"] > s["requested_iops"]
                              for t in self.opened)
            if not s["saturated"] or not faster_kept or "first" in s:
                continue
            self.opened.remove(s)
            ctx.note(f"{s['test']} fell behind its rate ({s['achieved_iops']:,.0f} of"
                          f" {s['requested_iops']:,.0f} IOPS) while a faster step kept its"
                          " own: measured again")
            again = self._step(ctx, f"{s['test']}-again", s["requested_iops"],
                               s["iodepth"], s["numjobs"])
            again["first"] = {k: s[k] for k in ("test", "achieved_iops", "saturated")}
            measured = True
        return measured

    def _rate(self, ctx: RunContext, rate: float, top: dict[str, Any]) -> bool:
        """Measure about ``rate`` IOPS; False when the rate fio offers nearest it is
        measured already."""
        written, rate = self._pace(max(1.0, round(rate)), top["numjobs"])
        if any(round(s["requested_iops"]) == round(rate) for s in self.opened):
            return False
        self.written[rate] = written
        # room for a burst of Poisson arrivals: the depth bounds what is outstanding, it
        # adds no load (at the closed-loop depth, qd1 say, fio falls behind its schedule)
        depth = top["iodepth"] if self.sync_engine else min(
            self.spec.max_depth, max(OPEN_DEPTH, 2 * top["iodepth"]))
        self._step(ctx, f"rate-{rate:.0f}", rate, depth, top["numjobs"])
        return True

    def _where_it_bends(self) -> float | None:
        """Halfway between two neighbouring rates where an objective (or the knee) turns
        from met to missed, when they are more than 5% apart."""
        steps = sorted(self.opened, key=lambda s: s["requested_iops"])
        limits = [(f"{o.percentile:g}", o.limit_ns) for o in self.objectives] or [
            ("99", answers.KNEE * float(steps[0]["percentiles_ns"]["99"] or 0))]
        for pct, limit in limits:
            for a, b in itertools.pairwise(steps):
                if (_meets(a, pct, limit) and not _meets(b, pct, limit)
                        and b["requested_iops"] > 1.05 * a["requested_iops"]):
                    return (float(a["requested_iops"]) + float(b["requested_iops"])) / 2
        return None

    def _step(self, ctx: RunContext, name: str, rate: float | None, depth: int,
              jobs: int) -> dict[str, Any]:
        test = self._variant(name, rate, depth, jobs)
        step = ctx.step(self.index, 0, test)
        self.workers = max(len(step.jobs), 1)  # hosts or pods: closed loop tells first
        self.index += 1
        here = all(not j.worker for j in step.jobs)  # this machine's CPUs, fio's
        before = CpuWait.now()
        results: list[TestResult] = ctx.run_step(step, test.jobfile.named_files())
        record = answers.step_record(name, rate, results, depth, jobs, self.poisson,
                                     self.objectives)
        if here and (waited := CpuWait.now().percent_since(before)) is not None:
            record["cpu_waited_percent"] = waited  # time fio may have been kept from a CPU
        (self.closed if rate is None else self.opened).append(record)
        return record

    def _pace(self, rate: float, jobs: int) -> tuple[str, float]:
        """The rate_iops to write for about ``rate`` IOPS in all (per job and worker,
        each direction), and the rate fio will offer with it (analysis/rates.poisson_pace):
        the step's rate, as its name and its judgement say."""
        shares = [self.read_share, 1 - self.read_share] if self.mixed else [1.0]
        each = jobs * self.workers  # every host (pod) runs the jobs, each at its rate
        paced = [rates.paced(rate / each * share, self.poisson) for share in shares]
        return ",".join(str(iops) for iops, _ in paced), sum(got for _, got in paced) * each

    def _variant(self, name: str, rate: float | None, depth: int, jobs: int) -> PlannedTest:
        """The test's job renamed ``name``, time based for the step, at this depth and
        job count, and at ``rate`` IOPS in total (open loop) or as fast as it goes."""
        runtime = fio_seconds(self.spec.step_s)
        ramp = rates.ramp_s(self.spec.step_s)
        sections = []
        for s in self.test.jobfile.sections:
            s = s.without("rate", "rate_iops", "rate_process")  # the curve sets the rate
            if not s.is_global:
                s = _with_file(s, self.test.jobfile)
                s = replace(s, name=name).without("ramp_time", "rate", "rate_iops",
                                                  "rate_process", "runtime", "size_based")
                options: list[tuple[str, str | None]] = [
                    ("time_based", None), ("runtime", runtime),
                    ("ramp_time", fio_seconds(ramp)), ("iodepth", str(depth)),
                    ("numjobs", str(jobs))]
                if rate is not None:
                    written = self.written.get(rate) or self._pace(rate, jobs)[0]
                    options += [("rate_iops", written)]
                    options += [("rate_process", "poisson")] if self.poisson else []
                for key, value in options:
                    s = s.with_option(key, value)
            sections.append(s)
        arrivals = "Poisson arrivals" if self.poisson else "evenly spaced"
        what = (f"{rate:,.0f} IOPS, {arrivals}" if rate is not None else
                f"closed loop, iodepth {depth}, numjobs {jobs}")
        return PlannedTest(name, what, JobFile(tuple(sections)),
                           self.spec.step_s + ramp, paced=True)

    # --- the record --------------------------------------------------------------------
    def record(self) -> CurveSection:
        steps = [*self.closed, *self.opened]
        top = max(self.closed, key=lambda s: s["achieved_iops"]) if self.closed else None
        found = answers.answers(steps, self.objectives)
        # the steps whose CPU limited them (not a paced one that kept its rate: it spins)
        bound = [s for s in steps if answers.cpu_bound(s)]
        cpu = max((s["cpu_percent"] for s in bound or steps), default=0.0)
        busiest = max(bound or steps, key=answers.cpu_taken, default=None)
        opened = sorted(self.opened, key=lambda s: s["requested_iops"])
        knee, bent = answers.bend(steps)
        return {
            "workload": self.test.name,
            "engine": "sync" if self.sync_engine else "async",
            # what its latency is of (analysis/curve.waited_by): each I/O's completion,
            # each write's sync call, or both
            "latency": steps[0]["latency"] if steps else "completion",
            "closed_loop": self.closed, "steps": opened,
            "max_iops": top["achieved_iops"] if top else None,
            "max_at": top["test"] if top else None,
            "knee_iops": knee, "knee_bent": bent,
            "floor_ns": opened[0]["percentiles_ns"] if opened else None,
            "answers": found,
            "cpu_bound": bool(bound),
            "max_cpu_percent": cpu,
            "cpu_waited_percent": busiest.get("cpu_waited_percent") if busiest else None,
        }


def _meets(step: dict[str, Any], percentile: str, limit_ns: float) -> bool:
    """An open-loop step kept its rate and its ``percentile`` ("99") was within the limit."""
    v = step["percentiles_ns"].get(percentile)
    return not answers.off_rate(step) and v is not None and v <= limit_ns


def _with_file(section: Section, jobfile: JobFile) -> Section:
    """Every step works on one file: the job's own ``filename``, else the one fio
    would name after the job (steps are renamed, which would lay out a file each)."""
    if section.get("filename") is not None or any(
            s.is_global and s.get("filename") is not None for s in jobfile.sections):
        return section
    return section.with_option("filename", f"{section.name}.curve")


@dataclass
class CurveKind(Plain):
    """``storbench curve``: one test's steps, chosen as it measures (no fixed schedule);
    its answers are its section of the run record."""

    kind: ClassVar[str] = "curve"
    section: ClassVar[RecordSection] = CURVE
    fixed_schedule: ClassVar[bool] = False
    spec: CurveSpec
    suite: str
    curve: Curve | None = None

    @classmethod
    def from_spec(cls, spec: RunSpec) -> CurveKind | None:
        if not isinstance(spec.kind_spec, CurveSpec):
            return None
        return cls(spec.kind_spec, f"job:{spec.job_file.name}" if spec.job_file else spec.suite)

    def check(self) -> None:
        self.spec.check()

    def own_assertion(self, assertion: Assertion) -> bool:
        if assertion.test != "curve":
            return False
        key, figure, _ = assertion.curve_answer()
        answers.check_answer(assertion.text, key, figure,
                             [Objective.parse(t).key for t in self.spec.objectives]
                             + ["max", "knee"])
        return True

    def settings(self) -> dict[str, Any]:
        s = self.spec
        return {"curve": {"test": s.test, "objectives": list(s.objectives), "step_s": s.step_s,
                          "steps": s.steps, "max_depth": s.max_depth}}

    def plan(self, plan: Plan) -> Plan:
        """The one test it measures, scheduled as often as it may run (time budgets)."""
        test = replace(_curve_test(plan.tests, self.spec.test, plan.suite_name),
                       expected_s=self.spec.step_s + 1)
        # its own history: a curve's steps and answers are no runs of its suite
        return replace(plan, tests=[test], repeat=self.spec.most_steps,
                       workload_name=f"curve:{plan.workload}:{test.name}")

    def measure(self, ctx: RunContext) -> None:
        self.curve = Curve(self.spec, ctx.planned.plan.tests[0])
        self.curve.measure(ctx)

    def record(self) -> CurveSection | None:
        return self.curve.record() if self.curve is not None else None


def _curve_test(tests: list[PlannedTest], name: str | None, suite: str) -> PlannedTest:
    """The one test a curve measures; it must have exactly one job."""
    if name is not None:
        found = [t for t in tests if t.name == name]
        if not found:
            raise ConfigError(f"--workload {suite}:{name}: suite {suite} has no test {name!r};"
                              f" its tests: {', '.join(t.name for t in tests)}")
        tests = found
    if len(tests) != 1:
        raise ConfigError(f"--workload {suite}: a curve measures one test; name it, e.g."
                          f" {suite}:{tests[0].name}")
    jobs = tests[0].jobfile.jobs()
    if len(jobs) != 1:
        raise ConfigError(f"--workload: a curve measures one fio job, and {tests[0].name} has"
                          f" {len(jobs)} ({', '.join(j.name for j in jobs)})")
    return tests[0]
