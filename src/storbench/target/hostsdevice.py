"""A block device on many hosts at once: the Device storage (target/device.py: the
device's rules, the same on every place) where fio runs on the hosts of
target/hosts.py, each host's device at the same path.

The device guard runs on every host over SSH (target/remoteguard.py: a device that is
mounted or in use is never touched, writing needs ``--destructive``), before the run is
stored and once more right before fio; fio on each host gets the job file pointed at
the device (``--readonly`` for one that only reads, each test the whole device unless
--size, or only the tests that read with --reads-only), a replay's iolog in the host's
SSH session directory, every name in it the device, and with --precondition the device
written whole first on every host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError
from storbench.execute import FioBinary, FioJob, SignalGuard
from storbench.execute.ssh import Remote, put_remote
from storbench.target.base import DeviceRoom, Placed
from storbench.target.device import Device, Seen
from storbench.target.hosts import HostsTarget
from storbench.target.remoteguard import look_all
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan

REFUSED = "Nothing was started."  # what a refusal says after why


@dataclass
class HostsDeviceTarget(HostsTarget):
    """``path`` is a block device on each host (/dev/...), every host reached over SSH."""

    destructive: str | None = None  # the device named again: writing to it is allowed
    size_given: bool = False  # --size: else each test covers each host's device
    precondition: bool = False  # --precondition: each host's device is written first
    reads_only: bool = False  # --reads-only: only the plan's tests that only read
    dev: Device = field(init=False)
    files_in_path = False  # the device is no directory: no files of the run's in it

    def __post_init__(self) -> None:
        super().__post_init__()
        self.dev = Device(str(self.path), self.destructive, self.size_given, self.precondition,
                          self.reads_only, every="host", after=REFUSED)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), **self.dev.settings()}

    def look(self, writes: bool) -> list[Seen]:
        """Each host's guard, over SSH, all hosts at once."""
        return look_all([h.ssh for h in self.hosts if h.ssh is not None], self.ssh_config,
                        str(self.path), writes, self.destructive)

    def preflight(self) -> None:
        """Every host must be reached over SSH (the guard runs there), and none may have
        the device in use."""
        if any(h.ssh is None for h in self.hosts):
            raise ConfigError(f"{self.path} on --hosts: a block device needs every host"
                              " reached over SSH (ssh://HOST): storbench checks the"
                              " device on each host before fio touches it")
        self.dev.judge(self.look)

    def restrict(self, plan: Plan) -> Plan:
        return self.dev.restrict(plan)

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        """Nothing runs anywhere before every host allowed what the plan does."""
        self.dev.check(plan, self.look)
        super().check(plan, fio, workdir)

    def remote(self) -> Remote:
        """Each session may write the device only when the guard allowed writing."""
        return Remote("", ("--file", str(self.path)) if self.dev.writing else ())

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """fio told --readonly for a job file that only reads."""
        return [self.dev.job(jobfile, h.key, str(self.path), f"t{index:03d}-h{i}.fio",
                             self.dev.size_of(h.key), Path(self._session_dir(h)))
                for i, h in enumerate(self.hosts)]

    def precondition_job(self, cap_bytes: int | None) -> list[FioJob]:
        return [self.dev.precondition_job(h.key, str(self.path), f"precondition-h{i}.fio",
                                          cap_bytes) for i, h in enumerate(self.hosts)]

    def replay_device(self) -> DeviceRoom:
        """The smallest host's device, once the guard reached them all."""
        return self.dev.room(smallest_of="host")

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
        seen = {s.worker: s for s in self.dev.seen}
        for entry in facts["hosts"]:
            if entry["host"] in seen:
                entry["device"] = self.dev.facts(seen[entry["host"]])
        facts["target"]["block_device"] = True
        return facts

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """The guard once more on every host, right before fio; then each host's device,
        said."""
        super().prepare(uid, invocations, guard, note)
        self.dev.judge(self.look, self.dev.writers)
        self.dev.say(note)
