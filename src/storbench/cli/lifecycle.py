"""`storbench k8s lifecycle`: how long a StorageClass's volumes take to appear, attach,
take a first write and go away."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from storbench.cli.common import (
    NUMBER,
    FiniteRange,
    assert_options,
    db_option,
    err,
    json_option,
    naming_options,
    only_with,
    parse_tags,
)
from storbench.cli.kubeflags import ACCESS_MODE, CONNECTION, IMAGE, NAMESPACE, build_options
from storbench.errors import ConfigError
from storbench.store import Store
from storbench.target.kubernetes.manifests import quantity

if TYPE_CHECKING:
    from storbench.pipeline.spec import RunSpec

F = TypeVar("F", bound=Callable[..., Any])


def _cluster_options(f: F) -> F:
    """What lifecycle and failover share: the volume, the cluster, the run's names."""
    opts = [
        click.option("--capacity", default="1Gi", show_default=True, metavar="QUANTITY",
                     help="Each PVC's size."),
        NAMESPACE, *CONNECTION, IMAGE,
        click.option("--timeout", "timeout_s", type=NUMBER, default=300.0, show_default=True,
                     metavar="SECONDS", help="Per pod: the time to bind its volume and run."),
        naming_options,
    ]
    for opt in reversed(opts):
        f = opt(f)
    return db_option(json_option(assert_options(f)))


def _options(name: str, capacity: str, namespace: str | None, kube_context: str | None,
             kubeconfig: str | None, image: str, timeout_s: float,
             access_mode: str = "RWO") -> Any:
    params: dict[str, Any] = {
        "namespace": namespace, "kube_context": kube_context, "kubeconfig": kubeconfig,
        "capacity": capacity, "access_mode": access_mode, "volume_mode": "Filesystem",
        "node_selector": (), "image": image, "clients": 1, "requests": (), "limits": ()}
    return build_options(name, params, timeout_s)


def _check_assertions(assertions: tuple[str, ...], baseline: str | None, kind: str,
                      example: str) -> None:
    from storbench.analysis.assertions import Assertion

    if baseline is not None:
        raise ConfigError(f"--baseline: {kind} runs have no headline figures to compare;"
                          f" use --assert '{example}'")
    for text in assertions:
        if Assertion.parse(text).test != kind:
            raise ConfigError(f"--assert {text!r}: a {kind} run's figures are {kind}.…,"
                              f" e.g. '{example}'")


@click.command()
@click.option("--storage-class", "storage_classes", multiple=True, required=True,
              metavar="CLASS", help="The class to time (repeat to compare classes).")
@click.option("--volumes", type=click.IntRange(1, 500), default=5, show_default=True,
              metavar="N", help="Volumes (a PVC and a pod each) per class.")
@click.option("--parallel", type=click.IntRange(1, 100), default=None, metavar="P",
              help="Volumes created at once (default: all of them).")
@_cluster_options
def lifecycle(store: Store, storage_classes: tuple[str, ...], volumes: int,
              parallel: int | None, capacity: str, namespace: str | None,
              kube_context: str | None, kubeconfig: str | None, image: str,
              timeout_s: float, label: str | None, tags: tuple[str, ...], series: str | None,
              assertions: tuple[str, ...], baseline: str | None, max_regression: str,
              as_json: bool) -> None:
    """Time a StorageClass's volume lifecycle: provision, attach and mount, first write,
    snapshot, restore, clone, pod move, expansion, delete.

    For each class, N volumes (a PVC and a pod that mounts it, as a StatefulSet makes
    them), P at a time; per phase the p50, p90 and maximum over the volumes:
    PVC created -> Bound (WaitForFirstConsumer: from the scheduler's choice of node),
    pod created -> Running, the first durable 4 KiB write (fio: write + fsync), the pod
    moved (deleted, a new one on the claim -> Running), and PVC deleted ->
    PersistentVolume gone. Where the class's driver can: VolumeSnapshot -> readyToUse;
    a PVC from it -> Bound, -> first 4 KiB read in a pod, and the restored data's first
    read (MiB/s: lazily loaded restores show there); a clone -> Bound; an online
    expansion to twice the size -> the claim's capacity. 16 MiB of random data is
    checked (md5) on every copy. What the driver cannot do is said, with why (no
    CSIDriver, no VolumeSnapshotClass for it, allowVolumeExpansion false).

    Stored as a run (suite k8s-lifecycle); --assert gates on it, e.g.
    'lifecycle.bind.p90 < 30s', 'lifecycle.snapshot.p90 < 60s'. Everything created
    (snapshots too) is deleted at the end, on errors and on Ctrl-C.

    \b
    Example:
      storbench k8s lifecycle --storage-class gp3 --storage-class io2 --volumes 10
      storbench k8s lifecycle --storage-class fast --assert "lifecycle.bind.p90 < 30s"
    """
    from storbench.pipeline.kinds.lifecycle import LifecycleSpec
    from storbench.pipeline.spec import RunSpec

    _check_assertions(assertions, baseline, "lifecycle", "lifecycle.bind.p90 < 30s")
    only_with(("max_regression", "--max-regression", False, "`run --baseline`"))
    size = quantity(capacity, "--capacity")
    spec = RunSpec(label=label, tags=parse_tags(tags), series=series, assertions=assertions,
                   kind_spec=LifecycleSpec(volumes, parallel or volumes, size, timeout_s))
    _measure_classes(store, spec, storage_classes, as_json, size, namespace, kube_context,
                     kubeconfig, image, timeout_s)


