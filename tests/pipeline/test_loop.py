"""The run loop itself, down the paths a real fio cannot be made to take on demand.

A stand-in target records each step the loop asks of it and fails at a chosen one;
fio's output is replayed from real fio runs (tests/data/fio, made by
scripts/record-fio-json). The real targets are proven by their own tests against
real fio, real fio servers and a real cluster (tests/cli, tests/target).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from storbench.errors import FioError, Interrupted, StorbenchError, TargetError
from storbench.execute import Executor, FioBinary, FioJob, SignalGuard
from storbench.execute.replay import Recording, ReplayExecutor
from storbench.pipeline.loop import RunOutcome, run_all, run_on
from storbench.pipeline.reporter import NullReporter
from storbench.pipeline.spec import RunSpec
from storbench.target.base import Deadline, Leftover
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"
RANDREAD = Recording.load(DATA / "randread.json")
RANDWRITE = Recording.load(DATA / "randwrite-2jobs.json")
FAILED = Recording.load(DATA / "failed-job.json", returncode=1)
JOB_ERROR = Recording.load(DATA / "job-error.json", returncode=1)
IN_RAMP = Recording.load(DATA / "ended-in-ramp.json")
GROUPED = Recording.load(DATA / "steady-grouped.json")

JOB = ("[global]\nbs=4k\nsize=4m\ntime_based\nruntime=2\n"
       "[randread]\nrw=randread\n")


class StepTarget:
    """A stand-in Target: logs every call, raises at ``fail_at`` (the Nth time)."""

    kind = "stand-in"
    worker_noun = "job"
    needs_local_fio = False
    series_logs = False

    def __init__(self, tmp: Path, executor: Executor, fail_at: str = "",
                 fail_on_call: int = 1) -> None:
        self.tmp = tmp
        self.replay = executor
        self.fail_at = fail_at
        self.fail_on_call = fail_on_call
        self.calls: list[str] = []

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_at and self.calls.count(name) == self.fail_on_call:
            raise TargetError(f"stand-in failure in {name}")

    name = property(lambda self: "stand-in")
    short_name = property(lambda self: "stand-in")

    def settings(self) -> dict[str, Any]:
        return {}

    def preflight(self) -> None:
        self._step("preflight")

    def scratch_path(self, uid: str) -> Path:
        return self.tmp / f"storbench-{uid}"

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self._step("check")

    def leftovers(self) -> list[Leftover]:
        return []

    def remove_leftover(self, leftover: Leftover) -> None:
        pass

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        return [FioJob("", f"t{index:03d}.fio", jobfile.render())]

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        self._step("describe")
        return {"target": {"kind": self.kind}, "ram_bytes": 2**30}

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        self._step("prepare")

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        self._step("executor")
        return self.replay

    def probe_dir(self) -> Path | None:
        return None

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        self._step("before_test")

    def deadline(self, test: PlannedTest) -> Deadline | None:
        return None

    def cleanup(self, hurry: bool = False) -> None:
        self._step("cleanup")


def job_spec(tmp_path: Path, **kw: Any) -> RunSpec:
    path = tmp_path / "randread.fio"
    path.write_text(JOB)
    return RunSpec(job_file=path, **kw)


def run(target: StepTarget, spec: RunSpec, store) -> RunOutcome:
    return run_on(target, spec, store)


def test_a_run_goes_through_every_step_in_order(tmp_path, store):
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD, RANDREAD]))
    outcome = run(target, job_spec(tmp_path, repeat=2, assertions=("randread.iops > 1",)),
                  store)
    assert outcome.error is None and outcome.run.status == "completed"
    assert target.calls == ["check", "describe", "prepare", "describe", "executor",
                            "before_test", "before_test", "cleanup"]
    assert [t.repeat for t in outcome.run.tests] == [0, 1]
    # judged once, when the run finished; stored with it
    assert [v.assertion for v in outcome.run.judged] == ["randread.iops > 1"]
    assert store.get_run(outcome.run.id).verdicts == outcome.run.verdicts


@pytest.mark.parametrize("step", ["check", "describe"])
def test_a_failure_before_the_run_is_stored_stores_nothing(step, tmp_path, store):
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD]), fail_at=step)
    with pytest.raises(TargetError, match=f"stand-in failure in {step}"):
        run(target, job_spec(tmp_path), store)
    assert store.list_runs() == []
    assert "prepare" not in target.calls
    # what check started (ssh sessions, fio servers) is ended all the same, also when
    # check itself failed half-way (a target's check had to clean up after itself)
    assert target.calls.count("cleanup") == 1 and target.calls[-1] == "cleanup"


@pytest.mark.parametrize("step, call", [("prepare", 1), ("describe", 2), ("executor", 1),
                                        ("before_test", 1), ("before_test", 2),
                                        ("cleanup", 1)])
def test_a_failure_in_each_later_phase_is_stored_and_cleaned_up(step, call, tmp_path, store):
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD, RANDREAD]), fail_at=step,
                        fail_on_call=call)
    outcome = run(target, job_spec(tmp_path, repeat=2), store)
    assert isinstance(outcome.error, TargetError)
    assert outcome.run.status == "failed"
    assert outcome.run.error == f"stand-in failure in {step}"
    assert target.calls.count("cleanup") == 1  # cleaned up once, also when cleanup failed
    assert target.calls[-1] == "cleanup"
    assert outcome.run.verdicts is None  # a run that did not complete is not judged


def test_a_repeat_that_fails_keeps_what_completed_and_quotes_fio(tmp_path, store):
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD, FAILED]))
    outcome = run(target, job_spec(tmp_path, repeat=2), store)
    assert isinstance(outcome.error, FioError)
    assert outcome.run.status == "failed"
    assert outcome.run.error == ("fio exited with status 1: fio: file creation disallowed by"
                                 " allow_file_create=0")
    # both invocations are kept verbatim; the first repeat's figures too
    assert [i.returncode for i in outcome.run.invocations] == [0, 1]
    assert outcome.run.tests[0].result.read is not None and outcome.run.tests[0].repeat == 0
    assert target.calls[-1] == "cleanup"


def test_a_job_error_is_reported_with_its_errno_and_fio_words(tmp_path, store):
    target = StepTarget(tmp_path, ReplayExecutor([JOB_ERROR]))
    outcome = run(target, job_spec(tmp_path), store)
    assert outcome.run.status == "failed"
    assert outcome.run.error.startswith("fio job 'full' failed with error 28 (No space left on"
                                        " device): fio: io_u error on file /dev/full")
    assert "error=No space left on device" in outcome.run.error  # the preamble fio wrote


def test_a_job_that_never_left_its_ramp_fails_and_shows_no_figure(tmp_path, store):
    """fio 3.33 ends a rate-limited job whose runtime is its ramp_time inside the ramp
    (exit status 0): it counted the ramp's I/Os and timed none. Stored, that was a test
    of 7 IOPS with no latency; it is a failure that says why."""
    target = StepTarget(tmp_path, ReplayExecutor([IN_RAMP]))
    outcome = run(target, job_spec(tmp_path), store)
    assert isinstance(outcome.error, FioError) and outcome.run.status == "failed"
    assert outcome.run.error.startswith(
        "test 'randread.fio': fio's job 'inramp' ended inside its ramp_time (1 s): its 7 I/Os"
        " were the ramp's and fio timed none of them: no figure to show."), outcome.run.error
    assert outcome.run.error.endswith("give it a runtime longer than its ramp_time, evenly"
                                      " spaced arrivals or more to do")
    assert target.calls[-1] == "cleanup"


def test_a_group_of_jobs_is_stored_as_stopping_after_its_own_time(tmp_path, store):
    """4 jobs judged as one group reached steady state after 1.85 s each (their read's
    runtime); fio's job_runtime, 7.4 s, is their four times summed. The stored run said
    the test stopped after 7.4 s."""
    outcome = run(StepTarget(tmp_path, ReplayExecutor([GROUPED])), job_spec(tmp_path), store)
    assert outcome.error is None and outcome.run.status == "completed"
    [stored] = store.get_run(outcome.run.id).tests
    test = stored.result
    assert test.jobs == 4 and test.steady_state is not None and test.steady_state.attained
    assert test.steady_state.stopped_after_s == test.read.runtime_ms / 1000 == 1.851


def test_output_fio_cannot_have_written_fails_the_run(tmp_path, store):
    garbage = Recording("fio: this is not json", "", 0)
    target = StepTarget(tmp_path, ReplayExecutor([garbage]))
    outcome = run(target, job_spec(tmp_path), store)
    assert outcome.run.status == "failed" and isinstance(outcome.error, FioError)
    assert target.calls[-1] == "cleanup"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_between_tests_interrupts_the_run(sig, code, tmp_path, store):
    def after(n: int) -> None:
        if n == 1:
            os.kill(os.getpid(), sig)  # a real signal, caught by the run's SignalGuard

    replay = ReplayExecutor([RANDREAD, RANDREAD, RANDREAD], after_run=after)
    target = StepTarget(tmp_path, replay)
    outcome = run(target, job_spec(tmp_path, repeat=3), store)
    assert isinstance(outcome.error, Interrupted) and outcome.error.exit_code == code
    assert outcome.run.status == "interrupted"
    assert len(replay.ran) == 1  # no test started after the signal
    assert outcome.run.tests == []  # an interrupted test's partial numbers are not stored
    assert target.calls[-1] == "cleanup"


@pytest.mark.parametrize("said", ["cleaning up: Pod team-a/storbench-ab12-1: still there",
                                  "scratch directory /mnt/x/storbench-ab12 left"])
def test_a_cleanup_that_fails_after_a_signal_is_said_with_cleaning_up_once(said, tmp_path,
                                                                          store):
    """A cluster's cleanup says "cleaning up:" in its error (the run's own where nothing
    else failed); after a signal it is a note, which said it twice."""
    class Leaving(StepTarget):
        def cleanup(self, hurry: bool = False) -> None:
            super().cleanup(hurry)
            raise TargetError(said)

    class Notes(NullReporter):
        def __init__(self) -> None:
            self.notes: list[str] = []

        def note(self, text: str) -> None:
            self.notes.append(text)

    replay = ReplayExecutor([RANDREAD, RANDREAD], after_run=lambda n: os.kill(
        os.getpid(), signal.SIGINT))  # a real signal, caught by the run's SignalGuard
    notes = Notes()
    outcome = run_on(Leaving(tmp_path, replay), job_spec(tmp_path, repeat=2), store, notes)
    assert isinstance(outcome.error, Interrupted) and outcome.run.status == "interrupted"
    assert notes.notes[-1] == "storbench: cleaning up: " + said.removeprefix("cleaning up: ")


def test_a_worker_that_dies_fails_the_run_with_its_words(tmp_path, store):
    died = Recording("", raises=TargetError("pod x stopped during the test: OOMKilled"))
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD, died]))
    outcome = run(target, job_spec(tmp_path, repeat=2), store)
    assert outcome.run.status == "failed" and "OOMKilled" in outcome.run.error
    assert target.calls[-1] == "cleanup"


def test_a_baseline_that_does_not_exist_fails_before_anything_runs(tmp_path, store):
    target = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    with pytest.raises(StorbenchError, match="no completed run labelled 'gp3'"):
        run_all([target], job_spec(tmp_path, baseline="gp3"), store, lambda t: None)
    assert target.calls == [] and store.list_runs() == []


def test_baseline_regressions_are_judged_once_and_stored(tmp_path, store):
    first = run(StepTarget(tmp_path, ReplayExecutor([RANDREAD])),
                job_spec(tmp_path, label="base"), store)
    second = run(StepTarget(tmp_path, ReplayExecutor([RANDREAD])),
                 job_spec(tmp_path, baseline="base"), store)
    assert second.error is None
    (change,) = [c for c in second.run.regressions if c.figure == "randread read IOPS"]
    assert change.baseline_run == first.run.id and change.worse_by == pytest.approx(0)
    assert not change.failed and second.run.failed_checks == []


def test_several_targets_go_on_after_one_fails(tmp_path, store):
    bad = StepTarget(tmp_path, ReplayExecutor([RANDREAD]), fail_at="prepare")
    good = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    done = run_all([bad, good], job_spec(tmp_path, label="x"), store, lambda t: None)
    assert [d.outcome.run.status for d in done] == ["failed", "completed"]
    assert [d.outcome.run.label for d in done] == ["x-stand-in", "x-stand-in"]


def test_a_target_whose_result_cannot_be_shown_does_not_stop_the_next(tmp_path, store):
    """A bug in showing the first target's result (stood in: on_done raises) ends neither
    the command nor the second target; the first's outcome says what failed."""
    shown = []

    def on_done(done) -> None:
        shown.append(done.outcome.run.id)
        if len(shown) == 1:
            raise KeyError("binding_mode")

    first = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    second = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    done = run_all([first, second], job_spec(tmp_path), store, lambda t: None, on_done)
    assert [d.outcome.run.status for d in done] == ["completed", "completed"]
    assert len(shown) == 2 and done[1].error is None
    assert "its run is stored, but showing it failed: KeyError: 'binding_mode'" in str(
        done[0].error)


