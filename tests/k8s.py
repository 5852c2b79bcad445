"""The real Kubernetes of ../shared/testbed/k8s for tests: its kubeconfig, a namespace
per test, and what storbench left in it (read through the real API)."""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from storbench.execute.kubernetes import Kube
from storbench.target.kubernetes import SELECTOR

REPO = Path(__file__).resolve().parents[1]
# The team's test-bed: $STORBENCH_K8S_TESTBED, else shared/testbed/k8s beside the
# repository or beside one of its parent directories (../shared, ../../shared, ...).
_CANDIDATES = [d / "shared/testbed/k8s" for d in REPO.parents]
TESTBED = Path(os.environ.get("STORBENCH_K8S_TESTBED")
               or next((c for c in _CANDIDATES if c.exists()), _CANDIDATES[0]))
IMAGE = "localhost/fio:3.33"  # the test-bed's image: Debian 12's fio 3.33 and busybox


def testbed_home() -> Path:
    return Path(os.environ.get("K8S_TESTBED_HOME") or Path.home() / ".cache/k8s-testbed")


def load_image(ref: str, source: Path) -> None:
    """The test-bed's load-image of SOURCE as REF, and the image is in its containerd.

    load-image checks its import with `ctr images ls -q | grep -qxF REF` under `set -o
    pipefail`: when grep has its line and exits while ctr still writes the names after it,
    ctr dies of SIGPIPE and the check says "import did not create" an image it did create
    (seen once in CI, with more images in the store than here). That one message is
    checked again here by reading ctr's whole list; any other failure fails the test."""
    loaded = subprocess.run([str(TESTBED / "load-image"), ref, str(source)],
                            capture_output=True, text=True, timeout=300)
    if loaded.returncode == 0:
        return
    assert "import did not create" in loaded.stderr, loaded.stderr
    sock = testbed_home() / "run/containerd/containerd.sock"
    listed = subprocess.run(["ctr", "--address", str(sock), "-n", "k8s.io", "images", "ls",
                             "-q"], capture_output=True, text=True, timeout=60, check=True)
    assert ref in listed.stdout.split(), loaded.stderr + listed.stdout


