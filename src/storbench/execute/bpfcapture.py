"""Capturing an application's I/O at file level with eBPF (bpftrace), `storbench record`.

The same calls as strace's capture (execute/capture.py), seen from the kernel's syscall
tracepoints instead of by stopping the process at each call: a bpftrace program follows
the command's process (or the ``--pid`` processes, every thread), every process and
thread they start from then on (``sched_process_fork``), and prints one line per I/O call
when it returns: the call, thread, process, start and end (ns), result and arguments
(descriptor, offset); an open or chdir also its path as the application gave it. The
descriptors' paths, positions and the working directories are followed by
workload/bpfevents.from_bpf, which starts from what /proc says of the followed processes
(their open descriptors with positions, their working directory).

Every line bpftrace prints starts with a random token known only to this run (written in
the 0700 program file, not on bpftrace's command line): a path holding a line break
cannot make a line of its own. bpftrace needs tracefs at /sys/kernel/tracing: where it is
not mounted, bpftrace runs in a mount namespace of its own with tracefs mounted there (the
machine's mounts are untouched). Events the kernel could not hand over (bpftrace's "Lost
N events") fail the recording. Root only.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

from storbench.errors import ConfigError, StorbenchError
from storbench.execute.capture import POLL_S, Capture, recording_dir, stop, traced_rate
from storbench.execute.followed import Followed, start_state, threads
from storbench.execute.signals import SignalGuard

T = TypeVar("T")
STRLEN = 200  # bpftrace's longest string (BPFTRACE_STRLEN): a longer path is cut
READY_S = 60.0  # how long bpftrace may take to attach its probes
AT_FDCWD = -100
O_CREAT_WRONLY_TRUNC = 0o1101

# call -> (argument a, argument b, where its path is): what workload/bpfevents.from_bpf reads
# of the raw arguments r0..r4 the kernel's raw_syscalls tracepoints give
ARGS: dict[str, tuple[str, str, str | None]] = {
    "open": (str(AT_FDCWD), "r1", "r0"),
    "openat": ("r0", "r2", "r1"),
    "openat2": ("r0", "0", "r1"),  # its flags are behind a pointer: unknown
    "creat": (str(AT_FDCWD), str(O_CREAT_WRONLY_TRUNC), "r0"),
    "close": ("r0", "0", None), "dup": ("r0", "0", None), "dup2": ("r0", "0", None),
    "dup3": ("r0", "0", None), "fcntl": ("r0", "r1", None), "lseek": ("r0", "0", None),
    "chdir": ("0", "0", "r0"), "fchdir": ("r0", "0", None),
    "read": ("r0", "-1", None), "readv": ("r0", "-1", None),
    "pread64": ("r0", "r3", None), "preadv": ("r0", "r3", None),
    "preadv2": ("r0", "r3", None),
    "write": ("r0", "-1", None), "writev": ("r0", "-1", None),
    "pwrite64": ("r0", "r3", None), "pwritev": ("r0", "r3", None),
    "pwritev2": ("r0", "r3", None),
    "fsync": ("r0", "0", None), "fdatasync": ("r0", "0", None),
    "sync_file_range": ("r0", "0", None), "ftruncate": ("r0", "0", None),
    "fallocate": ("r0", "0", None), "mmap": ("r4", "0", None),
    "sendfile64": ("r0", "r1", None), "copy_file_range": ("r0", "r2", None),
    "splice": ("r0", "r2", None),
}
# the calls' numbers (asm/unistd_64.h; asm-generic/unistd.h for arm64: no open, creat, dup2)
NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": {"read": 0, "write": 1, "open": 2, "close": 3, "lseek": 8, "mmap": 9,
               "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20, "dup": 32,
               "dup2": 33, "sendfile64": 40, "fcntl": 72, "fsync": 74, "fdatasync": 75,
               "ftruncate": 77, "chdir": 80, "fchdir": 81, "creat": 85, "openat": 257,
               "splice": 275, "sync_file_range": 277, "fallocate": 285, "dup3": 292,
               "preadv": 295, "pwritev": 296, "copy_file_range": 326, "preadv2": 327,
               "pwritev2": 328, "openat2": 437, "getppid": 110},
    "aarch64": {"dup": 23, "dup3": 24, "fcntl": 25, "ftruncate": 46, "fallocate": 47,
                "chdir": 49, "fchdir": 50, "openat": 56, "close": 57, "lseek": 62,
                "read": 63, "write": 64, "readv": 65, "writev": 66, "pread64": 67,
                "pwrite64": 68, "preadv": 69, "pwritev": 70, "sendfile64": 71, "splice": 76,
                "fsync": 82, "fdatasync": 83, "sync_file_range": 84, "mmap": 222,
                "copy_file_range": 285, "preadv2": 286, "pwritev2": 287, "openat2": 437,
                "getppid": 173},
}
_LOST = re.compile(r"Lost (\d+) events")
_LOST_BYTES = re.compile(rb"Lost (\d+) events")


def bpftrace_path() -> str | None:
    return shutil.which("bpftrace")


def usable() -> bool:
    """bpftrace is installed, we are root (the kernel loads no program else) and storbench
    knows this machine's system call numbers."""
    return os.geteuid() == 0 and bpftrace_path() is not None and os.uname().machine in NUMBERS


