"""`storbench k8s image build|dockerfile`: the runner image built with a real podman from a
Debian base made here (tests/images.py), pushed to an archive, loaded into the real
Kubernetes test-bed and used by a real run in a namespace that enforces Pod Security
"restricted"; names that try to become options of the engine are refused before it runs."""

from __future__ import annotations

import os
import secrets
import subprocess
import time

import pytest

from storbench.cli.k8s import ENGINE_CHOICES
from storbench.errors import ConfigError
from storbench.execute import imagebuild
from storbench.execute.kubewait import IMAGE_HINT
from storbench.target.kubernetes.manifests import DEFAULT_IMAGE
from tests.cli.test_cli import assert_one_line_error, show_json
from tests.conftest import STORBENCH, run_cli
from tests.images import BASE, PODMAN
from tests.k8s import leftovers, load_image


def test_the_dockerfile_is_the_one_shipped_and_its_base_is_its_arg(tmp_path):
    proc = run_cli("k8s", "image", "dockerfile", db=tmp_path / "r.db")
    assert proc.returncode == 0 and proc.stdout == imagebuild.dockerfile_text()
    assert "FROM ${BASE}" in proc.stdout and imagebuild.default_base() == "debian:12.11-slim"
    # what the pods need: fio at the default image's version, uid 1000
    assert f"fio={DEFAULT_IMAGE.rsplit(':', 1)[1].split('-')[0]}-" in proc.stdout
    assert "USER 1000:1000" in proc.stdout
    assert ENGINE_CHOICES == ("auto", *imagebuild.ENGINES)
    assert DEFAULT_IMAGE.rsplit(":", 1)[1] in IMAGE_HINT  # the hint's example tag


@pytest.mark.parametrize("args, says", [
    (("--tag", "--privileged"), "--tag '--privileged' is not an image reference"),
    (("--tag", "x -v /:/host"), "is not an image reference"),
    (("--tag", "Upper/Case:1"), "is not an image reference"),
    (("--base", "-v=/:/host"), "--base '-v=/:/host' is not an image reference"),
    (("--base", "debian:12\n--privileged"), "is not an image reference"),
    (("--push", "--all"), "--push '--all' is not an image reference"),
    (("--push", "oci-archive:--rm"), "no usable path after oci-archive:"),
    (("--push", "oci-archive:"), "no usable path after oci-archive:"),
    (("--push", "dir:/tmp/x\x1b[2J"), "no usable path after dir:"),
    (("--network", "host --privileged"), "is not a network mode"),
])
def test_a_name_that_would_be_an_option_of_the_engine_is_refused(tmp_path, args, says):
    proc = run_cli("k8s", "image", "build", *args, db=tmp_path / "r.db", timeout=60)
    assert_one_line_error(proc, 2, says)
    assert "building" not in proc.stderr  # refused before any engine ran


def test_docker_pushes_only_to_registries():
    with pytest.raises(ConfigError, match="docker pushes only to registries"):
        imagebuild.check_destination("docker", "oci-archive:/tmp/x.tar")
    assert imagebuild.check_destination("podman", "oci-archive:/tmp/x.tar")
    assert imagebuild.check_destination("docker", "registry.example.com:5000/a/fio:1")
    assert not imagebuild.pushes_to_registry("oci-archive:/tmp/x.tar")
    assert imagebuild.pushes_to_registry("registry.example.com:5000/a/fio:1")


def test_an_engine_that_cannot_build_says_why(tmp_path):
    """Every engine here that cannot build (buildah not installed, docker's client with no
    daemon, ...) is refused with its own reason, exit 2, when asked for by name."""
    cannot = {e: why for e in imagebuild.ENGINES if (why := imagebuild._probe(e))}
    if not cannot:
        pytest.skip("every engine can build here")
    for engine, why in cannot.items():
        proc = run_cli("k8s", "image", "build", "--engine", engine, db=tmp_path / "r.db",
                       timeout=120)
        assert_one_line_error(proc, 2, "no image engine can build here", f"{engine}: {why}",
                              "apt install podman")


def test_a_base_that_does_not_exist_fails_with_the_engines_words(image_env, tmp_path):
    start = time.monotonic()
    proc = run_cli("k8s", "image", "build", "--engine", "podman", "--base",
                   "localhost/storbench-no-such-base:0", "--tag", "localhost/sbt-never:0",
                   db=tmp_path / "r.db", env=image_env, timeout=300)
    assert_one_line_error(proc, 1, "`podman build` failed (exit status", "Error:",
                          "localhost/storbench-no-such-base")
    assert time.monotonic() - start < 120


