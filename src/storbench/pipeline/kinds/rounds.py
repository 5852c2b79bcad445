"""Preconditioning and steady state in rounds, as the SNIA Solid State Storage
Performance Test Specification does it (``run --precondition``, block devices).

First the device is written sequentially in 128 KiB blocks, twice its size (or up to
``--precondition-size``). Then each test runs in rounds of ``--round`` seconds, the
tests interleaved, until its tracking figure (IOPS; bandwidth for a sequential test)
is steady over the last 5 rounds: their range (max - min) within 20% of their mean,
and the least-squares line through them rising or falling by at most 10% of the mean
across the window. A test that is steady runs no more rounds; one that is not after
``--max-rounds`` (25) is said so. The figures of a test are those of its window:
the run stores every round (its ``steady_rounds`` section says which are the window),
and the record type gives comparisons, verdicts and summaries only the window's rounds.
This judging is storbench's own; ``--until-steady`` keeps meaning fio's criterion.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import ClassVar

from storbench.analysis.assertions import Assertion
from storbench.errors import ConfigError, FioError
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.model import TestResult
from storbench.result.record import Run, Warning
from storbench.result.sections import ROUNDS, RoundsEntry
from storbench.target.base import PRECONDITION_BYTES_PER_S, Preconditionable, Target
from storbench.workload.jobfile import SEQUENTIAL
from storbench.workload.plan import Plan
from storbench.workload.sizes import format_bytes_iec, parse_size

WINDOW = 5
MAX_RANGE = 0.20  # of the window's mean
MAX_SLOPE = 0.10  # the fitted line's rise across the window, of the mean


def tracking(results: list[TestResult]) -> float | None:
    """A round's figure: its IOPS, all directions; for a sequential test, bandwidth."""
    total = 0.0
    for r in results:
        rw = r.options.get("rw", r.options.get("readwrite", "read"))
        for _, d in r.directions():
            total += d.bw_bytes_per_s if rw in SEQUENTIAL else d.iops
    return total if results else None


def steady(values: list[float]) -> bool:
    """SNIA's criterion over the last WINDOW values."""
    if len(values) < WINDOW:
        return False
    w = values[-WINDOW:]
    mean = statistics.fmean(w)
    if mean <= 0:
        return False
    xs = range(WINDOW)
    x_mean = statistics.fmean(xs)
    slope = sum((x - x_mean) * (y - mean) for x, y in zip(xs, w, strict=True)) / sum(
        (x - x_mean) ** 2 for x in xs)
    return max(w) - min(w) <= MAX_RANGE * mean and abs(slope) * (WINDOW - 1) <= MAX_SLOPE * mean


@dataclass
class Rounds:
    max_rounds: int
    cap_bytes: int | None = None  # --precondition-size
    values: dict[str, list[float]] = field(default_factory=dict)  # planned test -> per round
    repeats: dict[str, list[int]] = field(default_factory=dict)  # the repeat of each round
    names: dict[str, list[str]] = field(default_factory=dict)  # the results it stores
    reached: dict[str, int] = field(default_factory=dict)  # test -> round (1-based)
    kinds: dict[str, str] = field(default_factory=dict)  # test -> "iops" or "bw"

    def done(self, test: str) -> bool:
        return test in self.reached

    def add(self, test: str, repeat: int, results: list[TestResult]) -> int | None:
        """One round's results; the round where steady state was reached, if now."""
        value = tracking(results)
        if value is None:
            return None
        self.values.setdefault(test, []).append(value)
        self.repeats.setdefault(test, []).append(repeat)
        names = self.names.setdefault(test, [])
        names += [r.name for r in results if r.name not in names]
        self.kinds[test] = "bw" if any(r.options.get("rw", r.options.get(
            "readwrite", "read")) in SEQUENTIAL for r in results) else "iops"
        if steady(self.values[test]):
            self.reached[test] = len(self.values[test])
            return self.reached[test]
        return None

    def record(self) -> dict[str, RoundsEntry]:
        """Per test, every round's figure, where steady state was reached, and the
        window (the repeats whose results are the test's figures)."""
        out: dict[str, RoundsEntry] = {}
        for test, values in self.values.items():
            out[test] = {"values": values, "results": self.names.get(test, []),
                         "kind": self.kinds.get(test, "iops"),
                         "reached_round": self.reached.get(test),
                         "window": self.repeats[test][-WINDOW:],
                         "criterion": f"last {WINDOW} rounds: range <= {MAX_RANGE:.0%} of the"
                                      f" mean, fitted slope across them <= {MAX_SLOPE:.0%}"}
        return out

    def warnings(self) -> list[Warning]:
        return [Warning("not-steady", test,
                        f"{test}: steady state (SNIA: the last {WINDOW} rounds within"
                        f" {MAX_RANGE:.0%}, their slope within {MAX_SLOPE:.0%}) was not reached"
                        f" in {len(values)} rounds; the figures are the last {WINDOW} rounds'"
                        " and may still be moving. Give it more --max-rounds or a longer"
                        " --round.",
                        {"rounds": len(values), "criterion": "snia"})
                for test, values in self.values.items() if test not in self.reached]


