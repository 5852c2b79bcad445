"""A StorageClass itself as a target (`k8s lifecycle`, `k8s failover`): no fio of the
loop's own, nothing to prepare; the kind of run creates its volumes and pods and
removes them (pipeline/kinds/lifecycle.py, failover.py). The target says what the
class is (its facts) and gives the kind its cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError
from storbench.execute import Executor, FioBinary, FioJob, SignalGuard
from storbench.execute.base import Execution, Progress
from storbench.execute.kubernetes import Kube
from storbench.target.base import Deadline, Quiet
from storbench.target.kubernetes.facts import class_facts
from storbench.target.kubernetes.manifests import KubeOptions
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest


class ClassTarget(Quiet):
    """A StorageClass of a cluster, for kinds of run that make their own volumes (and
    remove them: `storbench k8s cleanup` finds a killed run's objects by their labels)."""

    kind = "kubernetes"
    worker_noun = "pod"
    needs_local_fio = False
    series_logs = False

    def __init__(self, options: KubeOptions, capacity: str) -> None:
        self.o = options
        self.capacity = capacity
        self.kube: Kube | None = None
        self.sc: Any = None

    @property
    def name(self) -> str:
        return f"storageclass/{self.o.storage_class}"

    @property
    def short_name(self) -> str:
        return self.o.storage_class

    @property
    def namespace(self) -> str:
        return self.o.namespace or self.cluster().namespace

    def cluster(self) -> Kube:
        """The cluster, reached (its class read) on first use."""
        if self.kube is None:
            self.kube = Kube(self.o.kubeconfig, self.o.context)
            self.sc = self.kube.storage_class(self.o.storage_class)
        return self.kube

    def settings(self) -> dict[str, Any]:
        return {"kubernetes": self.o.describe()}

    def preflight(self) -> None:
        self.cluster()

    def scratch_path(self, uid: str) -> Path:
        return Path("/")  # no fio of the loop's: the kind's pods have their own paths

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.cluster()

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        raise ConfigError(f"{self.name}: this kind of run has no fio tests of its own")

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        return class_facts(self.cluster(), self.sc, self.o, self.namespace, self.capacity)

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        return _NoFio(self.name)

    def deadline(self, test: PlannedTest) -> Deadline | None:
        return None


class _NoFio:
    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        raise ConfigError(f"{self.name}: no fio runs here outside the kind's own pods")
