"""The labels every Kubernetes object storbench creates carries (no client needed)."""

MANAGED_BY = "app.kubernetes.io/managed-by"
RUN_LABEL = "storbench.io/run"
SELECTOR = f"{MANAGED_BY}=storbench"  # `storbench k8s cleanup` deletes by it only