@dataclass
class RoundsKind(Plain):
    """``run --precondition``: the device written whole, then each test in rounds until
    steady state (SNIA PTS); the figures are those of each test's window."""

    kind: ClassVar[str] = "rounds"
    section: ClassVar[RecordSection] = ROUNDS
    fixed_schedule: ClassVar[bool] = True
    max_rounds: int
    round_s: float
    cap_bytes: int | None
    rounds: Rounds = field(init=False)

    def __post_init__(self) -> None:
        self.rounds = Rounds(self.max_rounds, self.cap_bytes)

    @classmethod
    def from_spec(cls, spec: RunSpec) -> RoundsKind | None:
        if not spec.precondition:
            return None
        return cls(spec.max_rounds, spec.round_s, parse_size(spec.precondition_size or ""))

    def check(self) -> None:
        pass  # RunSpec.check judged --round, --max-rounds and --precondition-size

    def check_target(self, target: Target) -> None:
        """A target that cannot be written whole is refused before anything is made."""
        if not isinstance(target, Preconditionable):
            raise ConfigError(f"--precondition applies to block devices, not a {target.kind}")
        target.check_precondition()

    def plan(self, plan: Plan) -> Plan:
        """Each test time based for a round, no ramp (the rounds before steady state are
        the ramp), as many rounds as it may take."""
        tests = [replace(t, jobfile=t.jobfile.as_round(self.round_s), expected_s=self.round_s)
                 for t in plan.tests]
        return replace(plan, tests=tests, repeat=self.max_rounds)

    def measure(self, ctx: RunContext) -> None:
        self._precondition(ctx)
        steps = ctx.planned.steps
        for n, step in enumerate(steps):
            ctx.guard.check()
            name = step.test.name
            if self.rounds.done(name):
                continue  # steady: no more rounds of this test
            results = ctx.run_step(step, {f for s in steps[n:]
                                          for f in s.test.jobfile.named_files()})
            reached = self.rounds.add(name, step.repeat, results)
            if reached is not None:
                ctx.note(f"{name}: steady state reached in round {reached} (the last"
                         f" {WINDOW} rounds within {MAX_RANGE:.0%}, slope within"
                         f" {MAX_SLOPE:.0%}): its figures are those rounds'")

    def record(self) -> dict[str, RoundsEntry] | None:
        return self.rounds.record() or None

    def own_assertion(self, assertion: Assertion) -> bool:
        return assertion.test == "rounds"  # rounds.TEST.reached (analysis/views/rounds.py)

    def warnings(self, run: Run) -> list[Warning]:
        return self.rounds.warnings()  # judged on the window's rounds only

    def _precondition(self, ctx: RunContext) -> None:
        """Write the target whole before the rounds. fio's output is kept with the run
        as an invocation of its own, with no test."""
        target = ctx.target
        if not isinstance(target, Preconditionable):
            raise ConfigError(f"--precondition applies to block devices, not a {target.kind}")
        jobs = target.precondition_job(self.rounds.cap_bytes)
        total = parse_size(next(line.split("=", 1)[1] for line in jobs[0].text.splitlines()
                                if line.startswith("io_size="))) or 0
        ctx.note(f"Preconditioning: writing {format_bytes_iec(total)} sequentially in"
                 " 128 KiB blocks (SNIA PTS); then each test in rounds until steady state")
        with ctx.phase("precondition"):
            execution = ctx.executor.run(jobs, None, total / PRECONDITION_BYTES_PER_S + 60)
        ctx.keep_invocation(len(ctx.planned.steps), jobs, execution)
        if execution.returncode != 0 or execution.timed_out or execution.lost:
            raise FioError(f"preconditioning failed: {execution.stderr.strip()[-300:]}"
                           if execution.stderr.strip() else "preconditioning failed",
                           returncode=execution.returncode, stderr=execution.stderr)
