"""The Target contract: where the I/O goes, and what it is.

A target is one object per run: it checks that it can be used, prepares the place
fio writes to (a marked scratch directory, a PVC and pods), says where fio's files
go (by rewriting each test's job file for each of its workers), describes itself
(the environment facts stored with the run), builds the Executor that runs fio
there, and removes what it created, also after a failure or a signal. The run
loop (pipeline/loop.py) drives every target the same way; docs/targets.md shows
how to add a kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from storbench.execute.base import Executor, FioJob
from storbench.execute.fio import FioBinary
from storbench.execute.signals import SignalGuard
from storbench.execute.workdir import Leftover as Leftover
from storbench.result.environment import Environment
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest, expected_seconds, moved_bytes

if TYPE_CHECKING:
    from storbench.execute.probe import Probe


@dataclass(frozen=True)
class Deadline:
    """How long one test may take, and why (said when it is passed)."""

    seconds: float
    why: str  # e.g. "the test's runtime + 30 s"


MARGIN_S = 60.0  # beyond what a test's options say it takes: fio's start, end, a slow open
LAYOUT_BYTES_PER_S = 16 * 2**20  # laying out its files, at the least
SLOW_BYTES_PER_S = 256 * 2**10  # a size-bound test on the slowest storage worth waiting for
UNKNOWN_S = 3600.0  # fio's options say neither how long nor how much


def default_deadline(test: PlannedTest) -> Deadline:
    """A test's time limit from its options: its runtime and ramp (or the bytes it
    moves at 256 KiB/s when it is size-bound), its files laid out at 16 MiB/s, and 60 s."""
    size = test.jobfile.estimated_bytes()
    run = expected_seconds(test.jobfile)
    moved = moved_bytes(test.jobfile)
    layout = (size or 0) / LAYOUT_BYTES_PER_S
    if run is not None:
        why = "its runtime and ramp"
    elif moved:  # loops=, io_size=, verify= move more than the files hold
        run, why = moved / SLOW_BYTES_PER_S, "its I/O at 256 KiB/s"
    else:
        run, why = UNKNOWN_S, "an hour: its options say neither runtime nor size"
    return Deadline(run + layout + MARGIN_S,
                    f"{why}, laying out its files at 16 MiB/s, and {MARGIN_S:.0f} s")


PRECONDITION_BYTES_PER_S = 16 * 2**20  # its time limit: at least this fast, plus a minute


@runtime_checkable
class Preconditionable(Protocol):
    """A target that can be written whole before its tests (``run --precondition``)."""

    def check_precondition(self) -> None:
        """ConfigError unless its storage can be written whole (a device)."""

    def precondition_job(self, cap_bytes: int | None) -> list[FioJob]:
        """The fio job that writes it sequentially in 128 KiB blocks, twice (or up to
        ``cap_bytes``)."""
        ...


@runtime_checkable
class Restricting(Protocol):
    """A target that runs only part of a plan (a block device without --destructive:
    the tests that only read)."""

    def restrict(self, plan: Plan) -> Plan: ...


@runtime_checkable
class Spread(Protocol):
    """A target whose tests run at its workers, in order (this machine alone, hosts,
    pods): each a target/storage.Worker (its key, tag and label)."""

    def workers(self) -> list[Any]: ...


@runtime_checkable
class Traceable(Protocol):
    """A target whose fio runs on this machine, where the kernel's tracepoints see its I/O
    (run --explain): the path (a directory or a device) beneath which that I/O goes."""

    def traced_path(self) -> Path: ...


@runtime_checkable
class TracesHosts(Protocol):
    """A place whose fio runs on hosts, each followed by its own kernel (run --explain
    over SSH: execute/hosttrace.py): what follows each test, given storbench's work
    directory; ConfigError where it cannot."""

    def tracer(self) -> Callable[[Path], Any]: ...


@runtime_checkable
class ProbesItself(Protocol):
    """A target whose latency beside the load is not a directory's metadata but its own
    requests (an S3 bucket's HEAD, LIST and GET: execute/probe.ObjectProbe). On by
    default; --no-probe-metadata turns it off. None: it has none (a place whose storage
    has none: a directory's metadata probe then follows the rules of files)."""

    def own_probe(self) -> Probe | None: ...


class Subject(Protocol):
    """What a run measures, whoever drives its I/O: the run loop gives every subject the
    same lifetime (quick checks, check, described, stored, cleaned up on every ending).
    A fio target (``Target``) is one; a StorageClass whose own volumes a kind creates
    (k8s lifecycle, failover: target/kubernetes/classsubject.py) is another."""

    @property
    def kind(self) -> str:
        """"directory", "hosts", "kubernetes": named in messages."""
        ...

    @property
    def name(self) -> str:
        """The subject as stored with the run and shown in tables."""
        ...

    @property
    def short_name(self) -> str:
        """A label for its run when several subjects run in one command."""
        ...

    def settings(self) -> dict[str, Any]:
        """What the user asked of it (stored with the run's settings)."""
        ...

    def preflight(self) -> None:
        """Quick checks before any subject of the command starts (exists, reachable)."""
        ...

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        """Raise unless the plan can run here: usable, room for the largest test, the
        right fio. What it starts to ask (SSH sessions, fio servers) ``cleanup`` ends,
        also when ``check`` raises half-way."""
        ...

    def leftovers(self) -> list[Leftover]:
        """What crashed runs left here that this machine may remove."""
        ...

    def remove_leftover(self, leftover: Leftover) -> None: ...

    def describe(self, fio: FioBinary | None) -> Environment:
        """The environment: facts of the machine(s) fio runs on (hostname, kernel,
        ram_bytes, ...), ``target`` (kind and what it is), fio (result/environment.py).
        Called before ``prepare`` and again after it (a pod's facts are known once it
        runs)."""
        ...

    def cleanup(self, hurry: bool = False) -> None:
        """Remove what ``check`` and ``prepare`` created (called once ``check`` was called,
        on every path: also when it raised, or the run never began; so also with nothing
        to remove); raise naming what could not be removed. In a
        ``hurry`` (a signal came, or the target stopped responding) it waits for slow
        removals only briefly."""
        ...


@runtime_checkable
class Target(Subject, Protocol):
    """A subject fio runs on through the loop: where its files go, each test's job file
    per worker, the executor, what happens between tests."""

    @property
    def worker_noun(self) -> str:
        """What a worker is called in job texts and errors: "host", "pod"."""
        ...

    @property
    def needs_local_fio(self) -> bool:
        """fio runs on this machine (or is its client)."""
        ...

    @property
    def series_logs(self) -> bool:
        """fio's per-second logs come back (one worker, an executor that can)."""
        ...

    def scratch_path(self, uid: str) -> Path:
        """Where fio's files go, as fio on the target sees the path."""
        ...

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        """Invocation ``index``'s job file for each worker (its file names its own)."""
        ...

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """Create the place fio writes to; ``invocations`` are every test's job files."""
        ...

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        """The Executor that runs fio on the prepared target."""
        ...

    def probe_dir(self) -> Path | None:
        """A directory on this machine inside the target (metadata probe), or None."""
        ...

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        """Between tests: remove earlier tests' files but ``keep``; check for room."""
        ...

    def deadline(self, test: PlannedTest) -> Deadline | None:
        """How long the test may take before the run stops it, or None (no limit)."""
        ...


class Quiet:
    """The optional steps of the Target contract for a target that leaves nothing between
    runs and has nothing to do between tests (a device, hosts, a kind's class): nothing
    to check before the command's targets start, nothing to prepare, no leftovers, no
    probe directory, no work before a test, the default deadline, nothing to clean up."""

    def preflight(self) -> None:
        pass  # what it needs is checked with the plan, in check()

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        pass  # check() made all there is

    def leftovers(self) -> list[Leftover]:
        return []

    def remove_leftover(self, leftover: Leftover) -> None:
        pass

    def probe_dir(self) -> Path | None:
        return None

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        pass

    def deadline(self, test: PlannedTest) -> Deadline | None:
        return default_deadline(test)

    def cleanup(self, hurry: bool = False) -> None:
        pass  # nothing was created (a kind's own objects are the kind's to remove)


@dataclass(frozen=True)
class DeviceRoom:
    """A replay on block devices: how far into them it may reach (the smallest one's
    size; None until ``check`` reached them) and what a refusal names."""

    size: int | None
    device: str  # as given: /dev/loop0
    smallest_of: str = ""  # several devices: "host" (it holds SIZE on its smallest host)


# A file's text made for one worker (a host, a pod, this machine) from ``where``: the
# path by which fio on that worker opens the run's file of a given name
Placed = Callable[[Callable[[str], str]], str]


@runtime_checkable
class PutsFiles(Protocol):
    """A target that can put a file of storbench's where each of its fio workers reads it
    (a replay's iolog): the directory target writes it into the scratch directory, the
    StorageClass target into its pod's, the block device target into the run's work
    directory, the hosts target onto each host over SSH. Targets without it cannot take
    a replay."""

    def check_put(self) -> None:
        """ConfigError if this target, as configured, cannot take such a file."""

    def put_file(self, uid: str, name: str, text: Placed) -> None:
        """Put ``text(where)`` as the run's file ``name`` for each worker, ``where``
        naming that worker's run files (an iolog names them); the job files' read_iolog
        is then found by job_files."""

    def replay_device(self) -> DeviceRoom | None:
        """None: a replay runs in files (prefilled as far as it reads); else it runs on
        block devices (every name in the iolog is the device), and their room."""

    def put_dirs(self) -> list[str]:
        """Where put_file wrote, outside the run's scratch and work directories: fio may
        read an iolog there (the gate's reads_from)."""
