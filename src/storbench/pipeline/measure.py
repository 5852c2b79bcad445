"""The third contract: a kind of run (``Measurement``), and what the one run loop gives it
(``RunContext``).

A kind of run (a suite with repeats, preconditioning rounds, an IOPS-latency curve, …;
one file each in ``pipeline/kinds/``) says which tests it runs (``plan``), runs them
through the context (``measure``: each step executed, parsed, warned about and stored
as the loop does it for every kind), and says what it found beyond the tests' figures:
its section of the run record (``record``, typed in ``result/sections.py``) and the
warnings it judges across them (``warnings``). The loop (pipeline/loop.py) does the
rest, alike for every kind and every target: preflight, prepare, the interrupt and
crash path, cleanup, verdicts, the outcome.
"""

from __future__ import annotations

import functools
import time
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar, Protocol

from storbench import __version__
from storbench.analysis import warnings
from storbench.analysis.assertions import Assertion
from storbench.errors import FioError, TargetHung
from storbench.execute import Execution, FioBinary, SignalGuard
from storbench.execute.base import Executor, FioJob
from storbench.execute.probe import MetadataProbe, Probe, is_network_fs
from storbench.pipeline.explained import Explained, Tracer, tracing
from storbench.pipeline.failures import failure
from storbench.pipeline.phases import Phases, io_phase
from storbench.pipeline.reporter import Reporter
from storbench.pipeline.steps import PlannedRun, Step, make_step, reported
from storbench.result.environment import Environment
from storbench.result.facts import TargetFacts
from storbench.result.fio_json import parse_fio_json, parse_per_host
from storbench.result.fio_logs import read_series
from storbench.result.model import TestResult
from storbench.result.record import Invocation, Run, Warning
from storbench.result.sections import Section
from storbench.store import Store
from storbench.target.base import Deadline, ProbesItself, Subject, Target
from storbench.workload.plan import Plan, PlannedTest

PROBE_IDLE_S = 3.0
RecordSection = Section[Any] | None  # where a kind keeps its record (None: nowhere)


class Measurement(Protocol):
    """A kind of run. One object per run: it may keep what it measures as it goes."""

    kind: ClassVar[str]  # its name ("suite", "rounds", "curve"), stored with the run
    fixed_schedule: ClassVar[bool]  # its steps are known before it starts (a curve's are not)
    # it runs fio's tests through the loop on a Target (False: it drives its own engine on
    # its Subject, as k8s lifecycle creates volumes; the loop prepares no fio for it)
    drives_fio: ClassVar[bool]
    # where its record is kept in the run (result/sections.py; None: it keeps none); what
    # is said of it, analysis/views says
    section: ClassVar[RecordSection]

    def check(self) -> None:
        """ConfigError for what this kind cannot do, before anything runs."""
        ...

    def check_target(self, target: Target) -> None:
        """ConfigError for a target this kind cannot run on, before anything is created
        there (a replay needs one that takes its iolog)."""
        ...

    def check_subject(self, subject: Subject) -> None:
        """A kind that drives its own engine: ConfigError for a subject it cannot measure
        (k8s lifecycle measures a StorageClass), before anything is created."""
        ...

    def plan(self, plan: Plan) -> Plan:
        """The tests (and how often each may run) of this kind, from the suite's or job
        file's tests."""
        ...

    def measure(self, ctx: RunContext) -> None:
        """Run its steps through ``ctx`` (``ctx.executor`` runs fio) until it has its
        answer."""
        ...

    def settings(self) -> dict[str, Any]:
        """What it was asked, stored with the run's settings (beside RunSpec's)."""
        ...

    def record(self) -> object | None:
        """Its record (typed: result/sections.py), kept in the run under ``section``; what
        it measured, also when the run did not complete; None: nothing."""
        ...

    def warnings(self, run: Run) -> list[Warning]:
        """What it judges across the stored results (repeats, rounds), once measured."""
        ...

    def cleanup(self, hurry: bool) -> None:
        """Remove what it created itself (a lifecycle's volumes), on every ending; raise
        a StorbenchError naming what could not be removed."""
        ...

    def failed(self) -> str | None:
        """Why the run failed although it measured (a volume that did not come up,
        writes lost), or None."""
        ...

    def own_assertion(self, assertion: Assertion) -> bool:
        """Whether ``assertion`` names the kind's own answers (curve.max.iops, an
        application's postgresql.tps), not a test's figure; checked here as far as it can
        be before the run (ConfigError for one it could never pass)."""
        ...


