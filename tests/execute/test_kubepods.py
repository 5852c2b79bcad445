"""Which waiting states of a pod's container fail a run at once (kubepods.pod_problem).

The kubelet's "failed to sync secret cache" cannot be caused at will: it came from a
busy node in a full run here. The pod statuses below are the Kubernetes client's own
models holding the kubelet's words as that run recorded them (a stand-in for the
fault, named so); what storbench does with a real cluster is in tests/target/kubernetes."""

from __future__ import annotations

from kubernetes import client

from storbench.execute.kubepods import pod_problem


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
