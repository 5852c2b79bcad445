"""A target is a **place** composed with a **storage**: this contract is what each gives
the other.

A place is where fio runs and how storbench reaches it: this machine (here.py), fio
servers on hosts (hosts.py), pods of a StorageClass (kubernetes/storageclass.py). A
storage is what fio works on, the same at every place: files in a directory
(files.py: ``FilesStorage``), a block device (device.py: ``DeviceStorage``). A place
implements the Target contract (base.py) by asking its storage at fixed points (check,
the job files, the facts, before each test, a file of storbench's, what fio may write);
the storage answers with what only a place can do for it (``Place``: its workers, a look
at their directories or devices, a file put on a worker, a command between tests). No
place has a branch for a storage: a new storage is a class that keeps ``Storage``
(tests/target/test_a_new_storage.py runs one at all three places).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from storbench.errors import ConfigError
from storbench.execute.base import FioJob
from storbench.target.base import Deadline, DeviceRoom, Placed
from storbench.workload.guard import plain
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

if TYPE_CHECKING:
    from storbench.execute.probe import Probe
    from storbench.execute.workdir import Leftover


@dataclass(frozen=True)
class Worker:
    """One place fio runs a test at: this machine, a host, a pod."""

    key: str  # "" (this machine), the host's key, the pod's name
    tag: str | None = None  # its files' tag among several sharing names (h0, p1); None: alone
    label: str = ""  # how lines name it among several: "ssh://db1", "pod storbench-…-0"


@dataclass(frozen=True)
class Access:
    """What fio may write at a place (the kernel's confinement here, an SSH session's
    permissions on a host): directories, and single files (a device)."""

    dirs: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Room:
    """What one worker's place saw of the room in its directory."""

    worker: str  # "" (this machine), a host, a pod
    free: int | None  # the bytes a test may lay out there; None: not said, or not counted
    words: str = "are free"  # said after the size: "of memory available (ramfs …)"


class Place(Protocol):
    """What a place gives a storage."""

    @property
    def every(self) -> str:
        """What a worker is called where there are several: "host", "pod"; "" here."""
        ...

    @property
    def looks_early(self) -> bool:
        """It can look at its devices before it starts anything (a pod's volume is seen
        once the pod runs)."""
        ...

    @property
    def refused_after(self) -> str:
        """What it says after a refusal of the guard ("Nothing was started.")."""
        ...

    @property
    def keeps_until_end(self) -> bool:
        """It removes what workers' jobs keep (unlink=0) as the run ends."""
        ...

    def workers(self) -> list[Worker]:
        """Where each test runs, in order; the first lays out a shared file."""
        ...

    def files_dir(self, uid: str) -> str:
        """Where the run's files go on every worker, as fio there sees it (here and in a
        pod, a scratch directory of the run's; on hosts, the path itself)."""
        ...

    def files_words(self, path: str) -> tuple[str, str]:
        """How a refusal for room names the directory, and what it advises."""
        ...

    def rooms(self) -> list[Room]:
        """The room each worker's directory has, as far as the place saw it (here: it
        looks, and fails for a directory it cannot use)."""
        ...

    def sharing(self) -> list[list[str]]:
        """Workers in groups that see one another's files in the directory."""
        ...

    def apart(self, path: str) -> str | None:
        """Why the workers do not all see ``path`` as one directory (one file each, where
        the run would say one), or None."""
        ...

    def clean(self, keep: set[str], before: str) -> tuple[int, Room] | None:
        """Between tests (``before`` test): remove the run's files but ``keep``; the bytes
        kept and the room then, where the place sees them (None: it does not)."""
        ...

    def lay_out(self, test: PlannedTest, jobfile: JobFile, deadline: Deadline | None) -> None:
        """Lay out ``jobfile``'s files from the first worker alone (--shared-file)."""
        ...

    def look(self, path: str, writes: bool, destructive: str | None) -> list[Any]:
        """Each worker's device ``path`` as the place's guard sees it (device.Seen): what
        is on it, and whether the run may do what it asks."""
        ...

    def device(self, worker: Worker, path: str) -> str:
        """The device ``path`` as fio on ``worker`` opens it."""
        ...

    def own_dir(self, worker: Worker, uid: str) -> str | None:
        """A directory of the run's on ``worker`` that is not among fio's files (where a
        device's replay finds its iolog); None: the place has none."""
        ...

    def volume_size(self) -> int | None:
        """The size of the volume the place makes for the storage (a pod's), or None."""
        ...

    def stop_point(self) -> None:
        """Interrupted, if the run was told to stop (Ctrl-C, SIGTERM): a storage's long
        work between tests (a bucket's listing) looks here as it goes."""
        ...

    def check_putting(self) -> None:
        """ConfigError where the place cannot put a file of storbench's on its workers."""
        ...

    def put(self, files: list[tuple[Worker, str, str]]) -> None:
        """Write each (worker, path, text) as a new file on that worker."""
        ...


