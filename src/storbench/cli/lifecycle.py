"""`storbench k8s lifecycle`: how long a StorageClass's volumes take to appear, attach,
take a first write and go away."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from storbench.cli.common import (
    NUMBER,
    assert_options,
    db_option,
    err,
    json_option,
    out,
    parse_tags,
    print_json,
)
from storbench.cli.k8s import k8s
from storbench.errors import ConfigError, Interrupted, StorbenchError, ThresholdExceeded
from storbench.store import Store
from storbench.target.kubernetes.manifests import DEFAULT_IMAGE, IMAGE_ENV, quantity

F = TypeVar("F", bound=Callable[..., Any])


def _cluster_options(f: F) -> F:
    """What lifecycle and failover share: the volume, the cluster, the run's names."""
    opts = [
        click.option("--capacity", default="1Gi", show_default=True, metavar="QUANTITY",
                     help="Each PVC's size."),
        click.option("--namespace", "-n", metavar="NS",
                     help="Namespace (default: the context's, else default)."),
        click.option("--context", "kube_context", metavar="CTX",
                     help="kubeconfig context (default: the current one)."),
        click.option("--kubeconfig", metavar="FILE", envvar="KUBECONFIG",
                     help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)."),
        click.option("--image", envvar=IMAGE_ENV, show_envvar=True, default=DEFAULT_IMAGE,
                     show_default=True, help="Runner image: fio and a POSIX sh."),
        click.option("--timeout", "timeout_s", type=NUMBER, default=300.0, show_default=True,
                     metavar="SECONDS", help="Per pod: the time to bind its volume and run."),
        click.option("--label", "-l", help="Name of the runs in tables."),
        click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
                     help="Attach a tag (repeatable)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return db_option(json_option(assert_options(f)))


def _options(name: str, capacity: str, namespace: str | None, kube_context: str | None,
             kubeconfig: str | None, image: str, timeout_s: float) -> Any:
    from storbench.cli.k8s import build_options

    params: dict[str, Any] = {
        "namespace": namespace, "kube_context": kube_context, "kubeconfig": kubeconfig,
        "capacity": capacity, "access_mode": "RWO", "volume_mode": "Filesystem",
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


@k8s.command()
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
              timeout_s: float, label: str | None, tags: tuple[str, ...],
              assertions: tuple[str, ...], baseline: str | None, max_regression: str,
              as_json: bool) -> None:
    """Time a StorageClass's volume lifecycle: provision, attach and mount, first write,
    delete.

    For each class, N volumes (a PVC and a pod that mounts it, as a StatefulSet makes
    them), P at a time; per phase the p50, p90 and maximum over the volumes:
    PVC created -> Bound (WaitForFirstConsumer: from the scheduler's choice of node),
    pod created -> Running, the first durable 4 KiB write (fio: write + fsync), and PVC
    deleted -> PersistentVolume gone. Stored as a run (suite k8s-lifecycle);
    --assert gates on it, e.g. 'lifecycle.bind.p90 < 30s'. Everything created is
    deleted at the end, on errors and on Ctrl-C. Resize and snapshot times are not
    measured yet: the table says so.

    \b
    Example:
      storbench k8s lifecycle --storage-class gp3 --storage-class io2 --volumes 10
      storbench k8s lifecycle --storage-class fast --assert "lifecycle.bind.p90 < 30s"
    """
    from storbench import __version__
    from storbench.pipeline.lifecycle import LifecycleSpec, run_class
    from storbench.render.json import run_dict
    from storbench.render.terminal import print_run

    _check_assertions(assertions, baseline, "lifecycle", "lifecycle.bind.p90 < 30s")
    spec = LifecycleSpec(volumes, parallel or volumes, quantity(capacity, "--capacity"),
                         timeout_s, label, parse_tags(tags), assertions)
    runs, errors = [], []
    for name in storage_classes:
        o = _options(name, spec.capacity, namespace, kube_context, kubeconfig, image,
                     timeout_s)
        try:
            run = run_class(store, o, spec, __version__,
                            lambda text: err.print(f"  {text}", markup=False))
        except Interrupted:
            raise
        except StorbenchError as exc:
            if len(storage_classes) == 1:
                raise
            err.print(f"storbench: {name}: {exc}", markup=False)
            errors.append(exc)
            continue
        runs.append(run)
        if not as_json:
            print_run(out, run)
    if as_json and runs:
        print_json([run_dict(r) for r in runs] if len(storage_classes) > 1
                   else run_dict(runs[0]))
    failed_runs = [r for r in runs if r.status != "completed"]
    if errors or failed_runs:
        raise StorbenchError(errors[0] if errors else
                             f"run #{failed_runs[0].id}: {failed_runs[0].error}")
    failed = [text for r in runs for text in r.failed_checks]
    if failed:
        raise ThresholdExceeded(f"{len(failed)} check(s) failed: {'; '.join(failed)}")


@k8s.command()
@click.option("--storage-class", "storage_class", required=True, metavar="CLASS",
              help="The class whose volume fails over.")
@click.option("--rate", type=click.IntRange(1, 100_000), default=100, show_default=True,
              metavar="WRITES/S", help="Synchronous 4 KiB writes per second before the pause.")
@click.option("--before", "before_s", type=click.FloatRange(1, 3600), default=10.0,
              show_default=True, metavar="SECONDS", help="Writing before the pod is deleted.")
@click.option("--evict", is_flag=True,
              help="End the pod through the Eviction API, as a node drain does (a"
                   " PodDisruptionBudget may refuse it), instead of deleting it.")
@_cluster_options
def failover(store: Store, storage_class: str, rate: int, before_s: float, evict: bool,
             capacity: str,
             namespace: str | None, kube_context: str | None, kubeconfig: str | None,
             image: str, timeout_s: float, label: str | None, tags: tuple[str, ...],
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
    from storbench import __version__
    from storbench.pipeline.lifecycle import LifecycleSpec, run_failover
    from storbench.render.json import run_dict
    from storbench.render.terminal import print_run

    _check_assertions(assertions, baseline, "failover", "failover.pause < 60s")
    spec = LifecycleSpec(1, 1, quantity(capacity, "--capacity"), timeout_s, label,
                         parse_tags(tags), assertions)
    o = _options(storage_class, spec.capacity, namespace, kube_context, kubeconfig, image,
                 timeout_s)
    run = run_failover(store, o, spec, rate, before_s, __version__,
                       lambda text: err.print(f"  {text}", markup=False), evict)
    if as_json:
        print_json(run_dict(run))
    else:
        print_run(out, run)
    if run.status != "completed":
        raise StorbenchError(f"run #{run.id}: {run.error}")
    failed = run.failed_checks
    if failed:
        raise ThresholdExceeded(f"{len(failed)} check(s) failed: {'; '.join(failed)}")
