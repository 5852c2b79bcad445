"""What a Kubernetes run creates, planned before the cluster is touched: the volume's
size, the time budget, the manifests (a ConfigMap of job files, a Secret of what fio's
environment must hold, the PVCs, the pods)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError
from storbench.execute.base import FioJob
from storbench.target.base import MARGIN_S, default_deadline
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    KubeOptions,
    capacity_for,
    claim_names,
    configmap_manifest,
    pod_manifest,
    pod_names,
    pvc_manifest,
    quantity_bytes,
    secret_manifest,
)
from storbench.target.storage import Outside, Storage
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec

START_S = 300.0  # bind the volume, schedule, pull the image, start the pods
TEST_GRACE_S = 60.0  # beyond a test's runtime (laying out files, fio's start and end)


def test_s(t: PlannedTest) -> float:
    """How long a test may take: its runtime and ramp; a size-bound one (etcd's 22 MiB),
    its bytes at 256 KiB/s and its layout, as on any target (an hour only when its
    options say neither runtime nor size)."""
    if t.expected_s:
        return t.expected_s
    return default_deadline(t).seconds - MARGIN_S


@dataclass(frozen=True)
class KubePlan:
    """What one class's run will create, computed before touching the cluster."""

    uid: str
    namespace: str
    plan: Plan
    pods: list[tuple[str, str]]  # (pod, the PVC it mounts)
    jobs: dict[str, str]  # ConfigMap key -> job text, per scheduled invocation and pod
    capacity: str
    budget_s: float  # the whole run, start included
    manifests: list[dict[str, Any]]

    @property
    def scratch(self) -> Path:
        return Path(DATA_DIR) / f"storbench-{self.uid}"


def plan_layout(o: KubeOptions, storage: Storage, uid: str, plan: Plan,
                invocations: list[list[FioJob]], namespace: str) -> KubePlan:
    """The volume size, time budget and manifests of a run."""
    jobs = {job.key: job.text for jobs in invocations for job in jobs}
    size = capacity(o, storage, plan)
    budget = o.timeout_s or START_S + storage.precondition_s(quantity_bytes(size) or 0) + sum(
        test_s(t) + TEST_GRACE_S for _, _, t in plan.schedule())
    claims = claim_names(uid, o) if o.volume else [""] * o.clients
    pods = list(zip(pod_names(uid, o.clients), claims, strict=True))
    deadline = int(budget + TEST_GRACE_S)
    manifests = [configmap_manifest(uid, namespace, o, jobs)]
    env = storage.environment() if isinstance(storage, Outside) else {}
    if env:  # fio's environment in the pods, owned by the ConfigMap (KubeTarget.prepare)
        manifests.append(secret_manifest(uid, namespace, o, env))
    manifests += [pvc_manifest(uid, namespace, o, size, claim)
                  for claim in dict.fromkeys(c for _, c in pods if c)]
    manifests += [pod_manifest(uid, namespace, o, deadline, pod, claim or None, tuple(env))
                  for pod, claim in pods]
    return KubePlan(uid, namespace, plan, pods, jobs, size, budget, manifests)


def capacity(o: KubeOptions, storage: Storage, plan: Plan) -> str:
    """The PVC's size: --capacity, else what the suite writes + 25 % (a storage whose
    tests cover the volume: --capacity as given); "" without a volume (--pods)."""
    if not o.volume:
        return ""
    if o.capacity and storage.covers():
        return o.capacity
    sharing = o.clients if o.clients > 1 and o.shared_volume else 1  # pods on one volume
    needed, name, files = storage.needed(plan, sharing)  # files: copies on it
    size = o.capacity or capacity_for(needed)
    have = quantity_bytes(size)
    if have is not None and needed > have:
        raise ConfigError(f"--capacity {size} is smaller than the"
                          f" {format_bytes_iec(needed)} test {name!r} writes"
                          f"{f' (in its {files} pods)' if files > 1 else ''}; give more, or"
                          " a smaller --size")
    return size
