"""The one run loop: every target and executor, every kind of run, goes through it.

    plan -> check -> store the run -> prepare -> the kind measures (each step:
    execute -> parse -> warnings -> store) -> finish (the kind's warnings and section,
    verdicts, assertions, baseline) -> clean up

The loop knows no kind of run: it asks pipeline/kinds for the one the spec wants and
drives it through the Measurement contract (pipeline/measure.py).

It owns the run's lifetime: leftovers of crashed runs are removed first, the
target is cleaned up on success, on error and on SIGINT/SIGTERM, and a run that
got as far as being stored is always finished with its status (completed, failed
or interrupted) and what did complete. What the CLI gets back is a RunOutcome: the
stored run, and the error that ended it, if one did.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from storbench import __version__
from storbench.analysis.assertions import Assertion
from storbench.analysis.naming import auto_series
from storbench.analysis.regression import regressions
from storbench.analysis.verdicts import evaluate
from storbench.errors import ConfigError, Interrupted, StorbenchError, TargetHung
from storbench.execute import FioBinary, SignalGuard, find_fio, layers
from storbench.execute.fsops import remove_marked
from storbench.execute.local import Confinement, FioProcess
from storbench.execute.workdir import MARKER, create_marked, leftovers, run_workdir
from storbench.pipeline import kinds
from storbench.pipeline.explained import Here, Tracer
from storbench.pipeline.gate import Gated
from storbench.pipeline.measure import Measurement, RunContext, recorded
from storbench.pipeline.phases import Phases
from storbench.pipeline.reporter import NullReporter, Reporter
from storbench.pipeline.spec import RunSpec, check_baseline, make_plan
from storbench.pipeline.steps import PlannedRun, make_step
from storbench.result.environment import Environment
from storbench.result.facts import TargetFacts
from storbench.result.record import Run
from storbench.store import Store
from storbench.store.series import series_runs
from storbench.target.base import (
    ProbesItself,
    PutsFiles,
    Restricting,
    Subject,
    Target,
    Traceable,
    TracesHosts,
)

WORKDIR_WAIT_S = 5.0  # to remove storbench's own work directory (on local disk)
NO_SCRATCH = Path("storbench-scratch")  # a plan's paths where no fio of the loop's runs


@dataclass(frozen=True)
class RunOutcome:
    """A stored run, as it ended, and the error that ended it (None: completed)."""

    run: Run
    error: StorbenchError | None = None


def plan_run(spec: RunSpec, subject: Subject, kind: Measurement | None = None) -> PlannedRun:
    """The plan and every invocation's job files for ``subject``; nothing is touched."""
    spec.check()
    kind = kind or kinds.choose(spec)
    target = fio_target(kind, subject)
    uid = secrets.token_hex(6)
    plan = kind.plan(make_plan(spec, target.scratch_path(uid) if target else NO_SCRATCH))
    if isinstance(target, Restricting):
        plan = target.restrict(plan)
    jobs = list(dict.fromkeys(options.get("name") or job for t in plan.tests
                              for job, options in t.jobfile.effective()))  # fio's results
    for text in spec.assertions:  # one it could never pass fails now, not after the run
        assertion = Assertion.parse(text)
        if not kind.own_assertion(assertion):
            assertion.check_before(jobs)
    if target is None or not kind.fixed_schedule:  # no fio's, or made as it measures
        return PlannedRun(uid, plan, [])
    return PlannedRun(uid, plan, [make_step(target, uid, index, repeat, test)
                                  for index, (_, repeat, test) in enumerate(plan.schedule())])


def fio_target(kind: Measurement, subject: Subject) -> Target | None:
    """``subject`` as the target the loop runs ``kind``'s fio on, checked by the kind;
    None for a kind that drives its own engine (k8s lifecycle, failover). ConfigError for
    a subject ``kind`` cannot run on, before anything is created there. Asked before the
    run's scratch path is: a kind's check may ask the target for one of its own (a
    replay: how long its file names will be)."""
    target = _as_target(kind, subject)
    if target is None:
        kind.check_subject(subject)
    else:
        kind.check_target(target)
    return target


