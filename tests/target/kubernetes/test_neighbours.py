"""`storbench neighbours --storage-class` (#60) on the real single-node Kubernetes of the
test-bed: the victims in the first pod, the aggressors in the others, each pod with its
own PVC of the class, all pinned to the one node by its name."""

from __future__ import annotations

from tests.cli.test_cli import show_json
from tests.conftest import run_cli
from tests.k8s import leftovers


def test_the_victims_pod_beside_the_aggressors_pods_on_one_node(kube, namespace, k8s_env,
                                                                store_path):
    proc = run_cli("neighbours", "--storage-class", "local-hostpath", "--clients", "3",
                   "--node-selector", "kubernetes.io/hostname=localhost", "--victim",
                   "randread", "--max-aggressors", "3", "--step-time", "3", "--size", "64m",
                   "-n", namespace, db=store_path, env=k8s_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = show_json(store_path)
    record = run["data"]["neighbours"]
    pods = sorted({row["host"] for row in run["per_host"]})
    assert len(pods) == 3 and record["places"] == {
        "victims": f"pod {pods[0]}", "aggressors": [f"pod {p}" for p in pods[1:]]}
    ran: dict[str, list[str]] = {}
    for row in run["per_host"]:
        ran.setdefault(row["name"], []).append(row["host"])
    assert all(ran[f"randread-{n}"] == [pods[0]] for n in (1, 2, 3))
    assert ran["aggressors-1"] == [pods[1]] and sorted(ran["aggressors-3"]) == pods[1:]
    assert [s["aggressors"] for s in record["steps"]] == [0, 1, 2, 3]
    for step in record["steps"][1:]:
        assert step["aggressor_bw_bytes_per_s"] > 0
        assert step["victims"]["randread"]["p99_ns"] > 0
    env = run["environment"]
    assert env["kubernetes"]["node"] == "localhost"
    assert leftovers(kube, namespace) == []  # the three PVCs and pods, all gone
