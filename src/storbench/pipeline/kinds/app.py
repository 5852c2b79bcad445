"""An application profile (`run --suite postgresql`, mysql, redis, etcd, kafka,
prometheus) or a training one (unet3d, resnet50, cosmoflow): its suite on the fixed
schedule of a suite, then its judge (analysis/apps.py, analysis/training.py) turns the
figures into the application's units; the answer is the run's ``app`` section
(result/sections.APP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from storbench.analysis import apps, training
from storbench.analysis.assertions import Assertion
from storbench.pipeline.kinds.suite import Suite
from storbench.pipeline.measure import RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.model import TestResult
from storbench.result.sections import APP, AppSection

# each profile's judge: the applications' and the training models'
JUDGES = {**apps.JUDGES, **training.JUDGES}
ANSWERS = {**apps.ANSWERS, **training.ANSWERS}  # what each answers: (name, label, unit)


@dataclass
class AppKind(Suite):
    kind: ClassVar[str] = "app"
    section: ClassVar[RecordSection] = APP
    profile: str = ""
    results: dict[str, list[TestResult]] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: RunSpec) -> AppKind | None:
        if spec.kind_spec is not None or spec.job_file is not None or spec.suite not in JUDGES:
            return None
        return cls(spec.repeat, spec.until_steady, spec.steady_window_s, spec.runtime,
                   profile=spec.suite)

    def own_assertion(self, assertion: Assertion) -> bool:
        # its estimates (postgresql.tps) are named once measured; etcd.* may also be a
        # figure of its test etcd: judged as the one or the other then (assertions.check)
        return assertion.test == self.profile

    def measure(self, ctx: RunContext) -> None:
        steps = ctx.planned.steps
        for n, step in enumerate(steps):
            ctx.guard.check()
            for r in ctx.run_step(step, {f for s in steps[n:]
                                         for f in s.test.jobfile.named_files()}):
                self.results.setdefault(r.name, []).append(r)

    def record(self) -> AppSection | None:
        found = JUDGES[self.profile](self.results)
        return found.to_dict() if found is not None else None
