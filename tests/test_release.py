"""What a release publishes, proven without publishing: the version is git's and
`--version` says it with the fio it finds; the wheel, installed by `uv tool install`
into a place of its own, runs a real suite outside the source tree; the workflows pass
actionlint; the runner image the release pushes is the one the code defaults to; the
images build and run where a builder exists; shell completion works."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from storbench.execute.imagebuild import dockerfile_text
from storbench.target.kubernetes.manifests import DEFAULT_IMAGE
from tests.conftest import STORBENCH, needs_fio
from tests.images import BASE, PODMAN
from tests.services import needs
from tests.testbed import TOOLS

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "storbench"
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = TOOLS / "bin" / "actionlint"
UV = shutil.which("uv")


@needs_fio
def test_version_says_storbench_fio_and_python(tmp_path):
    proc = subprocess.run([*STORBENCH, "--version"], capture_output=True, text=True,
                          check=True)
    lines = proc.stdout.splitlines()
    assert re.fullmatch(r"storbench \d+\.\d+\S*", lines[0]), lines
    assert lines[2].startswith(f"Python {sys.version.split()[0]} ")
    if shutil.which("fio"):
        assert re.match(r"fio fio-\d+\.\d+", lines[1]), lines
    # no fio to be found: said, and --version still answers
    proc = subprocess.run([*STORBENCH, "--version"], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(tmp_path)}, check=True)
    assert proc.stdout.splitlines()[1].startswith("fio none: fio is not installed"), proc.stdout


def test_the_version_is_git_s(tmp_path):
    """A tag is the version; commits after it make a development version of the next."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("no git checkout")
    from importlib.metadata import version

    described = subprocess.run(["git", "-C", str(ROOT), "describe", "--tags", "--match",
                                "v*", "--abbrev=0"], capture_output=True, text=True)
    installed = version("storbench")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    if described.returncode != 0:  # no release yet: 0.1.devN+gHASH (or 0.0.1.devN when dirty)
        assert ".dev" in installed, installed
    # the installed (editable) package may be older than HEAD; its version names a commit
    tag = described.stdout.strip().removeprefix("v")
    assert re.search(r"\+g[0-9a-f]{7,}", installed) or installed == tag, (installed, head)


@needs_fio
@pytest.mark.skipif(UV is None, reason="uv is not installed (scripts/setup installs it)")
def test_the_wheel_installs_and_runs_a_suite_outside_the_tree(tmp_path, tmpfs):
    dist = tmp_path / "dist"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_TOOL_DIR": str(tmp_path / "tools"),
           "UV_TOOL_BIN_DIR": str(tmp_path / "bin"), "STORBENCH_DB": str(tmp_path / "r.db")}
    env.pop("VIRTUAL_ENV", None)
    # as the release builds it: the sdist, then the wheel from the sdist (a file the sdist
    # leaves out is missing from the wheel too)
    subprocess.run([UV, "build", "--out-dir", str(dist), str(ROOT)], env=env,
                   check=True, capture_output=True, timeout=300)
    [wheel] = dist.glob("storbench-*.whl")
    subprocess.run([UV, "tool", "install", "--python", sys.executable, str(wheel)], env=env,
                   check=True, capture_output=True, timeout=600, cwd=tmp_path)
    exe = tmp_path / "bin" / "storbench"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = subprocess.run([str(exe), "--version"], env=env, cwd=elsewhere, text=True,
                           capture_output=True, check=True).stdout
    assert shown.startswith(f"storbench {wheel.name.split('-')[1]}\n"), shown
    run = subprocess.run([str(exe), "run", str(tmpfs), "--suite", "quick",
                         "--runtime", "1", "--ramp", "0",
                          "--size", "8m", "--json"], env=env, cwd=elsewhere, text=True,
                         capture_output=True, timeout=600)
    assert run.returncode == 0, run.stderr
    import json

    done = json.loads(run.stdout)
    assert done["status"] == "completed" and done["tests"], run.stdout[:500]
    # it ran from the wheel, not from this checkout
    where = subprocess.run([str(tmp_path / "tools" / "storbench" / "bin" / "python"), "-c",
                            "import storbench; print(storbench.__file__)"], env=env,
                           text=True, capture_output=True, check=True).stdout
    assert str(tmp_path / "tools") in where and str(ROOT / "src") not in where, where
    # the runner image's Dockerfile travels in the wheel (`k8s image build` reads it)
    shipped = subprocess.run([str(exe), "k8s", "image", "dockerfile"], env=env, cwd=elsewhere,
                             text=True, capture_output=True, check=True).stdout
    assert shipped == (SRC / "data" / "images" / "fio" / "Dockerfile").read_text() != ""


