"""The Kubernetes runner image, built with the image engine at hand (`storbench k8s image
build`): docker, podman or buildah, from the Dockerfile shipped inside storbench
(data/images/fio), checked by running fio in it, pushed where the user says.

Every name given to an engine is checked first (a reference, never an option or a
second word) and passed as one argument; the build context is a fresh directory that
holds the Dockerfile alone, so nothing of the user's is sent to a daemon.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from storbench.errors import ConfigError, StorbenchError

ENGINES = ("docker", "podman", "buildah")
PROBE_TIMEOUT_S = 20
# docker.io/library/debian:12.11-slim, ghcr.io:443/x/y:tag, name@sha256:…: the grammar of
# distribution/reference, lower-case repository, without the length limits
_REFERENCE = re.compile(
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?/)?"   # registry[:port]/
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")
# where podman and buildah (not docker) also push: containers-transports(5)
TRANSPORTS = ("oci-archive", "docker-archive", "oci", "dir")
HYBRID = "cgroups in hybrid mode not supported"  # crun's words


class EngineError(StorbenchError):
    """The image engine failed (exit 1): its own last words are in the message."""


def dockerfile_text() -> str:
    return resources.files("storbench.data").joinpath("images/fio/Dockerfile").read_text()


def default_base() -> str:
    """The image the Dockerfile starts from unless --base names another (its ARG BASE)."""
    found = re.search(r"^ARG BASE=(\S+)$", dockerfile_text(), re.M)
    if not found:
        raise AssertionError("data/images/fio/Dockerfile has no ARG BASE=…")
    return found.group(1)


def check_reference(what: str, value: str) -> str:
    """value if it is an image reference, else ConfigError naming `what`."""
    if not _REFERENCE.fullmatch(value):
        raise ConfigError(f"{what} {value!r} is not an image reference"
                          " (like registry.example.com/storbench/fio:3.33-2)")
    return value


def check_destination(engine: str | None, value: str) -> str:
    """A --push destination: a reference, or (podman, buildah) TRANSPORT:PATH.

    engine None checks its form alone (before any engine is probed: bad input is refused
    first, whatever this machine can build with)."""
    transport, sep, rest = value.partition(":")
    if sep and transport in TRANSPORTS:
        if engine == "docker":
            raise ConfigError(f"docker pushes only to registries, not to {transport}: (give"
                              " a registry reference, or use podman or buildah)")
        if not rest or rest.startswith("-") or any(c.isspace() or not c.isprintable()
                                                   for c in rest):
            raise ConfigError(f"--push {value!r}: no usable path after {transport}:")
        return value
    return check_reference("--push", value)


def pushes_to_registry(destination: str) -> bool:
    return destination.partition(":")[0] not in TRANSPORTS


def _probe(engine: str) -> str | None:
    """None if the engine can build here, else why not (its own words)."""
    if shutil.which(engine) is None:
        return "not installed"
    argv = {"docker": [engine, "version", "--format", "{{.Server.Version}}"],
            "podman": [engine, "version", "--format", "{{.Version}}"],
            "buildah": [engine, "version"]}[engine]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"`{' '.join(argv[:2])}` did not answer within {PROBE_TIMEOUT_S} s"
    except OSError as exc:
        return str(exc)
    if proc.returncode != 0:
        return _last_words(proc.stderr.splitlines() or proc.stdout.splitlines()) or (
            f"`{' '.join(argv[:2])}` exited with status {proc.returncode}")
    return None


def choose_engine(wanted: str | None) -> tuple[str, list[str]]:
    """(the engine to build with, why each one before it was passed over).

    ConfigError when the one asked for, or every one, cannot build here, with each
    engine's reason (docker's client without a daemon is the usual one).
    """
    passed: list[str] = []
    for engine in (wanted,) if wanted else ENGINES:
        why = _probe(engine)
        if why is None:
            return engine, passed
        passed.append(f"{engine}: {why}")
    raise ConfigError("no image engine can build here (" + "; ".join(passed) + "). Install"
                      " podman (Debian, Ubuntu: apt install podman; Fedora, RHEL: dnf install"
                      " podman), buildah or Docker, or build the Dockerfile of `storbench k8s"
                      " image dockerfile` where one runs")


def _last_words(lines: list[str] | deque[str]) -> str:
    """The engine's error line (`Error: …`, `ERROR: …`), else its last line."""
    kept = [line.strip() for line in lines if line.strip()]
    for line in reversed(kept):
        if line.lower().startswith(("error", "fatal")):
            return line
    return kept[-1] if kept else ""


