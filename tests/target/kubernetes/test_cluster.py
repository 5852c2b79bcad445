"""`storbench run --storage-class` and `storbench k8s` against the real single-node
Kubernetes of ../shared/testbed/k8s (tests/k8s.py): real PVCs, pods, exec and fio."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from storbench.execute.kubernetes import Kube, KubeError
from tests.cli.test_cli import assert_one_line_error, show_json
from tests.conftest import STORBENCH, needs_timing, run_cli, until
from tests.k8s import (
    assert_ended_by_ctrl_c_twice,
    ctrl_c_twice,
    heard,
    interrupted,
    kubelet_pid,
    leftovers,
    managed_pods,
    restricted_kubeconfig,
)
from tests.target.test_hosts import assert_finish_line, merged_percentile

SHORT = ("--runtime", "2", "--ramp", "0", "--size", "64m")


def write_job(tmp_path: Path, name: str, text: str) -> Path:
    job = tmp_path / name
    job.write_text(text)
    return job


def runs_json(db: Path) -> list[dict]:
    proc = run_cli("list", "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_two_classes_one_table_nothing_left(kube, namespace, k8s_env, store_path):
    """Issue #5's "done when": both binding modes, one comparison table, no leftovers."""
    proc = run_cli("run", "--storage-class", "local-hostpath", "--storage-class",
                   "local-hostpath-immediate", "--suite", "quick", *SHORT, "-n", namespace,
                   db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert leftovers(kube, namespace) == []
    comparison = proc.stdout.rsplit("\n\n", 1)[-1]  # printed last, after a blank line
    assert re.search(r"#1\b.*local-hostpath\b", comparison), comparison
    assert "local-hostpath-immediate" in comparison and "randread" in comparison
    first, second = show_json(store_path, "1"), show_json(store_path, "2")
    for run, mode in ((first, "WaitForFirstConsumer"), (second, "Immediate")):
        assert run["status"] == "completed"
        env = run["environment"]
        assert env["target"]["binding_mode"] == mode
        assert env["target"]["provisioner"] == "kubehyper.local/hostpath"
        assert env["target"]["reclaim_policy"] == "Delete"
        assert env["target"]["capacity"] == "1Gi" and env["target"]["fs_type"]
        assert env["kubernetes"]["server_version"].startswith("v1.")
        assert env["kubernetes"]["pv"].startswith("pvc-")
        assert env["kubernetes"]["node"] == "localhost"
        assert env["fio_version"] == "fio-3.33"
        assert [t["name"] for t in run["tests"]] == [
            "randread", "randwrite", "seqread", "seqwrite", "synclat"]
        assert all(any(t[d] and t[d]["iops"] > 0 for d in ("read", "write"))
                   for t in run["tests"])
        randread = run["tests"][0]
        assert randread["read"]["clat"]["percentiles_ns"] and randread["read"]["clat"]["bins"]
        assert randread["series"]["read"]  # per-second logs came back from the pod
    assert first["label"] == "local-hostpath"
    assert second["label"] == "local-hostpath-immediate"
    assert "local-hostpath-immediate" in comparison


@needs_timing  # a class capped at 3000 IOPS: its truth, alone
def test_throttled_class_measures_the_known_truth(kube, namespace, k8s_env, store_path,
                                                  tmp_path):
    job = write_job(tmp_path, "randwrite.fio",
                    "[randwrite]\nrw=randwrite\nbs=4k\nioengine=libaio\ndirect=1\niodepth=16\n"
                    "size=256m\ntime_based\nruntime=10\nramp_time=2\n")
    proc = run_cli("run", "--storage-class", "throttled-3000iops", "--job", str(job),
                   "-n", namespace, db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    iops = show_json(store_path)["tests"][0]["write"]["iops"]
    # never above the cap; below it by what the disk beneath the test-bed's volumes
    # stalls (up to ~180 ms at a time here; a cgroup throttle does not let lost time be
    # made up: 2902 IOPS in a CI run)
    assert 0.92 * 3000 <= iops <= 1.03 * 3000
    assert leftovers(kube, namespace) == []


@needs_timing  # a class capped at 3000 IOPS: its truth, alone
def test_a_curve_on_the_throttled_class(kube, namespace, k8s_env, store_path):
    """storbench curve --storage-class: each step's job file, made as the curve goes,
    is written into the pod; the closed-loop maximum is the class's cap."""
    proc = run_cli("curve", "--storage-class", "throttled-3000iops", "-n", namespace,
                   "--workload", "quick:randwrite", "--size", "128m", "--step-time", "3",
                   "--steps", "4", "--max-depth", "8", "--slo", "p99<=100ms",
                   db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    curve = show_json(store_path)["data"]["curve"]
    assert curve["max_iops"] == pytest.approx(3000, rel=0.05)
    assert len(curve["steps"]) == 4 and curve["answers"][0]["iops"] is not None
    # four rates, 10% to 110% of the cap: 43% met the objective, 77% did too unless the
    # disk beneath the test-bed's volumes stalled in its 3 s (a CI run: 2151 of 2299,
    # p99 91 ms), 110% fell behind
    rates = [s["requested_iops"] for s in curve["steps"]]
    answer = curve["answers"][0]
    met = 2 if answer["step"] == curve["steps"][2]["test"] else 1
    assert answer["step"] == curve["steps"][met]["test"]
    assert answer["iops"] == pytest.approx(rates[met], rel=0.05)
    assert answer["iops"] == pytest.approx((0.43, 0.77)[met - 1] * 3000, rel=0.08)
    assert answer["next_failed"]["saturated"] and rates[3] > 3000
    assert leftovers(kube, namespace) == []


def test_class_that_does_not_exist(kube, namespace, k8s_env, store_path):
    proc = run_cli("run", "--storage-class", "no-such-class", "-n", namespace,
                   db=store_path, env=k8s_env)
    assert_one_line_error(proc, 2, "StorageClass 'no-such-class' does not exist",
                          "local-hostpath (default)")
    assert leftovers(kube, namespace) == [] and runs_json(store_path) == []


@pytest.fixture
def unbindable_class(kube):
    """A StorageClass whose provisioner does not exist: its PVCs never bind."""
    name = f"sbt-noprov-{secrets.token_hex(3)}"
    kube.storage.create_storage_class({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
        "provisioner": "storbench.test/nobody", "volumeBindingMode": "Immediate"})
    yield name
    kube.storage.delete_storage_class(name)


def test_pvc_never_binds(kube, namespace, k8s_env, store_path, unbindable_class):
    start = time.monotonic()
    proc = run_cli("run", "--storage-class", unbindable_class, *SHORT, "--timeout", "12",
                   "-n", namespace, db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "not bound after 1", "storbench.test/nobody")
    assert time.monotonic() - start < 60
    assert leftovers(kube, namespace) == []
    assert show_json(store_path)["status"] == "failed"


def test_a_provisioner_s_refusal_is_said_while_waiting(kube, namespace, k8s_env, store_path,
                                                       csi_driver):
    """A claim the CSI driver refuses (larger than its 1 TiB maximum): its warning is said
    as it comes, once, while storbench waits on (provisioners retry); it was said only
    in the error at the time limit (300 s by default)."""
    proc = run_cli("run", "--storage-class", csi_driver, "--capacity", "2Ti", *SHORT,
                   "--timeout", "15", "-n", namespace, db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "not bound after 1", "exceeds maximum allowed")
    said = [line for line in proc.stderr.splitlines() if "still waiting" in line]
    claim = [line for line in said if line.startswith("PersistentVolumeClaim storbench-")]
    assert len(claim) == 1, proc.stderr  # once, however often the provisioner retried
    assert "ProvisioningFailed: " in claim[0] and "exceeds maximum allowed" in claim[0]
    # the pod's, if any, are the scheduler's of this claim (WaitForFirstConsumer)
    assert all(line.startswith("Pod storbench-") for line in said if line not in claim)
    assert leftovers(kube, namespace) == []


def test_a_pod_nowhere_to_run_is_said_while_waiting(kube, namespace, k8s_env, store_path):
    """A pod that asks for more CPU than the node has, its claim (Immediate) bound: why
    the scheduler cannot place it is said while storbench waits (from the pod's condition:
    its events said only the first reason) and in the error at the time limit. The pod
    is made only once its claim is bound, so the scheduler never finds the claim unbound
    (before, its first try did, and beside other lanes of tests it had not tried again
    60 s after the claim bound): no word of an unbound claim, said or in the pod's events."""
    proc = run_cli("run", "--storage-class", "local-hostpath-immediate", "--requests",
                   "cpu=64", *SHORT, "--timeout", "60", "-n", namespace, db=store_path,
                   env=k8s_env)
    assert_one_line_error(proc, 1, "not running after", "Insufficient cpu")
    assert "unbound" not in proc.stderr and "last words" not in proc.stderr
    lines = proc.stderr.splitlines()
    bind = next(i for i, ln in enumerate(lines) if ln.startswith("waiting for the volume to"))
    start = next(i for i, ln in enumerate(lines) if ln.startswith("starting the pod ("))
    assert bind < start, proc.stderr
    said = [line for line in lines[start:] if "still waiting" in line]
    assert len(said) == 1, proc.stderr
    # the pod's condition (Unschedulable) or the scheduler's event (FailedScheduling),
    # whichever was read first: the same words, said once (a CI run said them twice)
    m = re.match(r"Pod (storbench-\S+): (Unschedulable|FailedScheduling): ", said[0])
    assert m, said
    assert "Insufficient cpu" in said[0]
    # the scheduler's own record: it never found the claim unbound (events outlive the pod)
    scheduled = kube.events(namespace, "Pod", m.group(1))
    assert any("Insufficient cpu" in e for e in scheduled), scheduled
    assert not any("unbound" in e for e in scheduled), scheduled
    assert leftovers(kube, namespace) == []


def test_a_volume_bound_after_its_claim_was_read_is_waited_for(kube, namespace):
    """Ctrl-C while a claim is being provisioned: cleanup read the claim unbound, deleted
    it, and returned once it was gone, while the PV the provisioner then made for it was
    still there (a `k8s lifecycle` Ctrl-C test failed so). Here, deterministically: a PV
    for the claim (its uid) that cannot bind (too small) until the claim is gone, then
    Released; by its reclaim policy Retain it stays, and the cleanup must say so."""
    claim = kube.create({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "late", "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "sbt-none",
                 "resources": {"requests": {"storage": "64Mi"}}}})
    pv = f"sbt-late-{secrets.token_hex(4)}"
    kube.core.create_persistent_volume({
        "metadata": {"name": pv},
        "spec": {"capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "sbt-none", "persistentVolumeReclaimPolicy": "Retain",
                 "hostPath": {"path": "/nonexistent/sbt-late"},
                 "claimRef": {"namespace": namespace, "name": "late",
                              "uid": claim.metadata.uid}}})
    try:
        problems, stays = kube.delete_and_wait(
            [("PersistentVolumeClaim", namespace, "late")], 30)
        assert problems == []
        assert stays == [f"PersistentVolume {pv} stays, by its reclaim policy Retain"]
    finally:
        kube.core.delete_persistent_volume(pv)


def test_image_that_does_not_exist(kube, namespace, k8s_env, store_path):
    proc = run_cli("run", "--storage-class", "local-hostpath", *SHORT, "-n", namespace,
                   "--image", "localhost/storbench-no-such-image:0", db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "cannot start", "localhost/storbench-no-such-image:0")
    assert "ErrImagePull" in proc.stderr or "ImagePullBackOff" in proc.stderr
    assert "storbench k8s image build --push" in proc.stderr  # and how to go on
    assert leftovers(kube, namespace) == []


def test_fio_fails_in_the_pod(kube, namespace, k8s_env, store_path, tmp_path):
    job = write_job(tmp_path, "nofile.fio",
                    "[x]\nrw=read\nfilename=missing\nallow_file_create=0\nsize=1m\n")
    proc = run_cli("run", "--storage-class", "local-hostpath", "--job", str(job),
                   "-n", namespace, db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "fio exited with status 1", "file creation disallowed")
    assert show_json(store_path)["status"] == "failed"
    assert leftovers(kube, namespace) == []


def test_fio_oom_killed(kube, namespace, k8s_env, store_path, tmp_path):
    # 8 x 64 MiB buffers in a pod limited to 64 MiB.
    job = write_job(tmp_path, "big.fio", "[big]\nrw=read\nbs=64m\nioengine=libaio\niodepth=8\n"
                                         "size=512m\ntime_based\nruntime=5\n")
    proc = run_cli("run", "--storage-class", "local-hostpath", "--job", str(job),
                   "--limits", "memory=64Mi", "-n", namespace, db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "OOM-killed", "64Mi", "--limits memory=")
    assert leftovers(kube, namespace) == []


def test_rbac_forbids_a_verb(kube, kubeconfig, namespace, k8s_env, store_path, tmp_path):
    restricted = restricted_kubeconfig(kube, namespace, kubeconfig, tmp_path, [])
    proc = run_cli("run", "--storage-class", "local-hostpath", *SHORT, db=store_path,
                   env={**k8s_env, "KUBECONFIG": str(restricted)})
    # This user may not even read StorageClasses: the API server's own words.
    assert_one_line_error(proc, 1, "forbidden", "storageclasses")
    kube.storage.read_storage_class("local-hostpath")
    rbac = client.RbacAuthorizationV1Api(kube.core.api_client)
    name = f"sbt-read-classes-{namespace}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"],
         "verbs": ["get", "list"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": namespace}]})
    try:
        proc = run_cli("run", "--storage-class", "local-hostpath", *SHORT, db=store_path,
                       env={**k8s_env, "KUBECONFIG": str(restricted)})
        assert_one_line_error(proc, 1, f"in namespace {namespace}", "may not: create pods/exec",
                              "Nothing was created")
        assert leftovers(kube, namespace) == []
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_run_cleans_up(kube, namespace, k8s_env, store_path, sig, code):
    returncode, _, stderr = interrupted(
        ["run", "--storage-class", "local-hostpath", "--runtime", "60", "--size", "64m", "-n",
         namespace], {**k8s_env, "STORBENCH_DB": str(store_path)},
        lambda: _fio_runs(kube, namespace), sig, wait_s=120)
    assert returncode == code, stderr
    assert f"interrupted by {sig.name}" in stderr
    assert leftovers(kube, namespace) == []
    assert show_json(store_path)["status"] == "interrupted"


def _wait_for_fio(kube: Kube, namespace: str) -> None:
    """Until fio runs in storbench's pod."""
    assert until(lambda: _fio_runs(kube, namespace), 90, 0.5), "fio never started in the pod"


def _fio_runs(kube: Kube, namespace: str) -> bool:
    """fio runs in storbench's pod (seen through exec, like a user would)."""
    pods = [p for p in managed_pods(kube, namespace) if p.status.phase == "Running"]
    return bool(pods) and _fio_in(kube, namespace, pods[0].metadata.name)


def _fio_in(kube: Kube, namespace: str, pod: str) -> bool:
    """fio runs in this pod (seen through exec)."""
    try:
        res = kube.exec(namespace, pod, ["sh", "-c", "pidof fio"], deadline_s=10)
        return res.returncode == 0 and bool(res.stdout.strip())
    except KubeError:
        return False


def test_sigkill_then_k8s_cleanup(kube, namespace, k8s_env, store_path):
    proc = subprocess.Popen(
        [*STORBENCH, "run", "--storage-class", "local-hostpath", "--runtime", "60", "--size",
         "64m", "-n", namespace],
        env={**os.environ, **k8s_env, "STORBENCH_DB": str(store_path)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_fio(kube, namespace)
    finally:
        proc.kill()
        proc.wait()
    left = leftovers(kube, namespace)
    assert any(x.startswith("Pod ") for x in left) and any(
        x.startswith("PersistentVolumeClaim ") for x in left)  # SIGKILL: nothing could run
    spared = run_cli("k8s", "cleanup", "-n", namespace, "--older-than", "1h", db=store_path,
                     env=k8s_env)
    assert spared.returncode == 0 and "nothing to clean up" in spared.stderr
    assert leftovers(kube, namespace) == left
    done = run_cli("k8s", "cleanup", "-n", namespace, db=store_path, env=k8s_env)
    assert done.returncode == 0, done.stderr
    assert "deleted Pod" in done.stdout and "deleted PersistentVolumeClaim" in done.stdout
    assert leftovers(kube, namespace) == []  # the PV too: cleanup waits for it


def test_dry_run_manifests_pass_server_side_dry_run(kube, namespace, k8s_env, store_path):
    proc = run_cli("run", "--storage-class", "throttled-3000iops", "--suite", "etcd",
                   "-n", namespace, "--node-selector", "kubernetes.io/os=linux",
                   "--limits", "memory=512Mi,cpu=2", "--capacity", "5Gi", "--dry-run",
                   db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    docs = list(yaml.safe_load_all(proc.stdout))
    assert [d["kind"] for d in docs] == ["ConfigMap", "PersistentVolumeClaim", "Pod"]
    for d in docs:
        assert d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "storbench"
        kube.create(d, dry_run=True)  # the API server validates and admits it
    pod = docs[2]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    container = pod["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["privileged"] is False
    assert container["resources"]["limits"] == {"memory": "512Mi", "cpu": "2"}
    assert docs[1]["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert "fdatasync=1" in next(iter(docs[0]["data"].values()))
    assert leftovers(kube, namespace) == [] and runs_json(store_path) == []
    offline = run_cli("run", "--storage-class", "x", "--dry-run", db=store_path,
                      env={**k8s_env, "KUBECONFIG": "/nonexistent"})
    assert offline.returncode == 0 and "namespace: default" in offline.stdout


def test_k8s_classes(k8s_env, store_path):
    proc = run_cli("k8s", "classes", "--json", db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["local-hostpath"]["default"] is True
    assert rows["local-hostpath-immediate"]["binding_mode"] == "Immediate"
    assert rows["throttled-3000iops"]["parameters"] == {"readIOPS": "3000", "writeIOPS": "3000"}
    text = run_cli("k8s", "classes", db=store_path, env=k8s_env)
    assert "local-hostpath (default)" in text.stdout and "WaitForFirstConsumer" in text.stdout


def test_unreachable_cluster_is_one_clear_error(store_path, tmp_path):
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}))
    proc = run_cli("k8s", "classes", db=store_path, env={"KUBECONFIG": str(config)})
    assert_one_line_error(proc, 1, "cannot reach the API server https://127.0.0.1:1")
    missing = run_cli("k8s", "classes", db=store_path,
                      env={"KUBECONFIG": str(tmp_path / "none")})
    assert_one_line_error(missing, 2, f"cannot use the kubeconfig {tmp_path / 'none'}: it does"
                                      " not exist.")
    (tmp_path / "text").write_text("not yaml of a kubeconfig\n")
    text = run_cli("k8s", "classes", db=store_path, env={"KUBECONFIG": str(tmp_path / "text")})
    assert_one_line_error(text, 2, "it is not a kubeconfig (a YAML mapping")  # was Python's
    assert "object" not in text.stderr  # "'str' object does not support item assignment"


def test_directory_or_storage_class(store_path, tmp_path):
    both = run_cli("run", str(tmp_path), "--storage-class", "x", db=store_path)
    assert_one_line_error(both, 2, "not both")
    neither = run_cli("run", db=store_path)
    assert_one_line_error(neither, 2, "give a directory TARGET (or --storage-class CLASS)")
    dry = run_cli("run", str(tmp_path), "--dry-run", db=store_path)
    assert_one_line_error(dry, 2, "--dry-run applies to --storage-class")
    twice = run_cli("run", "--storage-class", "a", "--storage-class", "a", db=store_path)
    assert_one_line_error(twice, 2, "given twice")
    hosts = run_cli("run", "--storage-class", "a", "--hosts", "h1", db=store_path)
    assert_one_line_error(hosts, 2, "cannot be combined")


RANDRW_JOB = ("[randread]\nrw=randread\nbs=4k\nioengine=libaio\ndirect=1\niodepth=8\nsize=64m\n"
              "time_based\nruntime=3\n\n[randwrite]\nrw=randwrite\nbs=4k\nioengine=libaio\n"
              "direct=1\niodepth=8\nsize=64m\ntime_based\nruntime=3\nstonewall\n")


def test_three_pods_on_one_rwx_volume(kube, namespace, k8s_env, store_path, tmp_path):
    """Issue #6 item 4: N pods, one RWX volume, fio through exec; per-pod rows and an
    aggregate that is the sum, with percentiles from the merged histogram."""
    job = write_job(tmp_path, "randrw.fio", RANDRW_JOB)
    proc = run_cli("run", "--storage-class", "local-hostpath", "--clients", "3",
                   "--access-mode", "RWX", "--job", str(job), "-n", namespace,
                   db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert leftovers(kube, namespace) == []
    run = json.loads(run_cli("show", "last", "--json", "--raw", db=store_path).stdout)
    pods = run["environment"]["kubernetes"]["pods"]
    assert len(pods) == 3 and set(pods.values()) == {"localhost"}
    assert run["environment"]["target"]["access_mode"] == "ReadWriteMany"
    for test, direction in (("randread", "read"), ("randwrite", "write")):
        agg = next(t for t in run["tests"] if t["name"] == test)
        rows = [h for h in run["per_host"] if h["name"] == test]
        assert sorted(h["host"] for h in rows) == sorted(pods)
        assert all(h[direction]["iops"] > 0 for h in rows)
        assert agg[direction]["iops"] == pytest.approx(sum(h[direction]["iops"] for h in rows))
        for p in (50.0, 99.0, 99.9):
            assert agg[direction]["clat"]["percentiles_ns"][str(p)] == merged_percentile(
                rows, direction, p)
        assert f"{test}: per pod" in proc.stdout
        assert_finish_line(proc.stdout, test, "pod")
    texts = run["job_files"][0]  # one volume: per-pod file names, so pods never collide
    assert "# pod " in texts and "-p0." in texts and "-p2." in texts


def _volume_dir(kube, namespace: str, timeout: float = 60) -> Path:
    """The directory on this machine of the one volume made in ``namespace`` (the
    test-bed's hostPath provisioner makes it before the PV), once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pv in kube.core.list_persistent_volume().items:
            ref = pv.spec.claim_ref
            if ref is not None and ref.namespace == namespace and pv.spec.host_path:
                return Path(pv.spec.host_path.path)
        time.sleep(0.05)
    raise AssertionError(f"no volume was made in {namespace}")


def test_a_shared_file_is_laid_out_once_from_the_first_pod(kube, namespace, k8s_env,
                                                          store_path, tmp_path):
    """--shared-file: every pod's fio found the file missing or short and laid it out
    (unlinking it first), the others reading it meanwhile. Now the first pod lays each
    test's files out alone first, and every pod starts on them whole: each file is
    created and written once, and opened by nobody before it is whole (inotify on the
    volume's directory). Without it the run failed here 4 times in 4 (a pod's fio:
    "No such file or directory", the name unlinked under it by another's layout)."""
    from tests.inotify import Events

    job = write_job(tmp_path, "two.fio", "[global]\nrw=randread\nbs=512\nsize=128m\n"
                                         "time_based\nruntime=2\n[a]\n[b]\n")
    proc = subprocess.Popen(
        [*STORBENCH, "run", "--storage-class", "local-hostpath", "--clients", "3",
         "--access-mode", "RWX", "--shared-file", "--job", str(job), "-n", namespace],
        env={**os.environ, **k8s_env, "STORBENCH_DB": str(store_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Events(_volume_dir(kube, namespace)) as seen:
            _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    run = show_json(store_path)
    pods = sorted(run["environment"]["kubernetes"]["pods"])
    uid = re.search(r"storbench-(\w+)", run["job_files"][0])[1]
    for name in (f"storbench-{uid}-a.data", f"storbench-{uid}-b.data"):
        events = [what for what, path in seen.events if path.name == name]
        # created and written once; opened by nobody else before it was whole
        assert events.count("create") == 1 and events.count("written") == 1, events
        assert events[:events.index("written")].count("open") == 1, events
    assert f"each test's file is laid out from pod {pods[0]} first" in stderr
    assert leftovers(kube, namespace) == []


@needs_timing  # a class capped at 3000 IOPS: its truth, alone
def test_three_pods_each_on_its_own_throttled_volume(kube, namespace, k8s_env, store_path,
                                                     tmp_path):
    # Each pod's container is capped at 3000 write IOPS: together, 9000.
    job = write_job(tmp_path, "randwrite.fio",
                    "[randwrite]\nrw=randwrite\nbs=4k\nioengine=libaio\ndirect=1\niodepth=16\n"
                    "size=128m\ntime_based\nruntime=8\nramp_time=2\n")
    proc = run_cli("run", "--storage-class", "throttled-3000iops", "--clients", "3",
                   "--job", str(job), "-n", namespace, db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    run = show_json(store_path)
    # What the caps guarantee: no pod above its own 3000, so the three never share one
    # cap (that would be 1000 each). Reaching the cap is the machine's part: three fio
    # processes on 2 busy cores once gave 8569 in all (2856 a pod), so each pod is held
    # to 85% of its cap from below, not 3%.
    per_pod = [h["write"]["iops"] for h in run["per_host"]]
    assert len(per_pod) == 3 and all(0.85 * 3000 <= v <= 1.03 * 3000 for v in per_pod), per_pod
    assert run["tests"][0]["write"]["iops"] == pytest.approx(sum(per_pod), rel=0.01)
    assert leftovers(kube, namespace) == []  # three PVCs and their PVs, all gone


def test_a_failing_pod_fails_the_run_naming_it(kube, namespace, k8s_env, store_path,
                                               tmp_path):
    # The shared file is laid out by nobody: the first pod's fio refuses to create it.
    job = write_job(tmp_path, "nofile.fio",
                    "[x]\nrw=read\nfilename=missing\nallow_file_create=0\nsize=1m\n")
    proc = run_cli("run", "--storage-class", "local-hostpath", "--clients", "2",
                   "--access-mode", "RWX", "--shared-file", "--job", str(job),
                   "-n", namespace, db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "file creation disallowed")
    assert show_json(store_path)["status"] == "failed"
    assert leftovers(kube, namespace) == []


def test_a_pod_deleted_mid_run_fails_the_run_naming_it(kube, namespace, k8s_env, store_path):
    proc = subprocess.Popen(
        [*STORBENCH, "run", "--storage-class", "local-hostpath", "--clients", "2",
         "--access-mode", "RWX", "--runtime", "60", "--size", "64m", "-n", namespace],
        env={**os.environ, **k8s_env, "STORBENCH_DB": str(store_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_fio(kube, namespace)
        victim = sorted(p.metadata.name for p in managed_pods(kube, namespace))[1]
        start = time.monotonic()
        kube.core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
        _, stderr = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr
    assert time.monotonic() - start < 60  # not the test's 60 s: the others were stopped
    errors = [ln for ln in stderr.splitlines() if ln.startswith("storbench: error:")]
    assert len(errors) == 1 and victim in errors[0], stderr
    assert leftovers(kube, namespace) == []


def _storbench(namespace: str, k8s_env, store_path, *args: str) -> subprocess.Popen[str]:
    """`storbench run --storage-class local-hostpath ARGS -n NAMESPACE`, its output piped."""
    return subprocess.Popen(
        [*STORBENCH, "run", "--storage-class", "local-hostpath", *args, "-n", namespace],
        env={**os.environ, **k8s_env, "STORBENCH_DB": str(store_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kubelet_stopped(kubelet: int, began, within_s: float, then=lambda: None) -> bool:
    """The test-bed's kubelet stopped (SIGSTOP), ``then()``, and whether ``began()`` came
    true within ``within_s``; the kubelet goes on (SIGCONT) in any case."""
    os.kill(kubelet, signal.SIGSTOP)
    try:
        then()
        return until(began, within_s, 0.2)
    finally:
        os.kill(kubelet, signal.SIGCONT)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_k8s_cleanup_says_what_it_waits_for_and_ctrl_c_what_is_left(kube, namespace, k8s_env,
                                                                    store_path, as_json):
    """`k8s cleanup` after a killed run, with its pod's node not answering (its kubelet
    stopped): after 5 s it says what it waits for, and Ctrl-C ends the wait naming what is
    still there (exit 130), after what it deleted; the cluster deletes the rest once the
    node answers. Before, it waited 2 minutes, silent, and Ctrl-C said only "interrupted"
    (then nothing of what it had deleted)."""
    kubelet = kubelet_pid()
    env = {**os.environ, **k8s_env, "STORBENCH_DB": str(store_path)}
    proc = subprocess.Popen(
        [*STORBENCH, "run", "--storage-class", "local-hostpath", "--runtime", "60", "--size",
         "64m", "-n", namespace], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_fio(kube, namespace)
    finally:
        proc.kill()
        proc.wait()
    os.kill(kubelet, signal.SIGSTOP)  # 25 s at most (its node not ready after 40 s)
    try:
        cleanup = subprocess.Popen([*STORBENCH, "k8s", "cleanup", "-n", namespace,
                                    *(["--json"] if as_json else [])], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        said, reader = heard(cleanup)
        waiting = until(lambda: any("(Ctrl-C: stop waiting)" in ln for ln in said), 15, 0.2)
        cleanup.send_signal(signal.SIGINT)
        try:
            cleanup.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cleanup.kill()
            cleanup.wait()
    finally:
        os.kill(kubelet, signal.SIGCONT)
    reader.join(10)
    stderr = "".join(said)
    assert cleanup.stdout is not None
    stdout = cleanup.stdout.read()
    assert waiting, stderr
    assert cleanup.returncode == 130, (cleanup.returncode, stderr)
    # what went (the run's ConfigMap: the API's alone) is said as without Ctrl-C
    if as_json:
        answer = json.loads(stdout)
        assert [d["kind"] for d in answer["deleted"]] == ["ConfigMap"], answer
        assert answer["problems"][0].startswith(f"still there: Pod {namespace}/"), answer
    else:
        assert re.search(rf"^deleted ConfigMap {namespace}/storbench-\S+ \(run ", stdout,
                         re.M), stdout
        assert f"Pod {namespace}/" not in stdout, stdout
    assert re.search(rf"\nstorbench: cleaning up: still there: [^\n]*Pod {namespace}/storbench-"
                     r"[^\n]*\(`storbench k8s cleanup` again once their node answers\)\n"
                     r"storbench: error: interrupted by SIGINT\n", stderr), stderr
    assert until(lambda: leftovers(kube, namespace) == [], 120, 1), leftovers(kube, namespace)


def _cleanup_began(kube, namespace: str) -> bool:
    """storbench's cleanup began: a pod of its marked for deletion, or none left."""
    pods = managed_pods(kube, namespace)
    return not pods or any(p.metadata.deletion_timestamp is not None for p in pods)


def test_a_pod_deleted_while_its_node_is_slow_to_kill_it_stops_the_others_at_once(
        kube, namespace, k8s_env, store_path):
    """A pod deleted while its node's kubelet does not act (stopped here with SIGSTOP for
    up to 15 s; beside the other lanes of a full test run a busy node took ~60 s): fio
    goes on in it and its exec stays open, but the API says the pod is gone. storbench
    stops the other pod's fio and begins its cleanup while the kubelet is still stopped
    (the other pod marked for deletion), then fails naming the deleted pod. Before, it
    waited for the exec: the test's whole length."""
    kubelet = kubelet_pid()
    proc = _storbench(namespace, k8s_env, store_path, "--clients", "2", "--access-mode", "RWX",
                      "--runtime", "60", "--size", "64m")
    try:
        _wait_for_fio(kube, namespace)
        victim, other = sorted(p.metadata.name for p in managed_pods(kube, namespace))[1::-1]
        # fio running in both (an exec that has yet to connect waits for the kubelet)
        assert until(lambda: proc.poll() is not None or all(
            _fio_in(kube, namespace, pod) for pod in (victim, other)), 60, 0.5)
        assert proc.poll() is None, "storbench ended before fio ran in both pods"
        marked = _kubelet_stopped(
            kubelet, lambda: (pod := kube.read("Pod", other, namespace)) is None
            or pod.metadata.deletion_timestamp is not None, 15,
            lambda: kube.core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0))
        _, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert marked, "storbench began no cleanup in 15 s with the kubelet stopped"
    assert proc.returncode == 1, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("storbench: error:")]
    assert len(errors) == 1 and f"{victim} stopped during the test: the pod is" in errors[0], \
        stderr
    assert leftovers(kube, namespace) == []


def _fio_of_pods(kube, namespace: str) -> list[int]:
    """PIDs of the fio processes in storbench's pods of the namespace (the test-bed's node
    is this machine: each pod's processes are in its cgroup, named by its uid; other
    lanes' fio is not)."""
    from tests.testbed import processes

    uids = [p.metadata.uid for p in managed_pods(kube, namespace)]

    def in_pod(pid: int) -> bool:
        try:
            groups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return False
        return any(f"pod{uid}" in groups or f"pod{uid.replace('-', '_')}" in groups
                   for uid in uids)

    return [pid for pid in processes(lambda argv: argv[0].endswith(b"fio")) if in_pod(pid)]


def test_ctrl_c_while_a_pod_s_node_does_not_answer_cleans_up_and_a_second_ends_the_wait(
        kube, namespace, k8s_env, store_path):
    """As the first fio in the pods ends (the pods' facts read with `fio --version`, a
    layout, or the first test), their node stops answering (its kubelet stopped), and
    storbench waits in its next exec (a stream open and silent). Ctrl-C ends that wait:
    the cleanup begins (the pods marked for deletion) while the kubelet is still stopped.
    The deleted pods cannot go while their node does not answer: the cleanup says what it
    waits for, and a second Ctrl-C ends its wait; the run ends as interrupted, naming what
    is left and `storbench k8s cleanup`, and the cluster deletes it all once the node
    answers again. Before, only fio's own execs heeded Ctrl-C: where the stop caught the
    facts being read (60 s) or fio's output (120 s), storbench waited that long, deaf to
    it (beside two busy processes: 2 of 6 tries); and the cleanup waited 2 minutes for the
    pods, silent, deaf to any more signals."""
    kubelet = kubelet_pid()
    proc = _storbench(namespace, k8s_env, store_path, "--clients", "2", "--access-mode", "RWX",
                      "--suite", "quick", "--runtime", "3", "--ramp", "0", "--size", "64m")
    said, reader = heard(proc)
    wrong = "not stopped"
    try:
        assert until(lambda: proc.poll() is not None or _fio_of_pods(kube, namespace), 120,
                     0.2), "fio never ran in the pods"
        assert until(lambda: proc.poll() is not None or not _fio_of_pods(kube, namespace),
                     60, 0.05), "the first test's fio did not end"
        assert proc.poll() is None, "storbench ended after its first test"
        wrong = ctrl_c_twice(proc, said, kubelet)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_ended_by_ctrl_c_twice(kube, namespace, store_path, proc, said, reader, wrong)


def test_a_pod_whose_fio_goes_quiet_is_said_so_not_the_storage(kube, namespace, k8s_env,
                                                               store_path):
    """fio says how it goes every second; with its node's kubelet stopped mid-test, the
    pod's exec stream says nothing more. At the run's time limit the failure says fio went
    quiet in that pod (its connection through the node), not that the target stopped
    responding: before, it said "no I/O for N s" of storage that nobody had seen."""
    kubelet = kubelet_pid()
    started = time.monotonic()
    proc = _storbench(namespace, k8s_env, store_path, "--runtime", "60", "--ramp", "0",
                      "--size", "64m", "--timeout", "40")
    marked = False
    try:
        assert until(lambda: proc.poll() is not None or _fio_of_pods(kube, namespace), 120,
                     0.2), "fio never ran in the pod"
        # its status lines heard; the kubelet stopped for the run's last 20 s of 40 at
        # most (a node is marked not ready after 40 s or more without a word)
        time.sleep(max(2.0, started + 20 - time.monotonic()))
        assert proc.poll() is None, "storbench ended as fio began"
        (pod,) = [p.metadata.name for p in managed_pods(kube, namespace)]
        marked = _kubelet_stopped(kubelet, lambda: _cleanup_began(kube, namespace), 45)
        _, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert marked, "no cleanup began at the run's time limit"
    assert proc.returncode == 1, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("storbench: error:")]
    assert len(errors) == 1, stderr
    assert re.search(rf"fio went quiet during test '[a-z_]+': no word from it in pod {pod}"
                     r" for \d+ s, where it says how it goes every second;", errors[0]), \
        errors[0]
    assert "stopped responding" not in stderr, stderr
    assert leftovers(kube, namespace) == []


def test_a_restricted_namespace_on_a_tainted_node_with_an_account_and_a_pull_secret(
        kube, k8s_env, store_path):
    """A shared cluster's namespace: Pod Security "restricted" enforced (a root pod is
    refused there, for real), the only node tainted for storage work, a service account
    the namespace's policies bind, registry credentials. The run is admitted, scheduled
    and measured; nothing is left."""
    name = f"sbt-r-{secrets.token_hex(3)}"
    kube.core.create_namespace({"metadata": {"name": name, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}})
    node = kube.core.list_node().items[0].metadata.name
    taint = {"key": f"storbench-test-{secrets.token_hex(3)}", "value": "storage",
             "effect": "NoSchedule"}
    try:
        with pytest.raises(client.exceptions.ApiException, match="restricted"):
            kube.core.create_namespaced_pod(name, {
                "metadata": {"name": "root"}, "spec": {"containers": [
                    {"name": "c", "image": "localhost/pause:local",
                     "securityContext": {"runAsUser": 0}}]}})
        kube.core.create_namespaced_service_account(name, {"metadata": {"name": "bench"}})
        auth = base64.b64encode(b'{"auths": {"registry.example": {"auth": "eDp5"}}}').decode()
        kube.core.create_namespaced_secret(name, {
            "metadata": {"name": "regcred"}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": auth}})
        kube.core.patch_node(node, {"spec": {"taints": [*taints(kube, node), taint]}})
        proc = run_cli("run", "--storage-class", "local-hostpath", "--suite", "quick", *SHORT,
                       "-n", name, "--toleration", f"{taint['key']}=storage:NoSchedule",
                       "--service-account", "bench", "--image-pull-secret", "regcred",
                       db=store_path, env=k8s_env)
        assert proc.returncode == 0, proc.stderr
        run = show_json(store_path, "last")
        assert run["status"] == "completed" and run["tests"]
        assert leftovers(kube, name) == []
    finally:
        kept = [t for t in taints(kube, node) if t["key"] != taint["key"]]
        kube.core.patch_node(node, {"spec": {"taints": kept or None}})
        kube.core.delete_namespace(name)


def taints(kube, node: str) -> list[dict]:
    return [{"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
            for t in kube.core.read_node(node).spec.taints or []]
