"""``run --explain`` on hosts reached over SSH: while a test runs, bpftrace follows each
host's fio server (and every process it forks) with the program this machine would run
(execute/layers.py), made for what is beneath the path on that host, and its histograms
come back over SSH as the test ends.

Each host's session said, as it started (execute/ssh.py), what tracing needs there: the
machine (its system call numbers), whether the SSH user is root, whether bpftrace is
installed, the place beneath the path (execute/beneath.py run by the host's python3) and
its fio server's PID. A host that lacks any of them is named before anything runs.

Each test's trace is an SSH command of its own per host: bpftrace runs until storbench
writes a line (or the connection ends, storbench killed: bpftrace is stopped all the
same), then prints its maps and the program's end mark (printed, they are whole, however
bpftrace or the connection ended after: execute/layers.ended_whole; one that has not
ended layers.STOP_S after is killed there). The host's clock is not this machine's:
bpftrace says its own clock as it begins, and the slices of each host are read on it
(the error is the time that line took to arrive: far below a slice's 100 ms).
"""

from __future__ import annotations

import collections
import contextlib
import json
import secrets
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute import layers
from storbench.execute.beneath import Place, place_of
from storbench.execute.bpfcapture import NUMBERS
from storbench.execute.capcount import Counted
from storbench.execute.layers import Slices
from storbench.execute.ssh import SshHost, Tunnel, ssh_argv

# Runs on a host for one test: $1, the bpftrace program; $2, its maps' size; $3, the
# seconds it has to end once told to. bpftrace needs tracefs (mounted, where the host has
# not, in a mount namespace of bpftrace's own); it is told to stop (SIGINT: it prints its
# maps) when storbench writes a line or its connection ends, and killed if it has not
# ended $3 s after (storbench, killed, no longer waits for it; its maps printed whole are
# kept all the same: layers.ended_whole).
TRACE = r"""
t=$3
set -- env BPFTRACE_MAP_KEYS_MAX="$2" bpftrace -B line -e "$1"
if [ ! -d /sys/kernel/tracing/events/syscalls ]; then
  set -- unshare -m --propagation private sh -c \
    'mount -t tracefs nodev /sys/kernel/tracing && exec "$@"' sh "$@"
fi
"$@" </dev/null &
b=$!
read _ || true
kill -INT $b 2>/dev/null
(sleep "$t" & s=$!; trap 'kill $s 2>/dev/null; exit 0' TERM; wait $s; kill -KILL $b) \
  </dev/null >/dev/null 2>&1 &
k=$!
wait $b
c=$?
kill $k 2>/dev/null
exit $c
"""
SLACK_S = 10.0  # beyond layers.STOP_S, for the host's own kill and its word to arrive


@dataclass
class Host:
    """One host's share of the tracing: where, and what its session said."""

    key: str
    ssh: SshHost
    place: Place
    machine: str
    server: int


def check(tunnels: dict[str, Tunnel]) -> None:
    """TargetError naming each host that cannot be traced and why (its session said)."""
    found = []
    for key, tunnel in tunnels.items():
        said = tunnel.said
        why = [w for w, lacking in (
            ("bpftrace is not installed", "trace-bpftrace" not in said),
            ("the SSH user is not root (bpftrace loads programs into the kernel)",
             said.get("trace-uid") != "0"),
            (f"storbench does not know the system calls of {said.get('trace-machine')}",
             said.get("trace-machine") not in NUMBERS),
            ("python3 is not installed (it reads what is beneath the path)",
             "trace-place" not in said),
            ("its session did not say its fio server's PID",
             not said.get("server", "").isdigit())) if lacking]
        if not why:
            try:
                _place(tunnel)
            except ValueError as exc:
                why.append(f"what is beneath the path could not be read: {exc}")
        found += [f"{key}: {'; '.join(why)}"] if why else []
    if found:
        raise TargetError(f"--explain cannot follow fio on {len(found)} of {len(tunnels)}"
                          f" host(s): {'; '.join(found)}. Install what is missing there"
                          " (Debian/Ubuntu: apt install bpftrace python3), reach the host as"
                          " root, or run without --explain. Nothing was started.")


