"""Files in a directory as a target's storage: their rules written once, for every place
fio runs them (this machine: directory.py; hosts over SSH or agents: hosts.py; a
StorageClass's Filesystem volume in pods: kubernetes/storageclass.py), as target/device.py
holds a block device's.

A place gives what only it can see: how much room each worker's directory has (a
``Room``: the free bytes its look said, or none where nothing was said or the file system
keeps no count), which workers see one another's files, how it removes files on a
worker, and where a file of storbench's goes. Everything else is the files', the same
wherever they are (``Files``): each worker's own file names (or the one file all share,
``--shared-file``), the room the largest test needs on every worker and, where workers
share the directory, for all their files at once, the one message for too little room,
the room again between tests once the earlier test's files went (those a later test
reads counted), what is removed between tests (all but those), a file of storbench's
given a plain name, and with ``--shared-file`` each test's file laid out from the first
worker alone before every worker starts the test.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from storbench.errors import TargetError
from storbench.execute.base import Executor
from storbench.target.base import Deadline
from storbench.target.sharedlayout import lay_out
from storbench.workload.guard import plain
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec

FREE = "are free"  # how a room is said after its size, unless its place says otherwise


@dataclass(frozen=True)
class Room:
    """What one worker's place saw of the room in its directory."""

    worker: str  # "" (this machine), a host, a pod
    free: int | None  # the bytes a test may lay out there; None: not said, or not counted
    words: str = FREE  # said after the size: "of memory available (ramfs counts no size …)"


def run_file_name(name: str) -> str:
    """``name`` as a file of storbench's among the run's files (a replay's iolog):
    ValueError unless it is a plain file name (no directory, no way out of the run's)."""
    if not plain(name) or name == ".":
        raise ValueError(f"not a plain file name: {name!r}")
    return name


@dataclass
class Files:
    """fio's files of a run in ``path`` (as given: named in messages) on each worker."""

    path: str
    shared_file: bool = False  # --shared-file: every worker works on one file
    every: str = ""  # what a worker is called where there are several: "host", "pod"
    hint: str = "pass a smaller --size or another target"  # the end of a refusal

    # -- names ---------------------------------------------------------------------

    def for_worker(self, jobfile: JobFile, prefix: str, tag: str | None) -> JobFile:
        """The job file for one of several workers that may see one another's files:
        its own names, ``PREFIX-TAG-…`` (or the one shared file, ``PREFIX-…``; for_host);
        ``tag`` None, the only worker in a directory of the run's own: as it is."""
        if tag is None:
            return jobfile
        return jobfile.for_host(prefix, tag, shared=self.shared_file)

    # -- room ----------------------------------------------------------------------

    def at_once(self, workers: int) -> int:
        """How many copies of a test's files ``workers`` that share the directory lay
        out at once: one each, or the one file of --shared-file."""
        return 1 if self.shared_file else max(1, workers)

    def needed(self, plan: Plan, workers: int = 1) -> tuple[int, str]:
        """The bytes the largest test lays out in a directory ``workers`` share, and its
        name."""
        most, name = plan.largest()
        return most * self.at_once(workers), name

    def check(self, plan: Plan, rooms: Sequence[Room],
              sharing: Sequence[Sequence[str]] = ()) -> None:
        """TargetError unless the largest test fits on every worker whose room was said
        (each lays out its own files), and the files of the workers in each group of
        ``sharing`` (they see one another's) fit at once in the room they all see."""
        most, name = plan.largest()
        short = [r for r in rooms if r.free is not None and most > r.free]
        if short and len(rooms) == 1 and not self.every:
            self.refuse(name, f"it needs {format_bytes_iec(most)},"
                              f" {format_bytes_iec(short[0].free or 0)} {short[0].words}")
        if short:
            self.refuse(name, f"it needs {format_bytes_iec(most)} on each {self.every}; "
                              + ", ".join(f"{r.worker} has {format_bytes_iec(r.free or 0)}"
                                          " free" for r in short))
        said = {r.worker: r.free for r in rooms if r.free is not None}
        for group in sharing:
            free = [said[w] for w in group if w in said]
            files = self.at_once(len(group))
            if files > 1 and free and most * files > min(free):
                self.refuse(name, f"{', '.join(group)} share it (each sees the others'"
                                  f" files), so their {files} files need"
                                  f" {format_bytes_iec(most * files)} at once;"
                                  f" {format_bytes_iec(min(free))} {FREE}",
                            f"pass a smaller --size, fewer {self.every}s, or --shared-file"
                            " (one file for all)")

    def between(self, test: PlannedTest, kept_bytes: int, room: Room) -> None:
        """Before a test, once the earlier test's files went: TargetError unless what it
        lays out beyond the files kept for it (``kept_bytes``) fits in ``room``."""
        needed = max(0, (test.jobfile.estimated_bytes() or 0) - kept_bytes)
        if room.free is not None and needed > room.free:
            self.refuse(test.name, f"it needs {format_bytes_iec(needed)},"
                                   f" {format_bytes_iec(room.free)} {room.words}")

    def refuse(self, test: str, why: str, hint: str | None = None) -> None:
        raise TargetError(f"not enough free space in {self.path!r} for test {test!r}: {why};"
                          f" {hint or self.hint}")

    # -- between tests ---------------------------------------------------------------

    def remove_script(self, directory: str, keep: set[str]) -> str:
        """A POSIX shell command that removes every file in ``directory`` (the run's
        scratch directory on a worker) but those named in ``keep``: the earlier tests'
        files, for a place that runs commands on its workers (a pod)."""
        # compared with what is in the directory: a name can keep, never remove, a file
        kept = " ".join(shlex.quote(n) for n in sorted(keep)) or "''"
        return (f"cd {shlex.quote(directory)} && for f in * .[!.]* ..?*; do"
                ' [ -e "$f" ] || [ -L "$f" ] || continue; keep=;'
                f' for k in {kept}; do [ "$f" = "$k" ] && keep=1; done;'
                ' [ -n "$keep" ] || rm -rf -- "$f"; done')

    def lay_out_first(self, executor: Callable[[], Executor], first: str,
                      test: PlannedTest, jobfile: JobFile, deadline: Deadline | None,
                      hint: str) -> None:
        """--shared-file: the test's one file laid out from the ``first`` worker alone,
        with its job file (every worker's fio laying it out at once unlinked the others'
        copies: sharedlayout); nothing without it."""
        if self.shared_file:
            lay_out(executor(), first, test.name, jobfile, deadline, hint,
                    every=self.every or "worker")

    def say(self, note: Callable[[str], None], first: str) -> None:
        """Before the tests: how --shared-file lays out each test's file."""
        if self.shared_file:
            note(f"--shared-file: each test's file is laid out from {first} first, then every"
                 f" {self.every or 'worker'} starts the test on it")