@needs(("actionlint", str(ACTIONLINT) if ACTIONLINT.exists() else None))
def test_the_workflows_pass_actionlint():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "release.yml"}
    proc = subprocess.run([str(ACTIONLINT), "-color=false", *map(str, files)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_release_pushes_the_runner_image_the_code_defaults_to():
    """One constant: the release names the image by asking the code, the image's fio is
    the version in its tag, and the module answers with the constant."""
    release = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
    steps = release["jobs"]["images"]["steps"]
    [ref] = [s for s in steps if s.get("id") == "ref"]
    assert "python -m storbench.target.kubernetes.manifests" in ref["run"]
    [fio] = [s for s in steps if s.get("id") == "fio"]
    assert fio["with"]["tags"] == "${{ steps.ref.outputs.fio }}"
    assert fio["with"]["context"] == "src/storbench/data/images/fio" and fio["with"]["push"]
    asked = subprocess.run([sys.executable, "-m", "storbench.target.kubernetes.manifests"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert asked == DEFAULT_IMAGE
    pinned = re.search(r"fio=(\d+\.\d+)-", dockerfile_text())
    assert pinned and DEFAULT_IMAGE.rsplit(":", 1)[1].startswith(pinned.group(1) + "-")
    trigger = release.get("on", release.get(True))  # YAML 1.1 reads a bare `on` as true
    assert trigger["push"]["tags"] == ["v*"]
    assert release["jobs"]["pypi"]["permissions"] == {"id-token": "write"}  # no token kept
    assert "secrets.PYPI" not in (WORKFLOWS / "release.yml").read_text()


@needs_fio
@pytest.mark.skipif(os.environ.get("STORBENCH_TEST_RELEASE_IMAGE") != "1",
                    reason="the release's storbench image takes ~2 min to build (apt, pip):"
                           " STORBENCH_TEST_RELEASE_IMAGE=1 builds it")
def test_the_storbench_image_builds_and_runs(image_env, tmp_path):
    """images/storbench (the runner image: tests/execute/test_imagebuild.py) with podman,
    from the tests' Debian base; pip in the build trusts the host's CAs (the test machines'
    HTTPS goes through an intercepting proxy whose CA only the host knows)."""
    assert UV is not None and PODMAN is not None
    dist = ROOT / "dist"
    for old in dist.glob("storbench-*.whl"):
        old.unlink()
    subprocess.run([UV, "build", "--wheel", "--out-dir", str(dist), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    tag = "localhost/storbench-test-storbench:1"
    cas = "/etc/ssl/certs/ca-certificates.crt"
    built = subprocess.run([PODMAN, "build", "--tag", tag, "--build-arg", f"BASE={BASE}",
                            "--volume", f"{cas}:/run/host-ca.crt:ro",
                            "--env", "PIP_CERT=/run/host-ca.crt",
                            "--file", str(ROOT / "images" / "storbench" / "Dockerfile"),
                            str(ROOT)], env=image_env, capture_output=True, text=True,
                           timeout=1200)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-2000:]
    try:
        shown = subprocess.run([PODMAN, "run", "--rm", "--network", "none", "--ulimit",
                                "nofile=1024:1024", "--ulimit", "nproc=1024:1024", tag,
                                "--version"], env=image_env, text=True, capture_output=True,
                               check=True).stdout
        assert shown.startswith("storbench ") and "fio fio-3.33" in shown, shown
    finally:
        subprocess.run([PODMAN, "rmi", "-f", tag], env=image_env, capture_output=True)


def test_shell_completion(tmp_path):
    """click's completion (docs/install.md): the script, and what it completes."""
    script = subprocess.run([*STORBENCH], env={**os.environ, "_STORBENCH_COMPLETE":
                                               "bash_source"}, capture_output=True, text=True)
    assert "_storbench_completion()" in script.stdout and "complete " in script.stdout
    words = subprocess.run([*STORBENCH], env={**os.environ, "_STORBENCH_COMPLETE":
                                              "bash_complete", "COMP_WORDS": "storbench hist",
                                              "COMP_CWORD": "1"}, capture_output=True, text=True)
    assert "plain,history" in words.stdout.splitlines(), words.stdout
