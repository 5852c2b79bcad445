"""A plan: the tests one run will do, each a job file fio can run as it is, in order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storbench.workload.jobfile import JobFile, job_bytes
from storbench.workload.sizes import parse_count, parse_size


@dataclass(frozen=True)
class PlannedTest:
    """One fio invocation: its job file and a name for progress display."""

    name: str
    description: str
    jobfile: JobFile
    expected_s: float | None  # wall time fio will take, when its options say
    # its kind names each rate as fio paces it (a curve's steps: fio's Poisson pace,
    # not the rate_iops= written, is the step's rate), so that difference is not warned of
    paced: bool = False
    brief: str = ""  # why it is short by design (TestSpec.brief): not warned of as too short
    # how to make it longer where the usual advice (--runtime, --until-steady) does not
    # apply (a replay issues what was recorded); "" for the usual advice
    longer: str = ""
    # where workers run different jobs (neighbours on hosts: the victims on the first, the
    # aggressors on the others): (worker's index, its job file), the workers left out
    # running nothing; () when every worker runs ``jobfile`` (which holds every job
    # either way: what the results are read against)
    placed: tuple[tuple[int, JobFile], ...] = ()


@dataclass(frozen=True)
class Plan:
    suite_name: str
    tests: list[PlannedTest]
    repeat: int = 1
    # what names the workload in a series' name when the suite's name does not say it
    # all: a job file's name and a digest of its jobs ("job:my.fio#3fa9c2"; an edited
    # job file is another workload, so another history)
    workload_name: str = ""
    # a cgroup its jobs join (fio's cgroup=; neighbours --isolate), which their kind
    # creates and removes: fio may write its directory, and the hierarchy root's tasks
    # file (fio moves a job there as it ends) (the kernel's confinement of fio)
    cgroup_dirs: tuple[Path, ...] = ()
    cgroup_files: tuple[Path, ...] = ()
    # what the run says as it starts (options of the user's job file left out)
    notes: tuple[str, ...] = ()

    @property
    def workload(self) -> str:
        return self.workload_name or self.suite_name

    def largest(self) -> tuple[int, str]:
        """(bytes, name) of the test whose files take the most room (0: unknown)."""
        return max((t.jobfile.estimated_bytes() or 0, t.name) for t in self.tests)

    def schedule(self) -> list[tuple[int, int, PlannedTest]]:
        """(test index, repeat, test): repeats interleaved across tests (t1 t2 t1 t2)."""
        return [(i, r, t) for r in range(self.repeat) for i, t in enumerate(self.tests)]


def expected_seconds(jobfile: JobFile) -> float | None:
    """How long fio will run, when it is time based (runtime + ramp_time + startdelay),
    else None: the longest job of each group the jobs run in side by side, summed over
    the groups a `stonewall` (`wait_for_previous`) starts one after the other."""
    groups: list[float] = []
    for _, opts in jobfile.effective():
        if "time_based" not in opts or "runtime" not in opts:
            return None
        runtime = seconds(opts["runtime"])
        ramp = seconds(opts.get("ramp_time", "0"))
        # startdelay=1-5 (a range): at most its upper end
        delay = seconds(opts.get("startdelay", "0").rpartition("-")[2] or "0")
        if runtime is None or ramp is None or delay is None:
            return None
        waits = any(opts.get(k, "0") != "0" for k in ("stonewall", "wait_for_previous"))
        if waits or not groups:
            groups.append(0.0)
        groups[-1] = max(groups[-1], delay + runtime + ramp)
    return sum(groups)


def moved_bytes(jobfile: JobFile) -> int | None:
    """Bytes fio will move when size-bound (reads and writes, each job's clones), or
    None when its options don't say: its files' size, or io_size (io_limit) when given,
    times `loops`, twice when it reads back what it wrote to verify it."""
    total = 0
    for _, opts in jobfile.effective():
        io = opts.get("io_size") or opts.get("io_limit")
        size = (parse_size(io) if io else None) or job_bytes(opts)
        if size is None:
            return None
        verify = opts.get("verify", "0") not in ("0", "null") and opts.get(
            "do_verify", "1") != "0"
        total += (size * parse_count(opts.get("numjobs")) * parse_count(opts.get("loops"))
                  * (2 if verify else 1))
    return total


def seconds(text: str) -> float | None:
    """A fio time value (plain seconds, or with us/ms/s/m/h) in seconds."""
    text = text.strip().lower()
    for suffix, factor in (("ms", 0.001), ("us", 1e-6), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * factor
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None
