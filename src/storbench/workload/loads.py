"""A workload named for one part of a run that is one fio job (a neighbour's victim or
aggressor): a suite's test (``SUITE:TEST``) or a job file's only job, as its options
without what the run sets itself (where its file is, how long it runs, its rate, how
many of it run), so that the run can place, pace and repeat it.

The options are judged as every job file's are once the run's own job file holds them
(JobFile.prepared: workload/guard.py), so a load reaches no further than a job file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from storbench.errors import ConfigError
from storbench.workload.files import JOB_FILE_LIMIT, read_text
from storbench.workload.jobfile import JobFile, parse_jobfile
from storbench.workload.suite import synchronous
from storbench.workload.suites import get_suite

# what the run sets: the file, the time, the rate, how many, the reporting group
PLACED = ("name", "filename", "filename_format", "directory", "opendir", "nrfiles",
          "runtime", "time_based", "ramp_time", "startdelay", "loops", "number_ios",
          "rate", "rate_iops", "rate_min", "rate_iops_min", "rate_process", "rate_cycle",
          "rate_ignore_thinktime", "numjobs", "new_group", "group_reporting", "stonewall",
          "wait_for", "offset_increment", "unique_filename")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


@dataclass(frozen=True)
class Load:
    """One job's options, ready to be placed and paced by a run."""

    name: str  # a victim's name in the record and its jobs' (``oltp-2``)
    words: str  # what it is, for people: "job oltp of my.fio"
    options: tuple[tuple[str, str], ...]
    rate: float | None  # the job's own rate_iops (one figure), or None
    synchronous: bool  # one I/O at a time (a sync engine): paced evenly, not by Poisson

    def text(self) -> str:
        """Its options as job-file lines."""
        return "".join(f"{k}={v}\n" if v != "" else f"{k}\n" for k, v in self.options)


def is_named_load(word: str) -> bool:
    """``word`` names a suite's test or a job file, not a built-in (which has no ':')."""
    return ":" in word or word.endswith(".fio") or Path(word).is_file()


def one_job(word: str, role: str, size: str | None = None) -> Load:
    """The load ``word`` names (SUITE:TEST or a job file's path) for ``role`` ("--victim"),
    ConfigError for what it cannot be: not found, more than one job, a name that is not
    plain."""
    path = Path(word)
    if ":" in word and not word.endswith(".fio") and not path.is_file():
        suite_name, _, test = word.partition(":")
        suite = get_suite(suite_name)
        found = [jf for t, jf in suite.jobfiles(size=size) if t.name == test]
        if not found:
            raise ConfigError(f"{role} {word!r}: suite {suite_name} has no test {test!r}"
                              f" (its tests: {', '.join(t.name for t in suite.tests)})")
        return _load(found[0], test, f"{suite_name}'s test {test}", role, word)
    jobfile = parse_jobfile(read_text(path, "job file", JOB_FILE_LIMIT), str(path), path.parent)
    jobs = list(jobfile.effective())
    name = jobs[0][0] if len(jobs) == 1 else ""
    return _load(jobfile, name, f"job {name} of {path.name}", role, word)


def _load(jobfile: JobFile, name: str, words: str, role: str, word: str) -> Load:
    jobs = list(jobfile.effective())
    if len(jobs) != 1:
        raise ConfigError(f"{role} {word!r} has {len(jobs)} jobs"
                          f" ({', '.join(j for j, _ in jobs)}); give one job")
    if not _NAME.fullmatch(name) or name == "aggressors":
        raise ConfigError(f"{role} {word!r}: its job's name {name!r} names its figures:"
                          " give it a plain one (a letter, then letters, digits or _; 32"
                          " at most; not 'aggressors')")
    _, options = jobs[0]
    rate = options.get("rate_iops", "")
    return Load(name, words, tuple((k, v) for k, v in options.items() if k not in PLACED),
                float(rate) if rate.isdigit() else None,
                synchronous(options))
