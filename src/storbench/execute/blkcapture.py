"""Capturing a block device's I/O with the kernel's blk tracer (`storbench record --device`).

blktrace's own interface needs debugfs, which a locked-down kernel refuses (Secure Boot
hosts, the test machines); the same tracer is reachable through tracefs:
``/sys/block/DEV/trace/enable`` turns it on for one device, ``current_tracer`` = ``blk``
sends its events to the ftrace buffer, read here from ``trace_pipe`` as text (one line
per event: who, when, device, action, RWBS, sector + count). workload/trace.from_blk
keeps the queued requests (action Q) as fio's iolog.

The blk tracer is the machine's one global tracer, writing into the one top-level
buffer: storbench takes them only when they are free (tracer ``nop``, no events enabled
in ``set_event``, nothing unread in the buffer: it never clears or reads events of
someone else's) and the device is not being traced, and puts back everything it changed
(tracer, the device's switch, the buffer's size, tracing_on) however recording ends. It
reads, never writes, the device. The raw events live in a 0700 temporary directory
and are removed at once; a buffer that overflowed (events lost) fails the recording.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from storbench.errors import ConfigError, StorbenchError
from storbench.execute.capture import POLL_S, Capture, recording_dir, stop
from storbench.execute.signals import SignalGuard

T = TypeVar("T")
BUFFER_KB = 8192  # per CPU while recording: ~100 k events between two reads
TOOL = "ftrace blk tracer (tracefs)"


@dataclass(frozen=True)
class Device:
    path: str  # as given
    name: str  # the kernel's name (loop0, nvme0n1)
    majmin: str  # "7,0", as the tracer writes it
    trace_dir: Path  # /sys/class/block/NAME/trace


def block_device(path: str) -> Device:
    """The whole block device ``path`` names, with its tracer switch; ConfigError else."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"--device {path}: {exc.strerror}") from None
    if not stat.S_ISBLK(st.st_mode):
        raise ConfigError(f"--device {path} is not a block device")
    sysfs = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}").resolve()
    if (sysfs / "partition").exists():
        raise ConfigError(f"--device {path} is a partition: record its whole disk (the kernel"
                          " traces whole devices; sectors are the disk's)")
    trace_dir = sysfs / "trace"
    if not (trace_dir / "enable").exists():
        raise ConfigError(f"--device {path}: this kernel cannot trace block I/O (no"
                          f" {trace_dir}/enable: built without CONFIG_BLK_DEV_IO_TRACE)")
    return Device(path, sysfs.name, f"{os.major(st.st_rdev)},{os.minor(st.st_rdev)}",
                  trace_dir)


@contextlib.contextmanager
def tracefs() -> Iterator[Path]:
    """tracefs where it is mounted, else mounted for the recording in a 0700 directory
    of storbench's (and unmounted after)."""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "tracefs" and \
                    Path(fields[1], "current_tracer").exists():
                yield Path(fields[1])
                return
    with tempfile.TemporaryDirectory(prefix="storbench-tracefs-") as tmp:
        os.chmod(tmp, 0o700)
        done = subprocess.run(["mount", "-t", "tracefs", "nodev", tmp], capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise ConfigError("block-level recording needs tracefs, which could not be"
                              f" mounted: {done.stderr.strip() or 'mount failed'} (run it as"
                              " root)")
        try:
            yield Path(tmp)
        finally:
            subprocess.run(["umount", tmp], capture_output=True, check=False)


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value + "\n")
    except PermissionError:
        raise ConfigError(f"block-level recording needs root: cannot write {path}") from None
    except OSError as exc:
        raise StorbenchError(f"the kernel refused {value!r} in {path}: {exc.strerror}") from None


def _stat(fs: Path, field: str) -> int:
    """A count of the buffer's stats (``overrun``: events lost so far; ``entries``: events
    in it, not yet read), over every CPU."""
    total = 0
    for stats in (fs / "per_cpu").glob("cpu*/stats"):
        for line in stats.read_text().splitlines():
            if line.startswith(f"{field}:"):
                total += int(line.split()[1])
    return total


def _overruns(fs: Path) -> int:
    return _stat(fs, "overrun")


def _buffer_free(fs: Path) -> None:
    """ConfigError unless the top-level buffer is nobody's: no events enabled into it
    (their events would be read, so taken from them) and none left unread in it."""
    events = _read(fs / "set_event").split() if (fs / "set_event").exists() else []
    if events:
        shown = ", ".join(events[:3]) + (f" and {len(events) - 3} more" if len(events) > 3
                                         else "")
        raise ConfigError(f"the kernel's trace buffer is in use: events are enabled into it"
                          f" ({shown} in {fs}/set_event); block-level recording reads that"
                          " buffer and would take their events: once they are no longer"
                          f" wanted, disable them (echo > {fs}/set_event)")
    unread = _stat(fs, "entries")
    if unread:
        raise ConfigError(f"the kernel's trace buffer holds {unread:,}"
                          f" event{'s' if unread != 1 else ''} nobody has read yet;"
                          " block-level recording would have to clear them: read them"
                          f" ({fs}/trace) or clear them (echo > {fs}/trace) first")