def _as_target(kind: Measurement, subject: Subject) -> Target | None:
    if not kind.drives_fio:
        return None
    if not isinstance(subject, Target):
        raise ConfigError(f"{subject.name} is measured by its own kinds of run, which do"
                          f" not run fio's tests through storbench (not a {kind.kind})")
    return subject


def run_on(subject: Subject, spec: RunSpec, store: Store,
           reporter: Reporter | None = None) -> RunOutcome:
    """Run ``spec`` on ``subject`` and store it.

    Raises a StorbenchError for what stops the run before it is stored (bad flags,
    an unusable target); afterwards, every ending is a RunOutcome.
    """
    rep: Reporter = reporter or NullReporter()
    clock = Phases()
    kind = kinds.choose(spec)
    planned = plan_run(spec, subject, kind)  # the kind checked the subject there
    target = _as_target(kind, subject)
    baseline = _baseline(spec, store)
    check_baseline(baseline, planned.plan)
    traced = _traced(spec, subject)
    if spec.probe_metadata and (target is None or (
            target.probe_dir() is None and target.kind != "directory"
            and (not isinstance(target, ProbesItself) or target.own_probe() is None))):
        raise ConfigError(f"--probe-metadata runs on this machine; it cannot run on the"
                          f" {subject.kind} target {subject.name}")
    fio = _local_fio(spec, target)
    tmp = Path(tempfile.gettempdir())
    for leftover in leftovers(tmp):  # work directories of runs that were killed
        if remove_marked(leftover.path, WORKDIR_WAIT_S):
            rep.leftover_removed(leftover)
    workdir = create_marked(run_workdir(planned.uid), planned.uid)
    try:
        with SignalGuard() as guard:
            if fio is not None:
                checker = FioProcess(fio, workdir, guard, Confinement())
                checker.validate_all([(t.jobfile.render(), f"for test {t.name!r}")
                                      for t in planned.plan.tests])
            for leftover in subject.leftovers():
                subject.remove_leftover(leftover)
                rep.leftover_removed(leftover)
            try:
                subject.check(planned.plan, fio, workdir)
                guard.check()
                clock.since("preflight")
                environment: Environment = {**subject.describe(fio),
                                            "storbench_version": __version__}
                _say_confinement(environment, spec.allow_exec, rep)
                for note in planned.plan.notes:
                    rep.note(note)
                workload = planned.plan.workload + spec.shaping()
                if spec.series:
                    _say_another_workload(store, spec.series, workload, rep)
                run_id = store.begin_run(
                    uid=planned.uid, suite=planned.plan.suite_name, target=subject.name,
                    environment=dict(environment),
                    settings={**spec.settings(planned.plan.suite_name), **kind.settings(),
                              **subject.settings(), "workload": workload},
                    storbench_version=__version__, fio_version=environment.get("fio_version"),
                    label=spec.label, tags=spec.tags, lock_path=str(workdir / MARKER),
                    series=spec.series or auto_series(workload, subject.name,
                                                      TargetFacts.of(environment)))
            except BaseException:  # what check started (SSH sessions, servers) ends here,
                # also when check itself failed half-way; the first failure is what is said
                try:
                    subject.cleanup(hurry=guard.signum is not None)
                except StorbenchError as exc:
                    rep.note(_cleaning_up(exc))
                raise
            ctx = RunContext(subject, target, planned, store, run_id, rep, guard,
                             environment, clock)
            if traced is not None:
                ctx.explain_with(traced(workdir))
            try:
                failure: BaseException | None = None
                try:
                    if target is not None:
                        ctx.prepare(fio)
                        ctx.executor = Gated(target.executor(fio, workdir, guard),
                                             [target.scratch_path(planned.uid)],
                                             allow_exec=spec.allow_exec,
                                             reads_from=[workdir, *_put_dirs(target)])
                        ctx.start(spec.probe_metadata, spec.timeout_s)
                    else:
                        rep.run_started(run_id, planned.plan, NO_SCRATCH)
                    kind.measure(ctx)
                except BaseException as exc:  # cleaned up first, then recorded
                    failure = exc
                ctx.stop_probe()
                with clock.phase("cleanup"):
                    failure = _clean_up(subject, kind, failure, rep,
                                        hurry=guard.signum is not None
                                        or isinstance(failure, TargetHung))
                if failure is not None:
                    raise failure
                guard.check()  # a signal before the run is finished: it is interrupted
                why = kind.failed()
                if why is not None:
                    raise StorbenchError(why)
                _finish(store, run_id, ctx, kind, baseline, spec)
            except BaseException as exc:
                error = _record_failure(store, run_id, exc, kind, ctx)
                return RunOutcome(store.get_run(run_id), error)
            return RunOutcome(store.get_run(run_id))
    finally:
        remove_marked(workdir, WORKDIR_WAIT_S)


