"""Which waiting states of a pod's container fail a run at once (kubewait.pod_problem),
and how a pod that does not run is summed up at the time limit (kubewait.pod_summary).

The kubelet's "failed to sync secret cache" cannot be caused at will: it came from a
busy node in a full run here. The pod statuses below are the Kubernetes client's own
models holding the kubelet's words as that run recorded them (a stand-in for the
fault, named so); what storbench does with a real cluster is in tests/target/kubernetes."""

from __future__ import annotations

from kubernetes import client

from storbench.execute.kubewait import pod_problem, pod_summary


def _waiting(reason: str, message: str) -> client.V1Pod:
    state = client.V1ContainerState(waiting=client.V1ContainerStateWaiting(
        reason=reason, message=message))
    status = client.V1ContainerStatus(name="fio", image="localhost/fio:3.33", image_id="",
                                      ready=False, restart_count=0, state=state)
    return client.V1Pod(status=client.V1PodStatus(phase="Pending",
                                                  container_statuses=[status]))


def test_a_secret_cache_not_synced_yet_is_waited_for_a_missing_secret_is_not():
    synced = "failed to sync secret cache: timed out waiting for the condition"
    assert pod_problem(_waiting("CreateContainerConfigError", synced)) == ""
    assert pod_problem(_waiting("CreateContainerConfigError", synced.replace(
        "secret", "configmap"))) == ""
    missing = 'secret "storbench-s3" not found'
    assert pod_problem(_waiting("CreateContainerConfigError", missing)) == (
        f"container fio: CreateContainerConfigError: {missing}")
    assert pod_problem(_waiting("ErrImageNeverPull", "not present")).startswith(
        "container fio: ErrImageNeverPull")
    assert pod_problem(_waiting("ContainerCreating", "")) == ""


def test_a_bound_claim_is_not_called_unbound_in_the_error():
    """The scheduler's condition of a pod still spoke of its claim as unbound 60 s after
    storbench read it bound (a full run here, beside two other lanes: the scheduler had
    not tried again): the error at the time limit quoted it. Once the claim is bound its
    words are said to be the scheduler's last, not quoted; another reason is quoted."""
    unbound = ("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
               " preemption: 0/1 nodes are available: 1 Preemption is not helpful for"
               " scheduling.")
    cpu = "0/1 nodes are available: 1 Insufficient cpu."

    def pending(message: str) -> client.V1Pod:
        return client.V1Pod(status=client.V1PodStatus(phase="Pending", conditions=[
            client.V1PodCondition(type="PodScheduled", status="False",
                                  reason="Unschedulable", message=message)]))

    assert unbound in pod_summary(pending(unbound))  # the claim not bound: as it is
    said = pod_summary(pending(unbound), claims_over=True)
    assert "unbound" not in said and "PersistentVolumeClaims" not in said
    assert said == ("phase Pending; PodScheduled: Unschedulable: the scheduler's last words"
                    " were of its claim, bound since: it has not tried to place it again yet")
    assert pod_summary(pending(cpu), claims_over=True) == (
        f"phase Pending; PodScheduled: Unschedulable: {cpu}")