def _measure_classes(store: Store, spec: RunSpec, classes: tuple[str, ...], as_json: bool,
                     capacity: str, namespace: str | None, kube_context: str | None,
                     kubeconfig: str | None, image: str, timeout_s: float,
                     access_mode: str = "RWO") -> None:
    """Each class through the run loop in turn, as `run` does with several classes
    (cli/measuring.measure_and_report): a class that fails does not stop the others,
    Ctrl-C does; exit 1 if one did not complete, 3 if a check failed."""
    from storbench.cli.measuring import measure_and_report
    from storbench.pipeline.reporter import NullReporter
    from storbench.target.kubernetes.classsubject import ClassSubject
    from storbench.workload.plan import Plan

    class Notes(NullReporter):
        """What the loop says of a lifecycle or failover run: its number, its notes."""

        def run_started(self, run_id: int, plan: Plan, scratch: Path) -> None:
            err.print(f"Run #{run_id}: {plan.suite_name}", markup=False)

        def note(self, text: str) -> None:
            err.print(f"  {text}", markup=False)

    targets = [
        ClassSubject(_options(name, capacity, namespace, kube_context, kubeconfig, image,
                             timeout_s, access_mode), capacity) for name in classes]
    measure_and_report(targets, spec, store, as_json=as_json,
                       reporter_for=lambda target: Notes())


@click.command()
@click.option("--storage-class", "storage_class", required=True, metavar="CLASS",
              help="The class whose volume fails over.")
@click.option("--rate", type=click.IntRange(1, 100_000), default=100, show_default=True,
              metavar="WRITES/S", help="Synchronous 4 KiB writes per second before the pause.")
@click.option("--before", "before_s", type=FiniteRange(1, 3600), default=10.0,
              show_default=True, metavar="SECONDS", help="Writing before the pod is deleted.")
@click.option("--evict", is_flag=True,
              help="End the pod through the Eviction API, as a node drain does (a"
                   " PodDisruptionBudget may refuse it), instead of deleting it.")
@ACCESS_MODE
@_cluster_options
def failover(store: Store, storage_class: str, rate: int, before_s: float, evict: bool,
             access_mode: str, capacity: str,
             namespace: str | None, kube_context: str | None, kubeconfig: str | None,
             image: str, timeout_s: float, label: str | None, tags: tuple[str, ...],
             series: str | None,
             assertions: tuple[str, ...], baseline: str | None, max_regression: str,
             as_json: bool) -> None:
    """Measure the I/O pause when a pod with a volume dies and another takes it over.

    fio writes --rate synchronous 4 KiB writes per second (each acknowledged means
    durable, each with a checksum) in a pod; the pod is deleted (or, with --evict,
    evicted) with a 1 s grace period; once it is gone a new pod mounts the same PVC and
    writes. Reported: the pause (the last write acknowledged before -> the first after),
    its parts (old pod gone, new pod running, first write), and whether every write
    acknowledged before the pause reads back intact. Stored as a run (suite
    k8s-failover); --assert gates on it, e.g. 'failover.pause < 60s'. Everything is
    deleted at the end, on errors and on Ctrl-C.

    \b
    Example:
      storbench k8s failover --storage-class gp3 --rate 200
      storbench k8s failover --storage-class fast --assert "failover.pause < 60s"
    """
    from storbench.pipeline.kinds.failover import FailoverSpec
    from storbench.pipeline.spec import RunSpec

    _check_assertions(assertions, baseline, "failover", "failover.pause < 60s")
    only_with(("max_regression", "--max-regression", False, "`run --baseline`"))
    size = quantity(capacity, "--capacity")
    spec = RunSpec(label=label, tags=parse_tags(tags), series=series, assertions=assertions,
                   kind_spec=FailoverSpec(rate, before_s, evict, size, timeout_s))
    _measure_classes(store, spec, (storage_class,), as_json, size, namespace, kube_context,
                     kubeconfig, image, timeout_s, access_mode)
