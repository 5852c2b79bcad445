"""A directory target: a marked scratch directory ``storbench-<run id>`` under it,
fio on this machine. The worked example of a target (docs/targets.md)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import TargetError, TargetHung
from storbench.execute import Executor, FioBinary, FioJob, LocalExecutor, SignalGuard, fsops
from storbench.execute.fsops import remove_marked
from storbench.execute.local import Confinement
from storbench.execute.workdir import (
    PREFIX,
    Leftover,
    create_marked,
    leftovers,
)
from storbench.target.base import Deadline, InRunDirs, Placed, default_deadline
from storbench.target.environment import (
    host_facts,
    local_confinement,
    memory_available,
    mount_of,
    path_facts,
)
from storbench.target.files import Files, Room, run_file_name
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

REMOVE_WAIT_S = 10.0  # for the scratch directory to go (it goes on in the background)
HURRY_REMOVE_S = 0.5  # the same after a signal: storbench ends within 5 s of one
BETWEEN_TESTS_S = 60.0  # to remove a test's files and see what is free
RESPONDS_S = 15.0  # for the target directory to be looked at, before anything else


@dataclass
class DirectoryTarget(InRunDirs):
    """A directory on this machine; fio runs here, in a marked scratch directory."""

    path: Path
    kind = "directory"
    worker_noun = "job"
    needs_local_fio = True
    series_logs = True
    scratch: Path | None = field(default=None, init=False)
    # the run's: a signal ends a wait on the file system at once (fsops.call)
    guard: SignalGuard | None = field(default=None, init=False)
    ramfs: bool = field(default=False, init=False)  # it counts no size (usable())
    files: Files = field(init=False)  # the storage: fio's files in the scratch directory

    def __post_init__(self) -> None:
        self.files = Files(str(self.path))

    @property
    def name(self) -> str:
        return str(self.path.resolve())

    @property
    def short_name(self) -> str:
        return str(self.path)

    def settings(self) -> dict[str, Any]:
        return {}

    def preflight(self) -> None:
        self.usable()

    def scratch_path(self, uid: str) -> Path:
        return self.path.resolve() / f"{PREFIX}{uid}"

    def put_file(self, uid: str, name: str, text: Placed) -> None:
        scratch = self.scratch_path(uid)
        (scratch / run_file_name(name)).write_text(text(lambda n: str(scratch / n)))

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        # again: with several targets, this one's turn comes later
        self.files.check(plan, [self._room(self.usable())])

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        # fio's own names: the scratch directory is the run's alone
        return [FioJob("", f"t{index:03d}.fio",
                       self.files.for_worker(jobfile, f"storbench-{uid}", None).render())]

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        return {**host_facts(), "target": {"kind": self.kind, **path_facts(self.path)},
                "confinement": local_confinement(),
                **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {})}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        self.guard = guard
        self.scratch = self.create_scratch(uid)

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None
        assert self.scratch is not None
        return LocalExecutor(fio, workdir, guard, Confinement((self.scratch,)))

    def probe_dir(self) -> Path | None:
        return self.scratch

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        """Remove the earlier tests' files (but ``keep``) and check room, in a child
        process: on a file system that stopped answering it is given up on."""
        if self.scratch is None:
            return
        try:
            left = json.loads(fsops.call("clean", str(self.scratch), *sorted(keep),
                                         timeout_s=BETWEEN_TESTS_S,
                                         check=self.guard.check if self.guard else None))
        except fsops.Stuck as exc:
            raise TargetHung(f"the target stopped responding before test {test.name!r}:"
                             f" removing the previous test's files in {str(self.scratch)!r}"
                             f" got {exc}") from None
        except ValueError:
            raise TargetError(f"cannot remove the previous test's files in"
                              f" {str(self.scratch)!r}") from None
        self.files.between(test, left["kept_bytes"], self._room(left["free_bytes"]))

    def deadline(self, test: PlannedTest) -> Deadline | None:
        return default_deadline(test)

    def cleanup(self, hurry: bool = False) -> None:
        """Remove the scratch directory; within HURRY_REMOVE_S in a ``hurry`` (after a signal, or
        when the target stopped responding), else REMOVE_WAIT_S. What a file system
        that does not respond keeps is left for the next run (which removes it), and
        said so."""
        if self.scratch is None:
            return
        wait = HURRY_REMOVE_S if hurry else REMOVE_WAIT_S
        if not remove_marked(self.scratch, wait):
            raise TargetError(f"could not remove {str(self.scratch)!r} within {wait:g} s: the"
                              " file system does not respond; the next run on this target"
                              " removes it")

    def remove_leftover(self, leftover: Leftover) -> None:
        remove_marked(leftover.path, REMOVE_WAIT_S)

    def usable(self) -> int:
        """Raise TargetError unless the directory exists and we can create files in it;
        its free bytes. Looked at in a child (fsops "look"): on a file system whose
        server is silent a look of storbench's own would hold it in the kernel, where not
        even Ctrl-C reaches it; it is TargetHung after RESPONDS_S."""
        p = self.path
        try:
            seen = json.loads(fsops.call("look", str(p), timeout_s=RESPONDS_S))
        except fsops.Stuck as exc:
            raise TargetHung(f"target {str(p)!r} does not respond: looking at it got {exc};"
                             " is its file system's server reachable?") from None
        if seen.get("error") == "ENOENT":
            raise TargetError(f"target {str(p)!r} does not exist; create it or pass an existing"
                              " directory")
        if seen.get("error"):
            raise TargetError(f"cannot look at target {str(p)!r}: {seen['message']}")
        if not seen["is_dir"]:
            raise TargetError(f"target {str(p)!r} is not a directory; storbench benchmarks a"
                              " directory on the file system you want to measure")
        ramfs = seen.get("total_bytes") == 0 and getattr(mount_of(p), "fs_type", "") == "ramfs"
        if seen.get("total_bytes") == 0 and not ramfs:  # (an older look: absent)
            raise TargetError(f"target directory {str(p)!r} is on a file system of no size (0"
                              " bytes in all): no storage is behind it (/proc, /sys, cgroup's);"
                              " pass a directory on the storage you want to measure")
        if seen["read_only"]:
            raise TargetError(f"target directory {str(p)!r} is on a read-only file system: not"
                              " writable; remount it read-write or pass another directory")
        if not seen["writable"]:
            raise TargetError(f"target directory {str(p)!r} is not writable; pass a directory"
                              " you own, or run as a user who may write there")
        self.ramfs = ramfs
        return int(seen["free_bytes"])

    def _room(self, free: int) -> Room:
        """The room a test may lay out its files in: the file system's free bytes, or
        for a ramfs (it keeps no count, 0 of 0, and grows into memory) the memory
        available."""
        if self.ramfs:
            return Room("", memory_available() or 0,
                        "of memory available (ramfs counts no size: it grows into memory)")
        return Room("", free)

    def leftovers(self) -> list[Leftover]:
        """Scratch directories of storbench runs that died without cleaning up."""
        return leftovers(self.path)

    def create_scratch(self, run_uid: str) -> Path:
        try:
            # absolute (lexically: resolving looks at every part, a silent server's too):
            # fio and its confinement start in the run's work directory
            return create_marked(Path(os.path.abspath(self.path)) / f"{PREFIX}{run_uid}",
                                 run_uid)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise TargetError(f"no space left in {str(self.path)!r} to start") from exc
            raise TargetError(f"cannot create a scratch directory in {str(self.path)!r}:"
                              f" {exc.strerror}") from exc
