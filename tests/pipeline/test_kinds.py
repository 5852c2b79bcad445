"""A kind of run is one class, one section and one line in each registry: this file adds
one ("best of N": the test run N times, the best repeat kept as its section) with no
change to the loop, and runs it through the real loop, store and `show` printer. Also:
each built-in kind is chosen by what the spec asks, and a kind that fails after it
measured keeps its section with the failed run."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, TypedDict

import pytest
from rich.console import Console

from storbench.analysis import charts, views
from storbench.analysis.assertions import Assertion, check
from storbench.analysis.blocks import Block, Table, Text, Units
from storbench.analysis.compare import compare
from storbench.analysis.views import Answer
from storbench.analysis.views.base import View
from storbench.errors import ConfigError
from storbench.execute.replay import ReplayExecutor
from storbench.pipeline import kinds
from storbench.pipeline.kinds.curve import CurveKind, CurveSpec
from storbench.pipeline.kinds.failover import FailoverKind, FailoverSpec
from storbench.pipeline.kinds.lifecycle import LifecycleKind, LifecycleSpec
from storbench.pipeline.kinds.rounds import RoundsKind
from storbench.pipeline.kinds.suite import Suite
from storbench.pipeline.loop import run_all, run_on
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.reporter import NullReporter
from storbench.pipeline.spec import RunSpec
from storbench.render import report
from storbench.render.formats import FORMATS
from storbench.render.terminal import print_comparison, print_run
from storbench.result.environment import Environment
from storbench.result.record import Run
from storbench.result.sections import Section
from storbench.target.base import Target
from storbench.workload.plan import Plan
from tests.pipeline.test_loop import RANDREAD, StepTarget, job_spec


# --- the new kind: its spec, its section, its measurement, its view ------------------
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
    section: ClassVar[RecordSection] = BEST_OF
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

    def measure(self, ctx: RunContext) -> None:
        self.iops = []
        for step in ctx.planned.steps:
            results = ctx.run_step(step, set())
            self.iops.append(sum(d.iops for r in results for _, d in r.directions()))

    def record(self) -> BestOf | None:
        if not self.iops:
            return None
        return {"iops": self.iops, "best_repeat": self.iops.index(max(self.iops))}


class BestOfView(View):
    section = BEST_OF
    title = "Best of N"
    json_key = "best_of"

    def answers(self, value: BestOf) -> dict[str, Answer]:
        return {"best.iops": Answer(max(value["iops"]), "iops", "the best repeat's")}

    def shown(self, run: Run, value: BestOf, u: Units) -> list[Block]:
        return [Text(f"best of {len(value['iops'])}: repeat {value['best_repeat'] + 1}")]

    def compared(self, found: list[tuple[Run, BestOf]], u: Units) -> Table:
        return Table(["run", "best of", "best IOPS"],
                     [[f"#{r.id}", str(len(v["iops"])), u.IOPS.fmt(max(v["iops"]))]
                      for r, v in found], [False, True, True])


@pytest.fixture
def registered(monkeypatch):
    """The new kind's line in each registry: what it runs (pipeline/kinds) and what is
    said of what it recorded (analysis/views)."""
    monkeypatch.setitem(kinds.KINDS, BestOfKind.kind, BestOfKind.from_spec)
    monkeypatch.setitem(views.VIEWS, BEST_OF.key, BestOfView())
    # the plain suite answers every spec: it stays last
    suite = kinds.KINDS.pop(Suite.kind)
    kinds.KINDS[Suite.kind] = suite


def best_of_run(tmp_path, store, times=3):
    spec = replace(job_spec(tmp_path), kind_spec=BestOfSpec(times),
                   assertions=("best_of.best.iops >= 1",))
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD] * times))
    outcome = run_on(target, spec, store)
    assert target.calls[-1] == "cleanup"
    return outcome


def test_a_new_kind_runs_through_the_loop_with_no_change_to_it(registered, tmp_path, store):
    outcome = best_of_run(tmp_path, store)
    assert outcome.error is None and outcome.run.status == "completed"
    stored = store.get_run(outcome.run.id)
    best = BEST_OF.of(stored)
    assert best is not None and len(best["iops"]) == 3 and best["best_repeat"] == 0
    assert stored.settings["best_of"] == 3
    # its answer was judged at the end of the run, as the user's --assert asked
    (verdict,) = stored.judged
    assert verdict.passed and verdict.metric == "best_of.best.iops"
    assert verdict.measured == max(best["iops"])


def printed(draw, *args) -> str:
    console = Console(file=io.StringIO(), width=160)
    draw(console, *args)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_new_kind_is_shown_compared_reported_exported_and_checked(registered, tmp_path,
                                                                   store):
    """Its view, registered once, is found by show, compare (table and JSON), the report,
    the Markdown export and the assertions; no other file names it."""
    first = store.get_run(best_of_run(tmp_path, store).run.id)
    second = store.get_run(best_of_run(tmp_path, store, times=2).run.id)
    shown = printed(print_run, first)
    assert "best of 3: repeat 1" in shown
    assert "for --assert and check: best_of.best.iops" in shown
    comp = compare([first, second], None)
    table = printed(print_comparison, comp)
    assert "Best of N" in table and "best IOPS" in table
    doc = json.loads(FORMATS["json"](comp))
    assert [b["id"] for b in doc["best_of"]] == [first.id, second.id]
    assert doc["best_of"][0]["checkable"]["best_of.best.iops"]["kind"] == "iops"
    html = report.render(comp, charts.build(comp))
    assert "<h3>Best of N</h3>" in html and "best of 2: repeat 1" in html
    assert "**Best of N**" in FORMATS["md"](comp)
    judged = check(first, Assertion.parse("best_of.best.iops >= 1000000000"))
    assert not judged.passed and judged.measured == max(BEST_OF.of(first)["iops"])
    with pytest.raises(ConfigError, match=r"best_of has no 'worst\.iops'; it has: best\.iops"):
        check(first, Assertion.parse("best_of.worst.iops >= 1"))
    with pytest.raises(ConfigError, match="is a rate in IOPS"):
        check(first, Assertion.parse("best_of.best.iops >= 1ms"))


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
    assert all(v.section.of(outcome.run) is None for v in views.VIEWS.values())


def test_kinds_registry_names_each_kind_once():
    assert list(kinds.KINDS) == ["curve", "neighbours", "lifecycle", "failover", "replay",
                                 "rounds", "app", "suite"]
    assert Path(kinds.__file__).parent.joinpath("suite.py").is_file()


# --- a kind that drives its own engine measures a Subject, not a fio Target ----------
class Counted(TypedDict):
    counted: int


COUNTED = Section[Counted]("counted", "counted")


class Thing:
    """A Subject that is no fio target (as a StorageClass is to k8s lifecycle): a name,
    checks, facts, cleanup; no scratch path, job files or executor."""

    kind = "thing"
    name = "thing/one"
    short_name = "one"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def settings(self) -> dict[str, Any]:
        return {"thing": "one"}

    def preflight(self) -> None:
        self.calls.append("preflight")

    def check(self, plan: Plan, fio: Any, workdir: Path) -> None:
        self.calls.append("check")

    def leftovers(self) -> list[Any]:
        return []

    def remove_leftover(self, leftover: Any) -> None:
        pass

    def describe(self, fio: Any) -> Environment:
        self.calls.append("describe")
        return {"target": {"kind": self.kind, "things": 3}}

    def cleanup(self, hurry: bool = False) -> None:
        self.calls.append("cleanup")


@dataclass
class CountKind(Plain):
    kind: ClassVar[str] = "count"
    fixed_schedule: ClassVar[bool] = True
    drives_fio: ClassVar[bool] = False
    section: ClassVar[RecordSection] = COUNTED
    spec: BestOfSpec
    counted: int = 0

    @classmethod
    def from_spec(cls, spec: RunSpec) -> CountKind | None:
        return cls(spec.kind_spec) if isinstance(spec.kind_spec, BestOfSpec) else None

    def check(self) -> None:
        pass

    def check_subject(self, subject: Any) -> None:
        if not isinstance(subject, Thing):
            raise ConfigError(f"count measures a thing, not a {subject.kind}")

    def plan(self, plan: Plan) -> Plan:
        return replace(plan, suite_name="count", tests=[], repeat=1)

    def measure(self, ctx: RunContext) -> None:
        assert isinstance(ctx.subject, Thing)
        with ctx.phase("counting"):
            self.counted = self.spec.times
        with pytest.raises(AssertionError, match="no fio runs there"):
            ctx.target  # noqa: B018 (a kind of its own engine has no fio target)

    def record(self) -> Counted | None:
        return {"counted": self.counted} if self.counted else None


@pytest.fixture
def counting(monkeypatch):
    monkeypatch.setitem(kinds.KINDS, CountKind.kind, CountKind.from_spec)
    suite = kinds.KINDS.pop(Suite.kind)
    kinds.KINDS[Suite.kind] = suite


def test_a_kind_of_its_own_engine_measures_a_subject_that_is_no_target(counting, tmp_path,
                                                                       store):
    thing = Thing()
    outcome = run_on(thing, RunSpec(kind_spec=BestOfSpec(4)), store)
    assert outcome.error is None and outcome.run.status == "completed"
    # no prepare, executor, before_test: the loop asks a subject only what every run has
    assert thing.calls == ["check", "describe", "cleanup"]
    stored = store.get_run(outcome.run.id)
    assert COUNTED.of(stored) == {"counted": 4}
    assert stored.target == "thing/one" and stored.environment["target"]["things"] == 3
    assert stored.settings["thing"] == "one"
    assert not isinstance(thing, Target)


def test_a_fio_kind_refuses_a_subject_that_is_no_target_before_anything(tmp_path, store):
    thing = Thing()
    with pytest.raises(ConfigError, match="thing/one is measured by its own kinds of run"):
        run_on(thing, job_spec(tmp_path), store)
    assert thing.calls == [] and store.list_runs() == []


def test_a_kind_of_its_own_engine_refuses_a_fio_target_before_anything(counting, tmp_path,
                                                                       store):
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    with pytest.raises(ConfigError, match="count measures a thing, not a stand-in"):
        run_all([target], RunSpec(kind_spec=BestOfSpec(2)), store, lambda t: NullReporter())
    assert target.calls == [] and store.list_runs() == []


@pytest.mark.parametrize("spec", [LifecycleSpec(2, 1, "1Gi", 60),
                                  FailoverSpec(100, 5, False, "1Gi", 60)])
def test_lifecycle_and_failover_measure_a_storage_class_only(spec, tmp_path, store):
    from storbench.target.kubernetes.classsubject import ClassSubject
    from storbench.target.kubernetes.manifests import KubeOptions

    # the class is what they measure: a subject, not dressed as a fio target
    assert not isinstance(ClassSubject(KubeOptions("fast"), "1Gi"), Target)
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    with pytest.raises(ConfigError, match="measures a StorageClass, not a stand-in"):
        run_on(target, RunSpec(kind_spec=spec), store)
    assert target.calls == [] and store.list_runs() == []


def test_a_fio_kind_s_own_check_of_its_target_comes_before_anything(registered, tmp_path,
                                                                    store):
    """A kind that cannot run on a target (a replay on one that takes no iolog) refuses it
    through check_target before the target is checked or anything is stored."""
    class Picky(BestOfKind):
        def check_target(self, target: Target) -> None:
            raise ConfigError(f"best-of does not run on a {target.kind}")

    kinds.KINDS[BestOfKind.kind] = lambda s: Picky(s.kind_spec) if isinstance(
        s.kind_spec, BestOfSpec) else None
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    with pytest.raises(ConfigError, match="best-of does not run on a stand-in"):
        run_on(target, replace(job_spec(tmp_path), kind_spec=BestOfSpec(2)), store)
    assert target.calls == [] and store.list_runs() == []
