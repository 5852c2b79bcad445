"""What a run is asked to do, on any target: the workload, how to measure it, how
to judge it. Checked before any target is touched."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from storbench.analysis.assertions import Assertion
from storbench.analysis.naming import check_series_name
from storbench.errors import ConfigError
from storbench.result.record import Run
from storbench.store.series import check_label
from storbench.workload.files import JOB_FILE_LIMIT, read_text
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.plan import Plan, PlannedTest, expected_seconds
from storbench.workload.sizes import format_bytes_iec, parse_size
from storbench.workload.suites import SUITES, get_suite

DEFAULT_STEADY_MAX_S = 120.0
MAX_RAMP_S = 3600
MAX_REPEAT = 1000
STEADY_CRITERION = re.compile(r"^(iops|bw)(_slope)?:\d+(\.\d+)?%?$")


@dataclass(frozen=True)
class RunSpec:
    """Everything ``storbench run`` was asked to do, whatever the target."""

    suite: str = "quick"
    job_file: Path | None = None
    size: str | None = None
    runtime: float | None = None
    ramp: float | None = None  # each test's ramp_time (None: the suite's or job file's)
    label: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    series: str | None = None  # the history its runs join (None: their suite and storage)
    threshold_ms: float | None = None
    fio: str | None = None
    repeat: int = 1  # each test N times, interleaved across tests
    until_steady: str | None = None  # fio steadystate criterion, e.g. "iops_slope:0.5%"
    steady_window_s: float = 5.0
    probe_metadata: bool | None = None  # None: on for network file systems
    explain: bool = False  # each test's time split by the kernel's layers (execute/layers)
    assertions: tuple[str, ...] = ()
    rate_iops: float | None = None  # etcd: also run open-loop at this write rate
    profile: str | None = None  # named verdict profile of the suite
    baseline: str | None = None  # judge against this run (id, 'last' or label)
    max_regression: float = 0.10  # with baseline: how much worse a figure may get
    timeout_s: float | None = None  # the whole run's time limit (None: from each test)
    allow_exec: bool = False  # job files may run commands (exec_prerun=, ioengine=exec)
    precondition: bool = False  # block devices: write it first, then rounds until steady
    precondition_size: str | None = None  # cap on what preconditioning writes
    round_s: float = 60.0  # with precondition: each round's length
    max_rounds: int = 25
    # what a kind other than the plain suite is asked (a CurveSpec, a LifecycleSpec, ...):
    # the kind that knows it is the run's (pipeline/kinds), and checks it
    kind_spec: object | None = None

    def _latency_example(self) -> str:
        """A latency this run's suite measures, named as --assert takes it (an
        application's answer where it has one: postgresql.commit_p99)."""
        from storbench.analysis.apps import ANSWERS

        if self.job_file is not None or self.kind_spec is not None:
            return "TEST.read.clat_p99"
        for name, _, unit in ANSWERS.get(self.suite, ()):
            if unit == "ms":
                return f"{self.suite}.{name}"
        return next((f"{t.name}.{m}" for t in get_suite(self.suite).tests for m in t.metrics
                     if "lat_" in m), "TEST.read.clat_p99")

    def check(self) -> None:
        """ConfigError for what cannot work, before anything runs."""
        if self.threshold_ms is not None and self.threshold_ms <= 0:
            raise ConfigError(f"--threshold must be a positive number of ms, not"
                              f" {self.threshold_ms}")
        if self.threshold_ms is not None and (
                self.job_file is not None or self.kind_spec is not None
                or not get_suite(self.suite).profiles):
            raise ConfigError("--threshold sets the limit of a suite's verdict (--suite etcd);"
                              " this run has none: give --assert instead (e.g."
                              f" '{self._latency_example()} < {self.threshold_ms:g}ms')")
        if self.rate_iops is not None and (
                self.rate_iops <= 0 or not float(self.rate_iops).is_integer()):
            raise ConfigError(f"--rate must be a positive whole number of writes/s (fio's"
                              f" rate_iops), not {self.rate_iops:g}")
        if self.rate_iops is not None and (
                self.job_file is not None or not any(t.rated for t in get_suite(self.suite).tests)):
            raise ConfigError("--rate applies to suites with an open-loop variant (etcd);"
                              " in a job file, set rate_iops= yourself")
        for text in self.assertions:
            Assertion.parse(text)  # syntax errors before any I/O
        check_series_name(self.series)  # --series '' was the run's own series, unsaid
        check_label(self.label)  # --label 12 named a run `show 12` could not find
        if self.profile is not None:
            profiles = get_suite(self.suite).profiles or {}
            if self.profile not in profiles:
                hint = (f"; {self.profile} is a suite: --suite {self.profile}"
                        if self.profile in SUITES else "")
                raise ConfigError(f"suite {self.suite} has no profile {self.profile!r}"
                                  + (f"; choose one of: {', '.join(profiles)}" if profiles
                                     else "") + hint)
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError(f"--timeout must be positive, not {self.timeout_s:g}")
        if self.max_regression < 0:
            raise ConfigError(f"--max-regression must not be negative, not"
                              f" {100 * self.max_regression:g}%")
        if self.precondition:
            if self.repeat > 1 or self.until_steady is not None:
                raise ConfigError("--precondition runs each test in rounds until steady"
                                  " state: it replaces --repeat and --until-steady")
            if self.round_s <= 0 or not 5 <= self.max_rounds <= 100:
                raise ConfigError("--round must be positive and --max-rounds 5 to 100")
            if self.precondition_size is not None and not parse_size(self.precondition_size):
                raise ConfigError(f"--precondition-size {self.precondition_size!r} is not a"
                                  " size (e.g. 64g)")
        elif self.precondition_size is not None:
            raise ConfigError("--precondition-size applies to --precondition")

    def shaping(self) -> str:
        """What of the spec shapes the workload beyond its suite or job file, as the name
        of a series says it ("/size=4m,runtime=3"; "" for none): runs that differ in it
        are no history of one storage (a smaller --size is no change of the storage)."""
        parts = [f"size={self.size.strip()}" if self.size else "",
                 f"runtime={self.runtime:g}" if self.runtime is not None else "",
                 f"ramp={self.ramp:g}" if self.ramp is not None else "",
                 f"rate={self.rate_iops:g}" if self.rate_iops is not None else "",
                 f"until-steady={self.until_steady}" if self.until_steady is not None else "",
                 f"precondition={self.precondition_size or 'whole'}" if self.precondition
                 else ""]
        return "/" + ",".join(p for p in parts if p) if any(parts) else ""

    def settings(self, suite_name: str) -> dict[str, Any]:
        """What the run was asked to do, stored with it (verdicts are judged from it)."""
        return {
            "suite": suite_name,
            "size": self.size,
            "runtime_s": self.runtime,
            **({"ramp_s": self.ramp} if self.ramp is not None else {}),
            "threshold_ms": self.threshold_ms,
            "job_file": str(self.job_file) if self.job_file else None,
            "repeat": self.repeat,
            "until_steady": self.until_steady,
            "assertions": list(self.assertions),
            "rate_iops": self.rate_iops,
            "profile": self.profile,
            **({"baseline": self.baseline, "max_regression": self.max_regression}
               if self.baseline is not None else {}),
            **({"timeout_s": self.timeout_s} if self.timeout_s is not None else {}),
            **({"allow_exec": True} if self.allow_exec else {}),
            **({"explain": True} if self.explain else {}),
            **({"precondition": {"size": self.precondition_size, "round_s": self.round_s,
                                 "max_rounds": self.max_rounds}} if self.precondition else {}),
        }


