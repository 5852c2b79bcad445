"""The last look at every job file before fio gets it (workload/guard.check_final).

Job files are judged when they are read (a user's options, with messages that name
them); what fio finally runs has been rewritten since by storbench itself (the
scratch directory, file names per host, logs, rates, steady state). ``Gated`` judges
that final text, whatever built it, against the places the run may write: a job that
would reach outside never starts, even through a bug of storbench's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from storbench.execute.base import Execution, Executor, FioJob, Progress
from storbench.workload.guard import check_final, check_iolog
from storbench.workload.jobfile import JobFile, parse_jobfile


class Gated:
    """An Executor that runs only job files inside ``within`` (the scratch directory, or
    the one device named); the I/O logs they replay may also be read from
    ``reads_from`` (the run's own work directory)."""

    def __init__(self, inner: Executor, within: list[Path], *, allow_exec: bool,
                 reads_from: list[Path] | None = None) -> None:
        self.inner = inner
        self.within = [str(p) for p in within]
        self.reads_from = [str(p) for p in reads_from or []]
        self.allow_exec = allow_exec

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        for job in jobs:
            source = f"job file {job.key}"
            parsed = parse_jobfile(job.text, source)
            check_final(parsed, self.within, allow_exec=self.allow_exec, source=source,
                        reads_from=self.reads_from)
            self._iologs(parsed, source)
        # only now may a job run programs (confine.py lets fio execute nothing else)
        jobs = [replace(job, may_exec=self.allow_exec) for job in jobs]
        return self.inner.run(jobs, on_progress, deadline_s)

    def _iologs(self, jobfile: JobFile, source: str) -> None:
        """The files an I/O log names are opened by fio as if a job file named them:
        judged the same way, every line of it (the logs storbench can read here;
        elsewhere fio finds none in a scratch directory storbench just made)."""
        for _, options in jobfile.effective():
            for log in filter(None, options.get("read_iolog", "").split(":")):
                try:
                    with open(log, encoding="utf-8", errors="replace") as f:
                        check_iolog(f, self.within, f"{source}: the I/O log {log}")
                except OSError:
                    continue
