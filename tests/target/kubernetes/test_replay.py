"""`storbench run --storage-class CLASS --replay NAME` on the real test-bed: an application's
recorded I/O (fio as the application, recorded for real with strace on tmpfs) replayed
in a pod on a fresh volume of the class; the iolog is written into the pod's scratch
directory in pieces (tests/pipeline/test_replay.py has the directory side)."""

from __future__ import annotations

import pytest

from storbench.store import Store, workloads
from storbench.target.kubernetes import storageclass
from tests.cli.test_cli import assert_one_line_error, show_json
from tests.conftest import needs_fio, run_cli
from tests.k8s import leftovers
from tests.pipeline.test_replay import _record_fio, needs_strace

pytestmark = [needs_fio, needs_strace]


def test_a_recorded_application_replayed_on_a_storage_class(kube, namespace, k8s_env,
                                                             store_path, tmpfs):
    _, w = _record_fio(store_path, tmpfs, "app")  # reads, writes and fsyncs on 1 MiB
    recorded = w["counts"]
    proc = run_cli("run", "--storage-class", "local-hostpath", "--replay", "app", "-n",
                   namespace, db=store_path, env=k8s_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = show_json(store_path)
    assert run["status"] == "completed"
    replay = run["data"]["replay"]
    issued = replay["issued"]
    # what the pod's fio issued is what the application did (the replay's own check
    # fails the run beyond 1 %)
    assert issued["reads"] == recorded["reads"] and issued["writes"] == recorded["writes"]
    assert issued["syncs"] == recorded["syncs"]
    assert replay["timed"] and replay["lag_s"] is not None
    assert replay["prefilled"]  # the file it reads was written in the pod first
    assert run["environment"]["kubernetes"]["image"]  # it ran in the class's pod
    assert leftovers(kube, namespace) == []


def test_a_long_iolog_goes_to_the_pod_in_pieces(kube, namespace, k8s_env, store_path,
                                                 tmpfs):
    """An iolog of several exec pieces (PUT_CHUNK each), replayed as fast as possible:
    every call issued, so every piece arrived, in order (a lost or reordered piece breaks
    fio's parsing of the iolog or its counts)."""
    _, w = _record_fio(store_path, tmpfs, "long", fio=("--io_size=32m",))  # 8,192 calls
    store = Store(store_path)
    try:
        iolog = workloads.get(store, "long").iolog(store)
    finally:
        store.close()
    # the stored iolog names f0001...; the pod's names the scratch path: longer still
    assert len(iolog) > 2 * storageclass.PUT_CHUNK, len(iolog)
    proc = run_cli("run", "--storage-class", "local-hostpath", "--replay", "long",
                   "--replay-fast", "-n", namespace, db=store_path, env=k8s_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    replay = show_json(store_path)["data"]["replay"]
    assert not replay["timed"] and replay["lag_s"] is None
    assert replay["issued"] == {k: w["counts"][k] for k in ("reads", "writes", "syncs")}
    assert leftovers(kube, namespace) == []


@pytest.mark.parametrize("shape", [("--clients", "2", "--access-mode", "RWX"),
                                   ("--volume-mode", "Block")], ids=["pods", "block"])
def test_replay_on_several_pods_or_a_block_volume_is_refused(shape, namespace, k8s_env,
                                                             store_path, tmpfs):
    _record_fio(store_path, tmpfs, "app")
    proc = run_cli("run", "--storage-class", "local-hostpath", "--replay", "app", *shape,
                   "-n", namespace, db=store_path, env=k8s_env, timeout=600)
    assert_one_line_error(proc, 2, "one pod on a Filesystem volume")
    assert "StorageClass local-hostpath" not in proc.stderr  # refused before creating


def test_replay_on_fio_servers_is_refused_before_any_is_reached(tmp_path, store_path, tmpfs):
    """A host whose fio server storbench did not start over SSH (an agent) has no way to
    take the iolog: refused before any host is reached (none listens at port 1)."""
    _record_fio(store_path, tmpfs, "app")
    proc = run_cli("run", str(tmp_path), "--hosts", "127.0.0.1:1", "--replay", "app",
                   db=store_path, timeout=60)
    assert_one_line_error(proc, 2, "not reached over SSH (ssh://HOST): 127.0.0.1:1")
