"""A block device target: fio on this machine, ``filename=`` the device, direct I/O.

Nothing is created on the device and nothing needs removing afterwards; what
matters is the guard (target/blockguard.py): a device that is mounted or in use is
never touched, reading needs nothing more (fio runs with ``--readonly``), writing needs
the device named again with ``--destructive``. The guard decides before the run is
stored and once more right before fio starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storbench.errors import TargetError
from storbench.execute import Executor, FioBinary, FioJob, LocalExecutor, SignalGuard
from storbench.execute.local import Confinement
from storbench.execute.workdir import run_workdir
from storbench.result.record import BLANK_DEVICE
from storbench.target.base import DeviceRoom, InRunDirs, Placed, Quiet
from storbench.target.blockguard import Findings, decide, device_facts, inspect
from storbench.target.environment import host_facts, local_confinement
from storbench.workload.guard import fio_path, plain
from storbench.workload.jobfile import JobFile, Section
from storbench.workload.plan import Plan
from storbench.workload.sizes import format_bytes_iec, parse_count, parse_size

READS = ("read", "randread")
FILE_OPTIONS = ("directory", "filename", "filename_format", "nrfiles", "opendir", "unlink",
                "unlink_each_loop", "create_on_open", "create_only", "file_service_type")
ALIGN = 2**20  # each job's share of the device starts on a MiB


def only_reads(jobfile: JobFile) -> bool:
    """Every job of it only reads (read/randread): nothing written, nothing trimmed."""
    return all(o.get("rw", o.get("readwrite", "read")) in READS for _, o in jobfile.effective())


def writes(plan: Plan) -> list[str]:
    """The tests whose jobs write or trim."""
    return [t.name for t in plan.tests if not only_reads(t.jobfile)]


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
    found: Findings | None = field(default=None, init=False)
    read_only: bool = field(default=True, init=False)
    writers: list[str] = field(default_factory=list, init=False)  # the tests that write
    size_bytes: int = field(default=0, init=False)
    left_out: list[str] = field(default_factory=list, init=False)  # tests that would write

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def short_name(self) -> str:
        return self.path.name

    @property
    def device(self) -> str:
        return self.found.device if self.found else str(self.path.resolve())

    def settings(self) -> dict[str, Any]:
        return {"destructive": self.destructive is not None}

    def preflight(self) -> None:
        """A device that is not one, or that is in use, fails before anything starts."""
        self._judge(writes_to=[])

    def _judge(self, writes_to: list[str]) -> Findings:
        found = inspect(str(self.path))
        verdict = decide(found, writes=bool(writes_to), destructive=self.destructive)
        if not verdict.allowed:
            tests = f" (tests that write: {', '.join(writes_to)})" if writes_to else ""
            hint = "; or --reads-only for the tests that only read" if writes_to else ""
            raise TargetError(verdict.reason + tests + hint)
        self.found = found
        self.read_only = not writes_to
        return found

    def device_size(self) -> int:
        """The device's size in bytes (0: none, e.g. a loop device with no file)."""
        found = self.found or inspect(str(self.path))
        return int(device_facts(found.name).get("size_bytes") or 0) if found.is_block else 0

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

    def scratch_path(self, uid: str) -> Path:
        return Path(self.device)

    def replay_device(self) -> DeviceRoom:
        return DeviceRoom(self.device_size(), str(self.path))  # known before the run

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
        self.writers = writes(plan) + (["--precondition"] if self.precondition else [])
        self._judge(self.writers)
        size = self.device_size()
        if not size:
            raise TargetError(f"{self.path}: the device has no size (an empty loop device?)")
        if self.size_given:
            for test in plan.tests:
                for job, options in test.jobfile.effective():
                    reach = _reach(options)
                    if reach is not None and reach > size:
                        raise TargetError(
                            f"test {test.name!r} job {job!r} reaches {format_bytes_iec(reach)}"
                            f" into {self.path}, which holds {format_bytes_iec(size)}: pass a"
                            f" smaller --size")
        self.size_bytes = size

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """fio is told --readonly for a job file that only reads: it then refuses to
        write, whatever the options say."""
        self.size_bytes = self.size_bytes or self.device_size()
        text, args = device_job(jobfile, self.device,
                                None if self.size_given else self.size_bytes,
                                run_workdir(uid))
        return [FioJob("", f"t{index:03d}.fio", text, args)]

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        found = self.found or inspect(str(self.path))
        facts = device_facts(found.name) if found.is_block else {}
        return {**host_facts(), "confinement": local_confinement(),
                "target": {"kind": self.kind, "path": str(self.path), "device": found.device,
                           **facts, "found_on_it": found_on_it(found.signatures),
                           "access": access(not self.read_only),
                           **({"preconditioned": True} if self.precondition else {})},
                **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {})}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """The guard once more, right before fio; then the device's identity, said."""
        found = self._judge(self.writers)
        if self.left_out:
            note(f"Left out (--reads-only): {', '.join(self.left_out)}: they write")
        note(identity(found.device, device_facts(found.name), found.signatures,
                      writes=not self.read_only))

    def precondition_job(self, cap_bytes: int | None) -> list[FioJob]:
        size = self.size_bytes or self.device_size()
        total = min(2 * size, cap_bytes) if cap_bytes else 2 * size
        text = (f"[precondition]\nrw=write\nbs=128k\nioengine=libaio\niodepth=32\ndirect=1\n"
                f"filename={fio_path(self.device)}\nsize={size}\nio_size={total}\n")
        return [FioJob("", "precondition.fio", text)]

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None
        # the kernel lets fio write to the device only when the guard allowed writing
        return LocalExecutor(fio, workdir, guard,
                             Confinement(files=(self.device,) if self.writers else ()))


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
