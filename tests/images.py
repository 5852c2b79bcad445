"""Image builds in the tests: podman (scripts/install-testbed installs it) and a Debian 12
base image made here, because the test machines reach Debian's mirror but not Docker Hub:
debootstrap's minbase of bookworm (its tar kept in the tools cache) imported into podman.

Podman runs with runc: the test machines mount cgroups v1 and v2 at once ("hybrid"), which
crun, podman's default runtime, refuses (storbench's message says so: test_imagebuild).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.services import missing
from tests.testbed import TOOLS

PODMAN = shutil.which("podman")
DEBOOTSTRAP = shutil.which("debootstrap") or (
    "/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap") else None)
BASE = "localhost/storbench-test-debian:12"
CACHE = TOOLS / "debian-bookworm-minbase.tar"


def image_tools_missing() -> str | None:
    if os.geteuid() != 0:
        return "building images here needs root"
    return missing(("podman", PODMAN), ("debootstrap", DEBOOTSTRAP), ("runc", shutil.which("runc")))


def podman_env(directory: Path) -> dict[str, str]:
    """The environment podman runs with in the tests: runc as its runtime."""
    conf = directory / "containers.conf"
    conf.write_text('[engine]\nruntime = "runc"\n')
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def debian_base(env: dict[str, str]) -> str:
    """BASE in podman's store (made once; the debootstrap tar once per machine)."""
    assert PODMAN and DEBOOTSTRAP
    if subprocess.run([PODMAN, "image", "exists", BASE], env=env).returncode == 0:
        return BASE
    if not CACHE.exists():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE.parent) as tmp:
            root = Path(tmp) / "root"
            proc = subprocess.run([DEBOOTSTRAP, "--variant=minbase", "bookworm", str(root),
                                   "http://deb.debian.org/debian"], capture_output=True,
                                  text=True, timeout=900)
            if proc.returncode != 0:
                pytest.fail(f"debootstrap failed: {proc.stdout[-1500:]}{proc.stderr[-1500:]}")
            subprocess.run(["tar", "-C", str(root), "-cf", str(Path(tmp) / "base.tar"), "."],
                           check=True)
            os.replace(Path(tmp) / "base.tar", CACHE)
    subprocess.run([PODMAN, "import", str(CACHE), BASE], env=env, check=True,
                   capture_output=True, timeout=300)
    return BASE


@pytest.fixture(scope="session")
def image_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """podman's environment, with BASE made; skipped (or failed, where scripts/test
    installed the tools) without root, podman, debootstrap or runc."""
    reason = image_tools_missing()
    if reason:
        if os.environ.get("STORBENCH_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    env = podman_env(tmp_path_factory.mktemp("podman"))
    debian_base(env)
    return env
