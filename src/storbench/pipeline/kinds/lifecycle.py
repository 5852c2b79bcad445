"""`storbench k8s lifecycle`: how long a class's volumes take to be provisioned, attached,
written first and deleted. N volumes (a PVC and a pod each), P at a time; its section
holds every volume's phases and their percentiles (result/sections.LIFECYCLE)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from storbench.analysis import lifecycle
from storbench.analysis.assertions import Assertion
from storbench.errors import ConfigError
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.sections import LIFECYCLE, LifecycleSection
from storbench.target.base import Subject
from storbench.workload.plan import Plan

if TYPE_CHECKING:  # the Kubernetes client takes ~0.3 s to import: only runs on a class do
    from storbench.target.kubernetes.classsubject import ClassSubject
    from storbench.target.kubernetes.lifecycle import Abilities, Lifecycle

SUITE = "k8s-lifecycle"


@dataclass(frozen=True)
class LifecycleSpec:
    volumes: int
    parallel: int
    capacity: str
    timeout_s: float


def check_class(subject: Subject, what: str) -> ClassSubject:
    """``subject`` as the StorageClass ``what`` measures; ConfigError for another."""
    from storbench.target.kubernetes.classsubject import ClassSubject

    if not isinstance(subject, ClassSubject):
        raise ConfigError(f"{what} measures a StorageClass, not a {subject.kind}")
    return subject


@dataclass
class LifecycleKind(Plain):
    kind: ClassVar[str] = "lifecycle"
    section: ClassVar[RecordSection] = LIFECYCLE
    fixed_schedule: ClassVar[bool] = True
    drives_fio: ClassVar[bool] = False  # its volumes and pods, on the class itself
    spec: LifecycleSpec
    volumes: list[dict[str, Any]] = field(default_factory=list)
    binding_mode: str = ""
    not_measured: dict[str, str] = field(default_factory=dict)
    life: Lifecycle | None = None

    @classmethod
    def from_spec(cls, spec: RunSpec) -> LifecycleKind | None:
        return cls(spec.kind_spec) if isinstance(spec.kind_spec, LifecycleSpec) else None

    def check(self) -> None:
        pass  # the command line judged --volumes and --parallel

    def own_assertion(self, assertion: Assertion) -> bool:
        return assertion.test == self.kind  # the command checked its names

    def check_subject(self, subject: Subject) -> None:
        check_class(subject, "k8s lifecycle")

    def plan(self, plan: Plan) -> Plan:
        return replace(plan, suite_name=SUITE, tests=[], repeat=1)

    def settings(self) -> dict[str, Any]:
        return {"volumes": self.spec.volumes, "parallel": self.spec.parallel,
                "timeout_s": self.spec.timeout_s}

    def measure(self, ctx: RunContext) -> None:
        from storbench.target.kubernetes.lifecycle import Abilities, Lifecycle

        target = check_class(ctx.subject, "k8s lifecycle")
        sc = target.sc
        self.binding_mode = sc.volume_binding_mode
        kube = target.cluster()
        is_csi = kube.csi_driver(sc.provisioner) is not None
        snapshot_classes = [c["metadata"]["name"] for c in kube.snapshot_classes()
                            if c.get("driver") == sc.provisioner]
        can = Abilities(snapshot_class=snapshot_classes[0] if snapshot_classes else None,
                        clone=is_csi, expand=bool(sc.allow_volume_expansion))
        self.not_measured = not_measured(sc, can, is_csi)
        ctx.note(f"StorageClass {target.o.storage_class} ({sc.provisioner},"
                 f" {sc.volume_binding_mode}): {self.spec.volumes} volumes of"
                 f" {self.spec.capacity}, {self.spec.parallel} at a time, namespace"
                 f" {target.namespace}")
        self.life = Lifecycle(kube, target.o, ctx.planned.uid, target.namespace,
                              self.spec.capacity, self.spec.timeout_s, ctx.guard, ctx.note,
                              wait_for_consumer=sc.volume_binding_mode == "WaitForFirstConsumer",
                              can=can)
        with ctx.phase(f"volumes ({self.spec.volumes}, {self.spec.parallel} at a time)"):
            self.volumes = self.life.measure(self.spec.volumes, self.spec.parallel)
        for copy, said in self.life.refused.items():  # known only once asked for
            self.not_measured[copy] = f"not supported by {sc.provisioner} (its provisioner: {said})"

    def record(self) -> LifecycleSection | None:
        if self.life is None:
            return None
        return {"volumes": self.volumes, "summary": lifecycle.summary(self.volumes),
                "binding_mode": self.binding_mode, "not_measured": self.not_measured,
                "first_write_sync": lifecycle.FIRST_WRITE_SYNC}

    def cleanup(self, hurry: bool) -> None:
        if self.life is None:
            return
        self.life.cleanup()

    def failed(self) -> str | None:
        failed = [f"{v['volume']}: {v['error']}" for v in self.volumes if v.get("error")]
        return "; ".join(failed) or None


def not_measured(sc: Any, can: Abilities, is_csi: bool) -> dict[str, str]:
    """What the class's driver cannot do, and why (said in the table, never a blank or
    a zero): from the cluster's CSIDriver and VolumeSnapshotClass objects and the class's
    allowVolumeExpansion."""
    driver = sc.provisioner
    missing: dict[str, str] = {}
    if not can.snapshot_class:
        why = ("not a CSI driver: no CSIDriver object" if not is_csi else
               "no VolumeSnapshotClass names it")
        missing["snapshot"] = missing["restore"] = f"not supported by {driver} ({why})"
    if not can.clone:
        missing["clone"] = f"not supported by {driver} (not a CSI driver: no CSIDriver object)"
    if not can.expand:
        missing["resize"] = (f"not supported by {sc.metadata.name} (allowVolumeExpansion is"
                             " false)")
    return missing
