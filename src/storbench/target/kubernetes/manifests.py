"""A Kubernetes StorageClass as a target: what to ask for, and the objects that ask.

Pure data: the options of ``run --storage-class`` and the manifests (a ConfigMap
with the suite's job files, a PVC of the class, one pod mounting both) built from
them. Every object carries the ``app.kubernetes.io/managed-by=storbench`` label and
the run's id, so that ``storbench k8s cleanup`` finds what a crashed run left.
Nothing here talks to a cluster (see execute/kubernetes.py and __init__.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from storbench.errors import ConfigError
from storbench.execute.kubelabels import MANAGED_BY, RUN_LABEL
from storbench.execute.kubelabels import SELECTOR as SELECTOR
from storbench.workload.sizes import parse_size

CLASS_LABEL = "storbench.io/storage-class"

# The runner image (Dockerfile in this repository): Debian 12 with its fio 3.33.
DEFAULT_IMAGE = "ghcr.io/storbench/fio:3.33-2"
IMAGE_ENV = "STORBENCH_IMAGE"

DATA_DIR = "/data"  # the PVC (volume mode Filesystem)
DEVICE_PATH = "/dev/storbench"  # the PVC (volume mode Block)
VOLUME_MODES = ("Filesystem", "Block")
JOBS_DIR = "/storbench/jobs"  # the ConfigMap
WORK_DIR = "/tmp"  # an emptyDir: fio's output and per-second logs
RUN_AS = 1000

ACCESS_MODES = {"RWO": "ReadWriteOnce", "RWX": "ReadWriteMany", "ROX": "ReadOnlyMany",
                "RWOP": "ReadWriteOncePod"}
_QUANTITY = re.compile(r"^\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                        r"[A-Za-z0-9])?$")
# What a run does in its namespace (checked before anything is created).
RUN_VERBS: tuple[tuple[str, str, str], ...] = (
    ("create", "", "configmaps"), ("delete", "", "configmaps"),
    ("create", "", "persistentvolumeclaims"), ("get", "", "persistentvolumeclaims"),
    ("delete", "", "persistentvolumeclaims"),
    ("create", "", "pods"), ("get", "", "pods"), ("delete", "", "pods"),
    ("create", "", "pods/exec"), ("list", "", "events"),
)
# --pods (a storage outside the cluster): no claims; a Secret for fio's environment
OUTSIDE_VERBS: tuple[tuple[str, str, str], ...] = (
    ("create", "", "configmaps"), ("delete", "", "configmaps"),
    ("create", "", "secrets"), ("get", "", "secrets"), ("delete", "", "secrets"),
    ("create", "", "pods"), ("get", "", "pods"), ("delete", "", "pods"),
    ("create", "", "pods/exec"), ("list", "", "events"),
)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a DNS label (RFC 1123)
GIB = 1024**3


@dataclass(frozen=True)
class KubeOptions:
    """Where and how ``storbench run --storage-class`` runs fio in a cluster (or ``--pods``,
    on a storage outside the cluster: ``storage_class`` "", no volume)."""

    storage_class: str
    namespace: str | None = None  # None: the kubeconfig context's namespace, else "default"
    context: str | None = None  # None: the kubeconfig's current context
    capacity: str | None = None  # None: what the suite writes, + 25 %, at least 1Gi
    access_mode: str = "ReadWriteOnce"
    volume_mode: str = "Filesystem"
    node_selector: tuple[tuple[str, str], ...] = ()
    image: str = DEFAULT_IMAGE
    requests: tuple[tuple[str, str], ...] = (("cpu", "250m"), ("memory", "256Mi"))
    limits: tuple[tuple[str, str], ...] = (("memory", "1Gi"),)
    timeout_s: float | None = None  # None: from the suite's runtime
    kubeconfig: str | None = None  # None: $KUBECONFIG or ~/.kube/config
    clients: int = 1  # pods running each test at once (one RWX volume, or one each)
    # what shared clusters ask of a pod: taints it tolerates (key, value or None, effect
    # or None), the service account its namespace's policies bind, registry credentials
    tolerations: tuple[tuple[str, str | None, str | None], ...] = ()
    service_account: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    host_network: bool = False  # the node's network: an endpoint only the node reaches

    @property
    def volume(self) -> bool:
        """The pods mount a volume of the class (not: --pods, a storage outside)."""
        return bool(self.storage_class)

    def check(self) -> None:
        """ConfigError for values the API server would reject anyway, said in our words."""
        if self.volume and not _NAME.match(self.storage_class):
            raise ConfigError(f"--storage-class {self.storage_class!r} is not a valid"
                              " StorageClass name")
        if self.access_mode not in ACCESS_MODES.values():
            raise ConfigError(f"--access-mode {self.access_mode!r}: choose one of"
                              f" {', '.join(ACCESS_MODES)}")
        if self.volume_mode not in VOLUME_MODES:
            raise ConfigError(f"--volume-mode {self.volume_mode!r}: choose Filesystem or Block")
        if self.block and self.clients > 1 and self.shared_volume:
            raise ConfigError("--volume-mode Block with a shared access mode: the pods would"
                              " write over each other's blocks; use RWO (a volume per pod)")
        if self.capacity is not None:
            quantity(self.capacity, "--capacity")
        for key, value in (*self.requests, *self.limits):
            if key not in ("cpu", "memory", "ephemeral-storage"):
                raise ConfigError(f"resource {key!r}: choose cpu, memory or ephemeral-storage")
            quantity(value, f"resource {key}")
        for key, _ in self.node_selector:
            if not _LABEL_KEY.match(key):
                raise ConfigError(f"--node-selector: {key!r} is not a label key")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError(f"--timeout must be positive, not {self.timeout_s:g}")
        if not 1 <= self.clients <= 256:
            raise ConfigError(f"--clients must be 1 to 256, not {self.clients}")
        for key, _, effect in self.tolerations:
            if not _LABEL_KEY.match(key):
                raise ConfigError(f"--toleration: {key!r} is not a taint key")
            if effect not in (None, *TAINT_EFFECTS):
                raise ConfigError(f"--toleration {key}: effect {effect!r}: choose one of"
                                  f" {', '.join(TAINT_EFFECTS)}")
        if self.namespace is not None and not _NAMESPACE.match(self.namespace):
            raise ConfigError(f"--namespace {self.namespace!r} is not a namespace name (lower"
                              " case letters, digits and '-', at most 63)")
        if not self.image.strip() or any(c.isspace() for c in self.image):
            raise ConfigError(f"--image {self.image!r} is not an image reference (e.g."
                              " registry.example.com/fio:3.33)")
        for what, name in (("--service-account", self.service_account),
                           *(("--image-pull-secret", n) for n in self.image_pull_secrets)):
            if name is not None and not _NAME.match(name):
                raise ConfigError(f"{what} {name!r} is not a valid object name")

    @property
    def block(self) -> bool:
        return self.volume_mode == "Block"

    @property
    def shared_volume(self) -> bool:
        """Do all client pods mount one volume (RWX/ROX), or each its own?"""
        return self.access_mode in ("ReadWriteMany", "ReadOnlyMany")

    def describe(self) -> dict[str, Any]:
        return {
            "storage_class": self.storage_class, "namespace": self.namespace,
            "context": self.context, "capacity": self.capacity,
            "access_mode": self.access_mode, "volume_mode": self.volume_mode,
            "node_selector": dict(self.node_selector), "image": self.image,
            "requests": dict(self.requests), "limits": dict(self.limits),
            "timeout_s": self.timeout_s, "clients": self.clients,
            **({"host_network": True} if self.host_network else {}),
        }


def volume_mode(text: str) -> str:
    """block / Block -> Block."""
    for mode in VOLUME_MODES:
        if text.lower() == mode.lower():
            return mode
    raise ConfigError(f"--volume-mode {text!r}: choose Filesystem or Block")


def access_mode(text: str) -> str:
    """RWO / ReadWriteOnce (any case) -> ReadWriteOnce."""
    for short, full in ACCESS_MODES.items():
        if text.upper() == short or text.lower() == full.lower():
            return full
    raise ConfigError(f"--access-mode {text!r}: choose one of {', '.join(ACCESS_MODES)}")


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_tolerations(values: tuple[str, ...]) -> tuple[tuple[str, str | None, str | None], ...]:
    """KEY[=VALUE][:EFFECT] (as `kubectl taint` writes a taint) -> (key, value, effect):
    without a value any value is tolerated, without an effect every effect."""
    out = []
    for text in values:
        rest, _, effect = text.rpartition(":") if ":" in text else (text, "", "")
        key, sep, value = rest.partition("=")
        if not key:
            raise ConfigError(f"--toleration {text!r} is not KEY[=VALUE][:EFFECT]")
        out.append((key, value if sep else None, effect or None))
    return tuple(out)


def parse_pairs(values: tuple[str, ...], option: str) -> tuple[tuple[str, str], ...]:
    """('cpu=1', 'memory=2Gi') or ('cpu=1,memory=2Gi',) -> pairs."""
    pairs = []
    for value in values:
        for item in value.split(","):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"{option} {item!r} is not KEY=VALUE")
            pairs.append((key.strip(), val.strip()))
    return tuple(pairs)


def quantity(text: str, what: str) -> str:
    if not _QUANTITY.match(text):
        raise ConfigError(f"{what} {text!r} is not a Kubernetes quantity (e.g. 20Gi, 500m)")
    return text


def capacity_for(needed_bytes: int | None) -> str:
    """A volume size for a suite that writes ``needed_bytes``: + 25 %, whole GiB, >= 1Gi."""
    gib = math.ceil((needed_bytes or 0) * 1.25 / GIB)
    return f"{max(1, gib)}Gi"


def int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def quantity_bytes(quantity: str | None) -> int | None:
    """A Kubernetes memory quantity (1Gi, 500M, 1048576) in bytes."""
    if not quantity:
        return None
    q = quantity.strip()
    if q.endswith("i"):
        return parse_size(q[:-1])
    if q[-1:] in "kMGTPE" and q[:-1]:
        try:
            return int(float(q[:-1]) * 1000 ** ("kMGTPE".index(q[-1]) + 1))
        except ValueError:
            return None
    return int_or_none(q)


def name_of(uid: str) -> str:
    return f"storbench-{uid}"


def pod_names(uid: str, clients: int) -> list[str]:
    return [name_of(uid)] if clients == 1 else [f"{name_of(uid)}-{i}" for i in range(clients)]


def claim_names(uid: str, o: KubeOptions) -> list[str]:
    """The PVC each pod mounts: one for all (one pod, or a shared access mode), else one
    per pod."""
    if o.clients == 1 or o.shared_volume:
        return [name_of(uid)] * o.clients
    return pod_names(uid, o.clients)


def labels(uid: str, storage_class: str) -> dict[str, str]:
    return {MANAGED_BY: "storbench", "app.kubernetes.io/name": "storbench",
            RUN_LABEL: uid, CLASS_LABEL: storage_class}


def _meta(uid: str, namespace: str, o: KubeOptions, name: str | None = None) -> dict[str, Any]:
    return {"name": name or name_of(uid), "namespace": namespace,
            "labels": labels(uid, o.storage_class)}


def configmap_manifest(uid: str, namespace: str, o: KubeOptions,
                       jobs: dict[str, str]) -> dict[str, Any]:
    """The job files, one key per scheduled fio invocation (t000.fio, ...)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(uid, namespace, o),
            "data": jobs}


