"""Run a suite (or a job file) on a directory target: plan, execute, parse, store.

This is the one function the CLI's ``run`` calls. It owns the run's lifetime:
leftovers of crashed runs are removed first, the scratch directory is removed on
success, on error and on SIGINT/SIGTERM, and the run is always stored with its
final status (completed, failed or interrupted) and what did complete.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, Protocol

from storbench import __version__
from storbench.analysis import warnings
from storbench.errors import ConfigError, FioError, Interrupted, StorbenchError
from storbench.execute import Execution, LocalExecutor, Progress, SignalGuard, find_fio
from storbench.execute.local import fio_message
from storbench.execute.probe import MetadataProbe, is_network_fs
from storbench.result import TestResult, parse_fio_json
from storbench.result.fio_logs import read_series
from storbench.store import Invocation, Store
from storbench.target.directory import (
    DirectoryTarget,
    Leftover,
    remove_files_except,
    remove_scratch,
)
from storbench.target.environment import host_facts
from storbench.target.kubernetes import KubeOptions
from storbench.workload import JobFile, get_suite, parse_jobfile
from storbench.workload.sizes import parse_size


@dataclass(frozen=True)
class RunSpec:
    """Everything ``storbench run`` was asked to do."""

    target: Path | None  # None with kube
    suite: str = "quick"
    job_file: Path | None = None
    size: str | None = None
    runtime: float | None = None
    label: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    threshold_ms: float | None = None
    fio: str | None = None
    repeat: int = 1  # each test N times, interleaved across tests
    until_steady: str | None = None  # fio steadystate criterion, e.g. "iops_slope:0.5%"
    steady_window_s: float = 5.0
    probe_metadata: bool | None = None  # None: on for network file systems
    assertions: tuple[str, ...] = ()
    rate_iops: float | None = None  # etcd: also run open-loop at this write rate
    profile: str | None = None  # named verdict profile of the suite
    hosts: tuple[Any, ...] = ()  # hosts.Host: run on these fio servers (client/server mode)
    shared_file: bool = False  # with hosts: every host uses one file
    kube: KubeOptions | None = None  # run in a pod on a PVC of this StorageClass

    def settings(self, suite_name: str) -> dict[str, Any]:
        """What the run was asked to do, stored with it (verdicts are judged from it)."""
        return {
            "suite": suite_name,
            "size": self.size,
            "runtime_s": self.runtime,
            "threshold_ms": self.threshold_ms,
            "job_file": str(self.job_file) if self.job_file else None,
            "repeat": self.repeat,
            "until_steady": self.until_steady,
            "assertions": list(self.assertions),
            "rate_iops": self.rate_iops,
            "profile": self.profile,
            "hosts": [h.key for h in self.hosts],
            "shared_file": self.shared_file,
            **({"kubernetes": self.kube.describe()} if self.kube is not None else {}),
        }


DEFAULT_STEADY_MAX_S = 120.0
STEADY_CRITERION = re.compile(r"^(iops|bw)(_slope)?:\d+(\.\d+)?%?$")
PROBE_IDLE_S = 3.0

@dataclass(frozen=True)
class PlannedTest:
    """One fio invocation: its job file and a name for progress display."""

    name: str
    description: str
    jobfile: JobFile
    expected_s: float | None  # wall time fio will take, when its options say


@dataclass(frozen=True)
class Plan:
    suite_name: str
    tests: list[PlannedTest]
    repeat: int = 1

    def schedule(self) -> list[tuple[int, int, PlannedTest]]:
        """(test index, repeat, test): repeats interleaved across tests (t1 t2 t1 t2)."""
        return [(i, r, t) for r in range(self.repeat) for i, t in enumerate(self.tests)]


class Reporter(Protocol):
    """Progress callbacks; the CLI shows them, a library user may ignore them."""

    def leftover_removed(self, leftover: Leftover) -> None: ...
    def run_started(self, run_id: int, plan: Plan, scratch: Path) -> None: ...
    def note(self, text: str) -> None: ...
    def test_started(self, index: int, test: PlannedTest) -> None: ...
    def progress(self, index: int, progress: Progress) -> None: ...
    def test_finished(self, index: int, results: list[TestResult]) -> None: ...


class NullReporter:
    def leftover_removed(self, leftover: Leftover) -> None:
        pass

    def run_started(self, run_id: int, plan: Plan, scratch: Path) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def test_started(self, index: int, test: PlannedTest) -> None:
        pass

    def progress(self, index: int, progress: Progress) -> None:
        pass

    def test_finished(self, index: int, results: list[TestResult]) -> None:
        pass


def expected_seconds(jobfile: JobFile) -> float | None:
    """How long fio will run, when it is time based (runtime + ramp_time), else None."""
    longest = 0.0
    for _, opts in jobfile.effective():
        if "time_based" not in opts or "runtime" not in opts:
            return None
        runtime = _seconds(opts["runtime"])
        ramp = _seconds(opts.get("ramp_time", "0"))
        if runtime is None or ramp is None:
            return None
        longest = max(longest, runtime + ramp)
    return longest


def _seconds(text: str) -> float | None:
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


def make_plan(spec: RunSpec, scratch: Path) -> Plan:
    if spec.size is not None and parse_size(spec.size) is None:
        raise ConfigError(f"--size {spec.size!r} is not a size (examples: 64m, 1g, 512k)")
    if spec.runtime is not None and spec.runtime <= 0:
        raise ConfigError(f"--runtime must be a positive number of seconds, not {spec.runtime}")
    if spec.repeat < 1:
        raise ConfigError(f"--repeat must be 1 or more, not {spec.repeat}")
    if spec.until_steady is not None and not STEADY_CRITERION.match(spec.until_steady):
        raise ConfigError(
            f"--until-steady {spec.until_steady!r} is not a fio steady-state criterion"
            " (iops:2%, iops_slope:0.5%, bw:2%, bw_slope:0.5%); write --until-steady=CRITERION,"
            " or put a bare --until-steady after the target")
    if spec.steady_window_s <= 0:
        raise ConfigError(f"--steady-window must be positive, not {spec.steady_window_s}")
    plan = _plan_tests(spec, scratch)
    tests = plan.tests
    if spec.until_steady is not None:
        limit = spec.runtime or DEFAULT_STEADY_MAX_S
        tests = [replace(t, jobfile=t.jobfile.with_steady_state(
                     spec.until_steady, spec.steady_window_s, limit),
                     expected_s=None) for t in tests]
    return replace(plan, tests=tests, repeat=spec.repeat)


def _plan_tests(spec: RunSpec, scratch: Path) -> Plan:
    if spec.job_file is not None:
        try:
            text = spec.job_file.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read job file {str(spec.job_file)!r}: {exc.strerror}"
                              ) from exc
        jf = parse_jobfile(text, str(spec.job_file), spec.job_file.parent)
        prepared = jf.prepared(scratch, size=spec.size, runtime=spec.runtime)
        names = ", ".join(s.name for s in jf.jobs())
        test = PlannedTest(spec.job_file.name, names, prepared, expected_seconds(prepared))
        return Plan(f"job:{spec.job_file.name}", [test])
    suite = get_suite(spec.suite)
    tests = []
    jobfiles = suite.jobfiles(size=spec.size, runtime=spec.runtime, rate_iops=spec.rate_iops)
    for t, jf in jobfiles:
        prepared = jf.prepared(scratch)
        tests.append(PlannedTest(t.name, t.description, prepared, expected_seconds(prepared)))
    return Plan(suite.name, tests)


def run_benchmark(spec: RunSpec, store: Store, reporter: Reporter | None = None) -> int:
    """Run ``spec`` and store it; returns the run id.

    Raises StorbenchError subclasses; when the run got as far as being stored, its
    id is in the exception's ``run_id`` attribute.
    """
    rep: Reporter = reporter or NullReporter()
    if spec.hosts:
        from storbench.hosts import run_on_hosts

        return run_on_hosts(spec, store, rep)
    if spec.kube is not None:
        from storbench.kuberun import run_on_kubernetes

        return run_on_kubernetes(spec, store, rep)
    assert spec.target is not None
    fio = find_fio(spec.fio)
    target = DirectoryTarget(spec.target)
    target.check()
    for leftover in target.leftovers():
        remove_scratch(leftover.path)
        rep.leftover_removed(leftover)
    uid = secrets.token_hex(6)
    scratch = spec.target.resolve() / f"storbench-{uid}"
    plan = make_plan(spec, scratch)
    workdir = Path(tempfile.mkdtemp(prefix="storbench-fio-"))
    try:
        with SignalGuard() as guard:
            executor = LocalExecutor(fio, workdir, guard)
            for t in plan.tests:
                executor.validate(t.jobfile.render(), f"for test {t.name!r}")
            needed = [(t.jobfile.estimated_bytes() or 0, t.name) for t in plan.tests]
            most, name = max(needed)
            target.check_space(most, f"test {name!r}")
            guard.check()
            environment = {
                **host_facts(),
                "target": target.describe(),
                "fio_path": fio.path,
                "fio_version": fio.version_text,
                "storbench_version": __version__,
            }
            probe_on = spec.probe_metadata
            if probe_on is None:
                probe_on = is_network_fs(environment["target"].get("fs_type"))
            run_id = store.begin_run(
                uid=uid, suite=plan.suite_name, target=str(spec.target.resolve()),
                environment=environment, settings=spec.settings(plan.suite_name),
                storbench_version=__version__,
                fio_version=fio.version_text, label=spec.label, tags=spec.tags,
            )
            ctx = _Context(plan, executor, store, run_id, target, scratch, rep, guard,
                           environment, MetadataProbe(scratch) if probe_on else None)
            try:
                target.create_scratch(uid)
                rep.run_started(run_id, plan, scratch)
                _execute(ctx)
            except BaseException as exc:
                if ctx.probe is not None:
                    ctx.probe.stop()
                remove_scratch(scratch)
                record_failure(store, run_id, exc)
            remove_scratch(scratch)
            data = {"metadata_probe": ctx.probe.summary()} if ctx.probe is not None else {}
            stored = store.get_run(run_id)
            run_warnings = [w.to_dict() for name, results in stored.results_by_test().items()
                            for w in warnings.across_repeats(name, results)]
            store.finish_run(run_id, "completed", data=data, warnings=run_warnings)
            guard.check()
            return run_id
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class _Context:
    plan: Plan
    executor: LocalExecutor
    store: Store
    run_id: int
    target: DirectoryTarget
    scratch: Path
    rep: Reporter
    guard: SignalGuard
    environment: dict[str, Any]
    probe: MetadataProbe | None


def _execute(c: _Context) -> None:
    ordinal = 0
    schedule = c.plan.schedule()
    if c.probe is not None:
        c.probe.start("idle")
        c.guard.sleep(PROBE_IDLE_S)
        c.probe.stop()
    for index, (_, repeat, test) in enumerate(schedule):
        c.guard.check()
        kept = sum(f.stat().st_size for f in c.scratch.iterdir() if f.is_file())
        c.target.check_space(max(0, (test.jobfile.estimated_bytes() or 0) - kept),
                             f"test {test.name!r}")
        c.rep.test_started(index, test)
        jobfile, log_prefixes = test.jobfile.with_series_logs(f"sb{index:03d}")
        text = jobfile.render()
        if c.probe is not None:
            c.probe.start("load")
        try:
            execution = c.executor.run(text, functools.partial(c.rep.progress, index))
        finally:
            if c.probe is not None:
                c.probe.stop()
        c.guard.check()  # an interrupted test's partial numbers are not stored
        try:
            _, parsed = parse_fio_json(execution.raw_json)
        except FioError:
            if execution.returncode == 0:
                raise
            parsed = []
        results = [
            replace(r, series=read_series(c.executor.workdir, log_prefixes[r.name]))
            if r.name in log_prefixes else r
            for r in parsed
        ]
        for log in c.executor.workdir.glob(f"sb{index:03d}*.log"):
            log.unlink()
        numbered = list(enumerate(results, start=ordinal))
        ordinal += len(results)
        found = [w.to_dict() for r in results for w in warnings.compute(r, c.environment)]
        c.store.add_invocation(
            c.run_id,
            Invocation(index, text, execution.raw_json, execution.returncode,
                       execution.stderr, execution.wall_s),
            numbered, found, repeat=repeat,
        )
        c.rep.test_finished(index, results)
        raise_for_fio(execution, [("", r) for r in results])
        later = {n for _, _, t in schedule[index + 1:] for n in t.jobfile.named_files()}
        remove_files_except(c.scratch, later)


def number_results(ordinal: int, results: list[TestResult],
                   per_host: dict[str, list[TestResult]]
                   ) -> tuple[list[tuple[int, TestResult]], list[tuple[int, str, TestResult]], int]:
    """Ordinals for an invocation's aggregate results, then its per-host (per-pod) ones;
    returns both and the next free ordinal."""
    numbered = list(enumerate(results, start=ordinal))
    ordinal += len(results)
    rows = []
    for host, host_results in per_host.items():
        for r in host_results:
            rows.append((ordinal, host, r))
            ordinal += 1
    return numbered, rows, ordinal


def record_failure(store: Store, run_id: int, exc: BaseException) -> NoReturn:
    """Store a run that did not complete as failed or interrupted, and re-raise.

    A StorbenchError leaves with the run's id (``exc.run_id``), so that the CLI can
    show what did complete; Ctrl-C arriving as KeyboardInterrupt becomes Interrupted.
    """
    if isinstance(exc, KeyboardInterrupt):
        exc = Interrupted(2)
    status = "interrupted" if isinstance(exc, Interrupted) else "failed"
    store.finish_run(run_id, status, str(exc) or type(exc).__name__)
    if isinstance(exc, StorbenchError):
        exc.run_id = run_id  # type: ignore[attr-defined]
        raise exc from None
    raise exc


def raise_for_fio(execution: Execution, results: list[tuple[str, TestResult]],
                  missing: str = "") -> None:
    """FioError with fio's own words when a job reported an error (``results`` are
    (where, result): where is "" or a host) or fio exited non-zero."""
    said = fio_message(execution.stderr + "\n" + _preamble(execution.raw_json))
    failed = [(where, r) for where, r in results if r.error]
    if failed:
        where, r = failed[0]
        on = f" on {where}" if where else ""
        raise FioError(f"fio job {r.name!r} failed{on} with error {r.error}"
                       f" ({_strerror(r.error)}): {said}",
                       returncode=execution.returncode, stderr=execution.stderr)
    if execution.returncode != 0 or missing:
        raise FioError(f"fio exited with status {execution.returncode}{missing}: {said}",
                       returncode=execution.returncode, stderr=execution.stderr)


def _preamble(raw: str) -> str:
    """What fio printed into its output file before the JSON: its error messages."""
    start = raw.find("{")
    return raw if start == -1 else raw[:start]


def _strerror(errno_value: int) -> str:
    try:
        return os.strerror(errno_value)
    except ValueError:
        return "unknown error"
