"""A suite (or a job file) on a fixed schedule: each test once, or ``--repeat N`` times
interleaved, or each until fio's steady-state criterion holds (``--until-steady``).
The plain kind of run, and the worked example of one (docs/design.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from storbench.analysis import caps, warnings
from storbench.pipeline.measure import Plain, RunContext
from storbench.pipeline.spec import DEFAULT_STEADY_MAX_S, RunSpec
from storbench.result.record import Run, Warning
from storbench.workload.plan import Plan


@dataclass
class Suite(Plain):
    kind: ClassVar[str] = "suite"
    fixed_schedule: ClassVar[bool] = True
    repeat: int = 1
    until_steady: str | None = None  # fio's criterion, e.g. "iops_slope:0.5%"
    steady_window_s: float = 5.0
    runtime: float | None = None  # with until_steady: the most each test may run

    @classmethod
    def from_spec(cls, spec: RunSpec) -> Suite | None:  # None never: it answers every spec
        return cls(spec.repeat, spec.until_steady, spec.steady_window_s, spec.runtime)

    def check(self) -> None:
        pass  # RunSpec.check judged --repeat and --until-steady

    def plan(self, plan: Plan) -> Plan:
        tests = plan.tests
        if self.until_steady is not None:
            limit = self.runtime or DEFAULT_STEADY_MAX_S
            tests = [replace(t, jobfile=t.jobfile.with_steady_state(
                self.until_steady, self.steady_window_s, limit), expected_s=None)
                for t in tests]
        return replace(plan, tests=tests, repeat=self.repeat)

    def measure(self, ctx: RunContext) -> None:
        steps = ctx.planned.steps
        for n, step in enumerate(steps):
            ctx.guard.check()
            ctx.run_step(step, {f for s in steps[n:]
                                for f in s.test.jobfile.named_files()})

    def warnings(self, run: Run) -> list[Warning]:
        tests = run.results_by_test()
        return [*(w for name, results in tests.items()
                  for w in warnings.across_repeats(name, results)),
                *caps.iops_cap(tests)]
