"""A block device as a target's storage: its rules written once, for every place fio
runs on it (this machine: here.py; hosts over SSH: hosts.py; a Kubernetes Block volume
in pods: kubernetes/storageclass.py), through ``DeviceStorage`` below.

A place looks at its device(s) where they are, with the guard of its kind (here and on
each host, blockguard's own look and decision, run where the device is; in a pod, a
probe of the volume's first and last MiB): what it saw of each worker's device is a
``Seen``, refused or not. Everything else is the device's, the same wherever it is
(``Device``): which tests write (and so what the guard is asked), the one message of a
refusal, ``--reads-only`` (the tests that only read), ``--size`` against every device's
size, the job files (filename= the device, direct I/O, ``--readonly`` for a job file
that only reads), the facts stored with the run, the line said before fio starts, a
replay's room on the devices, and preconditioning (the device written whole, twice).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute.base import FioJob
from storbench.target.base import PRECONDITION_BYTES_PER_S, Deadline, DeviceRoom, Placed
from storbench.target.devicejob import (
    access,
    device_job,
    found_on_it,
    identity,
    only_reads,
    reach,
)
from storbench.target.storage import Access, Place, Worker, run_file_name
from storbench.workload.guard import fio_path
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec

PRECONDITION = "--precondition"  # a writer of the run that is no test


@dataclass(frozen=True)
class Seen:
    """One worker's device as its place's guard saw it, right before it was judged."""

    worker: str  # the worker fio runs the device on: "" (here), a host, a pod
    device: str  # the device as fio opens it there: /dev/loop3, /dev/storbench
    signatures: tuple[str, ...]  # what is on it (blkid -p): nothing when blank
    facts: dict[str, Any]  # what it is: size_bytes, model, serial, ... (blockguard)
    refused: str = ""  # why the guard refuses what the run would do; "" if it allows it
    label: str = ""  # its worker in lines said of several: "ssh://db1"
    named: str = ""  # how lines name it, when not by ``device``: "Block volume NAME"

    @property
    def size(self) -> int:
        return int(self.facts.get("size_bytes") or 0)


def seen_in(report: dict[str, Any], worker: str = "", label: str = "") -> Seen:
    """``worker``'s device as blockguard.report saw it (here, or on a host: the same
    report comes back over SSH)."""
    found, decision = report["findings"], report["decision"]
    return Seen(worker, found["device"], tuple(found["signatures"]), dict(report["facts"]),
                "" if decision["allowed"] else decision["reason"], label)


# a place's look at its devices: given whether the run writes, each worker's device seen
Look = Callable[[bool], Sequence[Seen]]


def writes(plan: Plan) -> list[str]:
    """The tests whose jobs write or trim."""
    return [t.name for t in plan.tests if not only_reads(t.jobfile)]


@dataclass
class Device:
    """What a run is asked to do with a device (as given: ``path``), and what the guard
    saw of it on each worker (``judge``)."""

    path: str  # as given: /dev/nvme1n1, /dev/disk/by-id/...
    destructive: str | None = None  # the device named again by --destructive
    size_given: bool = False  # --size: else each test covers the whole device
    precondition: bool = False  # --precondition: the device is written first
    reads_only: bool = False  # --reads-only: only the plan's tests that only read
    every: str = ""  # what a worker is called in a refusal of several: "host"
    after: str = ""  # what the place says after a refusal: "Nothing was started."
    seen: list[Seen] = field(default_factory=list, init=False)  # the last judge's
    writers: list[str] = field(default_factory=list, init=False)  # tests that write
    left_out: list[str] = field(default_factory=list, init=False)  # --reads-only's

    def settings(self) -> dict[str, Any]:
        return {"destructive": self.destructive is not None}

    @property
    def writing(self) -> bool:
        return bool(self.writers)

    def restrict(self, plan: Plan) -> Plan:
        """With --reads-only, the tests that only read (the read half of dbench); the
        others are left out, and said so before the run. A plan with nothing left is
        kept whole: the guard refuses it, naming what is on the device."""
        if not self.reads_only:
            return plan
        reading = [t for t in plan.tests if t.name not in writes(plan)]
        self.left_out = [t.name for t in plan.tests if t not in reading]
        if not reading or not self.left_out:
            self.left_out = []
            return plan
        return replace(plan, tests=reading)

    def plan_writers(self, plan: Plan) -> list[str]:
        """What of the run writes: its tests that do, and preconditioning."""
        return writes(plan) + ([PRECONDITION] if self.precondition else [])

    def judge(self, look: Look, writers: Sequence[str] = ()) -> None:
        """The place's look at its devices for a run whose ``writers`` write (none: it
        only reads); TargetError unless the guard allows it on every worker, naming each
        refusal (of several, each ``every``), what writes, and then ``after``."""
        seen, every, after = list(look(bool(writers))), self.every, self.after
        refused = [s for s in seen if s.refused]
        if refused:
            tests = f" (tests that write: {', '.join(writers)})" if writers else ""
            hint = "; or --reads-only for the tests that only read" if writers else ""
            if len(seen) == 1 and not every:
                why = refused[0].refused
            else:
                why = (f"{len(refused)} of {len(seen)} {every or 'worker'}(s) refuse"
                       f" {self.path}: " + "; ".join(
                           f"{s.label}: {s.refused}" if s.label else s.refused
                           for s in refused))
            raise TargetError(why + tests + hint + (f". {after}" if after else ""))
        self.seen, self.writers = seen, list(writers)

    def check(self, plan: Plan, look: Look) -> None:
        """Before anything of the run starts: the guard allows what the plan does on every
        worker's device, each has a size, and with --size no job reaches past the smallest."""
        self.judge(look, self.plan_writers(plan))
        for s in self.seen:
            if not s.size:
                where = f"{s.label}: " if s.label else ""
                raise TargetError(f"{where}{self.path}: the device has no size (an empty loop"
                                  " device?)")
        if self.size_given:
            smallest = min(self.seen, key=lambda s: s.size)
            of = f" on {smallest.label}" if len(self.seen) > 1 and smallest.label else ""
            for test in plan.tests:
                for job, options in test.jobfile.effective():
                    far = reach(options)
                    if far is not None and far > smallest.size:
                        raise TargetError(
                            f"test {test.name!r} job {job!r} reaches {format_bytes_iec(far)}"
                            f" into {self.path}{of}, which holds"
                            f" {format_bytes_iec(smallest.size)}: pass a smaller --size")

    def of(self, worker: str) -> Seen:
        """What the guard saw of ``worker``'s device."""
        found = next((s for s in self.seen if s.worker == worker), None)
        if found is None:
            raise TargetError(f"{self.path}: the device of {worker or 'this machine'} was"
                              " not looked at")
        return found

    def size_of(self, worker: str) -> int | None:
        """What each test covers of ``worker``'s device: None with --size (the sizes it
        has), else the whole device."""
        return None if self.size_given else self.of(worker).size

    def job(self, jobfile: JobFile, worker: str, device: str, name: str,
            whole: int | None, files: Path | None = None) -> FioJob:
        """``worker``'s job file ``name`` on its ``device`` (device_job): each test covers
        ``whole`` bytes of it (size_of: the device; None: the sizes the job file has); a
        replay's iolog is read from ``files``."""
        return FioJob(worker, name, *device_job(jobfile, device, whole, files))

    def facts(self, seen: Seen) -> dict[str, Any]:
        """The device's facts stored with the run: what it is, what was on it, the access
        the run had, and whether it was written whole first."""
        return {**seen.facts, "device": seen.device,
                "found_on_it": found_on_it(list(seen.signatures)),
                "access": access(self.writing),
                **({"preconditioned": True} if self.precondition else {})}

    def say(self, note: Callable[[str], None]) -> None:
        """Right before fio starts: what --reads-only left out, and each device about to
        be read or written (identity)."""
        if self.left_out:
            note(f"Left out (--reads-only): {', '.join(self.left_out)}: they write")
        for s in self.seen:
            note((f"{s.label}: " if s.label else "")
                 + identity(s.named or s.device, s.facts, list(s.signatures),
                            self.writing))

    def room(self, smallest_of: str = "") -> DeviceRoom:
        """How far a replay may reach into the devices: the smallest one's size (None
        before the guard reached them)."""
        return DeviceRoom(min(s.size for s in self.seen) if self.seen else None, self.path,
                          smallest_of=smallest_of)

    def precondition_s(self, size_bytes: int) -> float:
        """How long preconditioning a device of ``size_bytes`` may take (0: none asked)."""
        return 2 * size_bytes / PRECONDITION_BYTES_PER_S + 60 if self.precondition else 0.0

    def precondition_job(self, worker: str, device: str, name: str,
                         cap_bytes: int | None) -> FioJob:
        """The job that writes ``worker``'s device sequentially in 128 KiB blocks, twice
        (or up to ``cap_bytes``): SNIA's preconditioning."""
        size = self.of(worker).size
        total = min(2 * size, cap_bytes) if cap_bytes else 2 * size
        text = (f"[precondition]\nrw=write\nbs=128k\nioengine=libaio\niodepth=32\ndirect=1\n"
                f"filename={fio_path(device)}\nsize={size}\nio_size={total}\n")
        return FioJob(worker, name, text)