def _unavailable(reason: str) -> None:
    if os.environ.get("STORBENCH_REQUIRE_K8S") == "1":  # set by scripts/test after `up`
        pytest.fail(f"the Kubernetes test-bed is required but {reason}")
    pytest.skip(f"Kubernetes test-bed: {reason} (scripts/test starts it as root)")


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    status = TESTBED / "status"
    if not status.exists():
        _unavailable(f"{status} does not exist")
    proc = subprocess.run([str(status)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        _unavailable(f"not up: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> Kube:
    return Kube(kubeconfig)


@pytest.fixture
def k8s_env(kubeconfig: str) -> dict[str, str]:
    return {"KUBECONFIG": kubeconfig, "STORBENCH_IMAGE": IMAGE}


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace; deleted afterwards (not waited for)."""
    name = f"sbt-{secrets.token_hex(4)}"
    kube.core.create_namespace({"metadata": {"name": name}})
    yield name
    kube.core.delete_namespace(name)


@pytest.fixture(scope="session")
def csi_driver(kubeconfig: str) -> str:
    """The CSI hostpath driver on the test-bed (scripts/install-csi-hostpath: built once,
    then only checked and re-applied); its StorageClass's name."""
    proc = subprocess.run([str(REPO / "scripts/install-csi-hostpath")], capture_output=True,
                          text=True, timeout=1200,
                          env={**os.environ, "STORBENCH_K8S_TESTBED": str(TESTBED)})
    if proc.returncode != 0 or proc.stdout.strip().splitlines()[-1:] != ["ready"]:
        _unavailable(f"the CSI hostpath driver did not install: {proc.stderr[-1500:]}")
    return "csi-hostpath-sc"


@pytest.fixture
def noclone_driver(csi_driver: str, kube: Kube) -> Iterator[str]:
    """A second CSI hostpath driver, built without the CLONE_VOLUME capability (as AWS
    EBS's driver has none), beside the first for one test; its StorageClass's name. Its
    volumes go before it does (what a failed test left: a volume whose driver is gone
    stays mounted, and the kubelet retries its unmount for ever)."""
    script = str(REPO / "scripts/install-csi-hostpath")
    env = {**os.environ, "STORBENCH_K8S_TESTBED": str(TESTBED)}
    sc = "csi-hostpath-noclone-sc"
    proc = subprocess.run([script, "--noclone"], capture_output=True, text=True, timeout=600,
                          env=env)
    try:
        if proc.returncode != 0 or proc.stdout.strip().splitlines()[-1:] != ["ready"]:
            _unavailable(f"the driver without CLONE_VOLUME did not install:"
                         f" {proc.stderr[-1500:]}")
        yield sc
    finally:
        claims = [(c.metadata.namespace, c.metadata.name) for c in
                  kube.core.list_persistent_volume_claim_for_all_namespaces().items
                  if c.spec.storage_class_name == sc]
        pods = [("Pod", p.metadata.namespace, p.metadata.name) for p in
                kube.core.list_pod_for_all_namespaces().items
                if any(v.persistent_volume_claim is not None
                       and (p.metadata.namespace, v.persistent_volume_claim.claim_name) in claims
                       for v in p.spec.volumes or [])]
        if claims:
            kube.delete_and_wait([*pods, *(("PersistentVolumeClaim", ns, n)
                                           for ns, n in claims)], 120)
        subprocess.run([script, "--remove-noclone"], capture_output=True, timeout=300,
                       env=env, check=False)


def kubelet_orphans() -> set[str]:
    """The kubelet's directories of CSI hostpath volumes the driver no longer has
    (scripts/csi_orphans.py): what a pod deleted without a grace period leaves."""
    spec = importlib.util.spec_from_file_location("csi_orphans", REPO / "scripts/csi_orphans.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = testbed_home()
    return set(module.find(str(base / "state/kubelet/pods"),
                           str(base / "state/csi-hostpath-data/state.json")))


def leftovers(kube: Kube, namespace: str) -> list[str]:
    """storbench's objects in the namespace (VolumeSnapshots too), PVs that were bound to
    claims in it, and snapshot contents of snapshots that were in it."""
    found = [f"{m.kind} {m.name}" for m in kube.managed(namespace)]
    try:
        contents = kube.custom.list_cluster_custom_object(
            "snapshot.storage.k8s.io", "v1", "volumesnapshotcontents")["items"]
    except client.ApiException:  # no snapshot API on this cluster
        contents = []
    found += [f"VolumeSnapshotContent {c['metadata']['name']}" for c in contents
              if c["spec"]["volumeSnapshotRef"].get("namespace") == namespace]
    found += [f"ConfigMap {c.metadata.name}" for c in
              kube.core.list_namespaced_config_map(namespace).items
              if c.metadata.name.startswith("storbench-")]
    found += [f"PersistentVolume {pv.metadata.name}" for pv in
              kube.core.list_persistent_volume().items
              if pv.spec.claim_ref is not None and pv.spec.claim_ref.namespace == namespace]
    return sorted(set(found))


def interrupted(args: list[str], env: dict[str, str], ready: Callable[[], bool],
                sig: int = signal.SIGINT, wait_s: float = 60) -> tuple[int, str, str]:
    """Run `storbench ARGS` with ``env`` added, wait (up to ``wait_s``: it must come) until
    ``ready()``, send ``sig`` while it still runs, and give its exit code, stdout and
    stderr (killed if it has not ended 150 s later)."""
    from tests.conftest import STORBENCH

    proc = subprocess.Popen([*STORBENCH, *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + wait_s
        while not (seen := ready()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert seen, f"not ready after {wait_s:g} s"
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def kubelet_pid() -> int:
    """The PID of the test-bed's kubelet (a process of this machine's)."""
    from tests.testbed import processes

    found = processes(lambda argv: len(argv) > 1 and argv[0].endswith(b"kubehyper")
                      and argv[1] == b"kubelet")
    if not found:
        pytest.skip("no kubelet of the test-bed's on this machine")
    return found[0]


def heard(proc: subprocess.Popen[str]) -> tuple[list[str], threading.Thread]:
    """``proc``'s stderr lines as they come (read by the thread given, to its end)."""
    said: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return said, reader


def ctrl_c_twice(proc: subprocess.Popen[str], said: list[str], kubelet: int) -> str:
    """With the kubelet stopped (SIGSTOP), Ctrl-C, then, once storbench says what its
    cleanup waits for (within 15 s), Ctrl-C again, and storbench's end waited for 10 s
    more; what went wrong ("" if nothing did). The kubelet goes on (SIGCONT) after 30 s at
    most, storbench ended or not: after 40 s its node is not ready, and the next tests'
    pods wait."""
    os.kill(kubelet, signal.SIGSTOP)
    try:
        time.sleep(3)  # storbench waits for the node: an exec, or a pod's deletion
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 15
        while not (waiting := any("(Ctrl-C again: stop waiting)" in ln for ln in said)) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "storbench did not end within 10 s of the second Ctrl-C"
    finally:
        os.kill(kubelet, signal.SIGCONT)
    return "" if waiting else "no word of what the cleanup waits for within 15 s of Ctrl-C"


def assert_ended_by_ctrl_c_twice(kube: Kube, namespace: str, store_path: Path,
                                 proc: subprocess.Popen[str], said: list[str],
                                 reader: threading.Thread, wrong: str) -> None:
    """After `ctrl_c_twice` (``wrong`` what it said went wrong): storbench ended as
    interrupted, its cleanup's words name its pod still there, not waited for, and `k8s
    cleanup`; the cluster deletes it all once the node answers again."""
    from tests.cli.test_cli import show_json
    from tests.conftest import until

    reader.join(10)
    stderr = "".join(said)
    assert not wrong, f"{wrong}: {stderr}"
    assert proc.returncode == 130, stderr
    assert re.search(rf"\n *storbench: cleaning up: Pod {namespace}/[^ ]+[ ,][^\n]*: still there,"
                     rf" not waited for after a second signal\. Run `storbench k8s cleanup"
                     rf" --namespace {namespace}`\n", stderr), stderr
    assert show_json(store_path)["status"] == "interrupted"
    assert until(lambda: leftovers(kube, namespace) == [], 120, 1), leftovers(kube, namespace)


def managed_pods(kube: Kube, namespace: str) -> list[client.V1Pod]:
    return list(kube.core.list_namespaced_pod(namespace, label_selector=SELECTOR).items)


def grant(kube: Kube, namespace: str, name: str, rules: list[dict[str, list[str]]],
          account: str = "bench", timeout: float = 30) -> None:
    """A Role NAME of RULES bound to the ServiceAccount ACCOUNT, and the API server's
    authorizer already applying it: it reads Roles and bindings from its own watch, so a
    call right after their creation can still be refused ("cannot create resource
    volumesnapshots": a CI run of 2026-12-03). Each rule's every verb is asked of a
    SubjectAccessReview until it is allowed."""
    rbac = client.RbacAuthorizationV1Api(kube.core.api_client)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    reviews = client.AuthorizationV1Api(kube.core.api_client)
    user = f"system:serviceaccount:{namespace}:{account}"
    asks = [(group, resource, verb) for rule in rules for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]]
    deadline = time.monotonic() + timeout
    while asks:
        group, resource, verb = asks[0]
        sub, _, part = resource.partition("/")
        review = reviews.create_subject_access_review({
            "spec": {"user": user, "groups": ["system:serviceaccounts",
                                              f"system:serviceaccounts:{namespace}"],
                     "resourceAttributes": {"namespace": namespace, "group": group,
                                            "resource": sub, "subresource": part,
                                            "verb": verb}}})
        if review.status is not None and review.status.allowed:
            asks.pop(0)
        elif time.monotonic() > deadline:
            raise AssertionError(f"{user} still may not {verb} {resource} after {timeout} s")
        else:
            time.sleep(0.1)


def restricted_kubeconfig(kube: Kube, namespace: str, admin_kubeconfig: str, tmp_path: Path,
                          verbs_on_exec: list[str]) -> Path:
    """A ServiceAccount whose Role allows all storbench needs, but ``verbs_on_exec`` on
    pods/exec; a kubeconfig that logs in with its token."""
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": "bench"}})
    rules = [{"apiGroups": [""], "resources": ["pods", "configmaps", "persistentvolumeclaims"],
              "verbs": ["get", "list", "create", "delete", "watch"]},
             {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]
    if verbs_on_exec:
        rules.append({"apiGroups": [""], "resources": ["pods/exec"], "verbs": verbs_on_exec})
    grant(kube, namespace, "bench", rules)
    token = kube.core.create_namespaced_service_account_token(
        "bench", namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    if "certificate-authority" in cluster:
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    path = tmp_path / "restricted.kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "bench",
        "clusters": [{"name": "tb", "cluster": cluster}],
        "users": [{"name": "bench", "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "tb", "user": "bench",
                                                   "namespace": namespace}}]}))
    return path