def pvc_manifest(uid: str, namespace: str, o: KubeOptions, capacity: str,
                 name: str | None = None,
                 data_source: dict[str, str] | None = None) -> dict[str, Any]:
    """A claim; with ``data_source`` a copy: of a VolumeSnapshot (a restore) or of another
    PVC (a clone)."""
    spec: dict[str, Any] = {
        "storageClassName": o.storage_class,
        "accessModes": [o.access_mode],
        "volumeMode": o.volume_mode,
        "resources": {"requests": {"storage": capacity}},
    }
    if data_source:
        spec["dataSource"] = data_source
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(uid, namespace, o, name), "spec": spec}


def snapshot_manifest(uid: str, namespace: str, o: KubeOptions, name: str, claim: str,
                      snapshot_class: str) -> dict[str, Any]:
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": _meta(uid, namespace, o, name),
            "spec": {"volumeSnapshotClassName": snapshot_class,
                     "source": {"persistentVolumeClaimName": claim}}}


# The pod idles until storbench execs fio in it; it stops at once on SIGTERM (a trapped
# signal ends `wait` at once, where a foreground `sleep 1` would run out first: up to a
# second more for every pod deleted), and by itself at activeDeadlineSeconds if
# storbench died without deleting it.
IDLE_COMMAND = ["sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1 & wait $!; done"]