@pytest.mark.skipif(not (os.path.isdir("/sys/fs/cgroup/unified") and PODMAN),
                    reason="cgroups are not hybrid here (or no podman): crun accepts them")
def test_crun_on_hybrid_cgroups_is_named_with_the_way_out(image_env, tmp_path):
    """Without the tests' containers.conf podman runs crun, which refuses this host."""
    env = {k: v for k, v in image_env.items() if k != "CONTAINERS_CONF"}
    if subprocess.run([PODMAN, "info", "--format", "{{.Host.OCIRuntime.Name}}"], env=env,
                      capture_output=True, text=True).stdout.strip() != "crun":
        pytest.skip("podman's runtime here is not crun")
    proc = subprocess.run([*STORBENCH, "k8s", "image", "build", "--engine", "podman", "--base",
                           BASE, "--tag", "localhost/sbt-never:0"], env=env, capture_output=True,
                          text=True, timeout=300)  # not run_cli: it would add this environment's
    assert_one_line_error(proc, 1, "hybrid", 'runtime = "runc"')


@pytest.mark.parametrize("s3", ["moto"], indirect=True)
def test_the_built_image_runs_a_benchmark_in_a_restricted_namespace(
        image_env, kube, namespace, k8s_env, store_path, tmp_path, s3):
    """#31 item 5 end to end: built here by the command (podman; docker's client without a
    daemon, where there is one, passed over), pushed to an OCI archive, loaded into the
    test-bed's containerd, and a run with it completes under Pod Security restricted. Its
    fio has the http engine: a bucket measured from its pods (#59; on the node's network,
    which the restricted level refuses, so with that level taken off)."""
    tag = f"localhost/storbench-test-fio:{secrets.token_hex(3)}"
    archive = tmp_path / "runner.tar"
    proc = run_cli("k8s", "image", "build", "--base", BASE, "--tag", tag, "--push",
                   f"oci-archive:{archive}", db=store_path, env=image_env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == f"{tag}\n"  # what to give --image: the local name (no registry)
    assert f"built {tag} with podman" in proc.stderr
    assert "fio-3.33 (with the http and libaio engines) runs in it as uid 1000" in proc.stderr
    assert f"written to oci-archive:{archive}" in proc.stderr
    assert "STEP 1/" in proc.stderr  # the engine's progress was shown
    if imagebuild._probe("docker"):
        assert "passed over docker:" in proc.stderr
    try:
        load_image(tag, archive)
        kube.core.patch_namespace(namespace, {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "restricted"}}})
        run = run_cli("run", "--storage-class", "local-hostpath", "--suite", "quick",
                      "--runtime", "2", "--size", "32m", "-n", namespace,
                      db=store_path, env={**k8s_env, "STORBENCH_IMAGE": tag})
        assert run.returncode == 0, run.stderr[-3000:]
        shown = show_json(store_path)
        assert shown["status"] == "completed" and shown["tests"]
        assert shown["environment"]["kubernetes"]["image"] == tag  # this image, not another
        assert shown["environment"]["fio_version"] == "fio-3.33"
        assert leftovers(kube, namespace) == []
        kube.core.patch_namespace(namespace, {"metadata": {"labels": {
            "pod-security.kubernetes.io/enforce": "privileged"}}})
        s3.client().create_bucket(Bucket="sbt-runner")
        job = tmp_path / "objects.fio"
        job.write_text("[put]\nrw=write\nbs=64k\nsize=256k\nfilename=o\n"
                       "[get]\nstonewall\nrw=read\nbs=64k\nsize=256k\nfilename=o\n")
        run = run_cli("run", "s3://sbt-runner", "--pods", "--host-network", "--endpoint",
                      s3.url, "--job", str(job), "-n", namespace, db=store_path,
                      env={**k8s_env, **s3.env(), "STORBENCH_IMAGE": tag})
        assert run.returncode == 0, run.stderr[-3000:]
        tests = {t["name"]: t for t in show_json(store_path)["tests"]}
        assert tests["get"]["read"]["total_ios"] == 4
        assert s3.keys("sbt-runner") == [] and leftovers(kube, namespace) == []
    finally:
        subprocess.run([PODMAN or "podman", "rmi", "-f", tag], env=image_env,
                       capture_output=True)
