"""Adding a storage is one class that keeps target/storage.Storage: nothing else. This
file is that class, and runs it at all three places through the real loop, fio and
store: this machine (tmpfs), fio servers on two hosts (on this machine's loopback, as
`storbench run --hosts` reaches them), and a pod of the Kubernetes test-bed.

The storage made for the proof: ``OneFile``, each job of a worker on one file of its own
(``<run>-<worker>-<job>.data``: fio's ``filename=``, whatever the job file said), laid out
by fio and removed by it as the job ends (and by the place between tests where it removes
the run's files). It uses only what a place gives a storage (its
workers, where the run's files go, the room it sees, the removal between tests); it
knows nothing of SSH, pods or this machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from storbench.errors import ConfigError, TargetError
from storbench.execute.base import FioJob
from storbench.pipeline.loop import run_on
from storbench.pipeline.spec import RunSpec
from storbench.target.base import Deadline, Placed
from storbench.target.here import HereTarget
from storbench.target.hostlist import parse_hosts
from storbench.target.hosts import HostsTarget
from storbench.target.storage import Access, NoDevice, Place, Worker
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

JOB = "[one]\nrw=randrw\nbs=4k\nsize=4m\ntime_based\nruntime=1\n[two]\nrw=read\nbs=64k\nsize=4m\n"


@dataclass
class OneFile(NoDevice):
    """Each job of a worker on one file of the run's, named for the worker and the job."""

    path: str
    kind = "one file"
    in_files = True

    @property
    def name(self) -> str:
        return f"one file in {self.path}"

    @property
    def short_name(self) -> str:
        return "one-file"

    def file(self, place: Place, worker: Worker, uid: str, job: str) -> str:
        return f"{place.files_dir(uid)}/storbench-{uid}-{worker.tag or 'w'}-{job}.data"

    def settings(self, place: Place) -> dict[str, Any]:
        return {"one_file": True}

    def restrict(self, plan: Plan) -> Plan:
        return plan

    def needed(self, plan: Plan, sharing: int) -> tuple[int, str, int]:
        most, name = plan.largest()
        return most * sharing, name, sharing

    def preflight(self, place: Place) -> None:
        place.rooms()

    def approve(self, plan: Plan, place: Place) -> None:
        pass

    def check(self, plan: Plan, place: Place) -> None:
        most, name = plan.largest()
        for room in place.rooms():
            if room.free is not None and most > room.free:
                raise TargetError(f"no room for test {name!r} on {room.worker or 'this'}")

    def ready(self, plan: Plan, place: Place, note: Callable[[str], None]) -> None:
        note(f"one file per {place.every or 'worker'}, {len(place.workers())} in all")

    def scratch(self, place: Place, uid: str) -> str:
        return place.files_dir(uid)

    def job(self, jobfile: JobFile, place: Place, worker: Worker, name: str,
            uid: str) -> FioJob:
        sections = []
        for section in jobfile.sections:
            section = section.without("filename", "filename_format", "directory")
            if not section.is_global:  # fio removes it as the job ends (no place must)
                section = section.with_option("filename", self.file(place, worker, uid,
                                                                    section.name)) \
                    .with_option("unlink", "1")
            sections.append(section)
        return FioJob(worker.key, name, JobFile(tuple(sections)).render())

    def facts(self, place: Place, worker: Worker | None) -> dict[str, Any]:
        return {"one_file": True}

    def between(self, place: Place, test: PlannedTest, keep: set[str],
                deadline: Deadline | None, uid: str) -> None:
        place.clean(keep, test.name)

    def access(self, place: Place, uid: str, plan: Plan) -> Access:
        return Access(dirs=(place.files_dir(uid),))

    def check_put(self, place: Place) -> None:
        raise ConfigError("one file takes no replay")

    def put_file(self, place: Place, uid: str, name: str, text: Placed) -> None:
        self.check_put(place)

    def check_precondition(self) -> None:  # the rest of a storage without a device: NoDevice's
        raise ConfigError("one file is not preconditioned")


def job_spec(tmp_path) -> RunSpec:
    job = tmp_path / "two.fio"
    job.write_text(JOB)
    return RunSpec(job_file=job)


def ran(outcome, workers: int) -> None:
    """The run completed, both tests measured I/O on every worker, each job on its
    worker's one file, and the storage's facts were stored with it."""
    run = outcome.run
    assert outcome.error is None and run.status == "completed", run.error
    assert set(run.results_by_test()) == {"one", "two"}
    for results in run.results_by_test().values():
        assert all(sum(d.total_ios for _, d in r.directions()) > 0 for r in results)
    texts = [i.job_text for i in run.invocations]
    named = {line.split("=", 1)[1] for t in texts for line in t.splitlines()
             if line.startswith("filename=")}
    assert len(named) == 2 * workers and all(n.endswith(".data") for n in named), named
    said = [run.environment["target"], *run.environment.get("hosts", [])]
    assert any(facts.get("one_file") is True for facts in said)
    assert run.settings["one_file"] is True


def test_a_new_storage_runs_here(tmpfs, tmp_path, store, fio):
    outcome = run_on(HereTarget(OneFile(str(tmpfs))), job_spec(tmp_path), store)
    ran(outcome, 1)
    assert list(tmpfs.iterdir()) == []  # the place removed the run's files


def test_a_new_storage_runs_on_hosts(fio_servers, tmpfs, tmp_path, store):
    servers = fio_servers(2)
    hosts = parse_hosts(servers.hosts)
    outcome = run_on(HostsTarget(OneFile(str(tmpfs)), hosts), job_spec(tmp_path), store)
    ran(outcome, 2)
    assert [p for p in tmpfs.iterdir() if p.suffix == ".data"] == []  # fio unlinked them


def test_a_new_storage_runs_in_a_pod(kubeconfig, namespace, tmp_path, store):
    from storbench.target.kubernetes.manifests import DATA_DIR, KubeOptions
    from storbench.target.kubernetes.storageclass import KubeTarget
    from tests.k8s import IMAGE

    options = KubeOptions("local-hostpath", namespace=namespace, kubeconfig=kubeconfig,
                          image=IMAGE, capacity="1Gi")
    outcome = run_on(KubeTarget(options, OneFile(DATA_DIR)), job_spec(tmp_path), store)
    ran(outcome, 1)
    assert outcome.run.environment["target"]["storage_class"] == "local-hostpath"


def test_what_it_cannot_do_is_refused_before_anything_runs(tmp_path, store):
    target = HereTarget(OneFile(str(tmp_path)))
    with pytest.raises(ConfigError, match="takes no replay"):
        target.check_put()
    with pytest.raises(ConfigError, match="not preconditioned"):
        target.check_precondition()
