"""A Kubernetes StorageClass as a target: storageclass.py (the Target: PVCs and pods),
manifests.py (options and the objects, pure data), facts.py (what the class, the
volume and the node are). Importing this package loads no Kubernetes client."""

from storbench.execute.kubelabels import SELECTOR

__all__ = ["SELECTOR"]
