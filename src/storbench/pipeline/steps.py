"""A run's fio invocations: each test's repeat with its job file for every worker."""

from __future__ import annotations

from dataclasses import dataclass

from storbench.execute import FioJob
from storbench.target.base import Target
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest


@dataclass(frozen=True)
class Step:
    """One scheduled fio invocation: a test's repeat, its job file for each worker."""

    index: int
    repeat: int
    test: PlannedTest
    jobs: list[FioJob]
    log_prefixes: dict[str, str]  # job name -> its per-second log prefix ({}: no logs)


@dataclass(frozen=True)
class PlannedRun:
    uid: str
    plan: Plan
    steps: list[Step]  # empty for a curve: its steps are chosen as it measures


def make_step(target: Target, uid: str, index: int, repeat: int, test: PlannedTest) -> Step:
    """``test``'s invocation number ``index`` on ``target`` (with per-second logs where
    the target brings them back)."""
    prefixes: dict[str, str] = {}

    def logged(jobfile: JobFile) -> JobFile:
        if not target.series_logs:
            return jobfile
        jobfile, theirs = jobfile.with_series_logs(f"sb{index:03d}")
        prefixes.update(theirs)
        return jobfile

    if test.placed:  # each worker its own job file: its own entry of the target's list
        jobs = [target.job_files(logged(jf), index, uid)[i] for i, jf in test.placed]
    else:
        jobs = target.job_files(logged(test.jobfile), index, uid)
    return Step(index, repeat, test, jobs, prefixes)