@dataclass(frozen=True)
class TargetOutcome:
    target: Subject
    outcome: RunOutcome | None  # None: it failed before its run was stored
    error: StorbenchError | None


def run_all(targets: Sequence[Subject], spec: RunSpec, store: Store,
            reporter_for: Callable[[Subject], Reporter],
            on_done: Callable[[TargetOutcome], None] = lambda done: None,
            ) -> list[TargetOutcome]:
    """Several targets in one command, one after the other, each through ``run_on``.

    Every target's quick checks run before the first starts. A target that fails
    does not stop the others; an interrupt (Ctrl-C, SIGTERM) stops them all. With
    several targets, each run's label names its target. ``on_done`` hears of each
    target as it ends (if it fails, say in rendering, that target's outcome carries it as
    its error and the others still run).
    """
    spec.check()
    kind = kinds.choose(spec)
    kind.plan(make_plan(spec, NO_SCRATCH))  # a bad flag: once
    _baseline(spec, store)
    for target in targets:  # a target the kind cannot run on: before any is reached
        fio_target(kind, target)
        _traced(spec, target)
    for target in targets:
        target.preflight()
    done: list[TargetOutcome] = []
    for target in targets:
        label = spec.label if len(targets) == 1 else (
            f"{spec.label}-{target.short_name}" if spec.label else target.short_name)
        series = spec.series if len(targets) == 1 or not spec.series else (
            f"{spec.series}-{target.short_name}")
        reporter = reporter_for(target)
        try:
            outcome = run_on(target, replace(spec, label=label, series=series), store,
                             reporter)
            ended = TargetOutcome(target, outcome, outcome.error)
        except StorbenchError as exc:
            ended = TargetOutcome(target, None, exc)
        try:
            on_done(ended)
        except Exception as exc:  # showing it failed (a bug): it is stored; the next go on
            why = StorbenchError(f"{target.name}: its run is stored, but showing it failed:"
                                 f" {type(exc).__name__}: {exc}")
            ended = TargetOutcome(target, ended.outcome, ended.error or why)
        done.append(ended)
        if isinstance(ended.error, Interrupted):
            break
    return done


def _clean_up(subject: Subject, kind: Measurement, failure: BaseException | None,
              rep: Reporter, *, hurry: bool) -> BaseException | None:
    """The kind's and the subject's cleanup, on every path. When the run already failed,
    a cleanup that fails too is said (a note), and the first failure is what the run
    ended with."""
    for cleanup in (kind.cleanup, subject.cleanup):
        try:
            cleanup(hurry)
        except StorbenchError as exc:
            if failure is None:
                failure = exc
            else:
                rep.note(_cleaning_up(exc))
    return failure


def _cleaning_up(exc: StorbenchError) -> str:
    """A cleanup's failure, said after the run's own ("cleaning up:" once: a cluster's
    cleanup says it in its error, which is also a run's own where nothing else failed)."""
    return f"storbench: cleaning up: {str(exc).removeprefix('cleaning up: ')}"


def _say_confinement(environment: Environment, allow_exec: bool, rep: Reporter) -> None:
    """What keeps fio in the run's places, stored; said once when it is not the kernel."""
    said = str(environment.get("confinement", ""))
    if allow_exec and said:
        environment["confinement"] = ("none: --allow-exec (the job file is trusted to run"
                                      " commands, and fio runs unconfined)")
    elif said.startswith("none"):
        rep.note(f"storbench: fio is not confined by the kernel here ({said[6:]}); the"
                 " job-file checks still keep it in the scratch directory")


