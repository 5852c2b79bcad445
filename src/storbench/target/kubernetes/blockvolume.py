"""A StorageClass's raw volume (``--volume-mode Block``): the StorageClass target
(storageclass.py) whose storage is a device in each pod, not files in a directory.

Each pod gets its own volume (RWO) as the device DEVICE_PATH; fio works on it
(blockdev.device_job: ``--readonly`` for a job file that only reads, the whole volume
unless --size), and the volume is probed before a test writes to it (facts.volume_guard:
a volume holding a file system or partition table is refused for writing).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storbench.errors import ConfigError
from storbench.execute import FioJob, SignalGuard
from storbench.target.base import Quiet
from storbench.target.blockdev import device_job, writes
from storbench.target.kubernetes.facts import volume_guard
from storbench.target.kubernetes.manifests import DEVICE_PATH, pod_names, quantity_bytes
from storbench.target.kubernetes.storageclass import PUT_REFUSED, KubePlan, KubeTarget
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan


class KubeBlockTarget(KubeTarget):
    """--volume-mode Block."""

    def capacity(self, plan: Plan) -> str:
        """A given --capacity and no --size: the tests cover the volume."""
        if self.o.capacity and not self.size_given:
            return self.o.capacity
        return super().capacity(plan)

    def scratch_path(self, uid: str) -> Path:
        return Path(DEVICE_PATH)

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """Each pod its own volume: the same job file for all."""
        pods = pod_names(uid, self.o.clients)
        size = None if self.size_given else quantity_bytes(self.o.capacity)
        text, args = device_job(jobfile, DEVICE_PATH, size)
        return [FioJob(pod, f"t{index:03d}.fio" if len(pods) == 1 else
                       f"t{index:03d}-p{i}.fio", text, args) for i, pod in enumerate(pods)]

    def files_in(self, kp: KubePlan) -> str:
        return ""  # no file system: fio's files are the device

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """The pods running, then every volume probed before a test writes to it."""
        super().prepare(uid, invocations, guard, note)
        assert self.layout is not None and self.plan is not None
        kp = self.layout
        self.environment["target"].update(
            volume_guard(self._kube(), kp.namespace, kp.pods, writes(self.plan), note))

    def check_put(self) -> None:
        raise ConfigError(PUT_REFUSED)

    before_test = Quiet.before_test  # nothing to remove between tests: the files are the device
