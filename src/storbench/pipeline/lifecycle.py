"""`storbench k8s lifecycle` and `k8s failover`, class after class: each a run stored like any other
(suite ``k8s-lifecycle``, the class's facts as its environment, the volumes' phases
and their percentiles as its data), judged by its assertions, its objects deleted
whatever happens."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from storbench.analysis import lifecycle
from storbench.analysis.verdicts import evaluate
from storbench.errors import Interrupted, StorbenchError
from storbench.execute.kubernetes import Kube
from storbench.execute.signals import SignalGuard
from storbench.result.record import Run
from storbench.store import Store
from storbench.target.kubernetes.facts import class_facts
from storbench.target.kubernetes.failover import Failover
from storbench.target.kubernetes.lifecycle import Lifecycle
from storbench.target.kubernetes.manifests import KubeOptions

SUITE = "k8s-lifecycle"
FAILOVER = "k8s-failover"


@dataclass(frozen=True)
class LifecycleSpec:
    volumes: int
    parallel: int
    capacity: str
    timeout_s: float
    label: str | None
    tags: dict[str, str]
    assertions: tuple[str, ...]


def run_class(store: Store, o: KubeOptions, spec: LifecycleSpec, storbench_version: str,
              note: Callable[[str], None]) -> Run:
    """Measure one class; the stored run (failed, with its error, if a volume failed
    or the run was interrupted: Interrupted is raised after the run is stored)."""
    kube = Kube(o.kubeconfig, o.context)
    sc = kube.storage_class(o.storage_class)
    namespace = o.namespace or kube.namespace
    uid = secrets.token_hex(6)
    settings = {"kubernetes": o.describe(), "volumes": spec.volumes,
                "parallel": spec.parallel, "timeout_s": spec.timeout_s,
                "assertions": list(spec.assertions)}
    environment = class_facts(kube, sc, o, namespace, spec.capacity)
    run_id = store.begin_run(uid=uid, suite=SUITE, target=f"storageclass/{o.storage_class}",
                             environment=environment, settings=settings,
                             storbench_version=storbench_version, fio_version=None,
                             label=spec.label, tags=spec.tags)
    note(f"StorageClass {o.storage_class} ({sc.provisioner}, {sc.volume_binding_mode}):"
         f" {spec.volumes} volumes of {spec.capacity}, {spec.parallel} at a time, namespace"
         f" {namespace}")
    life = Lifecycle(kube, o, uid, namespace, spec.capacity, spec.timeout_s, SignalGuard(),
                     note, wait_for_consumer=sc.volume_binding_mode == "WaitForFirstConsumer")
    volumes: list[dict[str, Any]] = []
    error: StorbenchError | None = None
    with life.guard:
        try:
            volumes = life.measure(spec.volumes, spec.parallel)
        except StorbenchError as exc:
            error = exc
        finally:
            left = life.cleanup()
    data = {"lifecycle": {"volumes": volumes, "summary": lifecycle.summary(volumes),
                          "binding_mode": sc.volume_binding_mode,
                          "not_measured": not_measured(sc)}}
    failed = [f"{v['volume']}: {v['error']}" for v in volumes if v.get("error")]
    if left:
        failed.append("cleaning up: " + "; ".join(left)
                      + f". Run `storbench k8s cleanup --namespace {namespace}`")
    if error is not None:
        store.finish_run(run_id, "interrupted" if isinstance(error, Interrupted) else "failed",
                         str(error), data=data)
        raise error
    if failed:
        store.finish_run(run_id, "failed", "; ".join(failed), data=data)
        return store.get_run(run_id)
    judged = evaluate(replace(store.get_run(run_id), data=data), unresolvable="fail")
    store.finish_run(run_id, "completed", data=data, verdicts=judged)
    return store.get_run(run_id)


def not_measured(sc: Any) -> dict[str, str]:
    """What this version does not time, and why (said in the table, never a blank)."""
    resize = ("not measured by this version of storbench" if sc.allow_volume_expansion else
              f"not supported by {sc.metadata.name} (allowVolumeExpansion is false)")
    return {"resize": resize,
            "snapshot": "not measured by this version of storbench (needs a"
                        " VolumeSnapshotClass for the class's CSI driver)"}


def run_failover(store: Store, o: KubeOptions, spec: LifecycleSpec, rate: int,
                 before_s: float, storbench_version: str, note: Callable[[str], None],
                 evict: bool = False) -> Run:
    """One failover on one class, stored as a run (suite k8s-failover)."""
    kube = Kube(o.kubeconfig, o.context)
    sc = kube.storage_class(o.storage_class)
    namespace = o.namespace or kube.namespace
    uid = secrets.token_hex(6)
    settings = {"kubernetes": o.describe(), "rate_iops": rate, "before_s": before_s,
                "evict": evict,
                "timeout_s": spec.timeout_s, "assertions": list(spec.assertions)}
    run_id = store.begin_run(
        uid=uid, suite=FAILOVER, target=f"storageclass/{o.storage_class}",
        environment=class_facts(kube, sc, o, namespace, spec.capacity), settings=settings,
        storbench_version=storbench_version, fio_version=None, label=spec.label,
        tags=spec.tags)
    note(f"StorageClass {o.storage_class} ({sc.provisioner}): a PVC of {spec.capacity} in"
         f" namespace {namespace}, two pods one after the other")
    fo = Failover(kube, o, uid, namespace, spec.capacity, spec.timeout_s, SignalGuard(), note,
                  evict)
    found: dict[str, Any] = {}
    error: StorbenchError | None = None
    with fo.guard:
        try:
            found = fo.measure(rate, before_s)
        except StorbenchError as exc:
            error = exc
        finally:
            left = fo.cleanup()
    data = {"failover": found} if found else {}
    if error is None and left:
        error = StorbenchError("cleaning up: " + "; ".join(left))
    if error is None and found and not found["intact"]:
        error = StorbenchError(f"acknowledged writes did not read back intact:"
                               f" {found['verify_message']}")
    if error is not None:
        store.finish_run(run_id, "interrupted" if isinstance(error, Interrupted) else "failed",
                         str(error), data=data)
        if isinstance(error, Interrupted) or not found:
            raise error
        return store.get_run(run_id)
    judged = evaluate(replace(store.get_run(run_id), data=data), unresolvable="fail")
    store.finish_run(run_id, "completed", data=data, verdicts=judged)
    return store.get_run(run_id)
