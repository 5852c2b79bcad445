"""Capturing an application's I/O at file level with strace (`storbench record`).

strace follows the command (or the processes ``--pid``) and every process and thread it
starts, and writes one line per I/O call: the descriptor's path (-y), the time (-ttt),
how long the call took (-T); never the data (-s 0). workload/syscalls.py turns that into
fio's iolog. The raw output lives in a 0700 temporary directory and is removed at once.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from storbench.errors import ConfigError, StorbenchError
from storbench.execute.followed import start_state
from storbench.execute.fsops import remove_marked
from storbench.execute.workdir import create_marked, leftovers

POLL_S = 0.2
T = TypeVar("T")
RECORDING = "storbench-record-"  # a recording's raw trace: /tmp/storbench-record-<hex>


@dataclass(frozen=True)
class Capture(Generic[T]):
    trace: T  # what ``parse`` made of strace's lines
    wall_s: float  # how long the command ran (or the process was followed) under strace
    stopped: str | None  # why recording ended early (--max-size), else None
    raw_bytes: int  # strace's output: what --max-size counts
    tool: str  # "strace 6.1"
    calls_per_s: float | None = None  # ``count``'s rate while strace was attached


@contextlib.contextmanager
def recording_dir() -> Iterator[Path]:
    """A 0700 directory for a recording's raw trace, marked as storbench's and locked
    while the recording lives (execute/workdir); removed when it ends. One a killed
    recording left (its lock free) is removed first, as a run removes a dead run's."""
    tmp = Path(tempfile.gettempdir())
    for left in leftovers(tmp):
        if left.path.name.startswith(RECORDING):
            remove_marked(left.path)
    uid = secrets.token_hex(8)
    path = create_marked(tmp / f"{RECORDING}{uid}", f"record-{uid}")
    try:
        yield path
    finally:
        remove_marked(path)


def strace_path() -> str:
    found = shutil.which("strace")
    if found is None:
        raise ConfigError("recording needs strace (Debian/Ubuntu: apt install strace;"
                          " Fedora: dnf install strace)")
    return found


def strace_version(path: str) -> str:
    first = subprocess.run([path, "-V"], capture_output=True, text=True,
                           check=False).stdout.splitlines()
    words = first[0].split() if first else []
    return f"strace {words[-1]}" if words else "strace"


def capture(directory: Path, calls: str, parse: Callable[[Iterable[str], str], T],
            command: Sequence[str] = (), pids: Sequence[int] = (),
            duration_s: float | None = None, max_bytes: int = 256 << 20,
            on_progress: Callable[[float, int], None] | None = None,
            count: Callable[[], int | None] | None = None) -> Capture[T]:
    """Run ``command`` (or follow ``pids`` for ``duration_s``) under strace, tracing
    ``calls``, and return what ``parse`` makes of its lines and ``directory`` (resolved)
    (workload/syscalls.from_strace). StorbenchError when the command fails or strace cannot
    follow it (its own message). ``count`` (a counter of the application's calls) is read
    at every poll once strace has written its first line, until recording ends: its rate
    over that span is the traced rate (the attaching and detaching left out)."""
    strace = strace_path()
    root = str(directory.resolve())
    # what the followed processes have open now: positions, O_APPEND, O_DIRECT (strace
    # shows the calls from here on only)
    state = start_state(list(pids)) if pids else []
    with recording_dir() as tmp:
        out = tmp / "strace.txt"
        argv = [strace, "-f", "-qq", "-ttt", "-T", "-y", "-s", "0", "-e", f"trace={calls}",
                "-o", str(out)]
        if pids:
            argv += [a for p in pids for a in ("-p", str(p))]
        else:
            argv += ["--seccomp-bpf", "--", *command]
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL if pids else None,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        # strace's stderr (and the command's) read as it comes: a full pipe stopped the
        # command at its next line; the last of it is kept for the messages below
        said_lines: collections.deque[str] = collections.deque(maxlen=200)
        listener = threading.Thread(target=said_lines.extend, args=(proc.stderr,),
                                    daemon=True)
        listener.start()
        stopped = None
        counted: list[tuple[float, int]] = []  # (when, count) while traced
        try:
            while proc.poll() is None:
                time.sleep(POLL_S)
                size = out.stat().st_size if out.exists() else 0
                elapsed = time.monotonic() - started
                if count is not None and size and (n := count()) is not None:
                    counted.append((time.monotonic(), n))
                if on_progress is not None:
                    on_progress(elapsed, size)
                if size > max_bytes:
                    stopped = (f"--max-size: strace's output passed {max_bytes:,} bytes after"
                               f" {elapsed:.1f} s")
                    stop(proc, not pids)
                elif duration_s is not None and elapsed >= duration_s:
                    stop(proc, False)  # detach: the process goes on, untraced
                    break
        except BaseException:
            stop(proc, not pids)
            raise
        proc.wait()
        listener.join(5)
        stderr = "".join(said_lines)
        wall = time.monotonic() - started
        said = "\n".join(line for line in stderr.splitlines()
                         if line.strip() and "Process" not in line)
        if stopped is None and not pids and proc.returncode != 0:
            raise StorbenchError(f"the command exited with status {proc.returncode}: nothing"
                                 " was stored" + (f" ({said.strip()[-300:]})" if said else ""))
        if pids and ("attach:" in stderr or not out.exists()):
            raise StorbenchError(f"strace could not follow PID {', '.join(map(str, pids))}:"
                                 f" {stderr.strip()[-300:]}")
        raw = out.stat().st_size if out.exists() else 0
        with out.open(errors="replace") as text:
            trace = parse(itertools.chain(state, text), root)
    return Capture(trace, wall, stopped, raw, strace_version(strace), traced_rate(counted))


def traced_rate(counted: Sequence[tuple[float, int]]) -> float | None:
    """The application's calls per second from (when, count so far) read while traced;
    None without two readings apart in time."""
    if len(counted) < 2 or counted[-1][0] <= counted[0][0]:
        return None
    return (counted[-1][1] - counted[0][1]) / (counted[-1][0] - counted[0][0])


def stop(proc: subprocess.Popen[Any], with_command: bool) -> None:
    """End recording: strace detaches on SIGINT; a command started for the recording
    ends with it (its whole process group: SIGTERM, SIGKILL after 10 s)."""
    if proc.poll() is not None:
        return
    try:
        if with_command:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGINT)
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def io_calls(pids: Sequence[int]) -> int | None:
    """Read and write calls the processes made so far (/proc/PID/io: syscr + syscw, every
    thread's, also those that ended); None if one of them is gone or unreadable."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/io").read_text()
        except OSError:
            return None
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        try:
            total += int(fields["syscr"]) + int(fields["syscw"])
        except (KeyError, ValueError):
            return None
    return total


def call_rate(pids: Sequence[int], seconds: float) -> float:
    """The processes' read and write calls per second over the next ``seconds``
    (untraced). StorbenchError if one ends or cannot be read meanwhile."""
    first, began = io_calls(pids), time.monotonic()
    time.sleep(seconds)
    last, ended = io_calls(pids), time.monotonic()
    if first is None or last is None:
        raise StorbenchError(f"cannot read the I/O calls of PID {', '.join(map(str, pids))}"
                             " in /proc/PID/io (one ended, or it is not ours to read)")
    return (last - first) / (ended - began)
