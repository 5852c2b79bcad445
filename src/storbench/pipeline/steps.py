"""A run's fio invocations: each test's repeat with its job file for every worker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from storbench.errors import ConfigError
from storbench.execute import FioJob
from storbench.target.base import Target
from storbench.workload.jobfile import JobFile, parse_jobfile
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


def reported(step: Step, aliases: Mapping[str, str]
             ) -> dict[str, list[tuple[str, int]]]:
    """Each entry of fio's report (its first job's name, how many jobs it holds), by fio's
    name of each host ("" for a local fio; ``aliases``: fio's name of a worker -> ours),
    from the job file each ran (result/fio_json.Reported)."""
    texts = {job.worker: job.text for job in step.jobs}
    named = {"": texts.get("", step.jobs[0].text if len(step.jobs) == 1 else None),
             **texts,  # (a worker fio names as we do: a Kubernetes run's pods)
             **{fio: texts.get(worker) for fio, worker in aliases.items()}}
    out: dict[str, list[tuple[str, int]]] = {}
    for fio, text in named.items():
        try:
            layout = parse_jobfile(text).reported() if text is not None else None
        except ConfigError:
            layout = None
        if layout is not None:
            out[fio] = layout
    return out
