"""A StorageClass itself as what a run measures (`k8s lifecycle`, `k8s failover`): a
Subject, not a fio target. The loop runs no fio of its own there and prepares nothing;
the kind of run creates its volumes and pods and removes them
(pipeline/kinds/lifecycle.py, failover.py). The subject says what the class is (its
facts) and gives the kind its cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storbench.execute import FioBinary
from storbench.execute.kubernetes import Kube
from storbench.execute.workdir import Leftover
from storbench.result.environment import Environment
from storbench.target.kubernetes.facts import class_facts
from storbench.target.kubernetes.manifests import KubeOptions
from storbench.workload.plan import Plan


class ClassSubject:
    """A StorageClass of a cluster, for kinds of run that make their own volumes (and
    remove them: `storbench k8s cleanup` finds a killed run's objects by their labels)."""

    kind = "kubernetes"

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

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.cluster()

    def leftovers(self) -> list[Leftover]:
        return []  # a killed run's volumes: `storbench k8s cleanup` (by their labels)

    def remove_leftover(self, leftover: Leftover) -> None:
        pass

    def describe(self, fio: FioBinary | None) -> Environment:
        return class_facts(self.cluster(), self.sc, self.o, self.namespace, self.capacity)

    def cleanup(self, hurry: bool = False) -> None:
        pass  # nothing of its own: the kind's volumes are the kind's to remove
