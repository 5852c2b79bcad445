"""Waiting for the pods of a Kubernetes run: their claims bound, their containers
running, the warnings Kubernetes gives meanwhile said as they come, and why a pod
cannot start (or did not in time) in Kubernetes' own words."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storbench.execute.kubernetes import Kube
from storbench.execute.kubestatus import KubeError
from storbench.execute.signals import SignalGuard

# Container states that do not fix themselves: fail at once, quoting them (the image's
# first: its error says how to build and push it).
_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
_CAUSES = (*_PULL, "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
           "CrashLoopBackOff")

# ... except the kubelet's own cache of a Secret or ConfigMap that did not sync in time
# on a busy node ("failed to sync secret cache: timed out waiting for the condition"):
# it retries, and the container starts (a full run here failed at once on it)
_RETRIED = ("failed to sync secret cache", "failed to sync configmap cache")

IMAGE_HINT = (". The runner image is fio and a POSIX sh: build it and push it where the"
              " cluster pulls from with `storbench k8s image build --push"
              " REGISTRY/storbench/fio:3.33-2` (docker, podman or buildah), then give that"
              " with --image or STORBENCH_IMAGE")


QUICK_READ_S, QUICK_FOR_S, SLOW_READ_S = 0.25, 10.0, 1.0  # how often the waits read


def _next_read(guard: SignalGuard, start: float) -> None:
    """Sleep until a wait begun at ``start`` reads again: a claim binds and a pod starts
    in a few seconds on a quiet node, so often then, seldom after."""
    guard.sleep(QUICK_READ_S if time.monotonic() - start < QUICK_FOR_S else SLOW_READ_S)


def _gone(what: str, namespace: str) -> KubeError:
    return KubeError(f"{what} in namespace {namespace} was deleted by someone else while"
                     " starting")


def wait_bound(kube: Kube, namespace: str, claims: list[str], guard: SignalGuard,
               note: Callable[[str], None], deadline: float) -> float:
    """Wait until every claim is bound (before their pods are made: an Immediate class
    binds without them, and a pod made after its claim bound is placed at the
    scheduler's first try, which otherwise finds it unbound and tries again only after a
    back-off: beside other lanes of tests here, not within 60 s). Their warnings are
    said as they come; KubeError at the deadline, quoting the claim's events. Returns
    when the wait began (wait_running counts from it)."""
    start = time.monotonic()
    note("waiting for the volume to bind (0 s)")
    warned = Warned(kube, namespace, note)
    while True:
        unbound = []
        for claim in dict.fromkeys(claims):
            pvc = kube.read("PersistentVolumeClaim", claim, namespace)
            if pvc is None:
                raise _gone(f"PVC {claim}", namespace)
            if pvc.status.phase != "Bound":
                unbound.append(pvc)
        if not unbound:
            return start
        for pvc in unbound:
            warned.look_claim(pvc.metadata.name, deadline - time.monotonic())
        if time.monotonic() > deadline:
            raise not_bound(kube, namespace, unbound[0], time.monotonic() - start)
        _next_read(guard, start)


def not_bound(kube: Kube, namespace: str, pvc: Any, waited: float, pod: str = "") -> KubeError:
    """The error of a claim not bound at the time limit, with its events (and its pod's)."""
    claim = pvc.metadata.name
    return KubeError(f"PersistentVolumeClaim {namespace}/{claim} (StorageClass"
                     f" {pvc.spec.storage_class_name}) not bound after {waited:.0f} s;"
                     f" phase {pvc.status.phase}"
                     + events(kube, namespace, "PersistentVolumeClaim", claim)
                     + (events(kube, namespace, "Pod", pod) if pod else "")
                     + ". Check that the class's provisioner runs and has capacity, or"
                       " give it longer with --timeout")


def wait_running(kube: Kube, namespace: str, pods: list[tuple[str, str]], guard: SignalGuard,
                 note: Callable[[str], None], deadline: float,
                 since: float | None = None) -> list[Any]:
    """The pods ((pod, claim) names; claim "": none) once every container runs, in order.

    KubeError at once for a pod that cannot start (image, eviction, ...), and at the
    deadline for a claim not bound or a pod not running, quoting their events. ``since``:
    when the wait began (wait_bound's start, its claims bound), else now.
    """
    start = time.monotonic() if since is None else since
    said: set[str] = set() if since is None else {"waiting for the volume to bind"}
    warned = Warned(kube, namespace, note)
    while True:
        ready = []
        for name, claim in pods:
            pod = kube.read("Pod", name, namespace)
            pvc = kube.read("PersistentVolumeClaim", claim, namespace) if claim else None
            if pod is None or (claim and pvc is None):
                raise _gone(f"pod {name}" if pod is None else f"PVC {claim}", namespace)
            if pod.status.phase == "Running" and container_state(pod) == "running":
                ready.append(pod)
                continue
            problem = pod_problem(pod)
            if problem:
                raise KubeError(f"pod {namespace}/{name} cannot start: {problem}"
                                + events(kube, namespace, "Pod", name)
                                + (IMAGE_HINT if any(c in problem for c in _PULL) else ""))
            bound = pvc is None or pvc.status.phase == "Bound"
            step = "waiting for the volume to bind" if not bound else (
                "starting the pod" if not pod.spec.node_name
                else f"starting the pod on {pod.spec.node_name}")
            if step not in said:
                said.add(step)
                note(f"{step} ({time.monotonic() - start:.0f} s)")
            warned.look(pod, None if bound else claim,
                        deadline - time.monotonic())
            if time.monotonic() > deadline:
                waited = time.monotonic() - start
                if pvc is not None and not bound:
                    raise not_bound(kube, namespace, pvc, waited, name)
                # its claim is bound: the scheduler's words of the claim are over
                raise KubeError(f"pod {namespace}/{name} not running after {waited:.0f} s:"
                                f" {pod_summary(pod, claims_over=True)}"
                                + events(kube, namespace, "Pod", name, claims_over=True)
                                + ". Check the node selector and the nodes' free resources"
                                  " (--requests), or give it longer with --timeout")
        if len(ready) == len(pods):
            return ready
        _next_read(guard, start)


WARNINGS_EVERY_S = 5.0  # a claim's and its pod's warnings, read while waiting for them


@dataclass
class Warned:
    """The warnings of claims and pods being waited for, said as they come (a
    provisioner's refusal, a scheduler's): each reason and message once, however often
    Kubernetes repeats it and whichever volume of the run has it. Once a claim is bound,
    its pod's warnings about claims (the scheduler waiting for it to bind) are over: not
    said."""

    kube: Kube
    namespace: str
    note: Callable[[str], None]
    said: set[str] = field(default_factory=set)
    looked: dict[str, float] = field(default_factory=dict)  # per pod: when (first) waited for
    lock: threading.Lock = field(default_factory=threading.Lock)  # volumes wait in threads

    def look(self, pod: Any, unbound_claim: str | None, left_s: float) -> None:
        """Say the new warnings of the pod (and why the scheduler cannot place it, which
        its events may not repeat), and of its claim while it is not bound (read every
        WARNINGS_EVERY_S of each pod's wait: called as often as the wait looks)."""
        name = pod.metadata.name
        with self.lock:
            now = time.monotonic()
            if now - self.looked.setdefault(name, now) < WARNINGS_EVERY_S:
                return
            self.looked[name] = now
            found = [("PersistentVolumeClaim", unbound_claim, w) for w in self._new(
                "PersistentVolumeClaim", unbound_claim)] if unbound_claim else []
            found += [("Pod", name, w) for w in self._new("Pod", name, bound=not unbound_claim)]
            for c in pod.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False" and c.message:
                    text = f"{c.reason}: {c.message}"
                    if self._once("Pod", text, bound=not unbound_claim):
                        found.append(("Pod", name, text))
        for kind, what, warning in found:
            self._say(kind, what, warning, left_s)

    def look_claim(self, claim: str, left_s: float) -> None:
        """Say the claim's new warnings (a provisioner's refusal) while it is not bound and
        has no pod yet (read every WARNINGS_EVERY_S, as look)."""
        with self.lock:
            now = time.monotonic()
            if now - self.looked.setdefault(f"PVC {claim}", now) < WARNINGS_EVERY_S:
                return
            self.looked[f"PVC {claim}"] = now
            found = self._new("PersistentVolumeClaim", claim)
        for warning in found:
            self._say("PersistentVolumeClaim", claim, warning, left_s)

    def _say(self, kind: str, name: str, warning: str, left_s: float) -> None:
        self.note(f"{kind} {name}: {warning} (still waiting, as Kubernetes retries: up to"
                  f" {max(0.0, left_s):.0f} s more)")

    def _new(self, kind: str, name: str, bound: bool = False) -> list[str]:
        """The object's warnings not said before, now counted as said."""
        found = []
        for line in self.kube.events(self.namespace, kind, name):
            text = re.sub(r" \(x\d+\)$", "", line)
            if text.startswith("Warning ") and self._once(kind, text[len("Warning "):], bound):
                found.append(text[len("Warning "):])
        return found

    def _once(self, kind: str, text: str, bound: bool) -> bool:
        """Whether to say this warning: not said before (now counted as said), and not the
        scheduler's words about a claim once the claim is ``bound`` (they are over; the
        pod's condition may still hold them until the scheduler's next try); words said
        under one reason are not said again under another."""
        if bound and of_claims(text):
            return False
        # by its words, whatever reason names them: the scheduler's event (FailedScheduling)
        # and the pod's condition (Unschedulable) say the same once each
        said = f"{kind} {re.sub(r'^[A-Za-z]+: ', '', text)}"
        if said in self.said:
            return False
        self.said.add(said)
        return True


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
        if (waiting is not None and waiting.reason in _CAUSES
                and not any(r in (waiting.message or "") for r in _RETRIED)):
            return f"container {cs.name}: {waiting.reason}: {waiting.message or ''}".strip()
        if term is not None:
            return (f"container {cs.name} terminated: {term.reason} (exit code"
                    f" {term.exit_code}) {term.message or ''}").strip()
    if pod.status.phase in ("Failed", "Succeeded"):
        return f"pod {pod.status.phase}: {pod.status.reason or ''} {pod.status.message or ''}"
    return ""


def pod_summary(pod: Any, claims_over: bool = False) -> str:
    """The pod's phase, its conditions not met and its containers waiting; with
    ``claims_over`` (its claims are bound) a condition in the scheduler's words of
    claims is not quoted (a bound claim is not "unbound") but said to be the
    scheduler's last word: it has not tried to place the pod since (beside two other
    lanes of tests here, not within 60 s of the claim binding)."""
    parts = [f"phase {pod.status.phase}"]
    for c in pod.status.conditions or []:
        if c.status != "True" and c.message:
            if claims_over and of_claims(c.message):
                parts.append(f"{c.type}: {c.reason}: the scheduler's last words were of its"
                             " claim, bound since: it has not tried to place it again yet")
                continue
            parts.append(f"{c.type}: {c.reason}: {c.message}")
    for cs in pod.status.container_statuses or []:
        if cs.state.waiting is not None:
            parts.append(f"container {cs.name} waiting: {cs.state.waiting.reason}"
                         f" {cs.state.waiting.message or ''}".rstrip())
    return "; ".join(parts)


def of_claims(text: str) -> bool:
    """Whether the scheduler's words are of the pod's claims (unbound, binding)."""
    return re.search(r"(?i)persistentvolumeclaim|binding volumes", text) is not None


def events(kube: Kube, namespace: str, kind: str, name: str, claims_over: bool = False) -> str:
    """'. Events of the Pod: ...' (warnings first choice, the last five), or ''; with
    ``claims_over`` (its claims are bound) none of the scheduler's words of claims."""
    lines = [ln for ln in kube.events(namespace, kind, name)
             if not (claims_over and of_claims(ln))]
    warnings = [ln for ln in lines if ln.startswith("Warning ")]
    chosen = (warnings or lines)[-5:]
    if not chosen:
        return ""
    return f". Events of the {kind}: " + " | ".join(chosen)