def _any(ids: Iterable[int], of: str) -> str:
    return "(" + " || ".join(f"{of} == {n}" for n in sorted(ids)) + ")"


def program(token: str, tids: Iterable[int], ours: int, numbers: Mapping[str, int]) -> str:
    """The bpftrace program: follow ``tids`` and what they start; a line per call that
    returned (two raw_syscalls probes: attaching one tracepoint per call takes seconds);
    ``ours`` (this process) calling getppid() ends it once every line is out, and its
    end ends it too."""
    seeds = " ".join(f"@t[{t}] = 1;" for t in tids)
    traced = [n for c, n in numbers.items() if c in ARGS]
    second = [numbers[c] for c in ("openat", "openat2") if c in numbers]
    named = [numbers[c] for c, (_, _, p) in ARGS.items() if p is not None and c in numbers]
    fmt = f"{token} S %d %d %lu %lu %ld %ld %ld %ld %ld %ld %ld"
    values = "tid, pid, @s[tid], nsecs, args->ret, @i[tid], @r0[tid], @r1[tid], @r2[tid]," \
             " @r3[tid], @r4[tid]"
    return "\n".join([
        f'BEGIN {{ {seeds} printf("{token} B\\n"); }}',
        "tracepoint:sched:sched_process_fork /@t[args->parent_pid]/ {"
        f' @t[args->child_pid] = 1; printf("{token} F %d %d %d %lu\\n", args->parent_pid,'
        " pid, args->child_pid, nsecs); }",
        "tracepoint:sched:sched_process_exit /@t[tid]/ { delete(@t[tid]); delete(@s[tid]); }",
        # bpftrace prints every map left when it ends: none is
        "END { clear(@t); clear(@s); clear(@i); clear(@p); clear(@r0); clear(@r1);"
        " clear(@r2); clear(@r3); clear(@r4); }",
        # storbench gone (even SIGKILL): nobody reads or ends this program any more
        f"tracepoint:sched:sched_process_exit /tid == {ours}/ {{ exit(); }}",
        f"tracepoint:raw_syscalls:sys_enter /pid == {ours} && args->id =="
        f' {numbers["getppid"]}/ {{ printf("{token} E\\n"); exit(); }}',
        "tracepoint:raw_syscalls:sys_enter /@t[tid]/ { $id = args->id;"
        f" if {_any(traced, '$id')} {{ @s[tid] = nsecs; @i[tid] = $id;"
        " @r0[tid] = args->args[0]; @r1[tid] = args->args[1]; @r2[tid] = args->args[2];"
        " @r3[tid] = args->args[3]; @r4[tid] = args->args[4];"
        f" if {_any(second, '$id')} {{ @p[tid] = args->args[1]; }}"
        " else { @p[tid] = args->args[0]; } } }",
        "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { $i = @i[tid];"
        f" if {_any(named, '$i')} {{ printf(\"{fmt} %s\\n\", {values}, str(uptr(@p[tid]))); }}"
        f' else {{ printf("{fmt}\\n", {values}); }} delete(@s[tid]); }}',
    ]) + "\n"


