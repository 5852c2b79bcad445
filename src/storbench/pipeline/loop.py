"""The one run loop: every target and executor, every kind of run, goes through it.

    plan -> check -> store the run -> prepare -> for each test and repeat:
    execute -> parse -> warnings -> store -> finish (across-repeat warnings,
    verdicts, assertions, baseline) -> clean up

It owns the run's lifetime: leftovers of crashed runs are removed first, the
target is cleaned up on success, on error and on SIGINT/SIGTERM, and a run that
got as far as being stored is always finished with its status (completed, failed
or interrupted) and what did complete. What the CLI gets back is a RunOutcome: the
stored run, and the error that ended it, if one did.
"""

from __future__ import annotations

import functools
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from storbench import __version__
from storbench.analysis import warnings
from storbench.analysis.regression import regressions
from storbench.analysis.verdicts import evaluate
from storbench.errors import ConfigError, FioError, Interrupted, StorbenchError, TargetHung
from storbench.execute import Execution, FioBinary, SignalGuard, find_fio
from storbench.execute.base import Executor
from storbench.execute.local import Confinement, FioProcess
from storbench.execute.probe import MetadataProbe, is_network_fs
from storbench.execute.workdir import MARKER, create_marked, leftovers, remove_marked
from storbench.pipeline.curve import Curve
from storbench.pipeline.failures import failure
from storbench.pipeline.gate import Gated
from storbench.pipeline.phases import Phases, io_phase
from storbench.pipeline.reporter import NullReporter, Reporter
from storbench.pipeline.rounds import Rounds, after_round, precondition
from storbench.pipeline.spec import RunSpec, check_baseline, make_plan
from storbench.pipeline.steps import PlannedRun, Step, make_step
from storbench.result.fio_json import parse_fio_json, parse_per_host
from storbench.result.fio_logs import read_series
from storbench.result.model import TestResult
from storbench.result.record import Invocation, Run
from storbench.store import Store
from storbench.target.base import Deadline, Restricting, Target
from storbench.workload.sizes import parse_size

PROBE_IDLE_S = 3.0
WORKDIR_WAIT_S = 5.0  # to remove storbench's own work directory (on local disk)


@dataclass(frozen=True)
class RunOutcome:
    """A stored run, as it ended, and the error that ended it (None: completed)."""

    run: Run
    error: StorbenchError | None = None


def plan_run(spec: RunSpec, target: Target) -> PlannedRun:
    """The plan and every invocation's job files for ``target``; nothing is touched."""
    spec.check()
    uid = secrets.token_hex(6)
    plan = make_plan(spec, target.scratch_path(uid))
    if isinstance(target, Restricting):
        plan = target.restrict(plan)
    if spec.curve is not None:  # its steps are made as it goes (pipeline/curve.py)
        return PlannedRun(uid, plan, [])
    return PlannedRun(uid, plan, [make_step(target, uid, index, repeat, test)
                                  for index, (_, repeat, test) in enumerate(plan.schedule())])


