"""A StorageClass's raw volume (``--volume-mode Block``): the Device storage
(target/device.py: the device's rules, the same on every place) where fio runs in the
pods of storageclass.py, each pod's volume the device DEVICE_PATH.

Each pod gets its own volume (RWO); fio works on it (``--readonly`` for a job file that
only reads, the whole volume unless --size, only the tests that read with
--reads-only; with --precondition each volume is written whole first), and the volume
is looked at before a test writes to it (facts.look_volumes: a volume holding a file
system or partition table is refused for writing).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storbench.errors import ConfigError
from storbench.execute import FioJob, SignalGuard
from storbench.target.base import Quiet
from storbench.target.device import Device, Seen
from storbench.target.kubernetes.facts import look_volumes
from storbench.target.kubernetes.manifests import (
    DEVICE_PATH,
    KubeOptions,
    pod_names,
    quantity_bytes,
)
from storbench.target.kubernetes.storageclass import PUT_REFUSED, KubePlan, KubeTarget
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan


class KubeBlockTarget(KubeTarget):
    """--volume-mode Block."""

    def __init__(self, options: KubeOptions, shared_file: bool = False,
                 size_given: bool = False, reads_only: bool = False,
                 precondition: bool = False) -> None:
        super().__init__(options, shared_file, size_given)
        self.dev = Device(DEVICE_PATH, size_given=size_given, precondition=precondition,
                          reads_only=reads_only, every="pod")

    def before_tests_s(self, capacity: str) -> float:
        """--precondition: writing each volume whole, twice, before the tests."""
        return self.dev.precondition_s(quantity_bytes(capacity) or 0)

    def capacity(self, plan: Plan) -> str:
        """A given --capacity and no --size: the tests cover the volume."""
        if self.o.capacity and not self.size_given:
            return self.o.capacity
        return super().capacity(plan)

    def restrict(self, plan: Plan) -> Plan:
        return self.dev.restrict(plan)

    def scratch_path(self, uid: str) -> Path:
        return Path(DEVICE_PATH)

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """Each pod its own volume: the same job file for all, each test the whole volume
        (--capacity) unless --size. The volume is looked at only once the pods run, so
        its size is the one asked for."""
        pods = pod_names(uid, self.o.clients)
        whole = None if self.size_given else quantity_bytes(self.o.capacity)
        return [self.dev.job(jobfile, pod, DEVICE_PATH, f"t{index:03d}.fio" if len(pods) == 1
                             else f"t{index:03d}-p{i}.fio", whole)
                for i, pod in enumerate(pods)]

    def files_in(self, kp: KubePlan) -> str:
        return ""  # no file system: fio's files are the device

    def look(self, writes: bool) -> list[Seen]:
        """Each pod's volume, once the pods run (facts.look_volumes)."""
        assert self.layout is not None
        return look_volumes(self._kube(), self.layout.namespace, self.layout.pods, writes)

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """The pods running, then every volume looked at before a test writes to it."""
        super().prepare(uid, invocations, guard, note)
        assert self.plan is not None
        self.dev.judge(self.look, self.dev.plan_writers(self.plan))
        self.dev.say(note)
        self.environment["target"].update(self.dev.facts(self.dev.seen[0]))

    def precondition_job(self, cap_bytes: int | None) -> list[FioJob]:
        """Each pod's volume written whole (its size as looked at), twice."""
        assert self.layout is not None
        pods = [pod for pod, _ in self.layout.pods]
        return [self.dev.precondition_job(pod, DEVICE_PATH, "precondition.fio" if len(pods) == 1
                                          else f"precondition-p{i}.fio", cap_bytes)
                for i, pod in enumerate(pods)]

    def check_put(self) -> None:
        raise ConfigError(PUT_REFUSED)

    before_test = Quiet.before_test  # nothing to remove between tests: the files are the device
