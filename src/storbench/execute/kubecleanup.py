"""Deleting what a run created, and waiting until it is gone together with what others
delete after it: a claim's PersistentVolume (the provisioner, by its reclaim policy) and a
VolumeSnapshot's VolumeSnapshotContent (the snapshot controller and the driver's
csi-snapshotter sidecar, by the content's deletion policy)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from storbench.errors import Interrupted
from storbench.execute.kubestatus import KubeError
from storbench.execute.signals import SignalGuard

READ_EVERY_S = 0.5  # how often what is being deleted is read again
# after a signal, what is still waited for is said once it takes this long: a pod on a node
# that does not answer stays until the node does (DELETE_WAIT_S, 2 min, or a second signal)
SAY_AFTER_S = 5.0


class Kube(Protocol):
    """What of `storbench.execute.kubernetes.Kube` this needs."""

    core: Any  # the core API (client.CoreV1Api)

    def read_or(self, kind: str, name: str, namespace: str, failed: Any) -> Any: ...

    def delete(self, kind: str, name: str, namespace: str, grace_s: int = 1,
               evict: bool = False) -> bool: ...

    def annotate_content(self, name: str, annotations: dict[str, str]) -> None: ...

    def volumes_of_claims(self, uids: set[str]) -> dict[str, str]: ...

    def annotate_snapshot(self, namespace: str, name: str,
                          annotations: dict[str, str]) -> None: ...

    def release_snapshot(self, namespace: str, name: str, finalizer: str) -> None: ...

    def create(self, manifest: dict[str, Any], *, dry_run: bool = False) -> Any: ...

Obj = tuple[str, str, str]  # (kind, namespace, name); "" for a cluster-scoped object
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
BEING_CREATED = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
NUDGE = "storbench.io/deletion-nudged"
NUDGE_AFTER_S = 5.0
# the CSI provisioner's (v6.3+) while it provisions a claim from a snapshot; left behind
# when its removal conflicts with another update of the snapshot (seen here) or the claim
# goes mid-provisioning, then taken off by the provisioner's sweep (every 5 min)
PROVISIONER_SOURCE = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection"


def dependent(kube: Kube, obj: Obj) -> Obj | None:
    """What is deleted after ``obj`` by others: a bound claim's PV, a snapshot's content
    (the snapshot controller names it after the snapshot's uid, before it is bound)."""
    kind, ns, name = obj
    found = kube.read_or(kind, name, ns, None)
    if found is None:
        return None
    if kind == "PersistentVolumeClaim" and found.spec.volume_name:
        after = ("PersistentVolume", "", found.spec.volume_name)
    elif kind == "VolumeSnapshot":
        bound = (found.get("status") or {}).get("boundVolumeSnapshotContentName")
        after = ("VolumeSnapshotContent", "",
                 bound or f"snapcontent-{found['metadata']['uid']}")
    else:
        return None
    # a user who may not read PVs or contents (cluster-scoped: a namespace's user often
    # may not) cannot wait for one: only for what it can see go
    if kube.read_or(after[0], after[2], "", True) is True:
        return None
    return after


def _uid(kube: Kube, obj: Obj) -> str:
    """The object's uid, or "" when it is not there."""
    kind, ns, name = obj
    found = kube.read_or(kind, name, ns, None)
    return str(found.metadata.uid or "") if found is not None and found.metadata else ""


def policy(kind: str, found: Any) -> str:
    if kind == "PersistentVolume":
        return str(found.spec.persistent_volume_reclaim_policy)
    return str(found["spec"].get("deletionPolicy", "Delete"))


def awaits_sidecar(content: dict[str, Any]) -> bool:
    """The snapshot controller marked the content for deletion and the driver's sidecar is
    not creating its snapshot any more: the sidecar's to delete now."""
    meta = content["metadata"]
    notes = meta.get("annotations") or {}
    return bool(meta.get("deletionTimestamp")) and BEING_DELETED in notes \
        and BEING_CREATED not in notes


def _nudge_snapshots(kube: Kube, snapshots: list[Obj], waiting: dict[str, float]) -> None:
    """A VolumeSnapshot still there a few seconds after its deletion is annotated, and
    again every few seconds: the snapshot controller retries a snapshot it could not
    let go (a claim being restored from it was still Pending) with a growing back-off,
    ~50 s after a minute of it on the test-bed; each update is an event it acts on
    at once."""
    now = time.monotonic()
    for _, ns, name in snapshots:
        since = waiting.setdefault(f"{ns}/{name}", now)
        if now - since > NUDGE_AFTER_S:
            waiting[f"{ns}/{name}"] = now
            try:
                kube.annotate_snapshot(ns, name, {NUDGE: f"{time.time():.1f}"})
                _release_orphan(kube, ns, name)
            except KubeError:  # gone meanwhile, or this user may not: waited for
                pass


def _release_orphan(kube: Kube, ns: str, name: str) -> None:
    """A snapshot being deleted that only the CSI provisioner's source protection holds,
    with no Pending claim restored from it: the finalizer is orphaned (the provisioner's
    removal of it met "the object has been modified" and was not tried again; a lifecycle
    run's cleanup waited 120 s for it and failed, the provisioner's sweep came ~4 min
    later). Taken off as that sweep would."""
    found = kube.read_or("VolumeSnapshot", name, ns, None)
    if not isinstance(found, dict):
        return
    meta = found.get("metadata") or {}
    if meta.get("deletionTimestamp") and meta.get("finalizers") == [PROVISIONER_SOURCE] \
            and not restoring_from(kube, ns, name):
        kube.release_snapshot(ns, name, PROVISIONER_SOURCE)


def restoring_from(kube: Kube, namespace: str, snapshot: str) -> bool:
    """A Pending claim in ``namespace`` is being restored from the VolumeSnapshot (or the
    API cannot say: then it is not touched)."""
    try:
        claims = kube.core.list_namespaced_persistent_volume_claim(namespace).items
    except Exception:  # the API refused (this user may not list claims): left to its owner
        return True
    for c in claims:
        source = c.spec.data_source_ref or c.spec.data_source
        if source is not None and source.kind == "VolumeSnapshot" and \
                source.name == snapshot and (c.status.phase or "Pending") == "Pending":
            return True
    return False


def _held(kube: Kube, kind: str, name: str, namespace: str) -> str:
    """What still holds an object being deleted, for its message ("": none known)."""
    found = kube.read_or(kind, name, namespace, None)
    if isinstance(found, dict):  # a VolumeSnapshot(Content)
        held = (found.get("metadata") or {}).get("finalizers") or []
    else:  # a core object (a PersistentVolume, a claim, a pod), or None
        held = getattr(getattr(found, "metadata", None), "finalizers", None) or []
    return f" (held by its finalizers: {', '.join(held)})" if held else ""


def delete_and_wait(kube: Kube, objects: list[Obj], wait_s: float, grace_s: int = 1,
                    evict: bool = False, hurried: Callable[[list[str]], bool] | None = None
                    ) -> tuple[list[str], list[str]]:
    """Delete ``objects`` in this order, then wait until they and what others delete after
    them are gone; an object whose deletion was refused is not waited for. Returns (what is
    still there or could not be deleted, as "Kind ns/name: why"; what stays by its own
    policy, as "PersistentVolume name stays, by its reclaim policy Retain"). ``hurried``
    is given what is still waited for ("Kind name") at each look, and ends the wait
    when it says so.

    A content the snapshot controller marked for deletion can wait for the sidecar's next
    resync (15 min): when the snapshot was deleted while the content was still being
    created, the sidecar's own update of the content swallows the deletion's event (seen
    on the test-bed with csi-snapshotter v8.6.0; kubernetes-csi/external-snapshotter#1112).
    Such a content is annotated after a few seconds, and again every few seconds while it
    stays: each update is an event, and the sidecar then deletes the snapshot in the driver
    and the content."""
    after: dict[Obj, Obj] = {}
    unbound: dict[str, Obj] = {}  # by uid, claims not bound yet: a PV may be on its way
    for obj in objects:
        if (dep := dependent(kube, obj)) is not None:
            after[obj] = dep
        elif obj[0] == "PersistentVolumeClaim" and (uid := _uid(kube, obj)):
            unbound[uid] = obj
    problems = []
    refused = []
    for obj in objects:
        kind, ns, name = obj
        try:
            kube.delete(kind, name, ns, grace_s, evict)
        except KubeError as exc:  # e.g. an eviction a disruption budget refuses
            problems.append(str(exc))
            refused.append(obj)
    deadline = time.monotonic() + wait_s
    left = [o for o in objects if o not in refused]
    deps = [(obj, dep) for obj, dep in after.items() if obj not in refused]
    stays: list[str] = []
    waiting: dict[str, float] = {}  # content -> since when it awaits the sidecar, or nudged
    gave_up = False
    while time.monotonic() < deadline:
        left = [(k, ns, n) for k, ns, n in left if kube.read_or(k, n, ns, True) is not None]
        _nudge_snapshots(kube, [o for o in left if o[0] == "VolumeSnapshot"], waiting)
        remaining = []
        for obj, (kind, _, name) in deps:
            found = kube.read_or(kind, name, "", True)
            if found is None and obj not in left:
                continue
            if found is None:  # not there yet: a content is created while its snapshot is
                remaining.append((obj, (kind, "", name)))  # being deleted
                continue
            if found is not True and (rule := policy(kind, found)) != "Delete":
                which = "reclaim" if kind == "PersistentVolume" else "deletion"
                stays.append(f"{kind} {name} stays, by its {which} policy {rule}")
                continue
            remaining.append((obj, (kind, "", name)))
            if kind == "VolumeSnapshotContent" and found is not True and awaits_sidecar(found):
                since = waiting.setdefault(name, time.monotonic())
                if time.monotonic() - since > NUDGE_AFTER_S:
                    waiting[name] = time.monotonic()
                    try:
                        kube.annotate_content(name, {NUDGE: f"{time.time():.1f}"})  # a change
                    except KubeError:  # gone meanwhile, or this user may not: waited for
                        pass
        deps = remaining
        if not left and not deps and unbound:  # the claims gone: was a PV made for one?
            deps = [(unbound[uid], ("PersistentVolume", "", pv))
                    for pv, uid in kube.volumes_of_claims(set(unbound)).items()]
            unbound = {}
        if not left and not deps:
            break
        if hurried is not None and hurried(
                [f"{k} {n}" for k, _, n in left] + [f"{k} {n}" for _, (k, _, n) in deps]):
            gave_up = True
            break
        time.sleep(READ_EVERY_S)
    # what is still there, as "Kind ns/name" (a PV or a content: "Kind name") and what
    # holds it
    still = [(f"{k} {ns}/{n}", _held(kube, k, n, ns)) for k, ns, n in left] + [
        (f"{k} {n}", _held(kube, k, n, "")) for _, (k, _, n) in deps
        if kube.read_or(k, n, "", True) is not None]
    if gave_up and still:
        problems.append(", ".join(f"{what}{held}" for what, held in still)
                        + ": still there, not waited for after a second signal")
    else:
        problems += [f"{what}: still there after {wait_s:.0f} s{held}" for what, held in still]
    return problems, stays


def heeding(interrupted: Callable[[], int | None]) -> Callable[[list[str]], bool]:
    """For `delete_and_wait` within a measurement: a signal (``interrupted``'s) ends the
    wait, raising Interrupted (the cleanup then deletes what is left)."""
    def heed(left: list[str]) -> bool:
        if (signum := interrupted()) is not None:
            raise Interrupted(signum)
        return False
    return heed


def delete_saying(kube: Kube, objects: list[Obj], wait_s: float,
                  note: Callable[[str], None],
                  hurried: Callable[[list[str]], bool] | None = None) -> list[str]:
    """`delete_and_wait`, what stays by its own policy said (a claim's PV of a Retain
    class: it was not deleted, its data are kept); returns what is still there."""
    problems, stays = delete_and_wait(kube, objects, wait_s, hurried=hurried)
    for what in stays:
        note(what)
    return problems


@dataclass
class Created:
    """What a run created in a cluster, in the order it was created; deleted in reverse
    (a pod before the claim it mounts, a claim before the ConfigMap its pods read), also
    when objects are created from several threads (a lifecycle's volumes)."""

    objects: list[Obj] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self, kube: Kube, namespace: str, manifest: dict[str, Any]) -> Any:
        """Create ``manifest`` in ``namespace``, counted as the run's once it exists."""
        made = kube.create(manifest)
        with self.lock:
            self.objects.append((manifest["kind"], namespace, manifest["metadata"]["name"]))
        return made

    def forget(self, kind: str, namespace: str, name: str) -> None:
        """An object the run deleted itself (and waited for): no longer to delete."""
        with self.lock:
            self.objects = [o for o in self.objects if o != (kind, namespace, name)]

    def delete(self, kube: Kube, namespace: str, wait_s: float, note: Callable[[str], None],
               guard: SignalGuard | None = None) -> None:
        """Delete everything, newest first, waiting until it is gone (delete_saying);
        raise naming what is still there and `storbench k8s cleanup --namespace
        NAMESPACE` (left_error). After a signal (``guard``'s), what is waited for is said
        once that takes SAY_AFTER_S, and a second signal ends the wait. Nothing created:
        nothing asked of the cluster."""
        with self.lock:
            left, self.objects = self.objects[::-1], []
        if not left:
            return
        hurried = (_hurried(guard, wait_s, note) if guard is not None
                   and guard.signum is not None else None)
        if (error := left_error(delete_saying(kube, left, wait_s, note, hurried),
                                namespace)) is not None:
            raise error