class Plain:
    """The defaults of a kind that needs them: it is asked nothing beyond the RunSpec,
    keeps no record beyond its tests, judges nothing across its results, creates nothing
    of its own, and fails only by an exception. A kind inherits them and writes what it
    does differently."""

    section: ClassVar[RecordSection] = None
    drives_fio: ClassVar[bool] = True

    def record(self) -> object | None:
        return None

    def settings(self) -> dict[str, Any]:
        return {}

    def check_target(self, target: Target) -> None:
        pass

    def check_subject(self, subject: Subject) -> None:
        pass

    def warnings(self, run: Run) -> list[Warning]:
        return []

    def cleanup(self, hurry: bool) -> None:
        pass

    def failed(self) -> str | None:
        return None

    def own_assertion(self, assertion: Assertion) -> bool:
        # its view's answers are named after its section (analysis/views), judged once
        # measured
        return self.section is not None and assertion.test == self.section.key


class RunContext:
    """What a kind of run gets from the loop for one run on one subject: steps run,
    parsed, warned about and stored; notes; phases on the run's clock; the signal guard.
    A kind that drives fio has its target (``target``) and the executor (``executor``);
    one that drives its own engine has only its ``subject``."""

    def __init__(self, subject: Subject, target: Target | None, planned: PlannedRun,
                 store: Store, run_id: int, rep: Reporter, guard: SignalGuard,
                 environment: Environment, clock: Phases) -> None:
        self.subject = subject
        self._target = target
        self._executor: Executor | None = None
        self.planned = planned
        self.store = store
        self.run_id = run_id
        self.rep = rep
        self.guard = guard
        self.environment = environment
        self.clock = clock
        self.probe: Probe | None = None
        self.stored: list[TestResult] = []  # the last step's results
        self.ordinal = 0  # of the next result stored
        self.ends: float | None = None  # monotonic time the run's --timeout ends
        self.timeout_s: float | None = None
        self.explained: Explained | None = None  # --explain: each test's layers

    @property
    def target(self) -> Target:
        """Where the loop runs fio (a kind that drives fio has one: the loop checked)."""
        if self._target is None:
            raise AssertionError(f"{self.subject.name}: no fio runs there through the loop")
        return self._target

    @property
    def executor(self) -> Executor:
        """What runs fio on the prepared target (the job-file gate in front of it)."""
        if self._executor is None:
            raise AssertionError("fio's executor is made once the target is prepared")
        return self._executor

    @executor.setter
    def executor(self, executor: Executor) -> None:
        self._executor = executor

    def explain_with(self, tracer: Tracer) -> None:
        """Explain each test from here on (--explain), each followed by ``tracer``."""
        self.explained = Explained(tracer)
        for note in tracer.notes:
            self.rep.note(note)

    def explained_section(self) -> dict[str, Any]:
        return self.explained.section() if self.explained is not None else {}

    # --- what a kind uses ------------------------------------------------------------
    def note(self, text: str) -> None:
        self.rep.note(text)

    def phase(self, name: str, **extra: Any) -> AbstractContextManager[dict[str, Any]]:
        return self.clock.phase(name, **extra)

    def step(self, index: int, repeat: int, test: PlannedTest) -> Step:
        """``test``'s invocation number ``index`` on this run's target."""
        return make_step(self.target, self.planned.uid, index, repeat, test)

    def run_step(self, step: Step, keep: set[str]) -> list[TestResult]:
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
        trace, traced = tracing(self.explained, step.test.expected_s)
        if trace is not None:  # bpftrace's attaching and stopping: phases of their own
            traced = self.clock.around(traced, "--explain", test=step.test.name,
                                       repeat=step.repeat)
        try:
            # the test's phase inside its trace: fio's own time, not bpftrace's attaching
            # and its maps printed as it stops (a second or more each, which the phase
            # once held: its measured I/O was then taken to end that much late)
            with traced, self.clock.phase(step.test.name, test=step.test.name,
                                          repeat=step.repeat) as timed:
                execution = self.executor.run(
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
        if trace is not None and self.explained is not None:
            self.explained.add(trace, timed, self.clock.t0, self.stored, self.rep.note)
        return self.stored

    def keep_invocation(self, index: int, jobs: list[FioJob], execution: Execution) -> None:
        """fio's output of a step that measures no test (preconditioning), kept with the
        run as it is."""
        self.store.add_invocation(self.run_id, Invocation(
            index, self._stored_text(jobs), execution.raw_json, execution.returncode,
            execution.stderr, execution.wall_s), [], [])

    def _stored_text(self, jobs: list[FioJob]) -> str:
        """A step's job files as stored: each worker's under its name, when several."""
        if len(jobs) == 1:
            return jobs[0].text
        return "\n".join(f"# {self.target.worker_noun} {j.worker}\n{j.text}" for j in jobs)

    # --- what the loop does around a kind ----------------------------------------------
    def prepare(self, fio: FioBinary | None) -> None:
        with self.clock.phase("prepare"):
            self.target.prepare(self.planned.uid, [s.jobs for s in self.planned.steps],
                                self.guard, self.rep.note)
        described: Environment = {**self.target.describe(fio),
                                  "storbench_version": __version__}
        if described != self.environment:
            self.environment = described
            self.store.update_environment(self.run_id, dict(described),
                                          described.get("fio_version"))
        self.rep.run_started(self.run_id, self.planned.plan,
                             self.target.scratch_path(self.planned.uid))

    def start(self, probe_metadata: bool | None, timeout_s: float | None) -> None:
        """The probe (idle first): a bucket's requests unless turned off, a directory's
        metadata where asked or on a network file system; ``timeout_s`` caps the run from
        here, beyond each test's own limit."""
        ends = time.monotonic() + timeout_s if timeout_s is not None else None
        probe_dir = self.target.probe_dir()
        own = self.target.own_probe() if isinstance(self.target, ProbesItself) else None
        if own is not None:  # an S3 bucket: its own requests
            if probe_metadata is not False:
                self.probe = own
        else:
            if probe_metadata is None:
                probe_metadata = is_network_fs(
                    (self.environment.get("target") or {}).get("fs_type"))
            if probe_metadata and probe_dir is not None:
                self.probe = MetadataProbe(probe_dir)
        if self.probe is not None:
            with self.clock.phase("probe, idle"):
                self.probe.start("idle")
                self.guard.sleep(PROBE_IDLE_S)
                self.probe.stop()
        self.ends, self.timeout_s = ends, timeout_s

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

    def _store(self, step: Step, execution: Execution, ordinal: int,
               deadline: Deadline | None, timed: dict[str, Any]) -> int:
        """Parse, warn and store one invocation; raise when fio or a worker failed."""
        several = len(step.jobs) > 1
        try:
            held = reported(step, execution.aliases)  # (group_reporting's entries' jobs)
            _, parsed = parse_fio_json(execution.raw_json, held)
            per_worker = {execution.aliases.get(k, k): v for k, v in
                          parse_per_host(execution.raw_json, held).items()} if several else {}
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
        if self.probe is not None and timed.get("setup_s"):
            # the probe's samples before fio's I/O began fell in its layout, not its load
            self.probe.split_last(self.clock.t0 + float(timed["start_s"])
                                  + float(timed["setup_s"]), "layout")
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
        facts = TargetFacts.of(self.environment)
        planned = dict(step.test.jobfile.effective())  # the jobs as written: bare flags too
        found = [w for r in results
                 for w in warnings.compute(r, facts, step.test.paced, planned.get(r.name),
                                           step.test.brief, step.test.longer)]
        self.store.add_invocation(
            self.run_id,
            Invocation(step.index, self._stored_text(step.jobs), execution.raw_json,
                       execution.returncode, execution.stderr, execution.wall_s),
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


def recorded(kind: Measurement) -> dict[str, Any]:
    """The kind's record as the run's data keeps it ({} for none)."""
    value = kind.record()
    return kind.section.put(value) if kind.section is not None and value else {}
