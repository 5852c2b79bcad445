"""An s3:// TARGET measured from pods (#59, `run --pods`): fio's http engine in pods of the
real Kubernetes test-bed PUTs, GETs and DELETEs objects of its own at a real S3 server
(s3proxy, which checks every request's signature: tests/objects.py). The test-bed's
pods reach nothing but their node's loopback with hostNetwork (its README: pod IPs are
loopback-class, no routes), where the server listens: --host-network. Their image is
made here from the fio built with the http engine (tests/objects.FIO_HTTP), its
libraries and busybox, as the test-bed makes its own from the host's fio. The secret key
reaches the pods' fio from a Secret of the run's, is in no output, job file or stored
environment, and the Secret, the pods and every object the run put are gone afterwards
(after Ctrl-C too; after SIGKILL once `k8s cleanup` and the next run have run); an image
whose fio lacks the engine is said by name."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from storbench.execute.kubernetes import Kube
from tests.cli.test_cli import show_json
from tests.conftest import STORBENCH, needs, run_cli
from tests.k8s import IMAGE, leftovers, load_image
from tests.objects import FIO_HTTP, S3Server
from tests.objects import PUT_GET_DELETE as JOB
from tests.objects import PUT_GET_DELETE_OBJECTS as OBJECTS

HTTP_IMAGE = "localhost/storbench-test-fio-http:3.33"


@pytest.fixture(scope="module")
def http_image(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The test-bed's image made again with the fio that has the http engine."""
    if not FIO_HTTP.exists():
        pytest.skip(f"fio with the http engine is not built ({FIO_HTTP})")
    busybox = shutil.which("busybox") or "/bin/busybox"
    root = tmp_path_factory.mktemp("fio-http-image")
    for d in ("bin", "tmp", "etc", "data", "usr/bin"):
        (root / d).mkdir(parents=True)
    (root / "tmp").chmod(0o1777)
    shutil.copy(busybox, root / "bin/busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                             check=True).stdout.split()
    for applet in applets:
        if not (root / "bin" / applet).exists():
            (root / "bin" / applet).symlink_to("busybox")
    shutil.copy(FIO_HTTP, root / "usr/bin/fio")
    libs = set()
    for binary in (str(FIO_HTTP), busybox):
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        libs |= {w for w in out.split() if w.startswith("/")}
    for lib in libs:  # at its own path, the dynamic loader too
        (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, root / lib.lstrip("/"), follow_symlinks=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")
    load_image(HTTP_IMAGE, root)
    return HTTP_IMAGE


def _bucket(s3: S3Server) -> str:
    name = f"sbt-pods-{secrets.token_hex(3)}"
    s3.client().create_bucket(Bucket=name)
    return name


def _run(s3: S3Server, bucket: str, job: Path, kubeconfig: str, namespace: str, db: Path,
         *more: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", f"s3://{bucket}/team", "--pods", "--endpoint", s3.url,
                   "--kubeconfig", kubeconfig, "--namespace", namespace, "--job", str(job),
                   *more, db=db, env=s3.env(), timeout=600)


@needs("images")
@pytest.mark.parametrize("s3", ["s3proxy"], indirect=True)
def test_pods_put_get_and_delete_their_own_objects_and_the_key_stays_secret(
        s3, http_image, kube: Kube, kubeconfig, namespace, tmp_path, store_path):
    bucket = _bucket(s3)
    s3.client().put_object(Bucket=bucket, Key="team/keep-me", Body=b"theirs")
    job = tmp_path / "objects.fio"
    job.write_text(JOB)
    before = sorted(s3.keys(bucket))  # (s3proxy's directories list as keys too: "team/")
    # the endpoint is this machine's loopback: a pod's own, unless on the node's network
    proc = _run(s3, bucket, job, kubeconfig, namespace, store_path, "--image", http_image)
    assert proc.returncode == 2 and "--host-network" in proc.stderr, proc.stderr
    # two pods at once, each its own keys
    proc = _run(s3, bucket, job, kubeconfig, namespace, store_path, "--image", http_image,
                "--host-network", "--clients", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on the node's network" in proc.stderr + proc.stdout
    shown = show_json(store_path)
    tests = {t["name"]: t for t in shown["tests"]}
    assert tests["put"]["write"]["total_ios"] == 2 * OBJECTS
    assert tests["get"]["read"]["total_ios"] == 2 * OBJECTS
    assert tests["delete"]["trim"]["total_ios"] == 2 * OBJECTS
    per_pod = [h for h in shown["per_host"] if h["name"] == "get"]
    assert len(per_pod) == 2 and all(h["read"]["total_ios"] == OBJECTS for h in per_pod)
    texts = "\n".join(shown["job_files"])
    assert "/p0/obj.$jobnum" in texts and "/p1/obj.$jobnum" in texts
    assert "ioengine=http" in texts and "${STORBENCH_S3_SECRET}" in texts
    target = shown["environment"]["target"]
    assert target["kind"] == "kubernetes" and target["bucket"] == bucket
    assert target["host_network"] is True and target["namespace"] == namespace
    assert "3.33" in shown["environment"]["fio_version"]
    assert shown["target"] == f"s3://{bucket}/team from pods x2 pods"
    # nothing left in the bucket but what was there, nothing in the namespace; the key
    # in no output and nowhere in the database
    assert sorted(s3.keys(bucket)) == before
    assert leftovers(kube, namespace) == []
    assert [s.metadata.name for s in kube.core.list_namespaced_secret(namespace).items
            if s.metadata.name.startswith("storbench-")] == []
    exported = run_cli("export", "--format", "csv", db=store_path)
    for text in (proc.stdout, proc.stderr, json.dumps(shown), exported.stdout):
        assert s3.secret not in text
    assert s3.secret.encode() not in store_path.read_bytes()


@pytest.mark.parametrize("s3", ["s3proxy"], indirect=True)
def test_an_image_without_the_http_engine_is_named_and_nothing_is_left(
        s3, kube: Kube, kubeconfig, namespace, tmp_path, store_path):
    bucket = _bucket(s3)
    job = tmp_path / "objects.fio"
    job.write_text(JOB)
    # the test-bed's own image: Debian's fio, built without it
    proc = _run(s3, bucket, job, kubeconfig, namespace, store_path, "--image", IMAGE,
                "--host-network")
    assert proc.returncode != 0
    assert f"the image {IMAGE}'s fio has no http engine" in proc.stderr, proc.stderr
    assert "--image" in proc.stderr
    assert s3.keys(bucket) == [] and leftovers(kube, namespace) == []
    assert [s.metadata.name for s in kube.core.list_namespaced_secret(namespace).items
            if s.metadata.name.startswith("storbench-")] == []


def test_pods_are_for_objects_and_have_no_volume(tmp_path, store_path):
    """Refused before any cluster is reached (no kubeconfig needed)."""
    env = {"KUBECONFIG": str(tmp_path / "none"), "AWS_ACCESS_KEY_ID": "a",
           "AWS_SECRET_ACCESS_KEY": "b"}
    for args, said in [
        ((str(tmp_path), "--pods"), "--pods applies to s3:// TARGETs"),
        (("s3://bkt", "--pods", "--storage-class", "x", "--endpoint", "http://10.0.0.1:9"),
         "--pods applies to s3:// TARGETs"),
        (("s3://bkt", "--pods", "--capacity", "10Gi", "--endpoint", "http://10.0.0.1:9"),
         "--capacity: with --pods there is no volume"),
        (("s3://bkt", "s3://ckt", "--pods", "--endpoint", "http://10.0.0.1:9"),
         "with --pods, give one TARGET"),
        ((str(tmp_path), "s3://bkt", "--pods", "--endpoint", "http://10.0.0.1:9"),
         "give no path TARGET or --hosts"),
        (("s3://bkt", "--pods", "--endpoint", "http://127.0.0.1:9"), "--host-network"),
    ]:
        proc = run_cli("run", *args, db=store_path, env=env)
        assert proc.returncode == 2 and said in proc.stderr, (args, proc.stderr)


LONG = """\
[put]
rw=write
bs=64k
size=64m
time_based=1
runtime=60
filename=obj
"""


def _run_args(s3: S3Server, bucket: str, job: Path, kubeconfig: str, namespace: str,
              image: str) -> list[str]:
    return ["run", f"s3://{bucket}/team", "--pods", "--host-network", "--endpoint", s3.url,
            "--kubeconfig", kubeconfig, "--namespace", namespace, "--job", str(job),
            "--image", image]


def _putting(s3: S3Server, bucket: str) -> bool:
    """The run's pods have put objects of theirs (under its storbench-… prefix)."""
    return sum("/storbench-" in k for k in s3.keys(bucket)) > 3


def _secrets(kube: Kube, namespace: str) -> list[str]:
    return [s.metadata.name for s in kube.core.list_namespaced_secret(namespace).items
            if s.metadata.name.startswith("storbench-")]


@needs("images")
@pytest.mark.parametrize("s3", ["s3proxy"], indirect=True)
def test_ctrl_c_and_sigkill_leave_nothing_once_the_next_run_has_run(
        s3, http_image, kube: Kube, kubeconfig, namespace, tmp_path, store_path):
    from tests.k8s import interrupted

    bucket = _bucket(s3)
    before = sorted(s3.keys(bucket))
    job = tmp_path / "long.fio"
    job.write_text(LONG)
    env = {**s3.env(), "STORBENCH_DB": str(store_path)}
    args = _run_args(s3, bucket, job, kubeconfig, namespace, http_image)
    # Ctrl-C while the pods PUT: the pods, the Secret and every object go at once
    code, _, err = interrupted(args, env, lambda: _putting(s3, bucket), wait_s=120)
    assert code == 130 and "interrupted by SIGINT" in err, err
    assert sorted(s3.keys(bucket)) == before
    assert leftovers(kube, namespace) == [] and _secrets(kube, namespace) == []
    # SIGKILL: nothing of storbench's runs. `k8s cleanup` deletes the pods and the
    # ConfigMap (the Secret is the ConfigMap's: Kubernetes deletes it after), and the
    # next run from this machine on the bucket deletes the objects the killed one put
    proc = subprocess.Popen([*STORBENCH, *args], env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not _putting(s3, bucket) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert _secrets(kube, namespace) != []
    done = run_cli("k8s", "cleanup", "-n", namespace, "--kubeconfig", kubeconfig,
                   db=store_path)
    assert done.returncode == 0 and "deleted Pod" in done.stdout, done.stderr
    deadline = time.monotonic() + 60
    while _secrets(kube, namespace) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftovers(kube, namespace) == [] and _secrets(kube, namespace) == []
    assert sorted(s3.keys(bucket)) != before  # the killed run's objects, until:
    short = tmp_path / "short.fio"
    short.write_text(JOB)
    proc = run_cli(*_run_args(s3, bucket, short, kubeconfig, namespace, http_image),
                   db=store_path, env=s3.env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "left by crashed run" in proc.stderr + proc.stdout, proc.stderr
    assert sorted(s3.keys(bucket)) == before
    assert leftovers(kube, namespace) == [] and _secrets(kube, namespace) == []