def _local_fio(spec: RunSpec, target: Target | None) -> FioBinary | None:
    """This machine's fio: required where it runs the I/O or is the client; elsewhere
    (pods, a kind's own engine) it only checks job files early, when there is one."""
    if target is not None and target.needs_local_fio:
        return find_fio(spec.fio)
    try:
        return find_fio(spec.fio)
    except StorbenchError:
        return None


def _say_another_workload(store: Store, series: str, workload: str, rep: Reporter) -> None:
    """A series named with --series, joined by a run of another workload than its last
    run's (its job file edited, another --size): said, since `history` and `check
    --no-change` read what changed as the storage's (a series named by storbench has the
    workload in its name, so an edit starts another)."""
    ids = series_runs(store, series)
    if not ids:
        return
    was = store.get_run(ids[-1], with_results=False).settings.get("workload")
    if isinstance(was, str) and was != workload:  # (runs stored before it was kept: none)
        rep.note(f"series {series!r}: its last run (#{ids[-1]}) ran {was}, this one runs"
                 f" {workload}: `history` and `check --no-change` will read the difference"
                 " as the storage's; give the new workload its own --series")


def _traced(spec: RunSpec, target: Subject) -> Callable[[Path], Tracer] | None:
    """What follows fio's I/O for --explain, given storbench's work directory (None: not
    asked); ConfigError where it cannot."""
    if not spec.explain:
        return None
    if isinstance(target, TracesHosts):
        return target.tracer()
    if not isinstance(target, Traceable):
        where = ("in pods: a pod (Pod Security \"restricted\") may not load programs into"
                 " the kernel, and its node is not this machine" if target.kind == "kubernetes"
                 else f"for {target.kind}")
        raise ConfigError(f"--explain traces fio's I/O through a kernel's block layer; it is"
                          f" not available {where}")
    why = layers.usable()
    if why is not None:
        raise ConfigError(why)
    path = target.traced_path()
    return lambda directory: Here(path, directory)


def _baseline(spec: RunSpec, store: Store) -> Run | None:
    """The baseline run, found before anything runs (a typo fails now, not after the
    benchmark)."""
    if spec.baseline is None:
        return None
    return store.get_run(store.resolve_baseline(spec.baseline))


def _finish(store: Store, run_id: int, ctx: RunContext, kind: Measurement,
            baseline: Run | None, spec: RunSpec) -> None:
    """The kind's warnings and section, verdicts and the baseline: judged once, stored."""
    stored = store.get_run(run_id)
    found = kind.warnings(stored)
    section = recorded(kind)
    stored = replace(stored, data={**stored.data, **section})
    verdicts = evaluate(stored, unresolvable="fail")
    changes = regressions(stored, baseline, spec.max_regression) if baseline is not None else []
    store.finish_run(run_id, "completed", data={**ctx.probe_summary(), **ctx.clock.record(),
                                                **section, **ctx.explained_section()},
                     warnings=found, verdicts=verdicts, regressions=changes)


def _record_failure(store: Store, run_id: int, exc: BaseException,
                    kind: Measurement, ctx: RunContext | None = None) -> StorbenchError:
    """Store a run that did not complete as failed or interrupted, with what its kind
    measured; the error to report.

    Ctrl-C arriving as KeyboardInterrupt becomes Interrupted; anything that is not a
    StorbenchError (a bug) is stored and raised again, with its traceback.
    """
    if isinstance(exc, KeyboardInterrupt):
        exc = Interrupted(2)
    status = "interrupted" if isinstance(exc, Interrupted) else "failed"
    try:
        measured = recorded(kind)
    except Exception:  # a kind cut short may have nothing whole to say: its error stands
        measured = {}
    if ctx is not None:  # what was explained of the tests that ran
        measured = {**measured, **ctx.explained_section()}
    store.finish_run(run_id, status, str(exc) or type(exc).__name__, data=measured)
    if not isinstance(exc, StorbenchError):
        raise exc
    return exc


def _put_dirs(target: Target) -> list[Path]:
    """Where the target put files of storbench's that fio may read (hosts: the SSH
    sessions' directories holding a replay's iolog)."""
    return [Path(d) for d in target.put_dirs()] if isinstance(target, PutsFiles) else []
