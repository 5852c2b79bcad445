"""Why an fio invocation failed, in fio's own words ("" when it did not)."""

from __future__ import annotations

import os

from storbench.analysis.caches import flag
from storbench.execute.base import Execution, fio_message
from storbench.result.model import TestResult
from storbench.target.base import Deadline
from storbench.workload.options import COMMAND_ENGINES
from storbench.workload.plan import seconds

IDLE_S = 5.0  # no I/O for longer than this when a test's time is up: the target hangs


def failure(name: str, execution: Execution, checked: list[tuple[str, TestResult]],
             missing: list[str], noun: str, deadline: Deadline | None) -> str:
    """Why the invocation failed, in fio's words ("" when it did not)."""
    if execution.lost:
        return (f"fio {'server' if noun == 'host' else noun} {', '.join(execution.lost)}"
                f" disconnected during test {name!r} (the {noun} or its fio died, or the"
                f" network failed); the other {noun}s were stopped")
    stuck = (f"; fio (PID {', '.join(map(str, execution.stuck))}) did not end when killed:"
             " it is stuck in the kernel and was left running" if execution.stuck else "")
    if execution.timed_out:
        limit = deadline.seconds if deadline is not None else 0.0
        why = deadline.why if deadline is not None else "its time limit"
        if execution.quiet:  # it had said how it went every second, then nothing
            said = ", ".join(f"{noun} {w} for {s:.0f} s" for w, s in execution.quiet)
            return (f"fio went quiet during test {name!r}: no word from it in {said}, where"
                    " it says how it goes every second; the run was stopped at its time"
                    f" limit of {limit:.0f} s ({why}){stuck}. That is the connection to"
                    " fio, not the storage: a pod's passes through its node's kubelet (does"
                    " the node answer?)")
        idle = execution.idle_s if execution.idle_s is not None else execution.wall_s
        if idle > IDLE_S:
            return (f"the target stopped responding during test {name!r} (no I/O for"
                    f" {idle:.0f} s; its time limit of {limit:.0f} s is {why}); the run was"
                    f" stopped{stuck}. Check the target (a network file system whose server"
                    " does not answer?), or give more time with --timeout")
        return (f"test {name!r}: no result from {', '.join(missing) or 'fio'} within"
                f" {limit:.0f} s ({why}); the run was stopped{stuck}. Give more time with"
                " --timeout")
    said = fio_message(execution.stderr + "\n" + _preamble(execution.raw_json))
    failed = [(where, r) for where, r in checked if r.error]
    if failed:
        where, r = failed[0]
        return f"{_job_failed(r, where)}: {said}"
    if execution.returncode != 0 or missing:
        tail = f"; no result from {', '.join(missing)}" if missing else ""
        return f"fio exited with status {execution.returncode}{tail}: {said}"
    # a row of zeros, or none at all, is no figure; nor is an I/O issued in no time that
    # moved no byte (fio 3.33 pacing fdatasync'd writes by Poisson: 1 I/O, 0 bytes, 0 ms),
    # but from the exec engine, which runs a program and moves none (11 "I/Os" in 1 s)
    nothing = [(w, r) for w, r in checked if not any(
        d.total_ios and (d.io_bytes or r.options.get("ioengine") in COMMAND_ENGINES)
        for _, d in r.directions())]
    if nothing:
        where, r = nothing[0]
        on = f" on {where}" if where else ""
        return (f"test {name!r}: fio's job {r.name!r} did no I/O{on} in the time it measured"
                f" (fio ran {r.elapsed_s:.0f} s): no figure to show. Its runtime, ramp_time or"
                f" size leave nothing to measure{_poisson_synced(r)}")
    untimed = [(w, r) for w, r in checked if ended_in_ramp(r)]
    if untimed:  # the ramp's I/Os, counted: a figure of what was not measured
        where, r = untimed[0]
        on = f" on {where}" if where else ""
        ios = sum(d.total_ios for _, d in r.directions())
        ramp = seconds(r.options.get("ramp_time") or "0") or 0.0
        return (f"test {name!r}: fio's job {r.name!r} ended inside its ramp_time"
                f" ({ramp:g} s){on}: its {ios:,} I/Os were the ramp's and"
                " fio timed none of them: no figure to show. fio 3.33 ends so a"
                " rate-limited job whose runtime is no longer than its ramp_time (often),"
                " fdatasync'd writes paced by Poisson arrivals, and a job whose size is"
                " done within the ramp: give it a runtime longer than its ramp_time, evenly"
                " spaced arrivals or more to do")
    return ""


def _poisson_synced(r: TestResult) -> str:
    """Why a job of synced writes paced by Poisson arrivals did nothing, if it is one
    (fio 3.33 issued one write a job with fdatasync=1 or fsync=1 from 700 writes/s on)."""
    synced = any(r.options.get(o) not in (None, "", "0") for o in ("fsync", "fdatasync"))
    if r.options.get("rate_process") != "poisson" or not synced:
        return ""
    return (", or its synced writes are paced by Poisson arrivals: fio 3.33 issues one such"
            " write a job (rate_process=linear spaces them evenly)")


def ended_in_ramp(r: TestResult) -> bool:
    """fio moved data but timed none of it, the job having a ramp_time: it never left its
    ramp (what it counted is the ramp's), unless it was told to time less (a file
    operation's engine times its I/O itself, or not with disable_lat)."""
    if not seconds(r.options.get("ramp_time") or "0") or r.options.get("stats") == "0" or (
            flag(r.options, "disable_lat") or flag(r.options, "disable_clat")):
        return False
    moved = [d for _, d in r.directions() if d.total_ios]
    return bool(moved) and all(d.clat is None and d.lat is None for d in moved)


def job_errors(failed: list[TestResult], text: str) -> str:
    """Why a run of fio's output (an import) failed: each failed job's error number and its
    meaning, then fio's own error lines where the output holds them (its JSON's preamble,
    the job lines of its normal output)."""
    jobs = "; ".join(_job_failed(r) for r in failed)
    lines = dict.fromkeys(ln.strip() for ln in _preamble(text).splitlines()
                          if ln.strip().startswith("fio:") or "error=" in ln)
    return f"{jobs}: {' | '.join(list(lines)[:6])}" if lines else jobs


def _job_failed(r: TestResult, where: str = "") -> str:
    """'fio job 'w' failed [on HOST] with error 28 (No space left on device)'."""
    on = f" on {where}" if where else ""
    return f"fio job {r.name!r} failed{on} with error {r.error} ({_strerror(r.error)})"


def _preamble(raw: str) -> str:
    """What fio printed into its output file before the JSON: its error messages."""
    start = raw.find("{")
    return raw if start == -1 else raw[:start]


def _strerror(errno_value: int) -> str:
    try:
        return os.strerror(errno_value)
    except ValueError:
        return "unknown error"