def test_an_interrupt_stops_the_targets_after_it(tmp_path, store):
    def after(n: int) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    first = StepTarget(tmp_path, ReplayExecutor([RANDREAD], after_run=after))
    second = StepTarget(tmp_path, ReplayExecutor([RANDREAD]))
    done = run_all([first, second], job_spec(tmp_path), store, lambda t: None)
    assert len(done) == 1 and isinstance(done[0].error, Interrupted)
    assert second.calls == ["preflight"]


def test_a_signal_while_the_run_is_finished_leaves_status_and_exit_code_agreeing(tmp_path,
                                                                                store):
    """The signal arrives at the very end (during the target's cleanup): the run is
    stored interrupted, and the error says so (exit 130), never 'completed' + 130."""

    class LateSignal(StepTarget):
        def cleanup(self, hurry: bool = False) -> None:
            super().cleanup(hurry)
            os.kill(os.getpid(), signal.SIGINT)

    outcome = run(LateSignal(tmp_path, ReplayExecutor([RANDREAD])), job_spec(tmp_path), store)
    assert outcome.run.status == "interrupted"
    assert isinstance(outcome.error, Interrupted) and outcome.error.exit_code == 130


def test_a_marker_being_written_is_never_taken_for_a_crashed_run(tmp_path):
    """Runs starting at the same moment: one finds the other's work directory with its
    marker not yet readable. It must leave it alone (removing it failed a concurrent
    run: "No such file or directory: .../002-check.fio"); only an old unreadable marker
    is a crashed run's."""
    from storbench.execute.workdir import MARKER, create_marked, leftovers

    live = create_marked(tmp_path / "storbench-fio-live", "live")
    assert leftovers(tmp_path) == []  # its PID (ours) is alive
    assert sorted(p.name for p in live.iterdir()) == [MARKER]  # nothing written aside left
    fresh = tmp_path / "storbench-fio-fresh"
    fresh.mkdir()
    (fresh / MARKER).write_text("")  # mid-write, as a concurrent run would be seen
    assert leftovers(tmp_path) == []
    old = tmp_path / "storbench-fio-old"
    old.mkdir()
    (old / MARKER).write_text("{")
    os.utime(old / MARKER, (1, 1))
    assert [lo.path for lo in leftovers(tmp_path)] == [old]
