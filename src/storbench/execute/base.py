"""The Executor contract: how one test's fio runs on a prepared target.

An executor starts fio with the job files it is given (one per worker: this
machine, a fio server, a pod), all at once, shows progress, stops at a deadline
or on a signal, and returns what fio wrote: its json+ (one document; several
workers' outputs in fio's client/server shape, ``client_stats``) and where its
per-second logs are. It raises a StorbenchError only when fio could not run at
all or died with its worker (a pod OOM-killed); fio's own failures come back as
output, stderr and exit status, for the run loop to store and report verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

_PERCENT = re.compile(r"\]\[(\d+(?:\.\d+)?)%\]")
_BW = re.compile(r"\]\[([rwt]=[^\]]*B/s[^\]]*)\]")
_IOPS = re.compile(r"\]\[([rwt]=[^\]]*) IOPS\]")
_ETA = re.compile(r"\[eta (?:(\d+)d:)?(?:(\d+)h:)?(\d+)m:(\d+)s\]")
_STATES = re.compile(r"^Jobs: [^\[]*?: \[([A-Za-z_/]+(?:\(\d+\))?(?:,[A-Za-z_/]+\(\d+\))*)\]")
# fio's job states (eta.c): doing I/O (reading, writing, trimming, mixed, ramping,
# fsyncing, verifying, finishing) or not started on it yet (P, C, I: set up, laying out;
# p: pre-reading)
_IO_STATES = frozenset("RrWwMmDd/FVf")
_SETUP_STATES = frozenset("PCIp")


@dataclass(frozen=True)
class FioJob:
    """One fio to start: where (a worker's name; "" for this machine's only fio), the
    job file's name, and its text."""

    worker: str
    key: str  # file name of the job file, e.g. t003.fio or t003-p1.fio
    text: str
    fio_args: tuple[str, ...] = ()  # fio's own options for it: ("--readonly",)
    may_exec: bool = False  # it may run programs (--allow-exec): not confined to fio alone
    # variables added to fio's environment (an S3 secret key: never in a file); not shown
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class Progress:
    """What fio's status line says, roughly once a second."""

    percent: float | None
    eta_s: int | None
    bandwidth: str  # fio's own text, e.g. "r=47.3MiB/s,w=47.5MiB/s"
    iops: str  # e.g. "r=12.1k,w=12.2k"
    states: str = ""  # its jobs' states, e.g. "w(1)", "I(3),W(1)"; "" in its first seconds
    running_jobs: int | None = None  # "Jobs: N": jobs doing I/O (or ramping) now

    @property
    def did_io(self) -> bool:
        """Whether fio did I/O in the second this line is of: it gives a rate only then."""
        return bool(self.iops or self.bandwidth)

    @property
    def io_running(self) -> bool | None:
        """Whether a job does I/O: by fio's job states where it gives them (from its third
        second on), else by its count of running jobs; None when it said neither. fio
        prints no status line while it lays out files."""
        letters = set(re.sub(r"[^A-Za-z_/]", "", self.states))
        if letters & _IO_STATES:
            return True
        if letters & _SETUP_STATES and not self.running_jobs:
            return False
        return None if self.running_jobs is None else self.running_jobs > 0


@dataclass(frozen=True)
class Execution:
    """What fio left after one test, whatever its status."""

    raw_json: str  # fio's output file (several workers: client/server shape)
    stderr: str
    returncode: int
    wall_s: float
    lost: tuple[str, ...] = ()  # workers that disconnected mid-test
    timed_out: bool = False  # stopped at the deadline
    log_dir: Path | None = None  # fio's per-second logs, when the executor brings them back
    idle_s: float | None = None  # seconds since fio last reported I/O (None: it never did)
    stuck: tuple[int, ...] = ()  # fio's PIDs that did not end when killed (left running)
    # workers whose fio had said nothing for these seconds when the test was stopped,
    # after it spoke (a pod's: its connection through its node, not the storage)
    quiet: tuple[tuple[str, float], ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)  # fio's name of a worker -> ours


class Executor(Protocol):
    """Runs one test's fio job files on a prepared target."""

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        """Run every job at once (one per worker) until all end, the deadline passes or
        the run's SignalGuard gets a signal (then fio is stopped)."""
        ...


def parse_status_line(line: str) -> Progress | None:
    if not line.startswith("Jobs:"):
        return None
    pct = _PERCENT.search(line)
    eta = _ETA.search(line)
    bw = _BW.search(line)
    iops = _IOPS.search(line)
    states = _STATES.search(line)
    jobs = re.match(r"Jobs: (\d+)", line)
    eta_s = None
    if eta:
        d, h, m, s = (int(g) if g else 0 for g in eta.groups())
        eta_s = ((d * 24 + h) * 60 + m) * 60 + s
    return Progress(
        percent=float(pct.group(1)) if pct else None,
        eta_s=eta_s,
        bandwidth=bw.group(1) if bw else "",
        iops=iops.group(1) if iops else "",
        states=states.group(1) if states else "",
        running_jobs=int(jobs.group(1)) if jobs else None,
    )


def fio_message(text: str) -> str:
    """fio's error lines, verbatim, joined; the whole text if none look like errors.
    Lines that differ only in their numbers (an io_u error per offset) are said once,
    the first as fio wrote it, with how many more there were."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("fio:") or "error" in ln.lower()]
    shapes: dict[str, list[str]] = {}  # a line with its numbers blanked -> its lines
    for ln in errors or lines:
        shapes.setdefault(re.sub(r"\d+", "#", ln), []).append(ln)
    chosen = [same[0] + (f" (and {len(set(same)) - 1} more like it)" if len(set(same)) > 1
                         else "") for same in shapes.values()]
    return " | ".join(chosen[:6]) if chosen else "(fio printed nothing)"
