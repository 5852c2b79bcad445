"""Talk to a Kubernetes cluster through its API (the official Python client).

kubeconfig and context are read the way kubectl reads them ($KUBECONFIG, else
~/.kube/config; the current context unless one is named; in a pod without a
kubeconfig, the pod's service account). Every API error becomes a StorbenchError
that quotes the API server's own message: a 403 names the verb and the resource.
fio runs in a pod through the exec API (a websocket), never through kubectl.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.stream import stream

from storbench.errors import ConfigError, Interrupted
from storbench.execute import kubecleanup
from storbench.execute.kubelabels import RUN_LABEL, SELECTOR, is_default
from storbench.execute.kubesnapshots import (
    managed_snapshots,
    snapshot_classes,
    snapshot_contents,
    snapshots,
)
from storbench.execute.kubestatus import KubeError, api_message, exit_code, handshake_message

# deletion order: a snapshot before the claim it was taken of
KINDS = ("Pod", "ConfigMap", "VolumeSnapshot", "PersistentVolumeClaim")
DELETE_WAIT_S = 120.0  # for deleted pods, PVCs and their PVs to be gone


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    returncode: int  # LOST: the connection ended without an exit status
    wall_s: float
    timed_out: bool = False  # the stream was closed by us (deadline, or told to stop)


@dataclass(frozen=True)
class Managed:
    """An object storbench created (found by its label)."""

    kind: str
    namespace: str
    name: str
    run: str
    created: datetime


def kubeconfig_path(explicit: str | None = None) -> str:
    return explicit or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


class Kube:
    """A connection to one cluster: the API groups storbench uses, errors translated."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        path = kubeconfig_path(kubeconfig)
        self.namespace = "default"
        # the signal a run got (its SignalGuard's, once it has one): every exec ends on it
        self.interrupted: Callable[[], int | None] = lambda: None
        self.context = context or ""
        try:
            if not any(Path(p).expanduser().is_file() for p in path.split(":")) and (
                    "KUBERNETES_SERVICE_HOST" in os.environ and context is None):
                config.load_incluster_config()  # type: ignore[no-untyped-call]
                api = client.ApiClient()
                self.context = "in-cluster"
                ns_file = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                self.namespace = ns_file.read_text().strip() or "default"
            else:
                api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                    config_file=path, context=context)
                _, active = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                    config_file=path)
                if context is None:
                    self.context = active.get("name", "")
                else:
                    contexts, _ = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                        config_file=path)
                    active = next(c for c in contexts if c.get("name") == context)
                self.namespace = active.get("context", {}).get("namespace") or "default"
        except (ConfigException, OSError, StopIteration, KeyError, TypeError,
                AttributeError) as exc:
            where = f" (context {context!r})" if context else ""
            files = [Path(p).expanduser() for p in path.split(":") if p]
            why = ("it does not exist" if not any(f.exists() for f in files) else
                   "it is not a kubeconfig (a YAML mapping of clusters, users and contexts)"
                   if isinstance(exc, (TypeError, AttributeError)) else
                   str(exc).strip().rstrip(".") or "not found")
            raise ConfigError(f"cannot use the kubeconfig {path}{where}: {why}."
                              " Set KUBECONFIG or --kubeconfig, and --context") from None
        self.server = api.configuration.host
        self._configuration = api.configuration
        self.core = client.CoreV1Api(api)
        self.storage = client.StorageV1Api(api)
        self.authz = client.AuthorizationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.version_api = client.VersionApi(api)

    # -- errors ------------------------------------------------------------------------

    @contextmanager
    def call(self, what: str) -> Iterator[None]:
        """Run API calls; an ApiException or a connection failure becomes a KubeError."""
        try:
            yield
        except ApiException as exc:
            raise KubeError(f"{what}: {api_message(exc)}") from None
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            why = getattr(exc, "reason", None) or exc
            raise KubeError(f"{what}: cannot reach the API server {self.server}: {why}"
                            ) from None

    # -- reading ------------------------------------------------------------------------

    def server_version(self) -> str:
        with self.call("reading the server version"):
            return str(self.version_api.get_code().git_version)

    def storage_classes(self) -> list[Any]:
        with self.call("listing StorageClasses"):
            return list(self.storage.list_storage_class().items)

    def storage_class(self, name: str) -> Any:
        """The class, or ConfigError naming the classes that exist."""
        try:
            with self.call(f"reading StorageClass {name}"):
                return self.storage.read_storage_class(name)
        except KubeError as exc:
            if "not found" not in str(exc).lower():
                raise
        names = []
        try:
            names = [f"{c.metadata.name}{' (default)' if is_default(c) else ''}"
                     for c in self.storage_classes()]
        except KubeError:
            pass
        have = f"; the cluster has: {', '.join(names)}" if names else "; the cluster has none"
        raise ConfigError(f"StorageClass {name!r} does not exist{have}"
                          " (see `storbench k8s classes`)")

    def missing_permissions(self, namespace: str,
                            verbs: tuple[tuple[str, str, str], ...]) -> list[str]:
        """The verbs this user may not use in ``namespace``, as 'create pods/exec'."""
        missing = []
        for verb, group, resource in verbs:
            res, _, sub = resource.partition("/")
            review = client.V1SelfSubjectAccessReview(
                spec=client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=client.V1ResourceAttributes(
                        namespace=namespace, verb=verb, group=group, resource=res,
                        subresource=sub or None)))
            with self.call("asking the API server what this user may do"):
                answer = self.authz.create_self_subject_access_review(review)
            if answer.status is None or not answer.status.allowed:
                missing.append(f"{verb} {resource}")
        return missing

    def resize_claim(self, namespace: str, name: str, capacity: str) -> None:
        """Ask for a PVC of ``capacity`` (an expansion: the class must allow it)."""
        with self.call(f"resizing PersistentVolumeClaim {namespace}/{name} to {capacity}"):
            self.core.patch_namespaced_persistent_volume_claim(
                name, namespace, {"spec": {"resources": {"requests": {"storage": capacity}}}})

    def read(self, kind: str, name: str, namespace: str) -> Any | None:
        """The object (a VolumeSnapshot's a dict), or None when it does not exist (any more)."""
        readers: dict[str, Callable[..., Any]] = {
            "Pod": self.core.read_namespaced_pod,
            "PersistentVolumeClaim": self.core.read_namespaced_persistent_volume_claim,
            "ConfigMap": self.core.read_namespaced_config_map,
            "Secret": self.core.read_namespaced_secret,
            "VolumeSnapshot": snapshots(self.custom, "get"),
            "VolumeSnapshotContent": lambda name, _: snapshot_contents(self.custom, "get")(name),
            "PersistentVolume": lambda name, _: self.core.read_persistent_volume(name),
        }
        where = f"{namespace}/{name}" if namespace else name  # cluster-scoped: no namespace
        try:
            with self.call(f"reading {kind} {where}"):
                return readers[kind](name, namespace)
        except KubeError as exc:
            if "not found" in str(exc).lower():
                return None
            raise

    def read_or(self, kind: str, name: str, namespace: str, failed: Any) -> Any:
        """The object, None when it is gone, ``failed`` when the API cannot say."""
        try:
            return self.read(kind, name, namespace)
        except KubeError:
            return failed

    def read_pv(self, name: str) -> Any | None:
        return self.read("PersistentVolume", name, "")

    def volumes_of_claims(self, uids: set[str]) -> dict[str, str]:
        """PV name -> the uid of its claim, of those uids ({}: this user may not list PVs)."""
        pvs = self._or_none("listing PersistentVolumes", self.core.list_persistent_volume)
        return {pv.metadata.name: pv.spec.claim_ref.uid for pv in (pvs.items if pvs else [])
                if pv.spec.claim_ref is not None and pv.spec.claim_ref.uid in uids}

    def read_node(self, name: str) -> Any | None:
        """The node, or None when this user may not read nodes (namespaced users)."""
        return self._or_none(f"reading Node {name}", lambda: self.core.read_node(name))

    def _or_none(self, what: str, read: Callable[[], Any]) -> Any | None:
        """What ``read`` gives, or None whatever the API answers instead."""
        try:
            with self.call(what):
                return read()
        except KubeError:
            return None

    def events(self, namespace: str, kind: str, name: str) -> list[str]:
        """The object's events, oldest first, as 'Warning Reason: message (xN)'."""
        try:
            with self.call(f"listing events of {kind} {name}"):
                items = self.core.list_namespaced_event(
                    namespace, field_selector=f"involvedObject.kind={kind},"
                                              f"involvedObject.name={name}").items
        except KubeError:
            return []
        items.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp
                   or datetime.min)
        lines = []
        for e in items:
            count = f" (x{e.count})" if e.count and e.count > 1 else ""
            lines.append(f"{e.type} {e.reason}: {(e.message or '').strip()}{count}")
        return lines

    # -- writing ------------------------------------------------------------------------

    def create(self, manifest: dict[str, Any], *, dry_run: bool = False) -> Any:
        kind = manifest["kind"]
        ns = manifest["metadata"]["namespace"]
        creators: dict[str, Callable[..., Any]] = {
            "Pod": self.core.create_namespaced_pod,
            "PersistentVolumeClaim": self.core.create_namespaced_persistent_volume_claim,
            "ConfigMap": self.core.create_namespaced_config_map,
            "Secret": self.core.create_namespaced_secret,
            "VolumeSnapshot": snapshots(self.custom, "create"),
        }
        extra = {"dry_run": "All"} if dry_run else {}
        with self.call(f"creating {kind} {ns}/{manifest['metadata']['name']}"):
            return creators[kind](ns, manifest, **extra)

    def delete(self, kind: str, name: str, namespace: str, grace_s: int = 1,
               evict: bool = False) -> bool:
        """Delete (a pod with a 1 s grace period by default); False when it was already gone.

        With a grace period a pod's object stays until the kubelet has stopped its
        containers and unmounted its volumes, so its claim (kept by its protection
        finalizer) and volume go after that. With grace period 0 (a force deletion) the
        object goes at once while the containers may still run and the volume is still
        mounted: the claim and then the volume are deleted under it, and the kubelet
        retries the unmount for ever (seen with the CSI hostpath driver). ``evict``:
        a pod through the Eviction API, as a node drain does (a PodDisruptionBudget
        may refuse it: KubeError with the API server's words)."""
        deleters: dict[str, Callable[..., Any]] = {
            "Pod": self.core.delete_namespaced_pod,
            "PersistentVolumeClaim": self.core.delete_namespaced_persistent_volume_claim,
            "ConfigMap": self.core.delete_namespaced_config_map,
            "Secret": self.core.delete_namespaced_secret,
            "VolumeSnapshot": snapshots(self.custom, "delete"),
        }
        what = "evicting" if evict and kind == "Pod" else "deleting"
        try:
            with self.call(f"{what} {kind} {namespace}/{name}"):
                if what == "evicting":
                    self.core.create_namespaced_pod_eviction(name, namespace, client.V1Eviction(
                        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
                        delete_options=client.V1DeleteOptions(grace_period_seconds=grace_s)))
                else:
                    deleters[kind](name, namespace, grace_period_seconds=grace_s,
                                   propagation_policy="Background")
        except KubeError as exc:
            if "not found" in str(exc).lower():
                return False
            raise
        return True

    def delete_and_wait(self, objects: list[tuple[str, str, str]], wait_s: float,
                        grace_s: int = 1, evict: bool = False) -> tuple[list[str], list[str]]:
        """Delete (kind, namespace, name) objects in this order and wait until they, their
        PVs and snapshot contents are gone (`kubecleanup.delete_and_wait`); a signal ends it."""
        return kubecleanup.delete_and_wait(self, objects, wait_s, grace_s, evict,
                                           kubecleanup.heeding(self.interrupted))

    def annotate_snapshot(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        with self.call(f"annotating VolumeSnapshot {namespace}/{name}"):
            snapshots(self.custom, "patch")(name, namespace, body={"metadata": {
                "annotations": annotations}})

    def release_snapshot(self, namespace: str, name: str, finalizer: str) -> None:
        """Take ``finalizer`` off a VolumeSnapshot if it is its only one (tested first)."""
        with self.call(f"removing the finalizer {finalizer} of {namespace}/{name}"):
            snapshots(self.custom, "patch")(name, namespace, body=[
                {"op": "test", "path": "/metadata/finalizers", "value": [finalizer]},
                {"op": "remove", "path": "/metadata/finalizers"}],
                _content_type="application/json-patch+json")

    def annotate_content(self, name: str, annotations: dict[str, str]) -> None:
        with self.call(f"annotating VolumeSnapshotContent {name}"):
            snapshot_contents(self.custom, "patch")(name, {"metadata": {
                "annotations": annotations}})

    def managed(self, namespace: str | None) -> list[Managed]:
        """Every object storbench created, in one namespace or (None) in all."""
        if namespace is None:
            listers: list[tuple[str, Callable[..., Any]]] = [
                ("Pod", self.core.list_pod_for_all_namespaces),
                ("ConfigMap", self.core.list_config_map_for_all_namespaces),
                ("PersistentVolumeClaim",
                 self.core.list_persistent_volume_claim_for_all_namespaces)]
            args: tuple[str, ...] = ()
        else:
            listers = [("Pod", self.core.list_namespaced_pod),
                       ("ConfigMap", self.core.list_namespaced_config_map),
                       ("PersistentVolumeClaim",
                        self.core.list_namespaced_persistent_volume_claim)]
            args = (namespace,)
        found = []
        for kind, lister in listers:
            where = f"in namespace {namespace}" if namespace else "in all namespaces"
            with self.call(f"listing storbench's {kind}s {where}"):
                items = lister(*args, label_selector=SELECTOR).items
            for item in items:
                m = item.metadata
                found.append(Managed(kind, m.namespace, m.name,
                                     (m.labels or {}).get(RUN_LABEL, ""),
                                     m.creation_timestamp))
        with self.call("listing storbench's VolumeSnapshots"):
            return found + [Managed("VolumeSnapshot", *m)
                            for m in managed_snapshots(self.custom, namespace)]

    def csi_driver(self, name: str) -> Any | None:
        """The CSIDriver of that name; None: none (not CSI), or this user may not read it."""
        return self._or_none(f"reading CSIDriver {name}",
                             lambda: self.storage.read_csi_driver(name))

    def snapshot_classes(self) -> list[dict[str, Any]]:
        """The cluster's VolumeSnapshotClasses ([] without the snapshot API)."""
        try:
            with self.call("listing VolumeSnapshotClasses"):
                return snapshot_classes(self.custom)
        except KubeError:
            return []

    # -- exec ---------------------------------------------------------------------------

    def exec(self, namespace: str, pod: str, argv: list[str], *,
             on_stdout: Callable[[str], None] | None = None,
             deadline_s: float | None = None,
             should_stop: Callable[[], bool] = lambda: False) -> ExecResult:
        """Run ``argv`` in the pod's container and wait for it.

        ``on_stdout`` gets stdout as it arrives; at ``deadline_s`` (or when
        ``should_stop`` says so) the stream is closed and ``timed_out`` set: the
        process may go on in the pod until the pod is deleted. Interrupted once
        ``interrupted`` gives a signal (a node that does not answer keeps an exec's
        stream open and silent: a run waited for it, deaf to Ctrl-C).
        """
        start = time.monotonic()
        # stream() swaps its ApiClient's request method while it connects: an ApiClient
        # of its own per exec keeps concurrent execs (several pods) and other calls apart.
        core = client.CoreV1Api(client.ApiClient(self._configuration))
        with self.call(f"running {argv[0]} in pod {namespace}/{pod}"):
            try:
                ws = stream(core.connect_get_namespaced_pod_exec, pod, namespace,
                            command=argv, container="fio", stdout=True, stderr=True,
                            stdin=False, tty=False, _preload_content=False)
            except ApiException as exc:
                raise ApiException(status=exc.status, reason=handshake_message(exc)) from None
        out: list[str] = []
        err: list[str] = []
        timed_out = False
        try:
            while ws.is_open():
                ws.update(timeout=0.5)
                for channel, into in ((1, out), (2, err)):
                    data = ws.read_channel(channel, timeout=0) if ws.is_open() else ""
                    if data:
                        into.append(data)
                        if channel == 1 and on_stdout is not None:
                            on_stdout(data)
                if (signum := self.interrupted()) is not None:
                    raise Interrupted(signum)  # (the stream closed as this ends)
                if should_stop() or (deadline_s is not None
                                     and time.monotonic() - start > deadline_s):
                    timed_out = True
                    break
            for channel, into in ((1, out), (2, err)):
                rest = ws.read_channel(channel, timeout=0)
                if rest:
                    into.append(rest)
                    if channel == 1 and on_stdout is not None:
                        on_stdout(rest)
            status = "" if timed_out else ws.read_channel(3, timeout=0)
        finally:
            ws.close()
        wall = time.monotonic() - start
        if timed_out:
            return ExecResult("".join(out), "".join(err), -1, wall, timed_out=True)
        return ExecResult("".join(out), "".join(err), exit_code(status, argv, pod), wall)
