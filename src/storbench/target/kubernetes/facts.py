"""What a Kubernetes target is: the class and cluster before anything is created,
the volume, node and pod's fio once the pods run."""

from __future__ import annotations

import base64
import re
import tempfile
from typing import Any

from storbench.errors import TargetError
from storbench.execute.kubernetes import Kube
from storbench.execute.kubestatus import KubeError
from storbench.result.environment import Environment, Machine
from storbench.target.blockguard import signatures
from storbench.target.device import Seen
from storbench.target.devicejob import found_on_it
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    DEVICE_PATH,
    KubeOptions,
    int_or_none,
    quantity_bytes,
)


def class_facts(kube: Kube, sc: Any, o: KubeOptions, namespace: str,
                capacity: str) -> Environment:
    """What is known before anything is created: the class and the cluster."""
    return {
        "target": {
            "kind": "kubernetes",
            "storage_class": sc.metadata.name,
            "provisioner": sc.provisioner,
            "parameters": dict(sc.parameters or {}),
            "reclaim_policy": sc.reclaim_policy,
            "binding_mode": sc.volume_binding_mode,
            "allow_volume_expansion": bool(sc.allow_volume_expansion),
            "mount_options": list(sc.mount_options or []),
            "namespace": namespace,
            "requested_capacity": capacity,
            "access_mode": o.access_mode,
            "volume_mode": o.volume_mode,
            "clients": o.clients,
        },
        "kubernetes": _cluster(kube, o),
    }


def _cluster(kube: Kube, o: KubeOptions) -> dict[str, Any]:
    return {"context": kube.context, "server": kube.server,
            "server_version": kube.server_version(), "image": o.image}


def pods_facts(kube: Kube, o: KubeOptions, namespace: str) -> Environment:
    """What is known before anything is created of pods that mount no volume (--pods: the
    storage is outside the cluster)."""
    return {
        "target": {"kind": "kubernetes", "namespace": namespace, "clients": o.clients,
                   "host_network": o.host_network},
        "kubernetes": _cluster(kube, o),
    }


_PV_SOURCES = ("csi", "host_path", "local", "nfs", "aws_elastic_block_store",
               "gce_persistent_disk", "azure_disk", "rbd", "cephfs")
_MOUNT = re.compile(rf"^(\S+) {DATA_DIR} (\S+) (\S+)", re.M)


def pod_facts(kube: Kube, namespace: str, pods: list[Any], claim: str, o: KubeOptions,
              env: Environment, scratch: str) -> Environment:
    """The volume, the nodes and the pods' fio, once the pods run; makes the scratch
    directory in each pod's volume."""
    versions = set()
    mounts = ""
    for pod in pods:
        name = pod.metadata.name
        mkdir = f"mkdir -p {scratch} && " if scratch else ""
        res = kube.exec(namespace, name, [
            "sh", "-c", f"fio --version && {mkdir}cat /proc/mounts"], deadline_s=60)
        if res.returncode != 0 or res.timed_out:
            raise KubeError(f"the image {o.image} cannot run fio in pod {namespace}/{name}"
                            f" (exit code {res.returncode}): {(res.stderr or res.stdout).strip()}")
        versions.add(res.stdout.splitlines()[0].strip())
        mounts = mounts or res.stdout
    if len(versions) > 1:
        raise KubeError(f"the pods run different fio versions: {', '.join(sorted(versions))}")
    target = dict(env["target"])
    k8s = dict(env["kubernetes"])
    m = _MOUNT.search(mounts)
    if m is not None:
        target.update(fs_type=m.group(2), mount_source=m.group(1), fs_mount_options=m.group(3))
    pvc = kube.read("PersistentVolumeClaim", claim, namespace) if claim else None
    if pvc is not None:
        target["capacity"] = (pvc.status.capacity or {}).get("storage")
        k8s["pvc"] = f"{namespace}/{claim}"
        k8s["pv"] = pvc.spec.volume_name
        pv = kube.read_pv(pvc.spec.volume_name) if pvc.spec.volume_name else None
        if pv is not None:
            k8s["pv_source"] = {k: v for k, v in pv.spec.to_dict().items()
                                if v is not None and k in _PV_SOURCES}
    first = pods[0]
    k8s["node"] = first.spec.node_name
    if len(pods) > 1:
        k8s["pods"] = {p.metadata.name: p.spec.node_name for p in pods}
    for cs in first.status.container_statuses or []:
        k8s["image_id"] = cs.image_id
    facts: Machine = {"hostname": first.spec.node_name}
    node = kube.read_node(first.spec.node_name) if first.spec.node_name else None
    if node is not None:
        info = node.status.node_info
        labels = node.metadata.labels or {}
        k8s.update(kernel=info.kernel_version, os_image=info.os_image,
                   container_runtime=info.container_runtime_version,
                   kubelet=info.kubelet_version,
                   zone=labels.get("topology.kubernetes.io/zone"),
                   instance_type=labels.get("node.kubernetes.io/instance-type"))
        facts.update({"kernel": info.kernel_version, "os": info.os_image,
                      "cpu_count": int_or_none(node.status.capacity.get("cpu")),
                      "ram_bytes": quantity_bytes(node.status.capacity.get("memory"))})
    limit = quantity_bytes(dict(o.limits).get("memory"))
    if limit is not None:  # the page cache a pod may use is charged to its memory limit
        facts["ram_bytes"] = min(limit, facts.get("ram_bytes") or limit)
    return {**env, **facts, "target": target, "kubernetes": k8s,
            "fio_version": versions.pop()}


