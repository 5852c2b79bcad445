"""A directory target: a marked scratch directory ``storbench-<run id>`` under it,
fio on this machine. The worked example of a target (docs/targets.md)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import TargetError
from storbench.execute import Executor, FioBinary, FioJob, LocalExecutor, SignalGuard
from storbench.target.base import Deadline, Leftover
from storbench.target.environment import host_facts, path_facts
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec

MARKER = ".storbench-scratch"
PREFIX = "storbench-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class DirectoryTarget:
    """A directory on this machine; fio runs here, in a marked scratch directory."""

    path: Path
    kind = "directory"
    worker_noun = "job"
    needs_local_fio = True
    series_logs = True
    scratch: Path | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        return str(self.path.resolve())

    @property
    def short_name(self) -> str:
        return str(self.path)

    def settings(self) -> dict[str, Any]:
        return {}

    def preflight(self) -> None:
        self.usable()

    def scratch_path(self, uid: str) -> Path:
        return self.path.resolve() / f"{PREFIX}{uid}"

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.usable()
        needed = [(t.jobfile.estimated_bytes() or 0, t.name) for t in plan.tests]
        most, name = max(needed)
        self.check_space(most, f"test {name!r}")

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        return [FioJob("", f"t{index:03d}.fio", jobfile.render())]

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        return {**host_facts(), "target": {"kind": self.kind, **path_facts(self.path)},
                **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {})}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        self.scratch = self.create_scratch(uid)

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None
        return LocalExecutor(fio, workdir, guard)

    def probe_dir(self) -> Path | None:
        return self.scratch

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        if self.scratch is None:
            return
        remove_files_except(self.scratch, keep)
        kept = sum(f.stat().st_size for f in self.scratch.iterdir() if f.is_file())
        self.check_space(max(0, (test.jobfile.estimated_bytes() or 0) - kept),
                         f"test {test.name!r}")

    def deadline(self, test: PlannedTest) -> Deadline | None:
        return None

    def cleanup(self) -> None:
        if self.scratch is not None:
            remove_scratch(self.scratch)

    def remove_leftover(self, leftover: Leftover) -> None:
        remove_scratch(leftover.path)

    def usable(self) -> None:
        """Raise TargetError unless the directory exists and we can create files in it."""
        p = self.path
        if not p.exists():
            raise TargetError(f"target {str(p)!r} does not exist; create it or pass an existing"
                              " directory")
        if not p.is_dir():
            raise TargetError(f"target {str(p)!r} is not a directory; storbench benchmarks a"
                              " directory on the file system you want to measure")
        if not os.access(p, os.W_OK | os.X_OK):
            raise TargetError(f"target directory {str(p)!r} is not writable; pass a directory"
                              " you own, or run as a user who may write there")

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def check_space(self, needed: int, what: str) -> None:
        free = self.free_bytes()
        if needed > free:
            raise TargetError(
                f"not enough free space in {str(self.path)!r} for {what}: it needs"
                f" {format_bytes_iec(needed)}, {format_bytes_iec(free)} are free;"
                " pass a smaller --size or another target"
            )

    def leftovers(self) -> list[Leftover]:
        """Scratch directories of storbench runs that died without cleaning up."""
        found = []
        try:
            entries = list(self.path.iterdir())
        except OSError:
            return []
        for entry in entries:
            marker = entry / MARKER
            if not entry.name.startswith(PREFIX) or not marker.is_file():
                continue
            try:
                info = json.loads(marker.read_text())
            except (OSError, ValueError):
                info = {}
            same_host = info.get("hostname") == socket.gethostname()
            pid = info.get("pid")
            if same_host and isinstance(pid, int) and _pid_alive(pid):
                continue  # a run in progress
            if not same_host and info.get("hostname"):
                continue  # another host's run on a shared file system: not ours to judge
            found.append(Leftover(entry, str(info.get("run_uid", "?")), str(info.get("created"))))
        return found

    def create_scratch(self, run_uid: str) -> Path:
        scratch = self.path / f"{PREFIX}{run_uid}"
        try:
            scratch.mkdir()
            marker = {
                "run_uid": run_uid,
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            (scratch / MARKER).write_text(json.dumps(marker) + "\n")
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise TargetError(f"no space left in {str(self.path)!r} to start") from exc
            raise TargetError(f"cannot create a scratch directory in {str(self.path)!r}:"
                              f" {exc.strerror}") from exc
        return scratch


def remove_scratch(scratch: Path) -> None:
    """Delete a scratch directory, but only one that carries storbench's marker."""
    if not (scratch / MARKER).is_file():
        return
    shutil.rmtree(scratch, ignore_errors=True)


def remove_files_except(scratch: Path, keep: set[str]) -> None:
    """Delete the test files in a scratch directory, keeping the marker and ``keep``."""
    for entry in scratch.iterdir():
        if entry.name == MARKER or entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