def run_on(target: Target, spec: RunSpec, store: Store,
           reporter: Reporter | None = None) -> RunOutcome:
    """Run ``spec`` on ``target`` and store it.

    Raises a StorbenchError for what stops the run before it is stored (bad flags,
    an unusable target); afterwards, every ending is a RunOutcome.
    """
    rep: Reporter = reporter or NullReporter()
    clock = Phases()
    planned = plan_run(spec, target)
    baseline = _baseline(spec, store)
    check_baseline(baseline, planned.plan)
    if spec.probe_metadata and target.probe_dir() is None and target.kind != "directory":
        raise ConfigError(f"--probe-metadata runs on this machine; it cannot run on a"
                          f" {target.kind} target")
    fio = _local_fio(spec, target)
    tmp = Path(tempfile.gettempdir())
    for leftover in leftovers(tmp):  # work directories of runs that were killed
        if remove_marked(leftover.path, WORKDIR_WAIT_S):
            rep.leftover_removed(leftover)
    workdir = create_marked(tmp / f"storbench-fio-{planned.uid}", planned.uid)
    try:
        with SignalGuard() as guard:
            if fio is not None:
                checker = FioProcess(fio, workdir, guard, Confinement())
                for t in planned.plan.tests:
                    checker.validate(t.jobfile.render(), f"for test {t.name!r}")
            for leftover in target.leftovers():
                target.remove_leftover(leftover)
                rep.leftover_removed(leftover)
            target.check(planned.plan, fio, workdir)
            guard.check()
            clock.since("preflight")
            environment = {**target.describe(fio), "storbench_version": __version__}
            _say_confinement(environment, spec.allow_exec, rep)
            run_id = store.begin_run(
                uid=planned.uid, suite=planned.plan.suite_name, target=target.name,
                environment=environment,
                settings={**spec.settings(planned.plan.suite_name), **target.settings()},
                storbench_version=__version__, fio_version=environment.get("fio_version"),
                label=spec.label, tags=spec.tags, lock_path=str(workdir / MARKER))
            loop = _Loop(target, planned, store, run_id, rep, guard, environment, clock)
            loop.rounds = Rounds(spec.max_rounds, parse_size(spec.precondition_size or "")
                                 ) if spec.precondition else None
            loop.curve = Curve(spec.curve, planned.plan.tests[0]) if spec.curve else None
            try:
                failure: BaseException | None = None
                try:
                    loop.prepare(fio)
                    executor = Gated(target.executor(fio, workdir, guard),
                                     [target.scratch_path(planned.uid)],
                                     allow_exec=spec.allow_exec)
                    loop.execute(executor, spec.probe_metadata, spec.timeout_s)
                except BaseException as exc:  # cleaned up first, then recorded
                    failure = exc
                loop.stop_probe()
                with clock.phase("cleanup"):
                    failure = _clean_up(target, failure, rep, hurry=guard.signum is not None
                                        or isinstance(failure, TargetHung))
                if failure is not None:
                    raise failure
                guard.check()  # a signal before the run is finished: it is interrupted
                _finish(store, run_id, loop, baseline, spec)
            except BaseException as exc:
                error = _record_failure(store, run_id, exc)
                return RunOutcome(store.get_run(run_id), error)
            return RunOutcome(store.get_run(run_id))
    finally:
        remove_marked(workdir, WORKDIR_WAIT_S)


@dataclass(frozen=True)
class TargetOutcome:
    target: Target
    outcome: RunOutcome | None  # None: it failed before its run was stored
    error: StorbenchError | None


def run_all(targets: list[Target], spec: RunSpec, store: Store,
            reporter_for: Callable[[Target], Reporter],
            on_done: Callable[[TargetOutcome], None] = lambda done: None,
            ) -> list[TargetOutcome]:
    """Several targets in one command, one after the other, each through ``run_on``.

    Every target's quick checks run before the first starts. A target that fails
    does not stop the others; an interrupt (Ctrl-C, SIGTERM) stops them all. With
    several targets, each run's label names its target. ``on_done`` hears of each
    target as it ends.
    """
    spec.check()
    make_plan(spec, Path("storbench-scratch"))  # a bad flag fails once, not per target
    _baseline(spec, store)
    for target in targets:
        target.preflight()
    done: list[TargetOutcome] = []
    for target in targets:
        label = spec.label if len(targets) == 1 else (
            f"{spec.label}-{target.short_name}" if spec.label else target.short_name)
        reporter = reporter_for(target)
        try:
            outcome = run_on(target, replace(spec, label=label), store, reporter)
            ended = TargetOutcome(target, outcome, outcome.error)
        except StorbenchError as exc:
            ended = TargetOutcome(target, None, exc)
        done.append(ended)
        on_done(ended)
        if isinstance(ended.error, Interrupted):
            break
    return done


def _clean_up(target: Target, failure: BaseException | None, rep: Reporter, *,
              hurry: bool) -> BaseException | None:
    """The target's cleanup, on every path. When the run already failed, a cleanup
    that fails too is said (a note), and the first failure is what the run ended with."""
    try:
        target.cleanup(hurry)
    except StorbenchError as exc:
        if failure is None:
            return exc
        rep.note(f"storbench: cleaning up: {exc}")
    return failure


def _say_confinement(environment: dict[str, Any], allow_exec: bool, rep: Reporter) -> None:
    """What keeps fio in the run's places, stored; said once when it is not the kernel."""
    said = str(environment.get("confinement", ""))
    if allow_exec and said:
        environment["confinement"] = ("none: --allow-exec (the job file is trusted to run"
                                      " commands, and fio runs unconfined)")
    elif said.startswith("none"):
        rep.note(f"storbench: fio is not confined by the kernel here ({said[6:]}); the"
                 " job-file checks still keep it in the scratch directory")


