"""The pods of a Kubernetes run: waiting until they run, saying why they cannot,
and the facts of the volume, the node and the pod's fio once they do."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storbench.execute.kubernetes import Kube, KubeError
from storbench.execute.signals import SignalGuard
from storbench.target.kubernetes import DATA_DIR, KubeOptions, int_or_none, quantity_bytes

# Container states that do not fix themselves: fail at once, quoting them.
_CAUSES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
           "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
           "CrashLoopBackOff")


def wait_running(kube: Kube, namespace: str, pods: list[tuple[str, str]], guard: SignalGuard,
                 note: Callable[[str], None], deadline: float) -> list[Any]:
    """The pods ((pod, claim) names) once every container runs, in order.

    KubeError at once for a pod that cannot start (image, eviction, ...), and at the
    deadline for a claim not bound or a pod not running, quoting their events.
    """
    start = time.monotonic()
    said: set[str] = set()
    while True:
        ready = []
        for name, claim in pods:
            pod = kube.read("Pod", name, namespace)
            pvc = kube.read("PersistentVolumeClaim", claim, namespace)
            if pod is None or pvc is None:
                gone = f"pod {name}" if pod is None else f"PVC {claim}"
                raise KubeError(f"{gone} in namespace {namespace} was deleted by someone else"
                                " while starting")
            if pod.status.phase == "Running" and container_state(pod) == "running":
                ready.append(pod)
                continue
            problem = pod_problem(pod)
            if problem:
                raise KubeError(f"pod {namespace}/{name} cannot start: {problem}"
                                + events(kube, namespace, "Pod", name))
            step = "waiting for the volume to bind" if pvc.status.phase != "Bound" else (
                "starting the pod" if not pod.spec.node_name
                else f"starting the pod on {pod.spec.node_name}")
            if step not in said:
                said.add(step)
                note(f"{step} ({time.monotonic() - start:.0f} s)")
            if time.monotonic() > deadline:
                waited = time.monotonic() - start
                if pvc.status.phase != "Bound":
                    raise KubeError(
                        f"PersistentVolumeClaim {namespace}/{claim} (StorageClass"
                        f" {pvc.spec.storage_class_name}) not bound after {waited:.0f} s;"
                        f" phase {pvc.status.phase}"
                        + events(kube, namespace, "PersistentVolumeClaim", claim)
                        + events(kube, namespace, "Pod", name)
                        + ". Check that the class's provisioner runs and has capacity, or"
                          " give it longer with --timeout")
                raise KubeError(f"pod {namespace}/{name} not running after {waited:.0f} s:"
                                f" {pod_summary(pod)}" + events(kube, namespace, "Pod", name)
                                + ". Check the node selector and the nodes' free resources"
                                  " (--requests), or give it longer with --timeout")
        if len(ready) == len(pods):
            return ready
        guard.sleep(1.0)


def container_state(pod: Any) -> str:
    for cs in pod.status.container_statuses or []:
        if cs.state.running is not None:
            return "running"
        if cs.state.terminated is not None:
            return "terminated"
    return "waiting"


def pod_problem(pod: Any) -> str:
    """Why the pod will not run (image, eviction, OOM, ...), or ''."""
    for cs in pod.status.container_statuses or []:
        waiting, term = cs.state.waiting, cs.state.terminated
        if waiting is not None and waiting.reason in _CAUSES:
            return f"container {cs.name}: {waiting.reason}: {waiting.message or ''}".strip()
        if term is not None:
            return (f"container {cs.name} terminated: {term.reason} (exit code"
                    f" {term.exit_code}) {term.message or ''}").strip()
    if pod.status.phase in ("Failed", "Succeeded"):
        return f"pod {pod.status.phase}: {pod.status.reason or ''} {pod.status.message or ''}"
    return ""


def pod_summary(pod: Any) -> str:
    parts = [f"phase {pod.status.phase}"]
    for c in pod.status.conditions or []:
        if c.status != "True" and c.message:
            parts.append(f"{c.type}: {c.reason}: {c.message}")
    for cs in pod.status.container_statuses or []:
        if cs.state.waiting is not None:
            parts.append(f"container {cs.name} waiting: {cs.state.waiting.reason}"
                         f" {cs.state.waiting.message or ''}".rstrip())
    return "; ".join(parts)


def events(kube: Kube, namespace: str, kind: str, name: str) -> str:
    """'. Events of the Pod: ...' (warnings first choice, the last five), or ''."""
    lines = kube.events(namespace, kind, name)
    warnings = [ln for ln in lines if ln.startswith("Warning ")]
    chosen = (warnings or lines)[-5:]
    if not chosen:
        return ""
    return f". Events of the {kind}: " + " | ".join(chosen)


def class_facts(kube: Kube, sc: Any, o: KubeOptions, namespace: str,
                capacity: str) -> dict[str, Any]:
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
        "kubernetes": {"context": kube.context, "server": kube.server,
                       "server_version": kube.server_version(), "image": o.image},
    }


_PV_SOURCES = ("csi", "host_path", "local", "nfs", "aws_elastic_block_store",
               "gce_persistent_disk", "azure_disk", "rbd", "cephfs")
_MOUNT = re.compile(rf"^(\S+) {DATA_DIR} (\S+) (\S+)", re.M)


def pod_facts(kube: Kube, namespace: str, pods: list[Any], claim: str, o: KubeOptions,
              env: dict[str, Any], scratch: str) -> dict[str, Any]:
    """The volume, the nodes and the pods' fio, once the pods run; makes the scratch
    directory in each pod's volume."""
    versions = set()
    mounts = ""
    for pod in pods:
        name = pod.metadata.name
        res = kube.exec(namespace, name, [
            "sh", "-c", f"fio --version && mkdir -p {scratch} && cat /proc/mounts"],
            deadline_s=60)
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
    pvc = kube.read("PersistentVolumeClaim", claim, namespace)
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
    facts: dict[str, Any] = {"hostname": first.spec.node_name}
    node = kube.read_node(first.spec.node_name) if first.spec.node_name else None
    if node is not None:
        info = node.status.node_info
        labels = node.metadata.labels or {}
        k8s.update(kernel=info.kernel_version, os_image=info.os_image,
                   container_runtime=info.container_runtime_version,
                   kubelet=info.kubelet_version,
                   zone=labels.get("topology.kubernetes.io/zone"),
                   instance_type=labels.get("node.kubernetes.io/instance-type"))
        facts.update(kernel=info.kernel_version, os=info.os_image,
                     cpu_count=int_or_none(node.status.capacity.get("cpu")),
                     ram_bytes=quantity_bytes(node.status.capacity.get("memory")))
    limit = quantity_bytes(dict(o.limits).get("memory"))
    if limit is not None:  # the page cache a pod may use is charged to its memory limit
        facts["ram_bytes"] = min(limit, facts.get("ram_bytes") or limit)
    return {**env, **facts, "target": target, "kubernetes": k8s,
            "fio_version": versions.pop()}


