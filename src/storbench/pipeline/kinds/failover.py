"""`storbench k8s failover`: the I/O pause when a pod with a volume ends and another takes
the volume over, and whether every write acknowledged before it reads back intact;
its section (result/sections.FAILOVER) holds the pause and its parts."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, cast

from storbench.analysis.assertions import Assertion
from storbench.pipeline.kinds.lifecycle import check_class
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.sections import FAILOVER, FailoverSection
from storbench.target.base import Subject
from storbench.workload.plan import Plan

if TYPE_CHECKING:  # the Kubernetes client is imported by runs on a class only
    from storbench.target.kubernetes.failover import Failover

SUITE = "k8s-failover"


@dataclass(frozen=True)
class FailoverSpec:
    rate: int  # synchronous 4 KiB writes per second before the pause
    before_s: float  # writing before the pod is ended
    evict: bool  # through the Eviction API (as a node drain), not a plain delete
    capacity: str
    timeout_s: float


@dataclass
class FailoverKind(Plain):
    kind: ClassVar[str] = "failover"
    section: ClassVar[RecordSection] = FAILOVER
    fixed_schedule: ClassVar[bool] = True
    drives_fio: ClassVar[bool] = False  # its pods, on the class itself
    spec: FailoverSpec
    found: dict[str, Any] | None = None
    failover: Failover | None = None

    @classmethod
    def from_spec(cls, spec: RunSpec) -> FailoverKind | None:
        return cls(spec.kind_spec) if isinstance(spec.kind_spec, FailoverSpec) else None

    def check(self) -> None:
        pass

    def own_assertion(self, assertion: Assertion) -> bool:
        return assertion.test == self.kind  # the command checked its names

    def check_subject(self, subject: Subject) -> None:
        check_class(subject, "k8s failover")

    def plan(self, plan: Plan) -> Plan:
        return replace(plan, suite_name=SUITE, tests=[], repeat=1)

    def settings(self) -> dict[str, Any]:
        return {"rate_iops": self.spec.rate, "before_s": self.spec.before_s,
                "evict": self.spec.evict, "timeout_s": self.spec.timeout_s}

    def measure(self, ctx: RunContext) -> None:
        from storbench.target.kubernetes.failover import Failover

        target = check_class(ctx.subject, "k8s failover")
        ctx.note(f"StorageClass {target.o.storage_class} ({target.sc.provisioner}): a PVC of"
                 f" {self.spec.capacity} in namespace {target.namespace}, two pods one after"
                 " the other")
        self.failover = Failover(target.cluster(), target.o, ctx.planned.uid,
                                 target.namespace, self.spec.capacity, self.spec.timeout_s,
                                 ctx.guard, ctx.note, self.spec.evict)
        with ctx.phase("failover (write, pod ended, new pod, read back)"):
            self.found = self.failover.measure(self.spec.rate, self.spec.before_s)

    def record(self) -> FailoverSection | None:
        return cast(FailoverSection, self.found) if self.found else None

    def cleanup(self, hurry: bool) -> None:
        if self.failover is not None:
            self.failover.cleanup()

    def failed(self) -> str | None:
        if self.found and not self.found["intact"]:
            return (f"acknowledged writes did not read back intact:"
                    f" {self.found['verify_message']}")
        return None