def _local_fio(spec: RunSpec, target: Target) -> FioBinary | None:
    """This machine's fio: required where it runs the I/O or is the client; elsewhere
    (pods) it only checks job files early, when there is one."""
    if target.needs_local_fio:
        return find_fio(spec.fio)
    try:
        return find_fio(spec.fio)
    except StorbenchError:
        return None


def _baseline(spec: RunSpec, store: Store) -> Run | None:
    """The baseline run, found before anything runs (a typo fails now, not after the
    benchmark)."""
    if spec.baseline is None:
        return None
    return store.get_run(store.resolve_baseline(spec.baseline))


class _Loop:
    """One run's state while its tests execute."""

    def __init__(self, target: Target, planned: PlannedRun, store: Store, run_id: int,
                 rep: Reporter, guard: SignalGuard, environment: dict[str, Any],
                 clock: Phases) -> None:
        self.target = target
        self.planned = planned
        self.store = store
        self.run_id = run_id
        self.rep = rep
        self.guard = guard
        self.environment = environment
        self.probe: MetadataProbe | None = None
        self.clock = clock
        self.rounds: Rounds | None = None
        self.stored: list[TestResult] = []  # the last invocation's results
        self.ordinal = 0  # of the next result stored
        self.ends: float | None = None  # monotonic time the run's --timeout ends
        self.timeout_s: float | None = None
        self.curve: Curve | None = None

    def prepare(self, fio: FioBinary | None) -> None:
        with self.clock.phase("prepare"):
            self.target.prepare(self.planned.uid, [s.jobs for s in self.planned.steps],
                                self.guard, self.rep.note)
        described = {**self.target.describe(fio), "storbench_version": __version__}
        if described != self.environment:
            self.environment = described
            self.store.update_environment(self.run_id, described, described.get("fio_version"))
        self.rep.run_started(self.run_id, self.planned.plan,
                             self.target.scratch_path(self.planned.uid))

    def execute(self, executor: Executor, probe_metadata: bool | None,
                timeout_s: float | None) -> None:
        """Every step in order; ``timeout_s`` caps the run (from here) beyond each test's
        own limit."""
        ends = time.monotonic() + timeout_s if timeout_s is not None else None
        probe_dir = self.target.probe_dir()
        if probe_metadata is None:
            probe_metadata = is_network_fs((self.environment.get("target") or {}).get("fs_type"))
        if probe_metadata and probe_dir is not None:
            self.probe = MetadataProbe(probe_dir)
            with self.clock.phase("metadata probe, idle"):
                self.probe.start("idle")
                self.guard.sleep(PROBE_IDLE_S)
                self.probe.stop()
        self.ends, self.timeout_s = ends, timeout_s
        if self.curve is not None:  # steps chosen as it goes, from what they measure
            self.curve.measure(self, executor)
            return
        if self.rounds is not None:
            precondition(self, executor)
        steps = self.planned.steps
        for n, step in enumerate(steps):
            self.guard.check()
            if self.rounds is not None and self.rounds.done(step.test.name):
                continue  # steady: no more rounds of this test
            self.run_step(executor, step, {f for s in steps[n:]
                                           for f in s.test.jobfile.named_files()})
            if self.rounds is not None:
                after_round(self, step.test.name, step.repeat)

    def run_step(self, executor: Executor, step: Step, keep: set[str]) -> list[TestResult]:
        """Run one step, store what it measured (``keep``: files later steps use); its
        results, or an exception for fio's failure or a signal."""
        self.target.before_test(step.test, keep)
        self.rep.test_started(step.index, step.test)
        deadline = self.target.deadline(step.test)
        if self.ends is not None:
            left = max(1.0, self.ends - time.monotonic())
            if deadline is None or left < deadline.seconds:
                deadline = Deadline(left, f"what is left of --timeout {self.timeout_s:g} s")
        if self.probe is not None:
            self.probe.start("load")
        with self.clock.phase(step.test.name, test=step.test.name,
                              repeat=step.repeat) as timed:
            try:
                execution = executor.run(
                    step.jobs, functools.partial(self.rep.progress, step.index),
                    deadline.seconds if deadline is not None else None)
            finally:
                if self.probe is not None:
                    self.probe.stop()
        if execution.stuck and self.guard.signum is not None:
            self.rep.note(f"fio (PID {', '.join(map(str, execution.stuck))}) did not end"
                          " when killed: it is stuck in the kernel (a file system that does"
                          " not respond) and was left running")
        self.guard.check()  # an interrupted test's partial numbers are not stored
        self.ordinal = self._store(step, execution, self.ordinal, deadline, timed)
        return self.stored

    def _store(self, step: Step, execution: Execution, ordinal: int,
               deadline: Deadline | None, timed: dict[str, Any]) -> int:
        """Parse, warn and store one invocation; raise when fio or a worker failed."""
        several = len(step.jobs) > 1
        try:
            _, parsed = parse_fio_json(execution.raw_json)
            per_worker = {execution.aliases.get(k, k): v for k, v in
                          parse_per_host(execution.raw_json).items()} if several else {}
        except FioError:
            if execution.returncode == 0 and not execution.timed_out and not execution.lost:
                raise
            parsed, per_worker = [], {}
        results = [
            replace(r, series=read_series(execution.log_dir, step.log_prefixes[r.name]))
            if r.name in step.log_prefixes and execution.log_dir is not None else r
            for r in parsed
        ]
        io_phase(timed, results)
        self.stored = results
        if execution.log_dir is not None:
            for log in execution.log_dir.glob(f"sb{step.index:03d}*.log"):
                log.unlink()
        numbered = list(enumerate(results, start=ordinal))
        ordinal += len(results)
        rows = []
        for worker, worker_results in per_worker.items():
            for r in worker_results:
                rows.append((ordinal, worker, r))
                ordinal += 1
        found = [w for r in results for w in warnings.compute(r, self.environment)]
        text = "\n".join(f"# {self.target.worker_noun} {j.worker}\n{j.text}" if several
                         else j.text for j in step.jobs)
        self.store.add_invocation(
            self.run_id,
            Invocation(step.index, text, execution.raw_json, execution.returncode,
                       execution.stderr, execution.wall_s),
            numbered, found, repeat=step.repeat, per_host=rows)
        checked = ([(w, r) for w, rs in per_worker.items() for r in rs] if several
                   else [("", r) for r in results])
        missing = [j.worker for j in step.jobs if several and j.worker not in per_worker]
        error = failure(step.test.name, execution, checked, missing, self.target.worker_noun,
                        deadline)
        self.rep.test_finished(step.index, results, error)
        if error:
            if execution.timed_out:
                raise TargetHung(error)
            raise FioError(error, returncode=execution.returncode, stderr=execution.stderr)
        return ordinal

    def stop_probe(self) -> None:
        if self.probe is not None:
            stuck = self.probe.close()
            if stuck is not None:
                self.rep.note(f"the metadata probe (PID {stuck}) does not end: it is stuck in"
                              " the kernel on a file system that does not respond; left"
                              " running")

    def probe_summary(self) -> dict[str, Any]:
        if self.probe is None:
            return {}
        return {"metadata_probe": self.probe.summary(),
                "metadata_probe_timeline": self.probe.timeline(),
                "metadata_probe_start_s": round(self.probe.started_at - self.clock.t0, 3)}