GUARD_BYTES = 2**20  # from each end of a Block volume, probed by blkid -p on this machine


def look_volumes(kube: Kube, namespace: str, pods: list[tuple[str, str]],
                 writes: bool) -> list[Seen]:
    """Each Block volume as its guard sees it: its size, and what its first and last MiB
    hold (blkid -p on a copy, on this machine: the image needs only sh, blockdev, dd and
    base64). A volume holding a file system, partition table or other signature is
    refused for writing (device.Device.judge): storbench writes only to blank volumes."""
    seen = []
    claims = _one_per_claim(pods)
    for pod, claim in claims:
        try:
            size = int(_read(kube, namespace, pod, f"blockdev --getsize64 {DEVICE_PATH}"))
            sectors = min(GUARD_BYTES, size) // 512
            head, tail = (base64.b64decode(_read(
                kube, namespace, pod, f"dd if={DEVICE_PATH} bs=512 count={sectors}"
                                      f" skip={skip} 2>/dev/null | base64"))
                for skip in (0, size // 512 - sectors))
        except ValueError as exc:  # binascii.Error is one
            raise KubeError(f"reading the Block volume {DEVICE_PATH} in pod"
                            f" {namespace}/{pod}: unexpected output ({exc})") from None
        if not size:
            raise TargetError(f"the Block volume of PVC {namespace}/{claim} has no size")
        # a sparse copy the volume's size, its first and last MiB in place: what blkid
        # finds by the start (file systems, LVM, MBR, GPT) or the end (md, ZFS labels)
        with tempfile.NamedTemporaryFile(prefix="storbench-volume-") as copy:
            copy.truncate(size)
            copy.write(head)
            copy.seek(size - len(tail))
            copy.write(tail)
            copy.flush()
            found = signatures(copy.name)
        refused = (f"the Block volume of PVC {namespace}/{claim} holds"
                   f" {', '.join(found_on_it(found))} (blkid -p on its first and last MiB):"
                   " storbench writes only to blank volumes, and wrote nothing"
                   if found and writes else "")
        seen.append(Seen(pod, DEVICE_PATH, tuple(found), {"size_bytes": size}, refused,
                         pod if len(claims) > 1 else "", f"Block volume {claim}"))
    return seen


def _read(kube: Kube, namespace: str, pod: str, script: str) -> str:
    """What ``script`` prints in the pod; KubeError naming it if it fails."""
    res = kube.exec(namespace, pod, ["sh", "-c", f"set -o pipefail 2>/dev/null; {script}"],
                    deadline_s=120)
    if res.returncode != 0 or res.timed_out:
        raise KubeError(f"reading the Block volume {DEVICE_PATH} in pod {namespace}/{pod}"
                        f" failed (`{script}`: {res.stderr.strip() or res.returncode}); the"
                        " image needs sh, blockdev, dd and base64")
    return res.stdout


def _one_per_claim(pods: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(pod, claim) for the first pod of each claim."""
    first: dict[str, str] = {}
    for pod, claim in pods:
        first.setdefault(claim, pod)
    return [(pod, claim) for claim, pod in first.items()]