def _told(place: Place) -> str:
    """What is beneath a host's path, in a few words (its file system, its device)."""
    d = place.device
    return f"{place.fs_type or 'a block device'}" + (f" on {d.name}" if d is not None else "")


def _place(tunnel: Tunnel) -> Place:
    try:
        return place_of(json.loads(tunnel.said.get("trace-place", "")))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(str(exc)[:200] or type(exc).__name__) from None


class HostsTracer:
    """The tracing of a run's tests on its hosts over SSH (pipeline/explained.py asks
    ``place`` and, for each test, ``trace``): the hosts of ``tunnels``, their sessions
    open and ``check``ed."""

    def __init__(self, tunnels: dict[str, Tunnel], config: str | None) -> None:
        self.config = config
        self.hosts = [Host(key, t.ssh, _place(t), t.said["trace-machine"],
                           int(t.said["server"])) for key, t in tunnels.items()]
        if not self.hosts:
            raise ConfigError("--explain on --hosts: no host reached over SSH to trace")
        # the explanation's words name what is beneath the first host's path; where the
        # hosts differ, that is said as the run starts
        self.place = self.hosts[0].place
        beneath = {h.key: _told(h.place) for h in self.hosts}
        self.notes = [] if len(set(beneath.values())) == 1 else [
            "--explain: the hosts differ beneath the path ("
            + "; ".join(f"{k}: {v}" for k, v in beneath.items()) + "): their layers are"
            f" summed, and each sentence names what is beneath {self.hosts[0].key}'s"]

    def trace(self, expected_s: float | None) -> HostsTrace:
        return HostsTrace(self, expected_s)


@dataclass
class Merged:
    """Several hosts' slices, each on its host's clock: ``offsets``[i] is this machine's
    monotonic ns less host i's."""

    parts: list[Slices]
    offsets: list[int]

    def between(self, start_ns: int, end_ns: int) -> Slices:
        """Every host's slices within [start_ns, end_ns] of this machine's clock, summed;
        each host's window moved back to end where its fio's I/O ended (the hosts do not
        end a test together: one that laid out its file sooner began and ended sooner)."""
        out = Slices(self.parts[0].slice_ns)
        for part, off in zip(self.parts, self.offsets, strict=True):
            start, end = start_ns - off, end_ns - off
            if active := [k for _, k in part.hist if k * part.slice_ns <= end]:
                last = (max(active) + 1) * part.slice_ns
                if last < end:
                    start, end = start - (end - last), last
            seen = part.between(start, end)
            # each host's slices under keys of their own (the hosts' slices differ);
            # a layer's histogram and the bytes moved are summed over all keys
            for (layer, _), buckets in seen.hist.items():
                out.hist[(layer, len(out.hist))] = dict(buckets)
            for (direction, _), value in seen.bytes.items():
                out.bytes[(direction, len(out.bytes))] = value
        return out

    def span_s(self, start_ns: int, end_ns: int) -> float:
        return max(p.span_s(start_ns - o, end_ns - o)
                   for p, o in zip(self.parts, self.offsets, strict=True))


@dataclass
class _Session:
    host: Host
    proc: subprocess.Popen[str]
    token: str
    lines: list[str] = field(default_factory=list)
    began: threading.Event = field(default_factory=threading.Event)
    offset: int = 0
    reader: threading.Thread | None = None
    said: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=200))
    listener: threading.Thread | None = None  # reads its stderr into ``said``

    def stderr(self) -> str:
        """The last of what it wrote to stderr, once it has ended."""
        if self.listener is not None:
            self.listener.join(5)
        return "".join(self.said)