def make_plan(spec: RunSpec, scratch: Path) -> Plan:
    """The tests of ``spec``'s suite or job file, their job files pointed at ``scratch``;
    a kind of run (pipeline/kinds/) makes its own plan of them."""
    if spec.size is not None and not parse_size(spec.size):
        raise ConfigError(f"--size {spec.size!r} is not a size of a file fio can use"
                          " (examples: 64m, 1g, 512k)")
    if spec.runtime is not None and spec.runtime <= 0:
        raise ConfigError(f"--runtime must be a positive number of seconds, not {spec.runtime}")
    if spec.ramp is not None and not 0 <= spec.ramp <= MAX_RAMP_S:
        raise ConfigError(f"--ramp must be 0 to {MAX_RAMP_S:,} seconds, not {spec.ramp:g}")
    if spec.ramp is not None and (spec.until_steady is not None or spec.precondition):
        raise ConfigError(
            f"--ramp with {'--until-steady' if spec.until_steady else '--precondition'}: its"
            " rounds before steady state are the ramp (each round runs with none)")
    if not 1 <= spec.repeat <= MAX_REPEAT:
        raise ConfigError(f"--repeat must be 1 to {MAX_REPEAT}, not {spec.repeat}")
    if spec.until_steady is not None and not STEADY_CRITERION.match(spec.until_steady):
        raise ConfigError(
            f"--until-steady {spec.until_steady!r} is not a fio steady-state criterion"
            " (iops:2%, iops_slope:0.5%, bw:2%, bw_slope:0.5%); write --until-steady=CRITERION,"
            " or put a bare --until-steady after the target")
    if spec.steady_window_s < 2:
        raise ConfigError(f"--steady-window {spec.steady_window_s:g}: fio takes one sample a"
                          " second, and a window needs two at least to have a slope or a"
                          " spread (give 2 or more seconds)")
    plan = _plan_tests(spec, scratch)
    _holds_a_block(plan, spec.size)
    if spec.ramp:
        _ramps_by_time(plan, spec.ramp)
    return plan


