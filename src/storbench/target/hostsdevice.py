"""A block device on many hosts at once: the hosts target (target/hosts.py) whose
storage is each host's device, not files in a directory.

The device guard runs on every host over SSH (target/remoteguard.py: a device that is
mounted or in use is never touched, writing needs ``--destructive``), before the run is
stored and once more right before fio; fio on each host gets the job file pointed at
the device (blockdev.device_job: ``--readonly`` for one that only reads) and a replay's
iolog in the host's SSH session directory, every name in it the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute import FioBinary, FioJob, SignalGuard
from storbench.execute.ssh import Remote, put_remote
from storbench.target.base import DeviceRoom, Placed
from storbench.target.blockdev import access, device_job, found_on_it, identity, writes
from storbench.target.hostlist import Host
from storbench.target.hosts import HostsTarget
from storbench.target.remoteguard import judge_all
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan


@dataclass
class HostsDeviceTarget(HostsTarget):
    """``path`` is a block device on each host (/dev/...), every host reached over SSH."""

    destructive: str | None = None  # the device named again: writing to it is allowed
    size_given: bool = False  # --size: else each test covers each host's device
    reports: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)  # guard's
    writers: list[str] = field(default_factory=list, init=False)  # the tests that write
    files_in_path = False  # the device is no directory: no files of the run's in it

    def preflight(self) -> None:
        """Every host must be reached over SSH (the guard runs there), and none may have
        the device in use."""
        if any(h.ssh is None for h in self.hosts):
            raise ConfigError(f"{self.path} on --hosts: a block device needs every host"
                              " reached over SSH (ssh://HOST): storbench checks the"
                              " device on each host before fio touches it")
        self._judge(writes=False)

    def _judge(self, writes: bool) -> None:
        self.reports = judge_all([h.ssh for h in self.hosts if h.ssh is not None],
                                 self.ssh_config, str(self.path), writes, self.destructive)

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        """Nothing runs anywhere before every host allowed what the plan does."""
        self.writers = writes(plan)
        self._judge(writes=bool(self.writers))
        super().check(plan, fio, workdir)

    def remote(self) -> Remote:
        """Each session may write the device only when the guard allowed writing."""
        return Remote("", ("--file", str(self.path)) if self.writers else ())

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """fio told --readonly for a job file that only reads."""
        return [FioJob(h.key, f"t{index:03d}-h{i}.fio", *device_job(
            jobfile, str(self.path), None if self.size_given else self._size(h),
            Path(self._session_dir(h))))
            for i, h in enumerate(self.hosts)]

    def replay_device(self) -> DeviceRoom:
        """The smallest host's device, once the guard reached them all (check)."""
        size = min(self._size(h) for h in self.hosts) if self.reports else None
        return DeviceRoom(size, str(self.path), smallest_of="host")

    def put_dirs(self) -> list[str]:
        return [self._session_dir(h) for h in self.hosts]

    def _put_one(self, i: int, uid: str, name: str, text: Placed) -> None:
        """Into the host's session directory; every name in it is the device."""
        host = self.hosts[i].ssh
        assert host is not None
        put_remote(host, self.ssh_config, f"{self._session_dir(self.hosts[i])}/{name}",
                   text(lambda _: str(self.path)))

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        facts = super().describe(fio)
        for entry in facts["hosts"]:
            report = self.reports.get(entry["host"])
            if report is not None:
                entry["device"] = {**report["facts"], "device": report["findings"]["device"],
                                   "found_on_it": found_on_it(report["findings"]["signatures"]),
                                   "access": access(bool(self.writers))}
        facts["target"]["block_device"] = True
        return facts

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """The guard once more on every host, right before fio; then each host's device,
        said."""
        super().prepare(uid, invocations, guard, note)
        self._judge(writes=bool(self.writers))
        for host, report in self.reports.items():
            found = report["findings"]
            note(f"{host}: " + identity(found["device"], report["facts"], found["signatures"],
                                       writes=bool(self.writers)))

    def _size(self, host: Host) -> int:
        size = int(self.reports.get(host.key, {}).get("facts", {}).get("size_bytes") or 0)
        if not size:
            raise TargetError(f"{host.key}: {self.path} has no size (an empty loop device?)")
        return size