def _hurried(guard: SignalGuard, wait_s: float,
             note: Callable[[str], None]) -> Callable[[list[str]], bool]:
    """For `delete_and_wait` after a signal: what is still there said once, after
    SAY_AFTER_S; True (stop waiting) once a second signal came."""
    say = saying_after(wait_s, note, "Ctrl-C again: stop waiting")

    def hurried(left: list[str]) -> bool:
        return guard.count > 1 or say(left)
    return hurried


def saying_after(wait_s: float, note: Callable[[str], None],
                 how_to_stop: str) -> Callable[[list[str]], bool]:
    """For `delete_and_wait`: what is still there said once, after SAY_AFTER_S, with
    ``how_to_stop`` the wait; the wait goes on (False)."""
    start = time.monotonic()
    said: list[str] = []

    def say(left: list[str]) -> bool:
        if not said and (took := time.monotonic() - start) >= SAY_AFTER_S:
            said.append(", ".join(left))
            note(f"waiting up to {wait_s - took:.0f} s more for the cluster to delete"
                 f" {said[0]} ({how_to_stop})")
        return False
    return say


def left_error(problems: list[str], namespace: str) -> KubeError | None:
    """What a run's cleanup left (``problems`` of `Created.delete`), as the error to
    raise; None when nothing was."""
    if not problems:
        return None
    return KubeError("cleaning up: " + "; ".join(problems)
                     + f". Run `storbench k8s cleanup --namespace {namespace}`")