def secret_manifest(uid: str, namespace: str, o: KubeOptions,
                    values: dict[str, str]) -> dict[str, Any]:
    """What fio in the pods reads from its environment and no file may hold (an S3 secret
    key: target/objects.SECRET_VAR), one key per variable; the pods' ``env`` names it."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(uid, namespace, o), "stringData": values}


def pod_manifest(uid: str, namespace: str, o: KubeOptions, deadline_s: int,
                 name: str | None = None, claim: str | None = None,
                 secret_env: tuple[str, ...] = ()) -> dict[str, Any]:
    """A runner pod: it mounts ``claim`` (None: the run's one; none without a class: the
    storage is outside), the job files and a work directory, and has ``secret_env`` from
    the run's Secret in its environment (fio's, in every exec)."""
    resources: dict[str, Any] = {}
    if o.requests:
        resources["requests"] = dict(o.requests)
    if o.limits:
        resources["limits"] = dict(o.limits)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": deadline_s,
        "terminationGracePeriodSeconds": 2,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "dnsPolicy": "Default",  # fio needs no cluster DNS
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS, "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [{
            "name": "fio",
            "image": o.image,
            "imagePullPolicy": "IfNotPresent",
            "command": IDLE_COMMAND,
            "workingDir": WORK_DIR,
            "resources": resources,
            "securityContext": {
                "allowPrivilegeEscalation": False, "privileged": False,
                "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [
                *([] if o.block or not o.volume else [{"name": "data", "mountPath": DATA_DIR}]),
                {"name": "jobs", "mountPath": JOBS_DIR, "readOnly": True},
                {"name": "work", "mountPath": WORK_DIR},
            ],
        }],
        "volumes": [
            *([{"name": "data", "persistentVolumeClaim": {"claimName": claim or name_of(uid)}}]
              if o.volume else []),
            {"name": "jobs", "configMap": {"name": name_of(uid)}},
            {"name": "work", "emptyDir": {}},
        ],
    }
    if o.block:
        # the device node in the container carries the node's owner and mode (root,
        # 0600 or 0660): only its owner opens it. Root in the container, every
        # capability still dropped, no privilege escalation, no other device.
        spec["containers"][0]["volumeDevices"] = [{"name": "data", "devicePath": DEVICE_PATH}]
        spec["securityContext"].update(runAsNonRoot=False, runAsUser=0, runAsGroup=0)
        for key in ("fsGroup", "fsGroupChangePolicy"):
            del spec["securityContext"][key]
    if secret_env:
        spec["containers"][0]["env"] = [
            {"name": var, "valueFrom": {"secretKeyRef": {"name": name_of(uid), "key": var}}}
            for var in secret_env]
    if o.host_network:  # the node's interfaces, loopback included
        spec["hostNetwork"] = True
    if o.node_selector:
        spec["nodeSelector"] = dict(o.node_selector)
    if o.tolerations:
        spec["tolerations"] = [
            {"key": key, **({"operator": "Equal", "value": value} if value is not None
                            else {"operator": "Exists"}), **({"effect": effect} if effect else {})}
            for key, value, effect in o.tolerations]
    if o.service_account is not None:  # for the policies that bind it; its token stays out
        spec["serviceAccountName"] = o.service_account
    if o.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in o.image_pull_secrets]
    if o.clients > 1:  # spread the clients over the nodes, where there are several
        spec["affinity"] = {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {RUN_LABEL: uid}}}}]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(uid, namespace, o, name),
            "spec": spec}



if __name__ == "__main__":  # the release workflow pushes the runner image under this name
    print(DEFAULT_IMAGE)