def _finish(store: Store, run_id: int, loop: _Loop, baseline: Run | None,
            spec: RunSpec) -> None:
    """Across-repeat warnings, verdicts and the baseline: judged once, stored."""
    stored = store.get_run(run_id)
    found = [w for name, results in stored.results_by_test().items()
             for w in warnings.across_repeats(name, results)]
    rounds = loop.rounds.record() if loop.rounds is not None else {}
    if loop.rounds is not None:  # judged on the window's rounds only
        found = loop.rounds.warnings()
    if loop.curve is not None:  # its steps are no repeats of one test
        found, rounds = [], loop.curve.record()
    stored = replace(stored, data={**stored.data, **rounds})
    verdicts = evaluate(stored, unresolvable="fail")
    changes = regressions(stored, baseline, spec.max_regression) if baseline is not None else []
    store.finish_run(run_id, "completed", data={**loop.probe_summary(), **loop.clock.record(),
                                                **rounds},
                     warnings=found,
                     verdicts=verdicts, regressions=changes)


def _record_failure(store: Store, run_id: int, exc: BaseException) -> StorbenchError:
    """Store a run that did not complete as failed or interrupted; the error to report.

    Ctrl-C arriving as KeyboardInterrupt becomes Interrupted; anything that is not a
    StorbenchError (a bug) is stored and raised again, with its traceback.
    """
    if isinstance(exc, KeyboardInterrupt):
        exc = Interrupted(2)
    status = "interrupted" if isinstance(exc, Interrupted) else "failed"
    store.finish_run(run_id, status, str(exc) or type(exc).__name__)
    if not isinstance(exc, StorbenchError):
        raise exc
    return exc