class HostsTrace:
    """bpftrace on every host while one test runs: ``with HostsTrace(...): ...``, then
    ``slices`` (Merged) or ``error``."""

    def __init__(self, tracer: HostsTracer, expected_s: float | None) -> None:
        self.tracer = tracer
        self.slice_ns = layers.slice_ns(expected_s)
        self.slices: Merged | None = None
        self.error: str | None = None
        self.sessions: list[_Session] = []
        # what a cgroup's cap let through: not counted on the hosts (a sampler on each
        # would be needed; this machine's is execute/capcount.py)
        self.counted: Counted | None = None

    def __enter__(self) -> HostsTrace:
        token = secrets.token_hex(8)
        try:
            for host in self.tracer.hosts:
                self.sessions.append(self._start(host, token))
            deadline = time.monotonic() + layers.READY_S
            for s in self.sessions:
                if not s.began.wait(max(0.1, deadline - time.monotonic())):
                    said = s.stderr() if s.proc.poll() is not None else ""
                    raise TargetError(f"--explain: bpftrace on {s.host.key} "
                                      + (f"could not start: {layers.said(said)}"
                                         if s.proc.poll() is not None else
                                         f"did not attach within {layers.READY_S:g} s"))
        except BaseException:
            self._stop()
            raise
        return self

    def _start(self, host: Host, token: str) -> _Session:
        prog = layers.program(token, [host.server], host.place, host.machine, self.slice_ns)
        argv = [*ssh_argv(host.ssh, self.tracer.config),
                f"sh -c {shlex.quote(TRACE)} sh {shlex.quote(prog)} {layers.KEYS_MAX}"
                f" {layers.STOP_S:g}"]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        except OSError as exc:
            raise TargetError(f"{host.key}: cannot run ssh: {exc.strerror}") from None
        return self._follow(host, proc, token)

    def _follow(self, host: Host, proc: subprocess.Popen[str], token: str) -> _Session:
        """The session of ``proc`` (ssh running TRACE): its lines read as they come, the
        program's beginning (its mark and the host's clock) apart."""
        session = _Session(host, proc, token)
        mark = f"{token} B "

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith(mark) and not session.began.is_set():
                    with contextlib.suppress(ValueError):
                        session.offset = time.monotonic_ns() - int(line[len(mark):])
                    session.began.set()
                else:
                    session.lines.append(line)

        def listen() -> None:  # read as it comes: a full pipe would stop ssh, and bpftrace
            assert proc.stderr is not None  # with it, on its next line (its warnings)
            session.said.extend(proc.stderr)

        session.reader = threading.Thread(target=read, daemon=True)
        session.reader.start()
        session.listener = threading.Thread(target=listen, daemon=True)
        session.listener.start()
        return session

    def __exit__(self, *exc: Any) -> None:
        errors = self._stop()
        if errors:
            self.error = "; ".join(errors)
            return
        parts = [layers.parse("".join(s.lines), self.slice_ns) for s in self.sessions]
        if any(p.keys >= layers.KEYS_MAX * 0.95 for p in parts):
            self.error = ("bpftrace's histogram map filled on a host: the explanation would"
                          " be incomplete")
            return
        self.slices = Merged(parts, [s.offset for s in self.sessions])

    def _stop(self) -> list[str]:
        """Every host's bpftrace told to stop and its maps read; what went wrong, per host
        (nothing where its maps were printed whole, however it ended after)."""
        for s in self.sessions:
            with contextlib.suppress(OSError):
                if s.proc.stdin is not None:
                    s.proc.stdin.write("stop\n")
                    s.proc.stdin.close()
        errors = []
        until = time.monotonic() + layers.STOP_S + SLACK_S  # (the host kills it first)
        for s in self.sessions:
            try:
                s.proc.wait(max(0.1, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                s.proc.kill()
                s.proc.wait()
            if s.reader is not None:
                s.reader.join(5)
            if s.proc.returncode == 0 or layers.ended_whole("".join(s.lines), s.token):
                continue
            if s.proc.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):  # here, there
                errors.append(f"{s.host.key}: {layers.not_ended('host')}")
                continue
            said = s.stderr()
            errors.append(f"{s.host.key}: bpftrace ended with {s.proc.returncode}:"
                          f" {layers.said(said)}")
        return errors