def _ramps_by_time(plan: Plan, ramp: float) -> None:
    """--ramp on a job that ends when its size is done: fio's ramp spends that size too
    (the etcd suite with --ramp 3: 61 ms measured, no fdatasync figure at all), so the
    figure would be of what the ramp left. Refused, naming the job."""
    for t in plan.tests:
        for job, options in t.jobfile.effective():
            if options.get("time_based", "0") in ("0", "false"):
                raise ConfigError(
                    f"--ramp {ramp:g}: test {t.name!r} (job {job!r}) is not time based: it"
                    " ends when its size is done, and fio's ramp would spend part of it"
                    " unmeasured; leave --ramp out for it (or give 0)")


def _holds_a_block(plan: Plan, given: str | None) -> None:
    """A job whose size is smaller than its smallest block: fio refuses it ("size too
    small") only as the test starts, the run stored as failed; said before the run,
    with the size every test of the plan can take."""
    short: list[tuple[int, str, str, str]] = []  # (its smallest block, test, job, size=)
    for t in plan.tests:
        for job, options in t.jobfile.effective():
            size = parse_size(options.get("size") or "")
            blocks = [parse_size(b) for b in (options.get("bs") or options.get("blocksize")
                                              or "4k").split(",") if b.strip()]
            least = min((b for b in blocks if b), default=None)
            if size and least and size < least:
                short.append((least, t.name, job, options["size"]))
    if short:
        block, test, job, said = max(short)
        need = format_bytes_iec(block) if block % 1024 == 0 else f"{block:,} bytes"
        raise ConfigError(
            f"{f'--size {given}' if given is not None else f'size={said}'} is smaller than a"
            f" block of test {test!r} (job {job!r}: {need}): fio refuses a job with no room"
            f" for one block; give {need} or more")


@runtime_checkable
class PlansTests(Protocol):
    """A kind's spec that brings its own tests (a replay: its trace), not a suite's."""

    def plan_tests(self, scratch: Path) -> Plan: ...


def _plan_tests(spec: RunSpec, scratch: Path) -> Plan:
    if isinstance(spec.kind_spec, PlansTests):
        return spec.kind_spec.plan_tests(scratch)
    if spec.job_file is not None:
        text = read_text(spec.job_file, "job file", JOB_FILE_LIMIT)
        jf = parse_jobfile(text, str(spec.job_file), spec.job_file.parent)
        prepared = jf.prepared(scratch, size=spec.size, runtime=spec.runtime, ramp=spec.ramp,
                               allow_exec=spec.allow_exec)
        names = ", ".join(s.name for s in jf.jobs())
        test = PlannedTest(spec.job_file.name, names, prepared, expected_seconds(prepared))
        # its jobs as parsed (includes read; comments, blank lines and spacing not)
        digest = hashlib.sha256(jf.render().encode()).hexdigest()[:6]
        left = jf.dropped()
        return Plan(f"job:{spec.job_file.name}", [test],
                    workload_name=f"job:{spec.job_file.name}#{digest}",
                    notes=(f"{spec.job_file.name}: left out of the job file as fio runs it:"
                           f" {left}; storbench always reports latency, its tail, and reads"
                           " and writes apart",) if left else ())
    suite = get_suite(spec.suite)
    tests = []
    jobfiles = suite.jobfiles(size=spec.size, runtime=spec.runtime, rate_iops=spec.rate_iops,
                              ramp=spec.ramp)
    for t, jf in jobfiles:
        prepared = jf.prepared(scratch)
        tests.append(PlannedTest(t.name, t.description, prepared, expected_seconds(prepared),
                                 brief=t.brief))
    return Plan(suite.name, tests)


def check_baseline(baseline: Run | None, plan: Plan) -> None:
    if baseline is None:
        return
    # a suite's test is named like it; a job file's tests by its jobs' names
    names = {t.name for t in plan.tests} | {s.name for t in plan.tests
                                             for s in t.jobfile.jobs()}
    if not set(baseline.results_by_test()) & names:
        raise ConfigError(f"baseline #{baseline.id} ({baseline.name}) shares no test with this"
                          f" run ({', '.join(sorted(names))}): choose a baseline of the same"
                          " suite or job file")
