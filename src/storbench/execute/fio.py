"""Finding fio and checking its version."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from storbench.errors import FioError

MIN_VERSION = (3, 1)
INSTALL_HINT = (
    "install it with `apt-get install fio` (Debian/Ubuntu), `dnf install fio` (Fedora/RHEL)"
    " or `brew install fio`, or point --fio / STORBENCH_FIO at the binary"
)


@dataclass(frozen=True)
class FioBinary:
    path: str
    version: tuple[int, int]
    version_text: str


def parse_version(text: str) -> tuple[int, int] | None:
    m = re.search(r"fio-(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def find_fio(explicit: str | None = None) -> FioBinary:
    """The fio to run: ``explicit`` (a path or name) or ``fio`` on PATH, >= 3.1."""
    name = explicit or "fio"
    path = shutil.which(name)
    if path is None:
        where = f"{name!r} was not found" if explicit else "fio is not installed (not on PATH)"
        raise FioError(f"{where}; {INSTALL_HINT}")
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FioError(f"cannot run {path} --version: {exc}") from exc
    text = (proc.stdout + proc.stderr).strip()
    version = parse_version(text)
    if proc.returncode != 0 or version is None:
        raise FioError(f"{path} --version did not print a fio version (got {text[:80]!r})",
                       returncode=proc.returncode, stderr=proc.stderr)
    if version < MIN_VERSION:
        raise FioError(
            f"{path} is {text}, storbench needs fio >= {MIN_VERSION[0]}.{MIN_VERSION[1]}"
            " (for json+ output with nanosecond latency); upgrade fio"
        )
    return FioBinary(path=path, version=version, version_text=text)
