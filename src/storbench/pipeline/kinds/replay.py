"""A recorded workload replayed (`run TARGET --replay NAME`): the application's own I/O,
from `storbench record`, issued by fio's iolog replay on the target.

The trace's files get plain names in the scratch directory (f0001, ...), the files it
reads are first written as far as its reads reach (a read past a file's end fails), and
fio replays the iolog: on the recorded timeline (timed: how far it lagged behind is
said) or as fast as it can (``--replay-fast``: the storage's capacity for this
pattern), with an async engine at the depth the application reached. The answer is the
run's figures, as any run's, and the ``replay`` section: what was issued of what was
recorded (a replay that lost I/O fails the run), the lag, what a trace cannot hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from storbench.errors import ConfigError, FioError
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.model import TestResult
from storbench.result.sections import REPLAY, ReplaySection
from storbench.target.base import PutsFiles, Target
from storbench.workload.guard import FILENAME_FORMAT
from storbench.workload.jobfile import JobFile, Section, parse_jobfile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec
from storbench.workload.trace import Trace, check_iolog_name

IOLOG = "replay.iolog"
FILL_BYTES_PER_S = 16 << 20  # the prefill's time limit: its bytes at 16 MiB/s, + 60 s
LOST = 0.01  # more than 1% of the recorded I/O not issued: the replay failed
DISK_IMAGE = ("a block-level trace replayed in a file is a disk-image test of this storage,"
              " not the application on its file system")
NO_DATA = ("a trace holds no data, only offsets and sizes: fio writes its own buffers"
           " (storage that deduplicates or compresses sees those, not the application's)")


@dataclass(frozen=True)
class ReplaySpec:
    """What `run --replay` asks: the stored workload, timed or as fast as possible."""

    name: str
    method: str
    trace: Trace
    fast: bool = False

    def engine(self) -> list[tuple[str, str | None]]:
        """fio's engine, depth and buffering for it: as the application issued its I/O
        (a file-level trace whose every read and write was O_DIRECT: direct=1)."""
        depth = self.trace.depth
        direct = [("direct", "1")] if self.file_level and self.trace.io_mode() == "direct" \
            else []
        if depth <= 1:
            return [("ioengine", "psync"), *direct]
        return [("ioengine", "libaio"), ("iodepth", str(depth)), *direct]

    @property
    def file_level(self) -> bool:
        return not self.method.startswith("block")

    def buffering(self) -> str | None:
        """What a file-level replay says of its buffering when it is not the
        application's own (None: it is)."""
        mode = self.trace.io_mode()
        if not self.file_level or mode in ("direct", "buffered"):
            return None
        if mode is None:
            return ("recorded before storbench noted O_DIRECT: replayed through the page"
                    " cache; record it again if the application uses O_DIRECT")
        data = self.trace.counts()["reads"] + self.trace.counts()["writes"]
        return (f"{self.trace.direct:,} of the {data:,} recorded reads and writes were"
                " O_DIRECT, the others buffered: fio replays one way, through the page cache"
                " here (the direct ones were not)")

    def plan_tests(self, scratch: Path) -> Plan:
        # rw says whether the trace writes (fio takes each I/O's direction from the
        # iolog): the device guard asks --destructive, and fio --readonly, by it
        writes = self.trace.counts()["writes"] > 0
        options: list[tuple[str, str | None]] = [
            ("read_iolog", str(scratch / IOLOG)), ("rw", "randrw" if writes else "randread"),
            *self.engine()]
        if self.fast:
            options.append(("replay_no_stall", "1"))
        # no directory=: fio 3.33 crashes replaying an iolog with one set (the iolog's
        # names are absolute, in the scratch directory)
        jobfile = JobFile((Section("global", (("filename_format", FILENAME_FORMAT),)),
                           Section(self.name, tuple(options))))
        how = "as fast as possible" if self.fast else "on its recorded timeline"
        expected = None if self.fast else self.trace.duration_s
        # as fast as possible is another workload than the recorded timeline: its own
        # series (133,333 IOPS fast then 188 timed read as a 0.0014 × drop)
        workload = f"replay-fast:{self.name}" if self.fast else ""
        return Plan(f"replay:{self.name}", workload_name=workload, tests=[PlannedTest(
            self.name, f"replay of {self.name} ({self.method}), {how}", jobfile, expected,
            longer=f"a replay issues what was recorded: record a longer stretch of the"
                   f" application (storbench record {self.name} ... --duration SECONDS"
                   " --replace)")])


