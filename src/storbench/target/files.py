"""Files in a directory as a target's storage: their rules written once, for every place
fio runs them (this machine: here.py; hosts over SSH or agents: hosts.py; a
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
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute.base import FioJob
from storbench.target.base import Deadline, Placed
from storbench.target.storage import Access, NoDevice, Place, Worker
from storbench.target.storage import Room as Room
from storbench.target.storage import run_file_name as run_file_name
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import format_bytes_iec

FREE = "are free"  # how a room is said after its size, unless its place says otherwise


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

    def say(self, note: Callable[[str], None], first: str) -> None:
        """Before the tests: how --shared-file lays out each test's file."""
        if self.shared_file:
            note(f"--shared-file: each test's file is laid out from {first} first, then every"
                 f" {self.every or 'worker'} starts the test on it")


def remove_script(directory: str, keep: set[str]) -> str:
    """A POSIX shell command that removes every file in ``directory`` (the run's scratch
    directory on a worker) but those named in ``keep``: the earlier tests' files, for a
    place that runs commands on its workers (a pod)."""
    # compared with what is in the directory: a name can keep, never remove, a file
    kept = " ".join(shlex.quote(n) for n in sorted(keep)) or "''"
    return (f"cd {shlex.quote(directory)} && for f in * .[!.]* ..?*; do"
            ' [ -e "$f" ] || [ -L "$f" ] || continue; keep=;'
            f' for k in {kept}; do [ "$f" = "$k" ] && keep=1; done;'
            ' [ -n "$keep" ] || rm -rf -- "$f"; done')


@dataclass
class FilesStorage(NoDevice):
    """Files in a directory as the storage of a target, at any place (target/storage.py):
    the place says where the run's files go on each worker, the room it saw there and who
    shares it, and removes a test's files; the rules above do the rest."""

    path: str  # as given (on hosts: the path on every host)
    shared_file: bool = False  # --shared-file: every worker works on one file
    kind = "directory"
    in_files = True  # fio's files are the run's: removed between tests, probed beside

    @property
    def name(self) -> str:
        return str(Path(self.path).resolve())

    @property
    def short_name(self) -> str:
        return self.path

    def rules(self, place: Place) -> Files:
        named, hint = place.files_words(self.path)
        return Files(named, self.shared_file, every=place.every, hint=hint)

    def settings(self, place: Place) -> dict[str, Any]:
        return {"shared_file": self.shared_file} if place.every else {}

    def restrict(self, plan: Plan) -> Plan:
        return plan

    def needed(self, plan: Plan, sharing: int) -> tuple[int, str, int]:
        """What a volume ``sharing`` workers share must hold for the largest test: its
        bytes, its name, and how many copies of its files (one with --shared-file)."""
        rules = Files(self.path, self.shared_file)
        most, name = rules.needed(plan, sharing)
        return most, name, rules.at_once(sharing)

    def preflight(self, place: Place) -> None:
        place.rooms()  # a directory that cannot be used fails now, where it can be seen

    def approve(self, plan: Plan, place: Place) -> None:
        pass  # nothing to look at before the place starts

    def check(self, plan: Plan, place: Place) -> None:
        """Room for the largest test on every worker, and for those that share the
        directory at once; --shared-file only where every worker sees one directory."""
        if self.shared_file and (apart := place.apart(self.path)):
            raise TargetError(f"--shared-file: {apart}; leave out --shared-file")
        self.rules(place).check(plan, place.rooms(), place.sharing())

    def ready(self, plan: Plan, place: Place, note: Callable[[str], None]) -> None:
        """Workers that share the directory, said; how --shared-file lays out its file."""
        for group in place.sharing():
            if len(group) > 1 and not self.shared_file:
                note(f"{', '.join(group)} share {self.path} (each sees the others' files):"
                     f" each works on its own files in it, {len(group)} at once")
        first = place.workers()[0]
        self.rules(place).say(note, first.label or first.key)

    def scratch(self, place: Place, uid: str) -> str:
        return place.files_dir(uid)

    def run_file(self, place: Place, worker: Worker, uid: str, name: str) -> str:
        """Where ``worker`` keeps the run's file ``name``: in the run's own directory, or
        among the files of several workers, under its tag (for_host's names)."""
        where = place.files_dir(uid)
        if worker.tag is None:
            return f"{where}/{name}"
        return f"{where}/storbench-{uid}-{worker.tag}-{name}"

    def for_worker(self, jobfile: JobFile, place: Place, worker: Worker, uid: str) -> JobFile:
        """``worker``'s job file: its own file names (for_host; the only worker: fio's
        own), an iolog it replays its own copy (put_file), and where the place removes
        what is left as the run ends, a job that says unlink=0 keeps its files (a
        replay's prefill: the replay reads them next)."""
        mine = self.rules(place).for_worker(jobfile, f"storbench-{uid}", worker.tag)
        if worker.tag is None:
            return mine
        effective = dict(jobfile.effective())
        sections = []
        for section in mine.sections:
            log = section.get("read_iolog")
            if log is not None:
                section = section.with_option(
                    "read_iolog", self.run_file(place, worker, uid, Path(log).name))
            if place.keeps_until_end and not section.is_global and \
                    effective.get(section.name, {}).get("unlink") == "0":
                section = section.with_option("unlink", "0")
            sections.append(section)
        return JobFile(tuple(sections))

    def job(self, jobfile: JobFile, place: Place, worker: Worker, name: str,
            uid: str) -> FioJob:
        return FioJob(worker.key, name, self.for_worker(jobfile, place, worker, uid).render())

    def facts(self, place: Place, worker: Worker | None) -> dict[str, Any]:
        return {}  # the directory's facts are the place's look (its file system, room)

    def between(self, place: Place, test: PlannedTest, keep: set[str],
                deadline: Deadline | None, uid: str) -> None:
        """The earlier test's files go (but ``keep``), then room for this one; with
        --shared-file its file laid out from the first worker alone."""
        found = place.clean(keep, test.name)
        if found is not None:
            self.rules(place).between(test, *found)
        if self.shared_file:
            first = place.workers()[0]
            place.lay_out(test, self.for_worker(test.jobfile, place, first, uid), deadline)

    def access(self, place: Place, uid: str, plan: Plan) -> Access:
        return Access(dirs=(place.files_dir(uid),))

    def check_put(self, place: Place) -> None:
        if self.shared_file:
            raise ConfigError(f"--replay gives each {place.every or 'worker'} its own files:"
                              " leave out --shared-file")
        place.check_putting()

    def put_file(self, place: Place, uid: str, name: str, text: Placed) -> None:
        """``text`` for each worker as its own file of the run (a replay's iolog), naming
        that worker's run files."""
        run_file_name(name)
        self.check_put(place)
        def where(w: Worker) -> Callable[[str], str]:
            return lambda n: self.run_file(place, w, uid, n)

        place.put([(w, self.run_file(place, w, uid, name), text(where(w)))
                   for w in place.workers()])

    # (NoDevice: a replay's log among the run's files, the replay in files, prefilled)

    def check_precondition(self) -> None:
        raise ConfigError("--precondition applies to block devices, not a directory")
