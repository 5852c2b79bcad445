"""A kind of run is one class, one section and one line in each registry: this file adds
one ("best of N": the test run N times, the best repeat kept as its section) with no
change to the loop, and runs it through the real loop, store and `show` printer. Also:
each built-in kind is chosen by what the spec asks, and a kind that fails after it
measured keeps its section with the failed run."""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, TypedDict

import pytest
from rich.console import Console

from storbench.execute.base import Executor
from storbench.execute.replay import ReplayExecutor
from storbench.pipeline import kinds
from storbench.pipeline.kinds.curve import CurveKind, CurveSpec
from storbench.pipeline.kinds.failover import FailoverKind, FailoverSpec
from storbench.pipeline.kinds.lifecycle import LifecycleKind, LifecycleSpec
from storbench.pipeline.kinds.rounds import RoundsKind
from storbench.pipeline.kinds.suite import Suite
from storbench.pipeline.loop import run_on
from storbench.pipeline.measure import Plain, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.render import sections as shown
from storbench.render.terminal import print_run
from storbench.result import sections
from storbench.result.record import Run
from storbench.result.sections import Section
from storbench.workload.plan import Plan
from tests.pipeline.test_loop import RANDREAD, StepTarget, job_spec


# --- the new kind: its spec, its section, its class --------------------------------------
@dataclass(frozen=True)
class BestOfSpec:
    times: int


class BestOf(TypedDict):
    iops: list[float]
    best_repeat: int


BEST_OF = Section[BestOf]("best_of", "best of N")


@dataclass
class BestOfKind(Plain):
    kind: ClassVar[str] = "best-of"
    fixed_schedule: ClassVar[bool] = True
    spec: BestOfSpec
    iops: list[float] | None = None

    @classmethod
    def from_spec(cls, spec: RunSpec) -> BestOfKind | None:
        return cls(spec.kind_spec) if isinstance(spec.kind_spec, BestOfSpec) else None

    def check(self) -> None:
        pass

    def plan(self, plan: Plan) -> Plan:
        return replace(plan, tests=plan.tests[:1], repeat=self.spec.times)

    def settings(self) -> dict[str, Any]:
        return {"best_of": self.spec.times}

    def measure(self, ctx: RunContext, executor: Executor) -> None:
        self.iops = []
        for step in ctx.planned.steps:
            results = ctx.run_step(executor, step, set())
            self.iops.append(sum(d.iops for r in results for _, d in r.directions()))

    def record(self) -> dict[str, Any]:
        if not self.iops:
            return {}
        return BEST_OF.put({"iops": self.iops, "best_repeat": self.iops.index(max(self.iops))})



def print_best_of(console: Console, run: Run, best: BestOf) -> None:
    console.print(f"best of {len(best['iops'])}: repeat {best['best_repeat'] + 1}")


@pytest.fixture
def registered(monkeypatch):
    """The one line in each registry a new kind adds."""
    monkeypatch.setitem(kinds.KINDS, BestOfKind.kind, BestOfKind.from_spec)
    monkeypatch.setattr(sections, "KINDS", (*sections.KINDS, BEST_OF))
    monkeypatch.setitem(shown.SHOW, BEST_OF.key, print_best_of)
    # the plain suite answers every spec: it stays last
    suite = kinds.KINDS.pop(Suite.kind)
    kinds.KINDS[Suite.kind] = suite


def test_a_new_kind_runs_through_the_loop_with_no_change_to_it(registered, tmp_path, store):
    spec = replace(job_spec(tmp_path), kind_spec=BestOfSpec(3))
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD, RANDREAD, RANDREAD]))
    outcome = run_on(target, spec, store)
    assert outcome.error is None and outcome.run.status == "completed"
    stored = store.get_run(outcome.run.id)
    best = BEST_OF.of(stored)
    assert best is not None and len(best["iops"]) == 3 and best["best_repeat"] == 0
    assert stored.settings["best_of"] == 3
    assert target.calls[-1] == "cleanup"
    console = Console(file=io.StringIO(), width=120)
    print_run(console, stored)
    assert "best of 3: repeat 1" in console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("extra, kind", [
    ({}, Suite), ({"repeat": 3}, Suite), ({"until_steady": "iops_slope:0.5%"}, Suite),
    ({"precondition": True}, RoundsKind),
    ({"kind_spec": CurveSpec()}, CurveKind),
    ({"kind_spec": LifecycleSpec(2, 1, "1Gi", 60)}, LifecycleKind),
    ({"kind_spec": FailoverSpec(100, 5, False, "1Gi", 60)}, FailoverKind),
])
def test_each_built_in_kind_is_chosen_by_what_the_spec_asks(extra, kind):
    assert type(kinds.choose(RunSpec(**extra))) is kind


def test_a_kind_that_fails_after_measuring_keeps_its_section(registered, tmp_path, store):
    class Fails(BestOfKind):
        def failed(self) -> str | None:
            return "the best was not good enough"

    spec = replace(job_spec(tmp_path), kind_spec=BestOfSpec(2))
    kinds.KINDS[BestOfKind.kind] = lambda s: Fails(s.kind_spec) if isinstance(
        s.kind_spec, BestOfSpec) else None
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD, RANDREAD]))
    outcome = run_on(target, spec, store)
    assert outcome.run.status == "failed" and outcome.run.error == "the best was not good enough"
    assert BEST_OF.of(store.get_run(outcome.run.id)) is not None
    assert target.calls[-1] == "cleanup"


def test_a_section_is_none_on_a_run_without_it(tmp_path, store):
    outcome = run_on(StepTarget(tmp_path, ReplayExecutor([RANDREAD])), job_spec(tmp_path),
                     store)
    assert all(s.of(outcome.run) is None for s in sections.KINDS)


def test_kinds_registry_names_each_kind_once():
    assert list(kinds.KINDS) == ["curve", "lifecycle", "failover", "replay", "rounds", "app",
                                 "suite"]
    assert Path(kinds.__file__).parent.joinpath("suite.py").is_file()
