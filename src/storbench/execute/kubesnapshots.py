"""VolumeSnapshots through the custom objects API (the snapshot API is a CRD, absent on
clusters without a snapshot controller): the calls `Kube` makes for them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from storbench.execute.kubelabels import RUN_LABEL, SELECTOR

SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


def snapshots(custom: client.CustomObjectsApi, verb: str) -> Callable[..., Any]:
    """The VolumeSnapshot call (get, create, delete) with the core API's argument order:
    (name, namespace) or, to create, (namespace, body)."""
    method = getattr(custom, f"{verb}_namespaced_custom_object")

    def call(*args: Any, **kwargs: Any) -> Any:
        if verb == "create":
            namespace, body = args
            return method(SNAPSHOT_GROUP, "v1", namespace, "volumesnapshots", body, **kwargs)
        name, namespace = args
        return method(SNAPSHOT_GROUP, "v1", namespace, "volumesnapshots", name, **kwargs)
    return call


def snapshot_contents(custom: client.CustomObjectsApi, verb: str) -> Callable[..., Any]:
    """The VolumeSnapshotContent call (get, patch), cluster-scoped: (name) or (name, body)."""
    method = getattr(custom, f"{verb}_cluster_custom_object")

    def call(name: str, *body: Any) -> Any:
        return method(SNAPSHOT_GROUP, "v1", "volumesnapshotcontents", name, *body)
    return call


def snapshot_classes(custom: client.CustomObjectsApi) -> list[dict[str, Any]]:
    found: Any = custom.list_cluster_custom_object(SNAPSHOT_GROUP, "v1",
                                                   "volumesnapshotclasses")
    return list(found.get("items", []))


def managed_snapshots(custom: client.CustomObjectsApi,
                      namespace: str | None) -> list[tuple[str, str, str, datetime]]:
    """storbench's VolumeSnapshots as (namespace, name, run, created); [] where the cluster
    has no snapshot API."""
    items: Any
    try:
        if namespace is None:
            items = custom.list_cluster_custom_object(
                SNAPSHOT_GROUP, "v1", "volumesnapshots", label_selector=SELECTOR)
        else:
            items = custom.list_namespaced_custom_object(
                SNAPSHOT_GROUP, "v1", namespace, "volumesnapshots", label_selector=SELECTOR)
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise
    found = []
    for item in items.get("items", []):
        m = item["metadata"]
        found.append((m["namespace"], m["name"], (m.get("labels") or {}).get(RUN_LABEL, ""),
                      datetime.fromisoformat(m["creationTimestamp"].replace("Z", "+00:00"))))
    return found