class Storage(Protocol):
    """What fio works on, the same at every place."""

    path: str  # as the user gave it: a directory, /dev/nvme0n1
    kind: str  # what a target of it is called here: "directory", "block device"
    in_files: bool  # fio works on files of the run's (removed between tests, probed
    # beside, leftovers of a crashed run found), not on a device

    @property
    def name(self) -> str:
        """How a target of it here is stored and shown."""
        ...

    @property
    def short_name(self) -> str: ...

    def settings(self, place: Place) -> dict[str, Any]:
        """What the user asked of it (stored with the run's settings)."""
        ...

    def restrict(self, plan: Plan) -> Plan:
        """The tests it can run of ``plan`` (a device without --destructive: reads)."""
        ...

    def needed(self, plan: Plan, sharing: int) -> tuple[int, str, int]:
        """What a volume made for it must hold for the largest test when ``sharing``
        workers share it: bytes, the test's name, and the copies of its files on it."""
        ...

    def preflight(self, place: Place) -> None:
        """Quick checks before any target of the command starts."""
        ...

    def approve(self, plan: Plan, place: Place) -> None:
        """Before the place starts anything (SSH sessions, fio servers): what only the
        storage can refuse (a device's guard)."""
        ...

    def check(self, plan: Plan, place: Place) -> None:
        """Once the place is reached: TargetError unless the plan fits at every worker."""
        ...

    def ready(self, plan: Plan, place: Place, note: Callable[[str], None]) -> None:
        """Right before fio: the last look, and what is said before the tests."""
        ...

    def scratch(self, place: Place, uid: str) -> str:
        """Where fio's files are, as fio on the first worker sees it."""
        ...

    def job(self, jobfile: JobFile, place: Place, worker: Worker, name: str,
            uid: str) -> FioJob:
        """``worker``'s job file ``name``: its files (or device) its own."""
        ...

    def facts(self, place: Place, worker: Worker | None) -> dict[str, Any]:
        """What it is beyond the place's look, for the environment: of the target (None;
        here and in pods), or of one worker's part, merged into that worker's facts
        (hosts: a device's as its ``device``)."""
        ...

    def between(self, place: Place, test: PlannedTest, keep: set[str],
                deadline: Deadline | None, uid: str) -> None:
        """Before each test: what the earlier one left goes (but ``keep``), room again."""
        ...

    def access(self, place: Place, uid: str, plan: Plan) -> Access:
        """What fio may write."""
        ...

    def check_put(self, place: Place) -> None:
        """ConfigError if a file of storbench's (a replay's iolog) cannot be put here."""
        ...

    def put_file(self, place: Place, uid: str, name: str, text: Placed) -> None:
        """Put ``text(where)`` as the run's file ``name`` for each worker."""
        ...

    def put_dirs(self, place: Place, uid: str) -> list[str]:
        """Where put_file wrote, outside the run's files: fio may read an iolog there."""
        ...

    def replay_device(self, place: Place) -> DeviceRoom | None:
        """None: a replay runs in files; else on devices, and their room."""
        ...

    def check_precondition(self) -> None:
        """ConfigError unless it can be written whole before the tests."""
        ...

    def precondition_job(self, place: Place, cap_bytes: int | None) -> list[FioJob]:
        """Each worker's device written whole."""
        ...

    def precondition_s(self, size_bytes: int) -> float:
        """How long --precondition may take on ``size_bytes`` (0: none asked)."""
        ...

    def covers(self) -> bool:
        """Each test covers the whole storage (a device without --size): a volume made
        for it is sized by --capacity, not by the tests."""
        ...


