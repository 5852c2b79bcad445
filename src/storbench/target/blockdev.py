"""A block device on this machine: the Device storage (target/device.py: the device's
rules, the same on every place) where fio runs here.

Nothing is created on the device and nothing needs removing afterwards; what
matters is the guard (target/blockguard.py): a device that is mounted or in use is
never touched, reading needs nothing more (fio runs with ``--readonly``), writing needs
the device named again with ``--destructive``. The guard decides before the run is
stored and once more right before fio starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.execute import Executor, FioBinary, FioJob, LocalExecutor, SignalGuard
from storbench.execute.local import Confinement
from storbench.execute.workdir import run_workdir
from storbench.target.base import DeviceRoom, InRunDirs, Placed, Quiet
from storbench.target.blockguard import report
from storbench.target.device import Device, Seen, seen_in
from storbench.target.environment import host_facts, local_confinement
from storbench.workload.guard import plain
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan


@dataclass
class BlockTarget(Quiet, InRunDirs):
    """A block device on this machine, by any of its names (/dev/disk/by-id/…)."""

    path: Path
    destructive: str | None = None  # the device named again by --destructive
    size_given: bool = False  # --size: else each test covers the whole device
    precondition: bool = False  # --precondition: the device is written first
    reads_only: bool = False  # --reads-only: only the plan's tests that only read
    kind = "block device"
    worker_noun = "job"
    needs_local_fio = True
    series_logs = True
    dev: Device = field(init=False)

    def __post_init__(self) -> None:
        self.dev = Device(str(self.path), self.destructive, self.size_given, self.precondition,
                          self.reads_only)

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def short_name(self) -> str:
        return self.path.name

    @property
    def device(self) -> str:
        """The device node the path names (symlinks resolved)."""
        return self.dev.seen[0].device if self.dev.seen else os.path.realpath(self.path)

    def settings(self) -> dict[str, Any]:
        return self.dev.settings()

    def look(self, writes: bool) -> list[Seen]:
        """The guard's look here (blockguard.report: its findings and decision)."""
        return [seen_in(report(str(self.path), writes, self.destructive))]

    def preflight(self) -> None:
        """A device that is not one, or that is in use, fails before anything starts."""
        self.dev.judge(self.look)

    def _seen(self) -> None:
        """The device looked at (preflight's, for the steps that come before check)."""
        if not self.dev.seen:
            self.preflight()

    def restrict(self, plan: Plan) -> Plan:
        return self.dev.restrict(plan)

    def scratch_path(self, uid: str) -> Path:
        return Path(self.device)

    def replay_device(self) -> DeviceRoom:
        self._seen()
        return self.dev.room()  # known before the run

    def put_file(self, uid: str, name: str, text: Placed) -> None:
        """A file of storbench's (a replay's iolog) in the run's own work directory
        (0700): fio reads it there; every run file it names is the device (and
        replay_redirect says so to fio)."""
        if not plain(name):
            raise ValueError(f"not a plain file name: {name!r}")
        fd = os.open(run_workdir(uid) / name,
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text(lambda _: self.device))

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.dev.check(plan, self.look)

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """fio is told --readonly for a job file that only reads: it then refuses to
        write, whatever the options say."""
        self._seen()
        return [self.dev.job(jobfile, "", self.device, f"t{index:03d}.fio",
                             self.dev.size_of(""), run_workdir(uid))]

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        self._seen()
        return {**host_facts(), "confinement": local_confinement(),
                "target": {"kind": self.kind, "path": str(self.path),
                           **self.dev.facts(self.dev.seen[0])},
                **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {})}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """The guard once more, right before fio; then the device's identity, said."""
        self.dev.judge(self.look, self.dev.writers)
        self.dev.say(note)

    def precondition_job(self, cap_bytes: int | None) -> list[FioJob]:
        self._seen()
        return [self.dev.precondition_job("", self.device, "precondition.fio", cap_bytes)]

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None
        # the kernel lets fio write to the device only when the guard allowed writing
        return LocalExecutor(fio, workdir, guard,
                             Confinement(files=(self.device,) if self.dev.writing else ()))