def _arg(what: str, raw: Sequence[str]) -> str:
    return raw[int(what[1])] if what.startswith("r") else what


def lines(raw: Iterable[str], token: str, numbers: Mapping[str, int]) -> Iterator[str]:
    """bpftrace's output as the events from_bpf reads: its lines that start with
    ``token`` (the token dropped; a line without it is joined to the one before: a path's
    line break), a call's line (``S tid pid start end ret number r0..r4 [path]``) as
    ``CALL tid pid start end ret a b [path]`` (fcntl: ``... a b r2``)."""
    calls = {n: c for c, n in numbers.items() if c in ARGS}
    mark = token + " "
    for joined in _joined(raw, mark):
        line = joined.partition("\n")[0]  # only a path goes on past a line break
        kind, _, rest = line.partition(" ")
        if kind != "S":
            yield line
            continue
        fields = rest.split(" ", 11)
        if len(fields) < 11 or not fields[5].lstrip("-").isdigit():
            continue
        call = calls.get(int(fields[5]))
        if call is None:
            continue
        a, b, path = ARGS[call]
        regs = fields[6:11]
        said = " ".join([call, *fields[:5], _arg(a, regs), _arg(b, regs)])
        if call == "fcntl":  # F_SETFL's flags: O_DIRECT, O_APPEND turned on or off
            said += " " + regs[2]
        if path:  # the path, line breaks and all: what follows the twelfth space
            whole = joined.split(" ", 12)
            said += " " + (whole[12] if len(whole) > 12 else "")
        yield said


def _joined(raw: Iterable[str], mark: str) -> Iterator[str]:
    held: str | None = None
    for line in raw:
        line = line.rstrip("\n")
        if line.startswith(mark):
            if held is not None:
                yield held
            held = line[len(mark):]
        elif held is not None and line and not _LOST.search(line):
            held += "\n" + line
    if held is not None:
        yield held


