"""Every Kubernetes option, declared once: the cluster (`--kubeconfig`, `--context`), the
namespace and the runner image, shared by `run`, `curve`, `k8s classes|cleanup|lifecycle|
failover`; the options that shape a class's PVC and pods (`run`, `curve`); and the
KubeOptions they make."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from storbench.errors import ConfigError
from storbench.target.kubernetes.manifests import (
    DEFAULT_IMAGE,
    IMAGE_ENV,
    KubeOptions,
    access_mode,
    parse_pairs,
    parse_tolerations,
    volume_mode,
)

if TYPE_CHECKING:
    from storbench.target.base import Target

F = TypeVar("F", bound=Callable[..., Any])

CONNECTION = (
    click.option("--context", "kube_context", metavar="CTX",
                 help="kubeconfig context (default: the current one)."),
    click.option("--kubeconfig", metavar="FILE", envvar="KUBECONFIG",
                 help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)."),
)
NAMESPACE = click.option("--namespace", "-n", metavar="NS",
                         help="Namespace for the PVCs and pods (default: the context's, else"
                              " default).")
ACCESS_MODE = click.option(
    "--access-mode", default="RWO", show_default=True, metavar="RWO|RWX|RWOP",
    help="The PVC's access mode. RWOP (ReadWriteOncePod): Kubernetes itself keeps a second"
         " pod off the volume until the first is gone.")
IMAGE = click.option("--image", envvar=IMAGE_ENV, show_envvar=True, default=DEFAULT_IMAGE,
                     show_default=True, help="Runner image: fio and a POSIX sh (Dockerfile"
                                             " in the repository).")


def apply(f: F, options: Sequence[Callable[[Any], Any]]) -> F:
    for opt in reversed(options):
        f = opt(f)
    return f


def connection_options(f: F) -> F:
    """--kubeconfig and --context."""
    return apply(f, CONNECTION)


def kube_options(f: F) -> F:
    """The options of `run` that choose and shape a Kubernetes target."""
    opts = [
        click.option("--storage-class", "storage_classes", multiple=True, metavar="CLASS",
                     help="Benchmark a PVC of this StorageClass in a pod instead of a"
                          " directory (repeat to compare classes; see `storbench k8s"
                          " classes`)."),
        NAMESPACE,
        *CONNECTION,
        click.option("--capacity", metavar="QUANTITY",
                     help="PVC size, e.g. 100Gi (default: what the suite writes + 25%, at"
                          " least 1Gi). Cloud volumes often scale speed with size."),
        ACCESS_MODE,
        click.option("--volume-mode", default="Filesystem", show_default=True,
                     metavar="Filesystem|Block",
                     help="The PVC's volume mode. Block: fio on the raw volume (the pod"
                          " gets it as a device, runs as root with every capability"
                          " dropped; a volume holding a file system or partition table is"
                          " refused for writing)."),
        click.option("--node-selector", multiple=True, metavar="KEY=VALUE",
                     help="Run the pod on nodes with this label (repeatable)."),
        click.option("--toleration", "tolerations", multiple=True,
                     metavar="KEY[=VALUE][:EFFECT]",
                     help="Let the pod run on nodes with this taint, e.g."
                          " dedicated=storage:NoSchedule (repeatable)."),
        click.option("--service-account", metavar="NAME",
                     help="The pod's service account, for the policies your namespace binds"
                          " to one (its API token is still not mounted)."),
        click.option("--image-pull-secret", "image_pull_secrets", multiple=True,
                     metavar="NAME", help="A Secret with the registry's credentials for"
                                          " --image (repeatable)."),
        IMAGE,
        click.option("--requests", multiple=True, metavar="RES=QTY,...",
                     help="Pod resource requests (default cpu=250m,memory=256Mi)."),
        click.option("--limits", multiple=True, metavar="RES=QTY,...",
                     help="Pod resource limits (default memory=1Gi; no CPU limit, as"
                          " throttling distorts latency)."),
        click.option("--clients", type=int, default=1, show_default=True, metavar="N",
                     help="Run each test in N pods at once (spread over the nodes): on one"
                          " volume with --access-mode RWX, else each on its own; per-pod"
                          " rows and one merged result."),
        click.option("--pods", is_flag=True,
                     help="s3:// TARGETs: run fio in pods of the cluster (no volume; the"
                          " secret key reaches them as a Secret of the run's), with the"
                          " options above that shape pods. The runner image's fio needs the"
                          " http engine."),
        click.option("--host-network", is_flag=True,
                     help="Run the pods on their node's network (hostNetwork), for an"
                          " endpoint only the nodes reach (one on a node's loopback)."
                          " Namespaces that enforce the baseline or restricted Pod Security"
                          " level refuse it."),
        click.option("--dry-run", is_flag=True,
                     help="With --storage-class: print the manifests as YAML and stop;"
                          " the cluster is not contacted."),
    ]
    return apply(f, opts)


def build_options(storage_class: str, params: dict[str, Any],
                  timeout_s: float | None = None) -> KubeOptions:
    o = KubeOptions(
        storage_class=storage_class, namespace=params["namespace"],
        context=params["kube_context"], kubeconfig=params["kubeconfig"],
        capacity=params["capacity"], access_mode=access_mode(params["access_mode"]),
        volume_mode=volume_mode(params["volume_mode"]),
        node_selector=parse_pairs(params["node_selector"], "--node-selector"),
        tolerations=parse_tolerations(params.get("tolerations", ())),
        service_account=params.get("service_account"),
        image_pull_secrets=tuple(params.get("image_pull_secrets", ())),
        image=params["image"], timeout_s=timeout_s, clients=params["clients"],
        host_network=bool(params.get("host_network")),
        **_resources(params["requests"], params["limits"]),
    )
    o.check()
    return o


def _resources(requests: tuple[str, ...], limits: tuple[str, ...]) -> dict[str, Any]:
    """--requests/--limits over the defaults; a limit given alone also drops the default
    request of that resource (Kubernetes then requests the limit)."""
    given: dict[str, Any] = {}
    if limits:
        given["limits"] = parse_pairs(limits, "--limits")
    if requests:
        given["requests"] = parse_pairs(requests, "--requests")
    elif limits:
        limited = {k for k, _ in given["limits"]}
        given["requests"] = tuple((k, v) for k, v in KubeOptions.requests if k not in limited)
    return given




VOLUME_FLAGS = ("--capacity", "--access-mode", "--volume-mode", "--shared-file")


def pods_target(made: tuple[Target, ...], elsewhere: bool, dry_run: bool,
                params: dict[str, Any], typed: tuple[str, ...],
                timeout_s: float | None) -> Target:
    """An s3:// TARGET (``made``) measured from pods (--pods): one storage outside the
    cluster; nothing given ``elsewhere`` (a path, --hosts); ``typed``: the flags given."""
    from storbench.target.kubernetes.storageclass import KubeTarget
    from storbench.target.storage import Outside

    storage = getattr(made[0], "storage", None) if len(made) == 1 else None
    if not isinstance(storage, Outside):
        raise ConfigError("with --pods, give one TARGET: the s3://BUCKET the pods reach")
    if elsewhere:
        raise ConfigError("with --pods, fio runs in the pods: give no path TARGET or --hosts")
    if dry_run:
        raise ConfigError("--dry-run applies to --storage-class runs")
    if volume := [flag for flag in typed if flag in VOLUME_FLAGS]:
        raise ConfigError(f"{', '.join(volume)}: with --pods there is no volume (the objects"
                          " are outside the cluster)")
    if storage.loopback and not params.get("host_network"):
        raise ConfigError(f"{storage.loopback} is a loopback address: in a pod it is the"
                          " pod's own, not this endpoint. Give --endpoint an address the"
                          " pods reach, or --host-network where the endpoint listens on the"
                          " node's loopback")
    return KubeTarget(build_options("", params, timeout_s), storage)