@contextlib.contextmanager
def _tracer_on(fs: Path, dev: Device) -> Iterator[None]:
    """The blk tracer on for ``dev`` only, everything put back after."""
    tracer = _read(fs / "current_tracer")
    if tracer != "nop":
        left = (" (a recording that was killed with SIGKILL leaves 'blk': once none runs,"
                " write nop there and 0 into /sys/block/DEV/trace/enable)"
                if tracer == "blk" else "")
        raise ConfigError(f"the kernel's tracer is in use ({tracer!r} in"
                          f" {fs}/current_tracer): block-level recording needs it free"
                          + left)
    if _read(dev.trace_dir / "enable") != "0":
        raise ConfigError(f"{dev.path} is being traced already (blktrace?):"
                          f" {dev.trace_dir}/enable is on")
    _buffer_free(fs)
    was_on, size = _read(fs / "tracing_on"), _read(fs / "buffer_size_kb")
    undo: list[Callable[[], None]] = []
    try:
        _write(fs / "tracing_on", "0")
        undo.append(lambda: _write(fs / "tracing_on", was_on))
        # "7 (expanded: 1408)": not allocated yet; once used it is the expanded size
        found = re.search(r"expanded:\s*(\d+)", size) or re.match(r"(\d+)", size)
        before = found.group(1) if found else ""
        if not before or int(before) < BUFFER_KB:
            _write(fs / "buffer_size_kb", str(BUFFER_KB))
            if before:
                undo.append(lambda: _write(fs / "buffer_size_kb", before))
        _write(dev.trace_dir / "enable", "1")
        undo.append(lambda: _write(dev.trace_dir / "enable", "0"))
        _write(fs / "current_tracer", "blk")
        undo.append(lambda: _write(fs / "current_tracer", "nop"))
        _write(fs / "tracing_on", "1")
        yield
    finally:
        for step in reversed(undo):
            with contextlib.suppress(StorbenchError, OSError):
                step()


def capture_block(device: str, parse: Callable[[Iterable[str], Device], T],
                  command: Sequence[str] = (), duration_s: float | None = None,
                  max_bytes: int = 256 << 20,
                  on_progress: Callable[[float, int], None] | None = None) -> Capture[T]:
    """Trace every request queued on ``device`` while ``command`` runs (or for
    ``duration_s``), and return what ``parse`` makes of the tracer's lines."""
    dev = block_device(device)
    if os.geteuid() != 0:
        raise ConfigError("block-level recording needs root: it turns the kernel's block"
                          " tracer on")
    with recording_dir() as tmp, tracefs() as fs:
        raw = tmp / "blk.txt"
        lost_before = _overruns(fs)
        stopped = None
        with SignalGuard() as guard, _tracer_on(fs, dev), raw.open("wb") as sink:
            pipe = os.open(fs / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
            try:
                started = time.monotonic()
                proc = _start(command)
                guard.set_child(proc.pid if proc is not None else None)
                try:
                    while guard.signum is None:
                        written = _drain(pipe, sink)
                        elapsed = time.monotonic() - started
                        if on_progress is not None:
                            on_progress(elapsed, written)
                        if written > max_bytes:
                            stopped = (f"--max-size: the trace passed {max_bytes:,} bytes"
                                       f" after {elapsed:.1f} s")
                            break
                        if proc is not None and proc.poll() is not None:
                            break
                        if duration_s is not None and elapsed >= duration_s:
                            break
                        time.sleep(POLL_S)
                finally:
                    if proc is not None:
                        stop(proc, with_command=True)  # still running: it ends too
                wall = time.monotonic() - started
                _write(fs / "tracing_on", "0")
                _drain(pipe, sink)
            finally:
                os.close(pipe)
            lost = _overruns(fs) - lost_before
        guard.check()  # Ctrl-C, SIGTERM: the tracer is put back; nothing is stored
        if lost > 0:
            raise StorbenchError(f"the kernel's trace buffer overflowed: {lost:,} events of"
                                 f" {dev.path} were lost, the trace is incomplete; nothing"
                                 " was stored (a shorter recording, or a less busy device)")
        if proc is not None and stopped is None and proc.returncode != 0:
            raise StorbenchError(f"the command exited with status {proc.returncode}: nothing"
                                 " was stored")
        with raw.open(errors="replace") as text:
            trace = parse(text, dev)
        return Capture(trace, wall, stopped, raw.stat().st_size, TOOL)


def _start(command: Sequence[str]) -> subprocess.Popen[bytes] | None:
    if not command:
        return None
    try:
        return subprocess.Popen(list(command), start_new_session=True)
    except OSError as exc:
        raise ConfigError(f"cannot run {command[0]!r}: {exc.strerror}") from None


def _drain(pipe: int, sink: BinaryIO) -> int:
    """Move what the tracer has buffered into ``sink``; the bytes written so far."""
    while True:
        try:
            chunk = os.read(pipe, 1 << 20)
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            raise
        if not chunk:
            break
        sink.write(chunk)
    return sink.tell()