@runtime_checkable
class Outside(Storage, Protocol):
    """A storage outside every place, reached over the network (objects at an endpoint):
    what the run put there it removes itself as the run ends, and what crashed runs of
    this machine's left; every worker's fio needs an engine of its own; its latency beside
    the load is its own requests'. Each place asks for these where a storage keeps them
    (a place's check, cleanup, leftovers, probe)."""

    engine: str  # the fio engine every worker's fio must have ("http")
    engine_hint: str  # how to get a fio that has it
    engine_check: str  # a job that loads it and moves nothing (an agent's fio is asked)

    @property
    def loopback(self) -> str | None:
        """Where it is reached, if that is a loopback address (each machine's own: from
        another host it is not this one); None otherwise."""
        ...

    def environment(self) -> dict[str, str]:
        """What fio's environment must hold to reach it, which no file may (a secret key):
        a place that ships job files elsewhere (pods) gives it to fio there."""
        ...

    def end(self, hurry: bool) -> None:
        """Remove what the run put there (TargetError naming what is left)."""
        ...

    def leftovers(self) -> list[Leftover]: ...

    def remove_leftover(self, leftover: Leftover) -> None: ...

    def own_probe(self) -> Probe: ...


class NoDevice:
    """The answers every storage that is no block device gives alike (files, objects; a
    mixin): no directory of its own for a replay's log, no device to replay on, nothing
    to write whole before the tests (``check_precondition`` says why, in its words),
    each test sized by its own options."""

    def put_dirs(self, place: Place, uid: str) -> list[str]:
        return []

    def replay_device(self, place: Place) -> DeviceRoom | None:
        return None

    def check_precondition(self) -> None:
        raise ConfigError("--precondition applies to block devices")

    def precondition_job(self, place: Place, cap_bytes: int | None) -> list[FioJob]:
        self.check_precondition()
        return []

    def precondition_s(self, size_bytes: int) -> float:
        return 0.0

    def covers(self) -> bool:
        return False


def run_file_name(name: str) -> str:
    """``name`` as a file of storbench's among the run's files (a replay's iolog):
    ValueError unless it is a plain file name (no directory, no way out of the run's)."""
    if not plain(name) or name == ".":
        raise ValueError(f"not a plain file name: {name!r}")
    return name


class Stored(Place, Protocol):
    """A place with its storage and its run's id (scratch_path keeps it)."""

    storage: Storage
    uid: str


class OnStorage:
    """The Target methods every place answers by asking its storage (a mixin): the tests
    it can run, a file of storbench's (base.PutsFiles), preconditioning
    (base.Preconditionable)."""

    def restrict(self: Stored, plan: Plan) -> Plan:
        return self.storage.restrict(plan)

    def check_put(self: Stored) -> None:
        self.storage.check_put(self)

    def put_file(self: Stored, uid: str, name: str, text: Placed) -> None:
        self.storage.put_file(self, uid, name, text)

    def replay_device(self: Stored) -> DeviceRoom | None:
        return self.storage.replay_device(self)

    def put_dirs(self: Stored) -> list[str]:
        return self.storage.put_dirs(self, self.uid)

    def check_precondition(self: Stored) -> None:
        self.storage.check_precondition()

    def precondition_job(self: Stored, cap_bytes: int | None) -> list[FioJob]:
        return self.storage.precondition_job(self, cap_bytes)

    def stop_point(self) -> None:
        """Place.stop_point: the run's SignalGuard (the place's, from prepare) checked."""
        guard = getattr(self, "guard", None)
        if guard is not None:
            guard.check()



class ReachesOutside:
    """What a place with several workers answers for an outside storage (a mixin: hosts,
    pods): the storage, where it is one (``outside``), and its leftovers and probe, run
    from this machine; for files or a device of the workers', none."""

    storage: Storage

    @property
    def outside(self) -> Outside | None:
        return self.storage if isinstance(self.storage, Outside) else None

    def leftovers(self) -> list[Leftover]:
        return self.outside.leftovers() if self.outside is not None else []

    def remove_leftover(self, leftover: Leftover) -> None:
        if self.outside is not None:
            self.outside.remove_leftover(leftover)

    def own_probe(self) -> Probe | None:
        """The outside storage's requests beside the load (None for the workers' files
        or devices: no probe reaches them from here)."""
        return self.outside.own_probe() if self.outside is not None else None