def capture_bpf(directory: Path, parse: Callable[[Iterable[str], str], T],
                command: Sequence[str] = (), pids: Sequence[int] = (),
                duration_s: float | None = None, max_bytes: int = 256 << 20,
                on_progress: Callable[[float, int], None] | None = None,
                count: Callable[[], int | None] | None = None,
                on_ready: Callable[[], None] | None = None) -> Capture[T]:
    """Run ``command`` (or follow ``pids`` for ``duration_s``, else until they and every
    process they started end)
    traced by bpftrace; what ``parse`` (workload/bpfevents.from_bpf) makes of the events of
    the files under ``directory``. ``count`` (the application's calls so far) is read at
    every poll while traced: its rate is the traced rate. ``on_ready`` is called once
    bpftrace has attached (a process the followed ones start from then on is followed)."""
    found = bpftrace_path()
    if found is None:
        raise ConfigError("--tracer bpftrace needs bpftrace (Debian/Ubuntu: apt install"
                          " bpftrace); --tracer strace works without it")
    if os.geteuid() != 0:
        raise ConfigError("--tracer bpftrace needs root (it loads programs into the kernel);"
                          " --tracer strace works as the application's user")
    numbers = NUMBERS.get(os.uname().machine)
    if numbers is None:
        raise ConfigError(f"--tracer bpftrace: storbench does not know the system calls of"
                          f" {os.uname().machine} (x86_64, aarch64); --tracer strace works")
    root = str(directory.resolve())
    token = secrets.token_hex(8)
    with recording_dir() as tmp:
        out, errs = tmp / "bpf.txt", tmp / "bpf.err"
        gate = tmp / "gate"
        os.mkfifo(gate, 0o600)
        proc = None
        counted: list[tuple[float, int]] = []  # (when, count) while traced
        with SignalGuard() as guard:
            try:
                if command:
                    proc = _held(command, gate)
                    guard.set_child(proc.pid)  # its own session: SIGINT/SIGTERM go on to it
                    seeds = [proc.pid]
                else:
                    seeds = [t for p in pids for t in threads(p)]
                    if not seeds:
                        raise ConfigError(f"--pid {', '.join(map(str, pids))}: no such"
                                          " process")
                (tmp / "p.bt").write_text(program(token, seeds, os.getpid(), numbers))
                state = start_state([proc.pid] if proc is not None else list(pids))
                with out.open("w") as sink, errs.open("w") as sink_err:
                    tracer = _bpftrace(found, tmp / "p.bt", sink, sink_err)
                    try:
                        started = _wait_ready(tracer, out, errs, token, guard)
                        if on_ready is not None:
                            on_ready()
                        if proc is not None:
                            _release(proc, gate)
                        followed = None if proc is not None else \
                            Followed(out, token, seeds)
                        stopped = _follow(proc, followed, out, started, duration_s,
                                          max_bytes, on_progress, count, counted, guard)
                        wall = time.monotonic() - started
                        _end(tracer)
                    finally:
                        if tracer.poll() is None:
                            stop(tracer, False)
            finally:
                if proc is not None and proc.poll() is None:
                    stop(proc, True)
        guard.check()  # Ctrl-C, SIGTERM: bpftrace and the command ended; nothing stored
        lost = sum(int(n) for n in _LOST.findall(errs.read_text(errors="replace"))) + \
            lost_in(out)
        if lost:
            raise StorbenchError(f"bpftrace lost {lost:,} events (the kernel's buffers filled"
                                 " faster than it read them): the trace is incomplete; nothing"
                                 " was stored (a shorter recording, or --tracer strace)")
        if proc is not None and stopped is None and proc.returncode != 0:
            raise StorbenchError(f"the command exited with status {proc.returncode}: nothing"
                                 " was stored")
        with out.open(errors="replace") as text:
            trace = parse([*state, *lines(text, token, numbers)], root)
        return Capture(trace, wall, stopped, out.stat().st_size, _version(found),
                       traced_rate(counted))


def _held(command: Sequence[str], gate: Path) -> subprocess.Popen[bytes]:
    """The command, started but held (a shell opening the FIFO ``gate``) until bpftrace
    follows it; then the shell becomes the command (exec: the same process)."""
    try:
        return subprocess.Popen(["sh", "-c", ': < "$0"; exec "$@"', str(gate), *command],
                                start_new_session=True)
    except OSError as exc:
        raise ConfigError(f"cannot run {command[0]!r}: {exc.strerror}") from None