def run_engine(argv: list[str], echo: Callable[[str], None] | None) -> str:
    """Run one engine command, its output lines to echo (None: kept quiet); its stdout
    and stderr together. EngineError with its last words when it fails."""
    tail: deque[str] = deque(maxlen=200)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True, errors="replace") as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail.append(line.rstrip("\n"))
                if echo is not None:
                    echo(line.rstrip("\n"))
            status = proc.wait()
        finally:  # interrupted: the engine goes too (it had the signal as well)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    if status != 0:
        hint = ("; crun refuses a host whose cgroups are mounted both v1 and v2: have podman"
                " use runc (CONTAINERS_CONF=FILE with [engine] runtime = \"runc\")"
                if any(HYBRID in line for line in tail) else "")
        raise EngineError(f"`{' '.join(argv[:2])}` failed (exit status {status}): "
                          f"{_last_words(tail) or 'it printed nothing'}{hint}")
    return "\n".join(tail)


@dataclass(frozen=True)
class Built:
    engine: str
    tag: str
    fio_version: str
    pushed: str | None
    seconds: float


ENGINES_NEEDED = ("http", "libaio")  # an s3:// TARGET's, a block device's
CHECK = "fio --version && fio --enghelp"


def _fio_version(engine: str, tag: str) -> str:
    """fio's version from a container of the new image, as the pods will run it, and the
    engines an s3:// TARGET and a block device need (http, libaio), as it says them: an
    image without them is an image the Dockerfile did not make (another --base)."""
    if engine == "buildah":
        name = f"storbench-check-{int(time.time() * 1000)}"
        run_engine([engine, "from", "--pull=never", "--name", name, tag], None)
        try:
            out = run_engine([engine, "run", "--network", "none", name, "sh", "-c", CHECK],
                             None)
        finally:
            run_engine([engine, "rm", name], None)
    else:
        # small limits: podman's own (nofile 1048576) fail where root may not raise them
        out = run_engine([engine, "run", "--rm", "--network", "none", "--user", "1000:1000",
                          "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
                          tag, "sh", "-c", CHECK], None)
    lines = out.strip().splitlines()
    version = next((line for line in lines if line.startswith("fio-")), "")
    if not version:
        raise EngineError(f"fio does not run in the image {tag}: `fio --version` printed"
                          f" {lines[-1] if lines else ''!r}")
    engines = {line.strip() for line in lines}
    lacking = [e for e in ENGINES_NEEDED if e not in engines]
    if lacking:
        raise EngineError(f"{version} in the image {tag} has no {' or '.join(lacking)} engine"
                          " (`fio --enghelp`), which the Dockerfile builds in: was it built"
                          " from another Dockerfile?")
    return version


def build(engine: str, tag: str, base: str, push: str | None, network: str | None,
          echo: Callable[[str], None] | None) -> Built:
    """Build the runner image as `tag` from `base`, check that fio runs in it, push it."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="storbench-image-") as context:
        dockerfile = Path(context) / "Dockerfile"
        dockerfile.write_text(dockerfile_text())
        argv = [engine, "build", "--tag", tag, "--build-arg", f"BASE={base}",
                "--file", str(dockerfile)]
        if network:
            argv += ["--network", network]
        run_engine([*argv, context], echo)
    version = _fio_version(engine, tag)
    if push is not None:
        if engine == "docker":
            run_engine([engine, "tag", tag, push], echo)
            run_engine([engine, "push", push], echo)
        else:
            run_engine([engine, "push", tag, push], echo)
    return Built(engine, tag, version, push, time.monotonic() - start)
