"""`storbench k8s lifecycle` on the real single-node Kubernetes of the test-bed: real
PVCs provisioned and bound in both binding modes, pods running, fio's first write,
PVs deleted; nothing left, also after Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time

import pytest
from kubernetes import client

from storbench.analysis.lifecycle import percentile, summary
from tests.cli.test_cli import assert_one_line_error, show_json
from tests.conftest import STORBENCH, needs, run_cli, until
from tests.k8s import (
    assert_ended_by_ctrl_c_twice,
    ctrl_c_twice,
    heard,
    interrupted,
    kubelet_orphans,
    kubelet_pid,
    leftovers,
    managed_pods,
)


def test_two_classes_timed_stored_and_gated(kube, namespace, k8s_env, store_path):
    proc = run_cli("k8s", "lifecycle", "--storage-class", "local-hostpath",
                   "--storage-class", "local-hostpath-immediate", "--volumes", "3",
                   "--parallel", "2", "-n", namespace, "--assert", "lifecycle.bind.p90 < 60s",
                   db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert leftovers(kube, namespace) == []
    assert proc.stdout.count("Lifecycle of") == 2
    assert "Lifecycle of local-hostpath (WaitForFirstConsumer)" in proc.stdout
    assert "→ Bound" in proc.stdout and "PASS" in proc.stdout
    # each bind row says what it measured: an Immediate class binds from the PVC's creation
    wffc, immediate = proc.stdout.split("Lifecycle of local-hostpath-immediate")
    assert "node chosen for the pod → Bound (WaitForFirstConsumer)" in wffc
    assert "PVC created → Bound (Immediate)" in immediate and "node chosen" not in immediate
    for ref, mode in (("1", "WaitForFirstConsumer"), ("2", "Immediate")):
        run = show_json(store_path, ref)
        assert run["status"] == "completed" and run["suite"] == "k8s-lifecycle"
        assert run["environment"]["target"]["binding_mode"] == mode
        life = run["data"]["lifecycle"]
        assert len(life["volumes"]) == 3
        for v in life["volumes"]:
            t = v["timeline"]
            assert v["error"] is None
            # each phase is a real interval, in the order it happens
            assert 0 <= t["pvc_created"] <= t["pod_created"] <= t["running"]
            assert t["bound"] <= t["running"] <= t["first_write_done"] <= t["pvc_deleted"]
            assert t["pvc_deleted"] <= t["pv_gone"]
            assert v["bind"] >= 0 and v["running"] > 0 and v["delete"] >= 0
            assert 0 < v["first_write"] < 5  # fio's O_SYNC write on the node's disk
            if mode == "WaitForFirstConsumer":
                assert t["node_selected"] >= t["pod_created"]
        s = life["summary"]
        assert s["bind"]["n"] == 3 and s["bind"]["p50"] <= s["bind"]["p90"] <= s["bind"]["max"]
        assert s["running"]["max"] == max(v["running"] for v in life["volumes"])
        assert "resize" in life["not_measured"] and "snapshot" in life["not_measured"]
        assert life["first_write_sync"] == "O_SYNC"
        assert [v["passed"] for v in run["verdicts"]] == [True]
        # where the time went: the volumes' phase holds it (it was missing: 0 s in all)
        (volumes,) = [p for p in run["data"]["phases"] if p["name"].startswith("volumes")]
        assert volumes["name"] == "volumes (3, 2 at a time)"
        assert volumes["end_s"] - volumes["start_s"] >= max(
            v["timeline"]["pv_gone"] for v in life["volumes"])
    failing = run_cli("check", "1", "--assert", "lifecycle.running.max < 1ms", db=store_path)
    assert failing.returncode == 3 and "lifecycle.running.max" in failing.stdout
    # side by side, and in the report with a timeline per volume
    compared = run_cli("compare", "1", "2", db=store_path)
    assert "Kubernetes volume lifecycle" in compared.stdout
    assert "local-hostpath-immediate" in compared.stdout and "Immediate" in compared.stdout
    html = store_path.parent / "life.html"
    assert run_cli("report", "1", "2", "-o", str(html), db=store_path).returncode == 0
    text = html.read_text()
    assert text.count("<rect") == 2 * 3 * 4  # runs x volumes x phases
    assert "Running → first write done" in text


def test_a_class_that_never_binds_fails_and_says_why(kube, namespace, k8s_env, store_path):
    """A PVC of a class with no provisioner stays Pending: the run fails at the timeout
    quoting the claim's events, the next class is measured all the same, and nothing is
    left. A misspelt class among several fails the command before any starts."""
    from kubernetes import client

    proc = run_cli("k8s", "lifecycle", "--storage-class", "local-hostpath",
                   "--storage-class", "sbt-no-such-class", "-n", namespace, db=store_path,
                   env=k8s_env)
    assert_one_line_error(proc, 2, "sbt-no-such-class")
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"
    storage = client.StorageV1Api(kube.core.api_client)
    name = f"sbt-nobody-{namespace[4:]}"
    storage.create_storage_class({"metadata": {"name": name}, "provisioner": "example.com/none",
                                  "volumeBindingMode": "Immediate"})
    try:
        proc = run_cli("k8s", "lifecycle", "--storage-class", name, "--storage-class",
                       "local-hostpath", "--volumes", "1", "--timeout", "15", "-n", namespace,
                       db=store_path, env=k8s_env)
    finally:
        storage.delete_storage_class(name)
    assert proc.returncode == 1
    assert f"storbench: storageclass/{name}: " in proc.stderr
    # (15 s: the timeout is the measured class's too, whose volume, pod and lifecycle
    # took more than 5 s once on a busy machine)
    assert "not bound after 15 s" in proc.stderr
    assert proc.stdout.count("Lifecycle of") == 2
    assert leftovers(kube, namespace) == []
    failed, measured = show_json(store_path, "1"), show_json(store_path, "2")
    assert failed["status"] == "failed" and "not bound" in failed["error"]
    assert failed["data"]["lifecycle"]["summary"]["bind"]["n"] == 0
    assert measured["status"] == "completed" and measured["label"] == "local-hostpath"
    assert failed["label"] == name


@pytest.mark.parametrize("command", [
    ["lifecycle", "--volumes", "4", "--parallel", "1"],
    ["failover", "--rate", "50", "--before", "30"],  # Ctrl-C while fio writes in the pod
], ids=["lifecycle", "failover"])
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130)])
def test_ctrl_c_leaves_nothing(kube, namespace, k8s_env, store_path, command, sig, code):
    def ready() -> bool:
        pods = managed_pods(kube, namespace)
        if command[0] == "lifecycle":
            return bool(pods)
        if not any(p.status.phase == "Running" for p in pods):
            return False
        time.sleep(2)  # the writer pod up and fio writing in it
        return True

    returncode, _, stderr = interrupted(
        ["k8s", *command, "--storage-class", "local-hostpath", "-n", namespace],
        {**k8s_env, "STORBENCH_DB": str(store_path)}, ready, sig)
    assert returncode == code, stderr
    assert leftovers(kube, namespace) == []
    assert show_json(store_path)["status"] == "interrupted"


@pytest.mark.parametrize("command", [
    ["lifecycle", "--volumes", "1"],
    ["failover", "--rate", "50", "--before", "30"],
], ids=["lifecycle", "failover"])
def test_ctrl_c_while_the_node_does_not_answer_ends_at_once(kube, namespace, k8s_env,
                                                            store_path, command):
    """As a pod of `k8s lifecycle` or `k8s failover` runs, its node stops answering (its
    kubelet stopped): what the command waits for then (a command in the pod, its fio
    writing, or the pod's deletion) ends at Ctrl-C, the cleanup says what it waits for,
    and a second Ctrl-C ends that wait; what is left is named with `storbench k8s
    cleanup`, and the cluster deletes it once the node answers. Before, their commands in
    the pods and their own waits for a deleted pod did not heed Ctrl-C (up to 2 minutes,
    the failover's read-back 10), nor did the cleanup's wait (2 minutes)."""
    kubelet = kubelet_pid()
    proc = subprocess.Popen(
        [*STORBENCH, "k8s", *command, "--storage-class", "local-hostpath", "-n", namespace],
        env={**os.environ, **k8s_env, "STORBENCH_DB": str(store_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said, reader = heard(proc)
    wrong = "not stopped"
    try:
        assert until(lambda: proc.poll() is not None or any(
            p.status.phase == "Running" for p in managed_pods(kube, namespace)), 120, 0.2), \
            "no pod of storbench's ran"
        assert proc.poll() is None, "storbench ended as its pod ran"
        wrong = ctrl_c_twice(proc, said, kubelet)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_ended_by_ctrl_c_twice(kube, namespace, store_path, proc, said, reader, wrong)


@pytest.fixture
def retain_class(kube):
    """local-hostpath's provisioner with reclaim policy Retain; its PVs (and the node's
    directories the provisioner made for them) deleted afterwards."""
    name = f"sbt-retain-{secrets.token_hex(3)}"
    provisioner = kube.storage.read_storage_class("local-hostpath").provisioner
    kube.storage.create_storage_class({
        "metadata": {"name": name}, "provisioner": provisioner, "reclaimPolicy": "Retain",
        "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        yield name
    finally:
        for pv in kube.core.list_persistent_volume().items:
            if pv.spec.storage_class_name == name:
                kube.core.delete_persistent_volume(pv.metadata.name)
                if pv.spec.host_path is not None and pv.metadata.name in pv.spec.host_path.path:
                    shutil.rmtree(pv.spec.host_path.path, ignore_errors=True)
        kube.storage.delete_storage_class(name)


def test_ctrl_c_says_what_stays_by_its_reclaim_policy(kube, namespace, k8s_env, store_path,
                                                       retain_class):
    """The cleanup after Ctrl-C deletes the claim; its PV stays (Retain), with its data:
    said, as `run --storage-class` says it (the lifecycle's cleanup said nothing)."""
    returncode, _, stderr = interrupted(
        ["k8s", "lifecycle", "--storage-class", retain_class, "--volumes", "2",
         "--parallel", "1", "-n", namespace], {**k8s_env, "STORBENCH_DB": str(store_path)},
        lambda: any(p.status.phase == "Running" for p in managed_pods(kube, namespace)))
    assert returncode == 130, stderr
    kept = [pv.metadata.name for pv in kube.core.list_persistent_volume().items
            if pv.spec.storage_class_name == retain_class]
    assert kept and all(f"PersistentVolume {pv} stays, by its reclaim policy Retain"
                        in stderr for pv in kept), stderr
    assert [x for x in leftovers(kube, namespace) if x.split()[-1] not in kept] == []


@needs("fio", "tracer",
       unavailable=None if shutil.which("strace") else "strace is not installed")
def test_the_first_write_has_become_durable_when_fio_times_it(tmp_path):
    """The lifecycle's first write, run by the real fio here under strace: its one write
    goes to a file opened O_SYNC, or an fsync of it follows. It was --fsync=1, which fio
    issues before the next write: a job of one write had none, and the figure said
    "durable" of the write alone (27 µs on the test-bed's disk; 614 µs made durable)."""
    from storbench.target.kubernetes.lifecycle import DATA_DIR, FIRST_WRITE

    argv = [a.replace(DATA_DIR, str(tmp_path)) for a in FIRST_WRITE]
    trace = tmp_path / "strace.out"
    proc = subprocess.run(["strace", "-f", "-qq", "-o", str(trace), "-e",
                           "trace=open,openat,pwrite64,fsync,fdatasync", *argv],
                          capture_output=True, text=True, check=True)
    job = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]
    assert job["error"] == 0 and job["write"]["total_ios"] == 1
    lines = trace.read_text().splitlines()
    name = f'"{tmp_path}/storbench-first-write"'
    (wrote,) = [i for i, line in enumerate(lines) if " pwrite64(" in line]  # psync's
    opened = [line for line in lines[:wrote] if name in line and "open" in line][-1]
    synced_after = [line for line in lines[wrote:] if re.search(r"\bf(data)?sync\(", line)]
    assert "O_SYNC" in opened or "O_DSYNC" in opened or synced_after, "\n".join(lines[wrote - 1:])


def test_percentiles_interpolate_between_ranks():
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([7.0], 50) == 7.0
    s = summary([{"bind": 1.0, "running": None}, {"bind": 3.0}])
    assert s["bind"] == {"n": 2, "of": 2, "p50": 2.0, "p90": 2.8, "max": 3.0}
    assert s["running"]["n"] == 0 and s["running"]["p90"] is None


def test_a_failover_pause_is_measured_and_no_acknowledged_write_is_lost(kube, namespace,
                                                                         k8s_env, store_path):
    proc = run_cli("k8s", "failover", "--storage-class", "local-hostpath", "--rate", "50",
                   "--before", "3", "-n", namespace, "--assert", "failover.pause < 120s",
                   db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert "0 acknowledged writes lost" in proc.stdout
    assert leftovers(kube, namespace) == []
    run = show_json(store_path)
    found = run["data"]["failover"]
    assert run["status"] == "completed" and run["suite"] == "k8s-failover"
    (phase,) = [p for p in run["data"]["phases"] if p["name"].startswith("failover")]
    assert phase["end_s"] - phase["start_s"] > found["pause_s"]
    assert found["intact"] and found["acknowledged_writes"] >= 50  # ~150 in 3 s at 50/s
    # two counts, said so that they do not read as a contradiction: the old pod writes on
    # through its grace period
    so_far = int(re.search(r"\((\d+) writes acknowledged so far; it writes until its"
                           r" containers stop\)", proc.stderr)[1])
    read = int(re.search(r"reading back the (\d+) acknowledged writes in pod \S+ \(all the"
                         r" old pod's\)", proc.stderr)[1])
    assert so_far <= read == found["acknowledged_writes"]
    # the parts add up to the pause; the old pod's containers stop before the new runs
    assert sum(found["parts"].values()) == pytest.approx(found["pause_s"], abs=0.01)
    assert all(v >= 0 for v in found["parts"].values())
    assert found["delete_to_old_gone_s"] > 0 and found["pause_s"] > 0
    assert [v["passed"] for v in run["verdicts"]] == [True]
    failing = run_cli("check", "last", "--assert", "failover.pause < 1ms", db=store_path)
    assert failing.returncode == 3


def test_a_failover_by_eviction_and_one_a_disruption_budget_refuses(kube, namespace,
                                                                     k8s_env, store_path):
    """--evict goes through the Eviction API as a drain does: it works like a delete;
    with a PodDisruptionBudget that allows no disruption, the API server refuses it,
    the run fails with its words, and nothing is left."""
    proc = run_cli("k8s", "failover", "--storage-class", "local-hostpath", "--rate", "50",
                   "--before", "2", "--evict", "-n", namespace, db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert "evicting pod" in proc.stderr and "pod evicted → old pod gone" in proc.stdout
    found = show_json(store_path)["data"]["failover"]
    assert found["ended_by"] == "eviction" and found["intact"]
    assert leftovers(kube, namespace) == []
    client.PolicyV1Api(kube.core.api_client).create_namespaced_pod_disruption_budget(
        namespace, {"metadata": {"name": "none"}, "spec": {
            "maxUnavailable": 0,
            "selector": {"matchLabels": {"app.kubernetes.io/managed-by": "storbench"}}}})
    proc = run_cli("k8s", "failover", "--storage-class", "local-hostpath", "--rate", "50",
                   "--before", "2", "--evict", "-n", namespace, db=store_path, env=k8s_env)
    assert_one_line_error(proc, 1, "evicting Pod", "disruption budget")
    # said at once: the refused pod is not waited for as if it were going (it was, for 120 s)
    assert "still there after" not in proc.stderr
    assert show_json(store_path)["status"] == "failed"
    assert leftovers(kube, namespace) == []


def test_a_csi_class_snapshots_restores_clones_and_expands(kube, namespace, k8s_env,
                                                           store_path, csi_driver):
    """The real CSI hostpath driver with its sidecars: every phase timed on 5 volumes, each
    copy's data checked against what was written; the hostPath class beside it says what
    its provisioner cannot do and why; nothing left (snapshots and their contents too, and
    no volume the kubelet could not unmount: a pod deleted without a grace period left it
    one, whose unmount it retried for ever)."""
    orphans = kubelet_orphans()
    proc = run_cli("k8s", "lifecycle", "--storage-class", csi_driver, "--storage-class",
                   "local-hostpath", "--volumes", "5", "-n", namespace,
                   "--assert", "lifecycle.reattach.p90 < 120s", db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert leftovers(kube, namespace) == []
    assert kubelet_orphans() - orphans == set()
    csi, hostpath = proc.stdout.split("Lifecycle of local-hostpath")
    for row in ("VolumeSnapshot created → readyToUse", "PVC from the snapshot created → Bound",
                "first 4 KiB read in a pod", "restored data's first read",
                "PVC from the PVC (clone) created → Bound", "claim's capacity is the new size",
                "5 of 5 volumes intact: clone, restore, volume after the pod moved"):
        assert row in csi and row not in hostpath, row
    # a verdict's figure in seconds, not as a bandwidth (it said "1.18 B/s")
    assert re.search(r"PASS lifecycle\.reattach\.p90 < 120s: measured [\d.]+ (ms|s)\n", csi)
    assert "pod deleted → new pod on the claim Running" in hostpath
    assert "5 of 5 volumes intact: volume after the pod moved" in hostpath
    assert "not supported by" not in csi
    for what in ("snapshot", "restore", "clone"):
        assert f"│ {what} " in hostpath
    assert hostpath.count("not supported by kubehyper.local/hostpath (not a CSI driver") == 3
    assert "not supported by local-hostpath (allowVolumeExpansion is false)" in hostpath
    life = show_json(store_path, "1")["data"]["lifecycle"]
    assert life["not_measured"] == {}
    for v in life["volumes"]:
        assert v["error"] is None
        assert v["verified"] == ["restore", "clone", "volume after the pod moved"]
        t = v["timeline"]
        assert (t["first_write_done"] <= t["snapshot_created"] <= t["snapshot_ready"]
                <= t["pod_moved"] <= t["reattached"] <= t["expanded"] <= t["pvc_deleted"])
        assert 0 < v["snapshot"] <= t["snapshot_ready"] - t["snapshot_created"] + 0.01
        assert 0 <= v["restore"] < v["restore_first_read"] and v["clone"] >= 0
        assert v["restore_read_mibs"] > 0 and v["expand"] > 0 and v["reattach"] > 0
    s = life["summary"]
    for phase in ("snapshot", "restore", "restore_first_read", "restore_read_mibs", "clone",
                  "reattach", "expand", "delete"):
        assert s[phase]["n"] == 5 and s[phase]["p50"] <= s[phase]["p90"] <= s[phase]["max"]
    other = show_json(store_path, "2")["data"]["lifecycle"]
    assert set(other["not_measured"]) == {"snapshot", "restore", "clone", "resize"}
    assert other["summary"]["snapshot"]["n"] == 0 and other["summary"]["reattach"]["n"] == 5
    # an assertion on a phase the class cannot do fails, saying why
    failing = run_cli("check", "2", "--assert", "lifecycle.snapshot.p90 < 60s", db=store_path)
    assert failing.returncode == 3 and "no CSIDriver object" in failing.stdout


def test_a_csi_driver_that_cannot_clone_says_so_at_once(kube, namespace, k8s_env,
                                                        store_path, noclone_driver):
    """A CSI driver without CLONE_VOLUME (AWS EBS's has none) has a CSIDriver object like
    any other: only its provisioner's ProvisioningFailed event says it cannot clone. The
    clone row says so in its words, the volumes carry on (their clone claims deleted), and
    the run completes; it waited for --timeout, then failed every volume."""
    start = time.monotonic()
    proc = run_cli("k8s", "lifecycle", "--storage-class", noclone_driver, "--volumes", "2",
                   "--timeout", "90", "-n", namespace, db=store_path, env=k8s_env)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert leftovers(kube, namespace) == []
    said = ("not supported by hostpath-noclone.csi.k8s.io (its provisioner: CSI driver does"
            " not support clone operations: controller CLONE_VOLUME capability is not"
            " reported)")
    assert "no clones: the provisioner says CSI driver does not support clone" in proc.stderr
    life = show_json(store_path)["data"]["lifecycle"]
    assert life["not_measured"]["clone"] == said
    assert "clone" in proc.stdout and "its provisioner: CSI driver does not support" in proc.stdout
    assert "PVC from the PVC (clone)" not in proc.stdout  # no row of n/a beside it
    for v in life["volumes"]:
        assert v["error"] is None and v["clone"] is None
        assert v["verified"] == ["volume after the pod moved"] and v["reattach"] > 0
    assert took < 90  # not one --timeout per volume


def test_ctrl_c_while_a_snapshot_is_restored_leaves_nothing(kube, namespace, k8s_env,
                                                            store_path, csi_driver):
    """Ctrl-C once a VolumeSnapshot exists: the snapshot, its content, the restore's claim
    and pod are deleted with the rest."""
    returncode, _, stderr = interrupted(
        ["k8s", "lifecycle", "--storage-class", csi_driver, "--volumes", "2", "-n",
         namespace], {**k8s_env, "STORBENCH_DB": str(store_path)},
        lambda: any(m.kind == "VolumeSnapshot" for m in kube.managed(namespace)), wait_s=120)
    assert returncode == 130, stderr
    # the snapshot's content too, at exit: storbench waits for it (a snapshot deleted while
    # its content is being created left the content for the sidecar's 15-min resync)
    assert leftovers(kube, namespace) == []
    assert show_json(store_path)["status"] == "interrupted"


def test_a_failover_on_a_read_write_once_pod_csi_volume(kube, namespace, k8s_env, store_path,
                                                        csi_driver):
    """ReadWriteOncePod on the real CSI driver: the new pod takes the volume once the old
    is gone, and every acknowledged write reads back."""
    proc = run_cli("k8s", "failover", "--storage-class", csi_driver, "--access-mode", "RWOP",
                   "--rate", "50", "--before", "3", "-n", namespace,
                   "--assert", "failover.pause < 120s", db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr
    assert f"Failover on {csi_driver} (ReadWriteOncePod)" in proc.stdout
    assert "0 acknowledged writes lost" in proc.stdout
    run = show_json(store_path)
    assert run["environment"]["target"]["access_mode"] == "ReadWriteOncePod"
    found = run["data"]["failover"]
    assert found["intact"] and found["acknowledged_writes"] >= 50 and found["pause_s"] > 0
    assert leftovers(kube, namespace) == []


def test_lifecycle_pods_are_admitted_where_pod_security_is_restricted(
        kube, k8s_env, store_path, csi_driver):
    """Every pod a lifecycle makes (the volume's, the restore's, the clone's, the moved
    one; failover's are made the same way) in a namespace enforcing Pod Security
    "restricted"."""
    name = f"sbt-r-{secrets.token_hex(3)}"
    kube.core.create_namespace({"metadata": {"name": name, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}})
    try:
        proc = run_cli("k8s", "lifecycle", "--storage-class", csi_driver, "--volumes", "1",
                       "-n", name, db=store_path, env=k8s_env)
        assert proc.returncode == 0, proc.stderr
        life = show_json(store_path)["data"]["lifecycle"]
        assert life["volumes"][0]["verified"] == ["restore", "clone",
                                                  "volume after the pod moved"]
        assert leftovers(kube, name) == []
    finally:
        kube.core.delete_namespace(name)