def oom_killed(kube: Kube, namespace: str, pod: str) -> bool:
    """Did the kernel's OOM killer kill a process in the pod's container (cgroup v1/v2)?"""
    try:
        res = kube.exec(namespace, pod, [
            "sh", "-c", "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control"
                        " 2>/dev/null"], deadline_s=30)
    except KubeError:
        return False
    m = re.search(r"oom_kill (\d+)", res.stdout)
    return m is not None and int(m.group(1)) > 0


def read_file(kube: Kube, namespace: str, pod: str, path: str) -> str:
    """A text file in the pod ('' when it cannot be read: fio wrote none)."""
    res = kube.exec(namespace, pod, ["cat", path], deadline_s=120)
    return res.stdout if res.returncode == 0 else ""


_FILE_MARK = "@@storbench-file "


def fetch_logs(kube: Kube, namespace: str, pod: str, workdir: str, prefix: str,
               into: Path) -> None:
    """Copy fio's logs named ``prefix*.log`` from the pod's ``workdir`` into ``into``,
    removing them in the pod."""
    res = kube.exec(namespace, pod, [
        "sh", "-c", f"cd {workdir} && for f in {prefix}*.log; do [ -f \"$f\" ] || continue;"
                    f" echo \"{_FILE_MARK}$f\"; cat \"$f\"; rm -f \"$f\"; done"],
        deadline_s=120)
    if res.timed_out or res.returncode != 0:
        raise KubeError(f"reading fio's logs in pod {namespace}/{pod} failed (exit code"
                        f" {res.returncode}): {res.stderr.strip()}")
    current: list[str] | None = None
    files: dict[str, list[str]] = {}
    for line in res.stdout.splitlines():
        if line.startswith(_FILE_MARK):
            current = files.setdefault(Path(line[len(_FILE_MARK):]).name, [])
        elif current is not None:
            current.append(line)
    for name, lines in files.items():
        (into / name).write_text("\n".join(lines) + "\n")