def _release(proc: subprocess.Popen[bytes], gate: Path) -> None:
    """Let the held command go, once its shell waits at the FIFO (ENXIO: not yet)."""
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            os.close(os.open(gate, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError:
            time.sleep(0.01)
    if proc.poll() is None:
        raise StorbenchError("the command did not start within 30 s")


def _bpftrace(found: str, prog: Path, sink: IO[str], sink_err: IO[str]
              ) -> subprocess.Popen[bytes]:
    return launch(found, prog, sink, sink_err, {
        "BPFTRACE_STRLEN": str(STRLEN), "BPFTRACE_MAP_KEYS_MAX": "65536",
        "BPFTRACE_PERF_RB_PAGES": str(ring_pages(os.cpu_count() or 1))})


def launch(found: str, prog: Path, sink: IO[str], sink_err: IO[str],
           env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """bpftrace running ``prog`` in its own session, with tracefs mounted (in a mount
    namespace of its own where the machine has not mounted it)."""
    env = {**os.environ, **env}
    argv = [found, "-B", "line", str(prog)]
    if not Path("/sys/kernel/tracing/events/syscalls").is_dir():
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"', "sh", *argv]
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink_err,
                                env=env, start_new_session=True)
    except OSError as exc:
        raise ConfigError(f"cannot run bpftrace: {exc.strerror}") from None


def ring_pages(cpus: int) -> int:
    """Pages of bpftrace's event buffer per CPU: 4 MiB each (~40,000 lines between two
    reads), at most 64 MiB in all (a power of two, as the kernel wants; 64 at least)."""
    pages = max(64, min(1024, 16384 // max(1, cpus)))
    return 1 << (pages.bit_length() - 1)


def _wait_ready(tracer: subprocess.Popen[bytes], out: Path, errs: Path, token: str,
                guard: SignalGuard) -> float:
    """Wait until bpftrace has attached every probe (its BEGIN line); the time then."""
    mark = f"{token} B".encode()
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        guard.check()
        if mark in out.read_bytes():
            return time.monotonic()
        if tracer.poll() is not None:
            said = errs.read_text(errors="replace").strip()
            raise StorbenchError(f"bpftrace could not start: {said[-400:] or 'no message'}"
                                 " (--tracer strace records without it)")
        time.sleep(0.05)
    raise StorbenchError(f"bpftrace did not attach within {READY_S:g} s: nothing recorded")


def _follow(proc: subprocess.Popen[bytes] | None, followed: Followed | None, out: Path,
            started: float, duration_s: float | None, max_bytes: int,
            on_progress: Callable[[float, int], None] | None,
            count: Callable[[], int | None] | None,
            counted: list[tuple[float, int]], guard: SignalGuard) -> str | None:
    """Until the command ends (or every followed process: ``followed``), or
    ``duration_s``, or a signal; why it stopped early (--max-size), else None."""
    while guard.signum is None:
        time.sleep(POLL_S)
        size = out.stat().st_size
        elapsed = time.monotonic() - started
        if count is not None and (n := count()) is not None:
            counted.append((time.monotonic(), n))
        if on_progress is not None:
            on_progress(elapsed, size)
        if size > max_bytes:
            return (f"--max-size: bpftrace's output passed {max_bytes:,} bytes after"
                    f" {elapsed:.1f} s")
        if proc is not None and proc.poll() is not None:
            return None
        if followed is not None and not followed.any_running():
            return None
        if duration_s is not None and elapsed >= duration_s:
            return None
    return None


def _end(tracer: subprocess.Popen[bytes]) -> None:
    """Have bpftrace end after every line before this moment is out: it exits when this
    process calls getppid() (its probe's line comes after all others)."""
    deadline = time.monotonic() + 10
    while tracer.poll() is None and time.monotonic() < deadline:
        os.getppid()
        time.sleep(0.05)


def lost_in(out: Path, chunk: int = 8 << 20) -> int:
    """The events bpftrace said it lost, anywhere in its output (a "Lost N events" line
    comes where it happened, events before and after it: the output's last lines alone
    missed a loss in the middle of a recording, and a trace short of 40% of its calls
    was stored as whole)."""
    lost, carry = 0, b""
    with out.open("rb") as f:
        while block := f.read(chunk):
            text = carry + block
            cut = text.rfind(b"\n") + 1  # whole lines only; the rest goes with the next
            lost += sum(int(n) for n in _LOST_BYTES.findall(text[:cut]))
            carry = text[cut:]
    return lost + sum(int(n) for n in _LOST_BYTES.findall(carry))


def _version(found: str) -> str:
    said = subprocess.run([found, "--version"], capture_output=True, text=True,
                          check=False).stdout.split()
    return f"bpftrace {said[-1].lstrip('v')}" if said else "bpftrace"
