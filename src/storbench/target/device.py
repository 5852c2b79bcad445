"""A block device as a target's storage: its rules written once, for every place fio
runs on it (this machine: blockdev.py; hosts over SSH: hostsdevice.py; a Kubernetes
Block volume in pods: kubernetes/blockvolume.py).

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

from storbench.errors import TargetError
from storbench.execute.base import FioJob
from storbench.result.record import BLANK_DEVICE
from storbench.target.base import PRECONDITION_BYTES_PER_S, DeviceRoom
from storbench.workload.guard import fio_path
from storbench.workload.jobfile import JobFile, Section
from storbench.workload.plan import Plan
from storbench.workload.sizes import format_bytes_iec, parse_count, parse_size

READS = ("read", "randread")
FILE_OPTIONS = ("directory", "filename", "filename_format", "nrfiles", "opendir", "unlink",
                "unlink_each_loop", "create_on_open", "create_only", "file_service_type")
ALIGN = 2**20  # each job's share of the device starts on a MiB
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


def only_reads(jobfile: JobFile) -> bool:
    """Every job of it only reads (read/randread): nothing written, nothing trimmed."""
    return all(o.get("rw", o.get("readwrite", "read")) in READS for _, o in jobfile.effective())


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
                    reach = _reach(options)
                    if reach is not None and reach > smallest.size:
                        raise TargetError(
                            f"test {test.name!r} job {job!r} reaches {format_bytes_iec(reach)}"
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


def found_on_it(signatures: list[str]) -> list[str]:
    """What was found on a device, as stored and said: its signatures, or blank."""
    return list(signatures) or [BLANK_DEVICE]


def access(writes: bool) -> str:
    return "read and write" if writes else "read only"


def verb(writes: bool) -> str:
    """How the line said before fio starts begins."""
    return "WRITING to" if writes else "Reading (fio --readonly)"


def identity(device: str, facts: dict[str, Any], signatures: list[str], writes: bool) -> str:
    """The line said right before fio starts: the device about to be read or written,
    what it is (model, serial, an NVMe namespace's id, size, a loop device's file) and
    what is on it."""
    what = ", ".join(str(facts[k]) for k in ("model", "serial") if k in facts)
    if "nvme" in facts:  # a controller's serial is shared by all its namespaces
        what += f", namespace {facts['nvme']['namespace_id']}"
    size = format_bytes_iec(int(facts.get("size_bytes") or 0))
    backing = (f", backed by {facts['loop_backing_file']}"
               if "loop_backing_file" in facts else "")
    return (f"{verb(writes)} {device} ({what or facts.get('name', device)}, {size}{backing});"
            f" found on it: {', '.join(found_on_it(signatures))}")


def device_job(jobfile: JobFile, device: str, size_bytes: int | None,
               files: Path | None = None) -> tuple[str, tuple[str, ...]]:
    """The job file's text on ``device`` (on_device), and fio's options for it:
    --readonly for one that only reads (said in the text, which is stored)."""
    text = on_device(jobfile, device, size_bytes, files).render()
    if only_reads(jobfile):
        return (f"; run as: fio --readonly (only reads: fio refuses any write)\n{text}",
                ("--readonly",))
    return text, ()


def on_device(jobfile: JobFile, device: str, size_bytes: int | None,
              files: Path | None = None) -> JobFile:
    """The job file pointed at ``device``: its file options replaced by filename= the
    device, direct I/O, and with ``size_bytes`` (None: the sizes it has, from --size),
    each job's size the device (split among the jobs of a test that has them work side
    by side with offset_increment). A replay's iolog (read_iolog) is read from ``files``
    (the run's work directory, where put_file wrote it) and every file it names is the
    device (replay_redirect)."""
    effective = dict(jobfile.effective())
    sections: list[Section] = []
    for section in jobfile.sections:
        section = section.without(*FILE_OPTIONS)
        iolog = section.get("read_iolog")
        if iolog is not None:
            if files is None:
                raise TargetError("a replay on a device needs the run's work directory")
            section = section.with_option("read_iolog", str(files / Path(iolog).name)) \
                .with_option("replay_redirect", device)
        if not section.is_global:
            section = section.with_option("filename", fio_path(device)) \
                .with_option("direct", "1")
            options = effective.get(section.name, {})
            if size_bytes is not None:
                numjobs = max(1, parse_count(options.get("numjobs")))
                if options.get("offset_increment"):
                    share = size_bytes // numjobs // ALIGN * ALIGN
                    section = section.with_option("size", str(share)).with_option(
                        "offset_increment", str(share))
                else:
                    section = section.with_option("size", str(size_bytes))
        if section.options or not section.is_global:
            sections.append(section)
    return JobFile(tuple(sections))


def _reach(options: dict[str, str]) -> int | None:
    """How far into the device a job goes: offset + size (+ its jobs' increments)."""
    size = parse_size(options.get("size", "")) if options.get("size") else None
    if size is None:
        return None
    offset = parse_size(options.get("offset") or "0") or 0
    step = parse_size(options.get("offset_increment") or "0") or 0
    return offset + size + step * (max(1, parse_count(options.get("numjobs"))) - 1)
