"""The Kubernetes target's options and manifests (pure data; no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storbench.errors import ConfigError
from storbench.pipeline.loop import plan_run
from storbench.pipeline.spec import RunSpec
from storbench.target.device import DeviceStorage
from storbench.target.files import FilesStorage
from storbench.target.kubernetes.manifests import (
    DATA_DIR,
    DEVICE_PATH,
    KubeOptions,
    access_mode,
    capacity_for,
    parse_pairs,
)
from storbench.target.kubernetes.podplan import START_S, TEST_GRACE_S, KubePlan
from storbench.target.kubernetes.storageclass import KubeTarget


def plan_kube(spec: RunSpec, o: KubeOptions, namespace: str) -> KubePlan:
    """What a run of ``spec`` on class ``o`` would create (no cluster needed)."""
    storage = DeviceStorage(DEVICE_PATH) if o.block else FilesStorage(DATA_DIR)
    target = KubeTarget(o, storage)
    planned = plan_run(spec, target)
    return target.plan_layout(planned.uid, planned.plan, [s.jobs for s in planned.steps],
                              namespace)


def test_access_modes():
    assert access_mode("rwx") == "ReadWriteMany"
    assert access_mode("ReadWriteOnce") == "ReadWriteOnce"
    with pytest.raises(ConfigError, match="RWO, RWX"):
        access_mode("rw")


def test_capacity_follows_the_suite():
    assert capacity_for(None) == "1Gi"
    assert capacity_for(4 * 2**30) == "5Gi"  # + 25 %, whole GiB


@pytest.mark.parametrize("options, message", [
    ({"storage_class": "Bad_Name"}, "not a valid StorageClass"),
    ({"capacity": "lots"}, "not a Kubernetes quantity"),
    ({"volume_mode": "raw"}, "choose Filesystem or Block"),
    ({"volume_mode": "Block", "access_mode": "ReadWriteMany", "clients": 2},
     "write over each other"),
    ({"limits": (("gpu", "1"),)}, "choose cpu, memory"),
    ({"node_selector": (("bad key!", "x"),)}, "not a label key"),
    ({"timeout_s": 0.0}, "--timeout must be positive"),
    # the API server's refusal came only once the cluster was asked (dry runs printed it)
    ({"namespace": "Bad_NS"}, "not a namespace name"),
    ({"namespace": "a" * 64}, "not a namespace name"),
    ({"image": ""}, "not an image reference"),
    ({"image": "fio 3.33"}, "not an image reference"),
])
def test_bad_options(options, message):
    o = KubeOptions(**{"storage_class": "fast", **options})
    with pytest.raises(ConfigError, match=message):
        o.check()


def test_pairs():
    assert parse_pairs(("cpu=1,memory=2Gi", "x=y"), "--limits") == (
        ("cpu", "1"), ("memory", "2Gi"), ("x", "y"))
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_pairs(("cpu",), "--limits")


def test_plan_budget_manifests_and_labels():
    o = KubeOptions(storage_class="fast", image="img:1")
    spec = RunSpec(suite="quick", runtime=10, repeat=2)
    kp = plan_kube(spec, o, "bench")
    # the time limit follows the suite: start-up, then each test's runtime + ramp + grace
    tests = len(kp.plan.tests) * 2
    expected = START_S + sum(t.expected_s or 0 for t in kp.plan.tests) * 2
    assert kp.budget_s == pytest.approx(expected + tests * TEST_GRACE_S)
    assert len(kp.jobs) == tests and all(f"directory={kp.scratch}" in t
                                         for t in kp.jobs.values())
    cm, pvc, pod = kp.manifests
    for m in kp.manifests:
        assert m["metadata"]["namespace"] == "bench"
        assert m["metadata"]["labels"]["storbench.io/run"] == kp.uid
    assert cm["data"] == kp.jobs
    assert pvc["spec"]["storageClassName"] == "fast"
    assert pod["spec"]["activeDeadlineSeconds"] > kp.budget_s  # a crashed run's pod stops
    container = pod["spec"]["containers"][0]
    assert container["image"] == "img:1"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["fsGroup"] == 1000
    longer = plan_kube(RunSpec(suite="quick", runtime=100), o, "bench")
    assert longer.budget_s > kp.budget_s
    fixed = KubeOptions(storage_class="fast", timeout_s=42)
    assert plan_kube(RunSpec(), fixed, "b").budget_s == 42


def test_a_size_bound_test_gets_the_time_its_size_needs_not_an_hour():
    """etcd's 22 MiB test says no runtime: its limit is its bytes at 256 KiB/s and its
    layout, as on any target (it announced "time limit 3960 s")."""
    kp = plan_kube(RunSpec(suite="etcd"), KubeOptions(storage_class="fast"), "b")
    [test] = kp.plan.tests
    assert test.expected_s is None
    size = test.jobfile.estimated_bytes()
    assert size is not None and size >= 20 * 2**20
    need = size / (256 * 2**10) + size / (16 * 2**20)
    assert kp.budget_s == pytest.approx(START_S + need + TEST_GRACE_S)
    assert kp.budget_s < 600


def test_capacity_smaller_than_the_suite():
    """The bytes the largest test writes said as they are (16 MiB was "0.0 GiB"), the
    test named, and the pods that share the volume counted."""
    o = KubeOptions(storage_class="fast", capacity="1Gi")
    with pytest.raises(ConfigError, match=r"--capacity 1Gi is smaller than the 4.0 GiB test"):
        plan_kube(RunSpec(size="4g"), o, "b")
    o = KubeOptions(storage_class="fast", capacity="10Mi")
    with pytest.raises(ConfigError, match=r"smaller than the 16.0 MiB test 'synclat' writes;"):
        plan_kube(RunSpec(size="16m"), o, "b")
    o = KubeOptions(storage_class="fast", capacity="40Mi", clients=3,
                    access_mode="ReadWriteMany")
    with pytest.raises(ConfigError, match=r"the 48.0 MiB test 'synclat' writes \(in its 3 pods\)"):
        plan_kube(RunSpec(size="16m"), o, "b")


def test_job_file_paths_stay_in_the_volume(tmp_path: Path):
    job = tmp_path / "j.fio"
    job.write_text("[x]\nrw=read\nfilename=/etc/passwd\n")
    o = KubeOptions(storage_class="fast")
    with pytest.raises(ConfigError, match="only writes inside"):
        plan_kube(RunSpec(job_file=job), o, "b")


def test_the_scheduler_s_words_about_a_claim_are_over_once_it_is_bound():
    """What the waits say (kubewait.Warned), as text alone: each warning once, and once
    the claim is bound neither the pod's events nor its PodScheduled condition about
    claims (the condition may hold them until the scheduler's next try). The cluster
    tests (test_cluster.py) cover what a real scheduler and provisioner say."""
    from storbench.execute.kubewait import Warned

    said: list[str] = []
    warned = Warned(kube=None, namespace="ns", note=said.append)  # type: ignore[arg-type]
    unbound = ("Unschedulable: 0/1 nodes are available: pod has unbound immediate"
               " PersistentVolumeClaims. preemption: 0/1 nodes are available: 1"
               " Preemption is not helpful for scheduling.")
    cpu = "Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."
    assert warned._once("Pod", unbound, bound=False)
    assert not warned._once("Pod", unbound, bound=False)  # said once
    assert not warned._once("Pod", "FailedScheduling: running PreBind plugin"
                            " \"VolumeBinding\": binding volumes: timed out", bound=True)
    assert warned._once("Pod", cpu, bound=True)
    assert not warned._once("Pod", cpu, bound=True)
    # the claim's own refusal is said whatever the pod's state
    assert warned._once("PersistentVolumeClaim", "ProvisioningFailed: exceeds maximum allowed",
                        bound=False)
    fresh = Warned(kube=None, namespace="ns", note=said.append)  # type: ignore[arg-type]
    assert not fresh._once("Pod", unbound, bound=True)  # stale after bind: not said