@dataclass
class DeviceStorage:
    """A block device as the storage of a target, at any place (target/storage.py): the
    place looks at it with its guard and names it as fio there opens it; the rules above
    do the rest."""

    path: str  # as given: /dev/nvme1n1, /dev/disk/by-id/…, a pod's /dev/storbench
    destructive: str | None = None  # the device named again by --destructive
    size_given: bool = False  # --size: else each test covers the whole device
    precondition: bool = False  # --precondition: the device is written first
    reads_only: bool = False  # --reads-only: only the plan's tests that only read
    kind = "block device"
    in_files = False  # fio's files are the device: nothing of the run's to remove
    dev: Device = field(init=False)

    def __post_init__(self) -> None:
        self.dev = Device(self.path, self.destructive, self.size_given, self.precondition,
                          self.reads_only)

    @property
    def name(self) -> str:
        return self.path

    @property
    def short_name(self) -> str:
        return Path(self.path).name

    def _rules(self, place: Place) -> Device:
        """The device's rules, naming the place's workers in what they say."""
        self.dev.every = place.every
        self.dev.after = place.refused_after
        return self.dev

    def _look(self, place: Place) -> Look:
        return lambda writes: place.look(self.path, writes, self.destructive)

    def settings(self, place: Place) -> dict[str, Any]:
        return self.dev.settings()

    def restrict(self, plan: Plan) -> Plan:
        return self.dev.restrict(plan)

    def needed(self, plan: Plan, sharing: int) -> tuple[int, str, int]:
        """What each worker's device must hold for the largest test (each its own)."""
        most, name = plan.largest()
        return most, name, 1

    def preflight(self, place: Place) -> None:
        """A device that is not one, or that is in use, fails before anything starts
        (where the place can look before it starts anything)."""
        if place.looks_early:
            self._rules(place).judge(self._look(place))

    def approve(self, plan: Plan, place: Place) -> None:
        """Before the place starts anything: the guard allows what the plan does on every
        worker's device, each has a size, --size fits the smallest."""
        if place.looks_early:
            self._rules(place).check(plan, self._look(place))

    def check(self, plan: Plan, place: Place) -> None:
        pass  # approve() did it, before the place started anything

    def ready(self, plan: Plan, place: Place, note: Callable[[str], None]) -> None:
        """The guard once more, right before fio (where the devices are first seen once
        the place runs, a pod's volume: with the checks of approve); then each, said."""
        rules = self._rules(place)
        if place.looks_early:
            rules.judge(self._look(place), rules.plan_writers(plan))
        else:
            rules.check(plan, self._look(place))
        rules.say(note)

    def _seen(self, place: Place) -> None:
        if not self.dev.seen and place.looks_early:
            self.preflight(place)

    def scratch(self, place: Place, uid: str) -> str:
        return place.device(place.workers()[0], self.path)

    def job(self, jobfile: JobFile, place: Place, worker: Worker, name: str,
            uid: str) -> FioJob:
        """fio is told --readonly for a job file that only reads: it then refuses to
        write, whatever the options say. Each test covers the worker's whole device
        (unless --size): as looked at, or the volume the place makes for it."""
        self._seen(place)
        whole = (None if self.size_given else self.dev.size_of(worker.key) if self.dev.seen
                 else place.volume_size())
        own = place.own_dir(worker, uid)
        return self.dev.job(jobfile, worker.key, place.device(worker, self.path), name, whole,
                            Path(own) if own is not None else None)

    def facts(self, place: Place, worker: Worker | None) -> dict[str, Any]:
        """The device as the guard saw it (the first worker's), for the target; a
        worker's, as its ``device``; {} before it was looked at."""
        self._seen(place)
        if worker is None:
            return self.dev.facts(self.dev.seen[0]) if self.dev.seen else {}
        seen = [s for s in self.dev.seen if s.worker == worker.key]
        return {"device": self.dev.facts(seen[0])} if seen else {}

    def between(self, place: Place, test: PlannedTest, keep: set[str],
                deadline: Deadline | None, uid: str) -> None:
        pass  # nothing to remove between tests: the files are the device

    def access(self, place: Place, uid: str, plan: Plan) -> Access:
        """The device, for fio to write, only when the run writes (the guard allowed it)."""
        writes = self.dev.writing if self.dev.seen else bool(self.dev.plan_writers(plan))
        return Access(files=tuple(place.device(w, self.path) for w in place.workers())
                      if writes else ())

    def check_put(self, place: Place) -> None:
        place.check_putting()

    def put_file(self, place: Place, uid: str, name: str, text: Placed) -> None:
        """A file of storbench's (a replay's iolog) in each worker's own directory of the
        run, every run file it names the device (replay_redirect says so to fio)."""
        run_file_name(name)
        files = []
        for w in place.workers():
            own = place.own_dir(w, uid)
            if own is None:
                raise ConfigError(f"{self.path}: no place for a file of the run's beside"
                                  " the device here")
            device = place.device(w, self.path)
            files.append((w, f"{own}/{name}", text(_always(device))))
        place.put(files)

    def put_dirs(self, place: Place, uid: str) -> list[str]:
        return [d for w in place.workers() if (d := place.own_dir(w, uid)) is not None]

    def replay_device(self, place: Place) -> DeviceRoom:
        self._seen(place)
        return self.dev.room(smallest_of=place.every)

    def check_precondition(self) -> None:
        pass  # a device can be written whole

    def precondition_job(self, place: Place, cap_bytes: int | None) -> list[FioJob]:
        """Each worker's device written whole, twice (as looked at)."""
        self._seen(place)
        workers = place.workers()
        return [self.dev.precondition_job(
            w.key, place.device(w, self.path),
            "precondition.fio" if len(workers) == 1 else f"precondition-{w.tag}.fio",
            cap_bytes) for w in workers]

    def precondition_s(self, size_bytes: int) -> float:
        return self.dev.precondition_s(size_bytes)

    def covers(self) -> bool:
        """Each test covers the whole device (no --size): a volume made for it is sized
        by --capacity, not by the tests."""
        return not self.size_given


def _always(device: str) -> Callable[[str], str]:
    """Every run file a replay names, on a device: the device itself."""
    return lambda _: device
