"""What a suite is: its tests (one fio job each), its defaults, where each option comes
from, and the profiles that judge it. The suites themselves are data: workload/suites.py
(the studies' and storbench's own) and workload/apps.py (application profiles)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from storbench.errors import ConfigError
from storbench.workload.jobfile import JobFile, Option, Section
from storbench.workload.sizes import fio_seconds, fio_size, parse_size

# one I/O at a time a job: paced evenly, not by Poisson arrivals (fio 3.33 pacing
# fdatasync'd sync writes by Poisson issued one write a job from 700 writes/s on, 500 with a ramp)
SYNC_ENGINES = frozenset({"sync", "psync", "vsync", "pvsync", "pvsync2", "mmap"})


def synchronous(options: Mapping[str, str | None]) -> bool:
    """Whether a job's options name a synchronous engine (fio's default is psync)."""
    return (options.get("ioengine") or "psync") in SYNC_ENGINES


@dataclass(frozen=True)
class TestSpec:
    """One test of a suite: one fio job, run as its own fio invocation."""

    name: str
    description: str
    options: tuple[Option, ...]
    metrics: tuple[str, ...]  # headline metrics (see storbench.analysis.metrics)
    split_size: bool = False  # size is shared by numjobs jobs at offset_increment apart
    rated: bool = False  # with --rate W, also run open-loop at W IOPS as "<name>_rated"
    # why the test is short by design (a burst, a paced probe): it is not judged by the
    # rule for throughput tests (too short to be steady), nor told to run longer
    brief: str = ""


@dataclass(frozen=True)
class Profile:
    """A named set of pass/fail assertions (storbench.analysis.assertions syntax)."""

    assertions: tuple[str, ...]
    source: str  # where the limits come from, shown with the verdict


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    study: str
    defaults: tuple[Option, ...]
    tests: tuple[TestSpec, ...]
    profiles: dict[str, Profile] | None = None  # the first is the default
    origins: dict[str, str] | None = None  # option -> where it comes from, if not the study
    dropped: dict[str, str] | None = None  # the study's options left out -> why

    def origin(self, option: str) -> str:
        """Where an option of this suite's job files comes from."""
        if self.origins and option in self.origins:
            return self.origins[option]
        number = self.study.split(":", 1)[0]
        return f"study {number}" if number.isdigit() else "storbench default"

    def provenance(self, test: TestSpec) -> list[tuple[str, str | None, str]]:
        """(option, value, where it comes from) for each option of one test's job."""
        _, jf = next((t, j) for t, j in self.jobfiles() if t.name == test.name)
        options = [(k, v) for section in jf.sections for k, v in section.options]
        return [(k, v, self.origin(k)) for k, v in options]

    def all_tests(self, rate_iops: float | None = None) -> list[TestSpec]:
        """The tests, plus an open-loop copy of each ``rated`` test when a rate is given:
        Poisson arrivals, or evenly spaced for a synchronous engine (SYNC_ENGINES)."""
        out = []
        for t in self.tests:
            out.append(t)
            if t.rated and rate_iops is not None:
                paced = dict((*self.defaults, *t.options))
                process = "linear" if synchronous(paced) else "poisson"
                out.append(replace(
                    t, name=f"{t.name}_rated",
                    description=f"{t.description}, open loop at {rate_iops:,.0f} writes/s",
                    options=(*t.options, ("rate_iops", str(round(rate_iops))),
                             ("rate_process", process)),
                    rated=False))
        return out

    def jobfiles(
        self, *, size: str | None = None, runtime: float | None = None,
        rate_iops: float | None = None, ramp: float | None = None,
    ) -> list[tuple[TestSpec, JobFile]]:
        """Each test and its job file, with ``--size``/``--runtime``/``--rate``/``--ramp``
        applied."""
        out = []
        for test in self.all_tests(rate_iops):
            options = dict(self.defaults)
            options.update(dict(test.options))
            if size is not None and "filesize" in options:
                options["filesize"] = size  # each of its files (fio reads them all)
            elif size is not None:
                options["size"] = size
            if runtime is not None:
                options["runtime"] = fio_seconds(runtime)
            if ramp is not None:
                options["ramp_time"] = fio_seconds(ramp)
            if test.split_size:
                total = parse_size(options["size"] or "")
                numjobs = int(options.get("numjobs") or 1)
                if total is None:
                    raise ConfigError(f"--size {size!r} is not a size fio understands (e.g. 512m)")
                per_job = fio_size(max(total // numjobs, 4096))
                options["size"] = per_job
                options["offset_increment"] = per_job
            globals_ = tuple((k, v) for k, v in options.items() if k not in dict(test.options))
            own = tuple((k, v) for k, v in options.items() if k in dict(test.options))
            out.append((test, JobFile((Section("global", globals_), Section(test.name, own)))))
        return out
