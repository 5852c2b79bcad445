"""This machine as a place: fio runs here, on a storage (target/storage.py): files in a
marked scratch directory ``storbench-<run id>`` under a directory (FilesStorage), or a
block device (DeviceStorage). The worked example of a target (docs/targets.md).

What only this machine can do for a storage: look at a directory in a child process (a
file system whose server is silent holds a look in the kernel, where Ctrl-C does not
reach it), make and remove the scratch directory and find what crashed runs left, look at
a device with the guard (target/blockguard.py), and confine fio by the kernel to what the
storage lets it write (execute/confine.py).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import TargetError
from storbench.execute import Executor, FioBinary, FioJob, LocalExecutor, SignalGuard, fsops
from storbench.execute.fsops import remove_marked
from storbench.execute.local import Confinement
from storbench.execute.workdir import PREFIX, Leftover, create_marked, leftovers, run_workdir
from storbench.result.environment import Environment
from storbench.target.base import Deadline, default_deadline
from storbench.target.blockguard import report
from storbench.target.device import Seen, seen_in
from storbench.target.environment import (
    host_facts,
    local_confinement,
    memory_available,
    mount_of,
    path_facts,
)
from storbench.target.storage import OnStorage, Room, Storage, Worker
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

REMOVE_WAIT_S = 10.0  # for the scratch directory to go (it goes on in the background)
HURRY_REMOVE_S = 0.5  # the same after a signal: storbench ends within 5 s of one
BETWEEN_TESTS_S = 60.0  # to remove a test's files and see what is free
RESPONDS_S = 15.0  # for the target directory to be looked at, before anything else
ALONE = Worker("")  # this machine: the only worker


@dataclass
class HereTarget(OnStorage):
    """A storage on this machine; fio runs here (a scratch directory of the run's in a
    directory, or the device)."""

    storage: Storage
    worker_noun = "job"
    needs_local_fio = True
    series_logs = True
    # what this place is to a storage (target/storage.Place)
    every = ""
    looks_early = True
    refused_after = ""
    keeps_until_end = True  # the scratch directory goes with all in it
    scratch: Path | None = field(default=None, init=False)
    # the run's: a signal ends a wait on the file system at once (fsops.call)
    guard: SignalGuard | None = field(default=None, init=False)
    ramfs: bool = field(default=False, init=False)  # it counts no size (usable())
    plan: Plan | None = field(default=None, init=False)
    uid: str = field(default="", init=False)

    @property
    def path(self) -> Path:
        return Path(self.storage.path)

    @property
    def kind(self) -> str:
        return self.storage.kind

    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def short_name(self) -> str:
        return self.storage.short_name

    # -- the Target contract ---------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        return self.storage.settings(self)

    def preflight(self) -> None:
        self.storage.preflight(self)

    def traced_path(self) -> Path:
        """Where fio's I/O goes, for run --explain (target/base.Traceable)."""
        return self.path

    def scratch_path(self, uid: str) -> Path:
        self.uid = uid
        return Path(self.storage.scratch(self, uid))

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        # again: with several targets, this one's turn comes later
        self.plan = plan
        self.storage.approve(plan, self)
        self.storage.check(plan, self)

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        return [self.storage.job(jobfile, self, ALONE, f"t{index:03d}.fio", uid)]

    def describe(self, fio: FioBinary | None) -> Environment:
        where = path_facts(self.path) if self.storage.in_files else {"path": str(self.path)}
        return {**host_facts(), "confinement": local_confinement(),
                "target": {"kind": self.kind, **where, **self.storage.facts(self, None)},
                **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {})}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        self.guard = guard
        if self.storage.in_files:
            self.scratch = self.create_scratch(uid)
        assert self.plan is not None
        self.storage.ready(self.plan, self, note)

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None and self.plan is not None
        # the kernel lets fio write only what the storage allows (a device: when the
        # guard allowed writing)
        access = self.storage.access(self, self.uid, self.plan)
        return LocalExecutor(fio, workdir, guard, Confinement(
            (*(Path(d) for d in access.dirs), *self.plan.cgroup_dirs),
            (*access.files, *map(str, self.plan.cgroup_files))))

    def probe_dir(self) -> Path | None:
        return self.scratch

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        self.storage.between(self, test, keep, self.deadline(test), self.uid)

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

    def leftovers(self) -> list[Leftover]:
        """Scratch directories of storbench runs that died without cleaning up."""
        return leftovers(self.path) if self.storage.in_files else []

    def remove_leftover(self, leftover: Leftover) -> None:
        remove_marked(leftover.path, REMOVE_WAIT_S)

    # -- what this machine gives a storage (target/storage.Place) -----------------------

    def workers(self) -> list[Worker]:
        return [ALONE]

    def files_dir(self, uid: str) -> str:
        return str(self.path.resolve() / f"{PREFIX}{uid}")

    def files_words(self, path: str) -> tuple[str, str]:
        return path, "pass a smaller --size or another target"

    def rooms(self) -> list[Room]:
        return [self._room(self.usable())]

    def sharing(self) -> list[list[str]]:
        return []

    def apart(self, path: str) -> str | None:
        return None

    def clean(self, keep: set[str], before: str) -> tuple[int, Room] | None:
        """Remove the earlier tests' files (but ``keep``) and see the room, in a child
        process: on a file system that stopped answering it is given up on."""
        if self.scratch is None:
            return None
        try:
            left = json.loads(fsops.call("clean", str(self.scratch), *sorted(keep),
                                         timeout_s=BETWEEN_TESTS_S,
                                         check=self.guard.check if self.guard else None))
        except fsops.Stuck as exc:
            raise exc.blamed(f"the target stopped responding before test {before!r}:"
                             f" removing the previous test's files in {str(self.scratch)!r}"
                             f" got {exc}") from None
        except ValueError:
            raise TargetError(f"cannot remove the previous test's files in"
                              f" {str(self.scratch)!r}") from None
        return int(left["kept_bytes"]), self._room(left["free_bytes"])

    def lay_out(self, test: PlannedTest, jobfile: JobFile, deadline: Deadline | None) -> None:
        pass  # one worker: fio lays out its own files

    def look(self, path: str, writes: bool, destructive: str | None) -> list[Seen]:
        """The guard's look here (blockguard.report: its findings and decision)."""
        return [seen_in(report(path, writes, destructive))]

    def device(self, worker: Worker, path: str) -> str:
        """The device node the path names (symlinks resolved)."""
        return os.path.realpath(path)

    def own_dir(self, worker: Worker, uid: str) -> str | None:
        return str(run_workdir(uid))  # storbench's own work directory (0700)

    def volume_size(self) -> int | None:
        return None

    def check_putting(self) -> None:
        pass  # a file of storbench's is written here

    def put(self, files: list[tuple[Worker, str, str]]) -> None:
        """Each file made anew (never over one that is there), the user's only."""
        for _, path, text in files:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)

    # -- this machine's own ------------------------------------------------------------

    def usable(self) -> int:
        """Raise TargetError unless the directory exists and we can create files in it;
        its free bytes. Looked at in a child (fsops "look"): on a file system whose
        server is silent a look of storbench's own would hold it in the kernel, where not
        even Ctrl-C reaches it; it is TargetHung after RESPONDS_S."""
        p = self.path
        try:
            seen = json.loads(fsops.call("look", str(p), timeout_s=RESPONDS_S))
        except fsops.Stuck as exc:
            raise exc.blamed(f"target {str(p)!r} does not respond: looking at it got {exc};"
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