@dataclass
class ReplayKind(Plain):
    kind: ClassVar[str] = "replay"
    section: ClassVar[RecordSection] = REPLAY
    fixed_schedule: ClassVar[bool] = True
    spec: ReplaySpec
    result: TestResult | None = None
    prefilled: dict[str, int] = field(default_factory=dict)
    on_device: bool = False
    workers: int = 1  # fio workers that each replayed it (hosts): the issued I/O is theirs

    @classmethod
    def from_spec(cls, spec: RunSpec) -> ReplayKind | None:
        if not isinstance(spec.kind_spec, ReplaySpec):
            return None
        if spec.repeat != 1 or spec.until_steady or spec.precondition or spec.job_file:
            raise ConfigError("--replay runs the recorded workload once: leave out --job,"
                              " --repeat, --until-steady and --precondition")
        return cls(spec.kind_spec)

    def check(self) -> None:
        if not self.spec.trace.ops:
            raise ConfigError(f"workload {self.spec.name!r} holds no I/O")

    def plan(self, plan: Plan) -> Plan:
        return plan  # spec.plan_tests made it

    def settings(self) -> dict[str, Any]:
        return {"replay": {"workload": self.spec.name, "timed": not self.spec.fast}}

    def check_target(self, target: Target) -> None:
        if not isinstance(target, PutsFiles):
            raise ConfigError(f"--replay runs on directories, devices, --hosts and"
                              f" StorageClasses, not on a {target.kind}")
        target.check_put()
        self._check_reach(target)  # a device's size known now: refused before the run
        self._check_names(target, target)

    def _check_names(self, target: Target, puts: PutsFiles) -> None:
        """The names fio's I/O log will give the run's files, as far as they are known
        before the run has its id (a uid's length; each worker's copy says it again as it
        is put): a TARGET with a space in its path, or too long a one, is refused before
        the run is stored."""
        scratch = str(target.scratch_path("0" * 12))  # (the hosts target keeps the real
        # uid plan_run gives it next)
        on_device = puts.replay_device() is not None  # every name is the device
        for name in [scratch] if on_device else [f"{scratch}/{f}" for f in self.spec.trace.files]:
            check_iolog_name(name)

    def _check_reach(self, target: PutsFiles) -> None:
        """On devices: each must hold as far as the trace reaches."""
        room = target.replay_device()
        reach = max((o.offset + o.length for o in self.spec.trace.ops), default=0)
        if room is not None and room.size is not None and reach > room.size:
            raise ConfigError(
                f"the workload {self.spec.name!r} reaches {format_bytes_iec(reach)} into its"
                f" device; {room.device} holds {format_bytes_iec(room.size)}"
                + (f" on its smallest {room.smallest_of}" if room.smallest_of else ""))

    def measure(self, ctx: RunContext) -> None:
        assert isinstance(ctx.target, PutsFiles)
        self._check_reach(ctx.target)  # hosts: their devices' sizes are known now
        scratch = ctx.target.scratch_path(ctx.planned.uid)
        trace = self.spec.trace
        # each worker's iolog names the run's files as fio there opens them
        ctx.target.put_file(ctx.planned.uid, IOLOG,
                            lambda where: trace.iolog({f: where(f) for f in trace.files}))
        self.workers = len(ctx.planned.steps[0].jobs)
        if ctx.target.replay_device() is not None:  # the device holds what its reads find
            self.on_device = True
        else:
            self._prefill(ctx, scratch)
        ctx.guard.check()
        [step] = ctx.planned.steps
        found = ctx.run_step(step, {IOLOG, *trace.files})
        self.result = found[0] if found else None

    def _prefill(self, ctx: RunContext, scratch: Path) -> None:
        """Write each file the trace reads as far as its reads reach, before the replay."""
        needed = self.spec.trace.read_extents()
        if not needed:
            return
        sizes = {f: -(-n // 4096) * 4096 for f, n in needed.items()}  # whole 4 KiB pages
        # unlink=0: kept for the replay (hosts: until the session ends and removes them)
        text = "[global]\nrw=write\nioengine=psync\nend_fsync=1\nunlink=0\n" + "".join(
            f"[fill-{f}]\nfilename={f}\nsize={n}\nbs={min(n, 1 << 20)}\n"
            for f, n in sorted(sizes.items()))
        jobfile = parse_jobfile(text, "the replay's prefill").prepared(scratch)
        jobs = ctx.target.job_files(jobfile, len(ctx.planned.steps), ctx.planned.uid)
        total = sum(needed.values())
        ctx.note(f"Replay of {self.spec.name}: writing the {len(needed)} file(s) it reads"
                 f" first ({format_bytes_iec(total)})")
        with ctx.phase("prefill"):
            execution = ctx.executor.run(jobs, None, total / FILL_BYTES_PER_S + 60)
        ctx.keep_invocation(len(ctx.planned.steps), jobs, execution)
        if execution.returncode != 0 or execution.timed_out or execution.lost:
            raise FioError("writing the files the replay reads failed: "
                           + (execution.stderr.strip()[-300:] or "fio said nothing"),
                           returncode=execution.returncode, stderr=execution.stderr)
        self.prefilled = needed

    def expected(self) -> dict[str, int]:
        """What the workers together should issue: the recording once each."""
        return {k: v * self.workers for k, v in self.spec.trace.counts().items()}

    def issued(self) -> dict[str, int]:
        r = self.result
        if r is None:
            return {}
        return {"reads": r.read.total_ios if r.read else 0,
                "writes": r.write.total_ios if r.write else 0,
                "syncs": r.sync.calls if r.sync else 0}

    def record(self) -> ReplaySection | None:
        trace, r = self.spec.trace, self.result
        if r is None:
            return None
        replay_s = max((d.runtime_ms for _, d in r.directions()), default=0) / 1000
        notes = [NO_DATA]
        if (buffering := self.spec.buffering()) is not None:
            notes.append(buffering)
        if self.spec.method.startswith("block") and not self.on_device:
            notes.append(DISK_IMAGE)
        notes += [f"not in the trace: {n:,} × {why}" for why, n in sorted(trace.skipped.items())]
        return {
            "workload": self.spec.name, "method": self.spec.method,
            "timed": not self.spec.fast,
            "engine": ", ".join(f"{k} {v}" for k, v in self.spec.engine()),
            "recorded": trace.counts(), "issued": self.issued(), "workers": self.workers,
            "recorded_s": round(trace.duration_s, 6), "replay_s": replay_s,
            "lag_s": None if self.spec.fast else round(replay_s - trace.duration_s, 6),
            "prefilled": self.prefilled, "notes": notes}

    def failed(self) -> str | None:
        issued, recorded = self.issued(), self.expected()
        if not issued:
            return None
        times = f" ({self.workers} × the recording)" if self.workers > 1 else ""
        short = [f"{issued[k]:,} {k} of {recorded[k]:,} recorded{times}" for k in issued
                 if abs(issued[k] - recorded[k]) > LOST * max(recorded[k], 1)]
        return (f"the replay of {self.spec.name} issued {'; '.join(short)}" if short
                else None)
