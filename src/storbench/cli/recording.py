"""`storbench record` (an application's I/O, kept as a workload) and `storbench workloads`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from storbench.cli.common import (
    NUMBER,
    cli,
    db_option,
    err,
    json_option,
    out,
    read_db_option,
)
from storbench.errors import ConfigError, StorbenchError
from storbench.store import Store
from storbench.workload.guard import plain
from storbench.workload.sizes import format_bytes_iec, parse_size

if TYPE_CHECKING:
    from storbench.workload.trace import Trace

COST_WINDOW_S = 5.0  # --measure-cost --pid: the untraced calls are counted this long


@cli.command()
@click.argument("name")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARGS]...]")
@click.option("--dir", "directory", metavar="DIR",
              type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="File level: the directory whose files the application uses: only their"
                   " I/O is recorded, their names kept relative to it.")
@click.option("--device", metavar="DEVICE",
              help="Block level instead: every request queued on this whole block device"
                   " while COMMAND runs (or for --duration), by any process, with the"
                   " kernel's blk tracer (root). Replay it on a device (--destructive) or,"
                   " as a disk image, in a file.")
@click.option("--pid", "pids", type=click.IntRange(1), multiple=True,
              help="Follow this running process (its threads, and the processes it starts"
                   " from now on) instead of starting COMMAND; repeat it for several (a"
                   " database's server processes that run already).")
@click.option("--duration", type=NUMBER, default=None, metavar="SECONDS",
              help="With --pid: how long to follow it (default: until it ends, and every"
                   " process it started since).")
@click.option("--max-size", default="256m", show_default=True, metavar="SIZE",
              help="Stop recording when the tracer's output grows past this (~60-300 bytes"
                   " per I/O call); what was recorded until then is kept, and said so.")
@click.option("--tracer", type=click.Choice(["auto", "bpftrace", "strace"]), default="auto",
              show_default=True,
              help="File level: bpftrace (eBPF: the kernel records each call, the"
                   " application is not stopped; root) or strace (stops the application"
                   " at each call; any user). auto: bpftrace when it is installed and"
                   " storbench runs as root, else strace.")
@click.option("--measure-cost", is_flag=True,
              help="Say how much tracing slowed the application: COMMAND is run once without"
                   f" it first; with --pid (and --duration), its read and write calls per"
                   f" second are counted for {COST_WINDOW_S:g} s before tracing and while"
                   " traced.")
@click.option("--replace", is_flag=True, help="Replace a workload of the same name.")
@json_option
@db_option
def record(store: Store, name: str, command: tuple[str, ...], directory: Path | None,
           device: str | None, pids: tuple[int, ...], duration: float | None, max_size: str,
           tracer: str, measure_cost: bool, replace: bool, as_json: bool) -> None:
    """Record an application's I/O (on the files under DIR, or on a whole device) as the
    workload NAME, to replay it on any target later (`storbench run TARGET --replay NAME`).

    File level, with bpftrace (eBPF) or strace: every read, write and sync of the
    command's processes and threads on files under DIR, with offsets and times, kept as
    fio's iolog (version 3) in the results database. bpftrace records each call in the
    kernel; strace stops the process twice per call (slower): the time the command took
    traced is said beside the recording.

    Block level (--device), with the kernel's blk tracer through tracefs (it works
    where debugfs is locked down): every request the block layer received for the
    device, before merging, whoever sent it (the page cache's write-back too).

    \b
    Example:
      storbench record pg --dir /var/lib/postgresql -- pgbench -T 30 bench
      storbench record app --dir /data --pid 4242 --duration 60
      storbench record disk --device /dev/nvme1n1 --duration 60
      storbench run /mnt/candidate --replay pg
    """
    from storbench.execute import bpfcapture
    from storbench.execute.capture import call_rate, capture, io_calls
    from storbench.target.environment import host_facts, path_facts
    from storbench.workload.bpfevents import from_bpf
    from storbench.workload.syscalls import CALLS, from_strace

    if not plain(name):
        raise ConfigError(f"workload name {name!r}: use letters, digits, '.', '_', '-'")
    if (directory is None) == (device is None):
        raise ConfigError("say where to record: --dir DIR (file level) or --device DEVICE"
                          " (block level), one of them")
    if device is not None and tracer != "auto":
        raise ConfigError("--tracer is for file level (--dir); --device records with the"
                          " kernel's blk tracer")
    if device is not None:
        _record_block(store, name, command, device, pids, duration, max_size, measure_cost,
                      replace, as_json)
        return
    assert directory is not None
    if bool(pids) == bool(command):
        raise ConfigError("give the command to record after --, or --pid PID of a running"
                          " process (not both)")
    if duration is not None and not pids:
        raise ConfigError("--duration applies to --pid: a command after -- is recorded until"
                          " it ends")
    if duration is not None and duration <= 0:
        raise ConfigError("--duration is a positive number of seconds")
    max_bytes = _max_bytes(max_size)
    _not_stored_yet(store, name, replace)
    if measure_cost and pids and duration is None:
        raise ConfigError("--measure-cost with --pid needs --duration: the calls are counted"
                          " again when the recording ends, while the processes still run")
    if tracer == "auto":
        tracer = "bpftrace" if bpfcapture.usable() else "strace"
    if pids:
        pids = _running(pids)
    what = (f"PID {', '.join(map(str, pids))}" if pids else os.path.basename(command[0]))
    untraced = None
    rates: tuple[float, float] | None = None  # --pid: calls per second untraced, traced
    before = 0.0
    if measure_cost and command:
        err.print(f"Running {what} once untraced, to measure what tracing costs ...",
                  markup=False)
        untraced = _untraced(command)
    elif measure_cost:
        err.print(f"Counting the read and write calls of {what} for {COST_WINDOW_S:g} s"
                  " before tracing ...", markup=False)
        before = call_rate(pids, COST_WINDOW_S)
    err.print(f"Recording the I/O of {what} on {directory} ({tracer}) ...", markup=False)
    counter = (lambda: io_calls(pids)) if measure_cost and pids else None
    if tracer == "bpftrace":
        got = bpfcapture.capture_bpf(directory, from_bpf, command, pids, duration,
                                     max_bytes, _progress, counter,
                                     on_ready=lambda: _attached(bool(pids)))
    else:
        got = capture(directory, CALLS, from_strace, command, pids, duration, max_bytes,
                      _progress, counter)
    if measure_cost and pids:
        if got.calls_per_s is None:
            raise StorbenchError(f"{what} ended (or did no traced call) during the recording:"
                                 " its traced call rate is unknown; nothing was stored")
        rates = (before, got.calls_per_s)
    if err.is_terminal:
        err.print()
    trace = got.trace
    if not trace.ops:
        seen = "; ".join(f"{n:,} × {why}" for why, n in sorted(trace.skipped.items()))
        raise ConfigError(f"{what} did no read, write or sync on a file under {directory}"
                          f" that {tracer} can follow ({seen or 'no I/O call at all'}): nothing"
                          " stored; is --dir where its files are?")
    facts: dict[str, Any] = {
        **trace.facts(),
        "wall_s": round(got.wall_s, 3), "stopped": got.stopped, "program": what,
        "untraced_s": None if untraced is None else round(untraced, 3),
        **({} if rates is None else {"untraced_calls_per_s": round(rates[0], 1),
                                     "traced_calls_per_s": round(rates[1], 1)}),
        "tool": got.tool, "directory": str(directory.resolve()),
        "environment": {**host_facts(), "target": path_facts(directory)},
    }
    method = f"file level ({tracer})"
    if not _stored(store, name, method, trace, facts, replace, as_json):
        return
    if untraced is not None:
        out.print(f"The command ran {got.wall_s:.2f} s under {tracer}, {untraced:.2f} s without:"
                  f" tracing cost {got.wall_s / max(untraced, 1e-6):.2f} × its time.",
                  markup=False)
    elif rates is not None:
        slower = (f"its call rate {rates[0] / rates[1]:.2f} × lower traced" if rates[1]
                  else "no call at all while traced")
        out.print(f"{what} made {rates[0]:,.0f} read and write calls/s in the"
                  f" {COST_WINDOW_S:g} s before tracing and {rates[1]:,.0f}/s traced:"
                  f" {slower} (a steady load's slowdown; a varying load's rate varies of"
                  " itself).", markup=False)
    else:
        out.print(f"{'It was followed' if pids else 'The command ran'} {got.wall_s:.1f} s"
                  f" under {tracer} ("
                  + ("slower than without it: each traced call stops it twice"
                     if tracer == "strace" else "each call is recorded in the kernel, the"
                     " application is not stopped, but one making many calls a second"
                     " still runs slower")
                  + "; --measure-cost says how much).", markup=False)
    _said_after(got.stopped, trace, name)


def _stored(store: Store, name: str, method: str, trace: Trace, facts: dict[str, Any],
            replace: bool, as_json: bool) -> bool:
    """Store the workload and say so; False when that was said as JSON (all of it)."""
    from storbench.store import workloads
    from storbench.store.sqliteopen import now_iso

    size = workloads.save(store, name, now_iso(), method, facts, trace.iolog(),
                          replace=replace)
    if as_json:
        out.print_json(json.dumps({"name": name, "method": method, "stored_bytes": size,
                                   **facts}))
        return False
    c = trace.counts()
    where = "on the device" if "device" in facts else f"on {c['files']} file(s)"
    out.print(f"Recorded workload {name!r} ({method}) in {store.path}: {c['reads']:,} reads"
              f" ({format_bytes_iec(c['read_bytes'])}), {c['writes']:,} writes"
              f" ({format_bytes_iec(c['write_bytes'])}), {c['syncs']:,} syncs {where}"
              f" over {trace.duration_s:.2f} s; at most {trace.depth} in"
              f" flight{_direct(trace)}; {format_bytes_iec(size)} stored.", markup=False)
    return True


def _o_direct(facts: dict[str, Any]) -> str:
    """A listed workload's O_DIRECT reads and writes, when it had any."""
    from storbench.workload.trace import io_mode

    n, c = facts.get("direct"), facts["counts"]
    mode = io_mode(n if isinstance(n, int) else None, c["reads"] + c["writes"])
    return ", O_DIRECT" if mode == "direct" else f", {n:,} O_DIRECT" if mode == "mixed" else ""


def _direct(trace: Trace) -> str:
    """How many reads and writes went through an O_DIRECT descriptor (a replay issues
    them as the application did: all of them direct, or none)."""
    mode, n = trace.io_mode(), trace.direct
    if mode == "direct":
        return "; all of them O_DIRECT"
    if mode == "mixed" and n is not None:
        return f"; {n:,} of the reads and writes O_DIRECT"
    return ""


def _said_after(stopped: str | None, trace: Trace, name: str) -> None:
    if stopped:
        out.print(f"Stopped early by {stopped}: the workload holds what came before.",
                  markup=False)
    for why, n in sorted(trace.skipped.items()):
        out.print(f"Not recorded: {n:,} × {why}.", markup=False)
    out.print(f"Replay it: storbench run TARGET --replay {name}", markup=False)


def _record_block(store: Store, name: str, command: tuple[str, ...], device: str,
                  pids: tuple[int, ...], duration: float | None, max_size: str,
                  measure_cost: bool, replace: bool, as_json: bool) -> None:
    """`record --device`: the block level (execute/blkcapture.py)."""
    from storbench.execute.blkcapture import capture_block
    from storbench.target.blockguard import device_facts, inspect
    from storbench.target.environment import host_facts
    from storbench.workload.trace import from_blk

    if pids:
        raise ConfigError("--pid follows processes, which is file level: the block level"
                          " sees the device, not who sent each request; give COMMAND, or"
                          " --duration to record everything on it for that long")
    if bool(command) == (duration is not None):
        raise ConfigError("with --device, give the command to record after --, or"
                          " --duration SECONDS (not both)")
    if duration is not None and duration <= 0:
        raise ConfigError("--duration is a positive number of seconds")
    if measure_cost and not command:
        raise ConfigError("--measure-cost runs COMMAND once untraced: it needs COMMAND")
    max_bytes = _max_bytes(max_size)
    _not_stored_yet(store, name, replace)
    what = os.path.basename(command[0]) if command else f"{duration:g} s"
    untraced = None
    if measure_cost:
        err.print(f"Running {what} once untraced, to measure what tracing costs ...",
                  markup=False)
        untraced = _untraced(command)
    err.print(f"Recording every request queued on {device} "
              + (f"while {what} runs" if command else f"for {what}")
              + " (the kernel's blk tracer) ...", markup=False)
    got = capture_block(device, lambda text, dev: from_blk(text, dev.majmin, dev.name),
                        command, duration, max_bytes, _progress)
    if err.is_terminal:
        err.print()
    trace = got.trace
    if not trace.ops:
        raise ConfigError(f"no read, write or flush reached {device} while recording: nothing"
                          " stored (the page cache may have answered: is the application's"
                          " storage on that device?)")
    found = inspect(device)
    facts: dict[str, Any] = {
        **trace.facts(), "level": "block",
        "wall_s": round(got.wall_s, 3), "stopped": got.stopped,
        "program": os.path.basename(command[0]) if command else f"everything for {what}",
        "untraced_s": None if untraced is None else round(untraced, 3),
        "tool": got.tool, "device": found.device,
        "environment": {**host_facts(),
                        "target": {"kind": "block device", "device": found.device,
                                   **device_facts(found.name)}},
    }
    if not _stored(store, name, "block level (ftrace blk)", trace, facts, replace, as_json):
        return
    if untraced is not None:
        out.print(f"The command ran {got.wall_s:.2f} s traced, {untraced:.2f} s untraced:"
                  f" tracing cost {got.wall_s / max(untraced, 1e-6):.2f} × its time (the"
                  " tracer records each request in the kernel; the command itself is not"
                  " stopped).", markup=False)
    out.print("A block trace replayed in a file is a disk-image test of that storage, not"
              " the application on its file system; on a device it needs --destructive"
              " when it writes.", markup=False)
    _said_after(got.stopped, trace, name)


def _running(pids: tuple[int, ...]) -> tuple[int, ...]:
    """The --pid processes still running; one that ended since it was listed (a
    database's short-lived backend, listed by pgrep a moment ago) is said and left out;
    none running is an error."""
    running = tuple(p for p in pids if Path(f"/proc/{p}").is_dir())
    gone = [str(p) for p in pids if p not in running]
    if not running:
        raise ConfigError(f"--pid {', '.join(gone)}: no such process")
    if gone:
        err.print(f"PID {', '.join(gone)} ended before the recording began: not followed",
                  markup=False)
    return running


def _max_bytes(max_size: str) -> int:
    max_bytes = parse_size(max_size)
    if not max_bytes:
        raise ConfigError(f"--max-size {max_size!r} is not a size (e.g. 256m)")
    return max_bytes


def _not_stored_yet(store: Store, name: str, replace: bool) -> None:
    from storbench.store import workloads

    if not replace and any(w.name == name for w in workloads.listed(store)):
        raise ConfigError(f"a workload named {name!r} is stored already: pass --replace, or"
                          " another name")


def _attached(following: bool) -> None:
    """bpftrace takes seconds to attach (more on a busy machine): said when it has, so that
    a workload is started after it (a process started before is not followed)."""
    err.print("bpftrace attached: tracing from now on" + (
        " (a process the followed ones start from now on is followed; one started before"
        " is not)" if following else ""), markup=False)


def _progress(elapsed: float, size: int) -> None:
    if err.is_terminal:
        err.print(f"\rrecording: {elapsed:5.0f} s, {format_bytes_iec(size)} traced", end="",
                  markup=False)


def _untraced(command: tuple[str, ...]) -> float:
    """How long ``command`` takes untraced (it must succeed)."""
    import subprocess
    import time

    from storbench.errors import StorbenchError

    began = time.monotonic()
    try:
        done = subprocess.run(command, check=False)
    except OSError as exc:
        raise ConfigError(f"cannot run {command[0]!r}: {exc.strerror}") from None
    if done.returncode != 0:
        raise StorbenchError(f"the command exited with status {done.returncode} when run"
                             " untraced: nothing was recorded")
    return time.monotonic() - began


@cli.command()
@click.option("--delete", "delete", metavar="NAME", default=None,
              help="Delete the recorded workload NAME.")
@json_option
@read_db_option
def workloads(store: Store, delete: str | None, as_json: bool) -> None:
    """List the recorded workloads (`storbench record`), or delete one.

    \b
    Example:
      storbench workloads
      storbench workloads --delete pg
    """
    from storbench.render.text import harmless
    from storbench.store import workloads as stored

    if delete is not None:
        stored.delete(store, delete)
        out.print(f"Deleted workload {delete!r}.", markup=False)
        return
    found = stored.listed(store)
    if as_json:
        out.print_json(json.dumps([{"name": w.name, "created_at": w.created_at,
                                    "method": w.method, "stored_bytes": w.size, **w.facts}
                                   for w in found]))
        return
    if not found:
        out.print("No recorded workloads: `storbench record NAME --dir DIR -- COMMAND`.",
                  markup=False)
        return
    for w in found:
        c = w.facts["counts"]
        out.print(f"{harmless(w.name)}  {w.created_at}  {w.method}  {c['reads']:,} reads,"
                  f" {c['writes']:,} writes, {c['syncs']:,} syncs, {c['files']} file(s),"
                  f" {w.facts['duration_s']:.2f} s{_o_direct(w.facts)},"
                  f" from {harmless(w.facts['program'])}"
                  f" {'on' if 'device' in w.facts else 'in'}"
                  f" {harmless(w.facts.get('directory') or w.facts.get('device', ''))}",
                  markup=False)
