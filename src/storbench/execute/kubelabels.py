"""The labels every Kubernetes object storbench creates carries, and the annotation that
makes a StorageClass the default (no client needed)."""

from __future__ import annotations

from typing import Any

MANAGED_BY = "app.kubernetes.io/managed-by"
RUN_LABEL = "storbench.io/run"
SELECTOR = f"{MANAGED_BY}=storbench"  # `storbench k8s cleanup` deletes by it only


def is_default(storage_class: Any) -> bool:
    """Whether a StorageClass is the cluster's default (its annotation, either spelling)."""
    ann = storage_class.metadata.annotations or {}
    return any(ann.get(k) == "true" for k in (
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class"))
