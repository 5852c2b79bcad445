"""What storbench itself does on a target's file system during a run, in a child
process that can be left behind.

A file system that stops answering (a network server gone silent) blocks a system
call on it in the kernel, past SIGKILL: a thread of storbench's own stuck there
would keep storbench from ever exiting. So removing files, measuring what is left
and the metadata probe run in a child (execute/scratchops.py, run as a file with
``python -I``: it loads nothing of storbench's); storbench waits for it with a time
limit, reports a stuck one by its PID and goes on. The limit begins once the child says
it is up (its Python's start is given START_S of its own: a child that does not start
is the machine's fault, not the file system's).

One child serves a process's operations one after the other (started at the first,
ending when storbench does); one that does not answer in time is killed and left, and
the next operation starts a child anew. An operation asked while the serving child is
busy (another thread's) gets a child of its own.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from storbench.errors import StorbenchError, TargetHung
from storbench.execute import scratchops
from storbench.execute.scratchops import OPERATIONS, remove
from storbench.execute.workdir import release

__all__ = ["OPERATIONS", "Stuck", "call", "remove_marked", "start", "stat_mode"]

CHECK_EVERY_S = 0.1  # call(check=...): how often a wait looks for a signal
START_S = 60.0  # for a child's Python to start, before its operation's own limit begins


class Stuck(Exception):
    """The child did not finish in time (the file system does not respond); or, not
    ``started``, its Python did not even start (the machine is too busy: its file
    system is not at fault)."""

    def __init__(self, pid: int, waited_s: float, started: bool = True) -> None:
        super().__init__(f"no answer within {waited_s:.0f} s (PID {pid} left running)"
                         if started else f"storbench's child process did not start within"
                         f" {waited_s:.0f} s (PID {pid} left running); is the machine"
                         " overloaded?")
        self.pid, self.started = pid, started

    def blamed(self, said: str) -> StorbenchError:
        """The error to raise: TargetHung with ``said`` (its file system does not respond),
        or, where the child never started, this one's own words (not the target's fault)."""
        return TargetHung(said) if self.started else StorbenchError(str(self))


# + serve, or OP PATH ...: its file run isolated (-I), as nothing of storbench's is
# needed: nothing looked for in the working directory (`-m` looked there first, and on a
# file system gone silent the child hung before it could say it was up)
CHILD = (sys.executable, "-I", scratchops.__file__)


def start(*args: str) -> subprocess.Popen[str]:
    """A child running the metadata probe; its output comes back through a pipe of its
    own (never storbench's stdout, which a stuck child would hold open)."""
    return subprocess.Popen([*CHILD, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)


def _spawn(*args: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """A child serving operations (``serve``, its stdin a pipe) or doing one; its
    answers are read as bytes (_answer)."""
    return subprocess.Popen([*CHILD, *args], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)


class _Server:
    """The child that serves this process's operations (scratchops ``serve``)."""

    lock = threading.Lock()  # one operation at a time
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def ask(cls, args: tuple[str, ...], timeout_s: float,
            check: Callable[[], None] | None) -> str:
        proc, fresh = cls._sent(json.dumps(args).encode() + b"\n")
        try:
            out = _answer(proc, timeout_s, check, fresh)
        except BaseException:
            proc.kill()  # takes effect if and when the kernel lets go; not waited for
            cls.proc = None
            raise
        if out is None:  # it died: as a one-off child that printed nothing
            cls.proc = None
            return ""
        return out

    @classmethod
    def _sent(cls, request: bytes) -> tuple[subprocess.Popen[bytes], bool]:
        """The serving child (started if there is none), ``request`` written to it, and
        whether it was started for it; a child that ended since it was last asked is
        replaced, once."""
        for again in (True, False):
            proc, fresh = cls.proc, False
            if proc is None or proc.poll() is not None:
                proc = cls.proc = _spawn("serve", stdin=subprocess.PIPE)
                fresh = True
            assert proc.stdin is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
                return proc, fresh
            except BrokenPipeError:
                cls.proc = None
                if not again:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def end(cls) -> None:
        """Let the child end (its stdin closed); not waited for."""
        if cls.proc is not None and cls.proc.stdin is not None:
            try:
                cls.proc.stdin.close()
            except OSError:
                pass
            cls.proc = None


atexit.register(_Server.end)


def call(*args: str, timeout_s: float, check: Callable[[], None] | None = None) -> str:
    """Run one operation to its end and return what it printed; Stuck past the limit.

    ``check`` (a SignalGuard's) is called every CHECK_EVERY_S while it waits: what it
    raises (a signal came) ends the wait at once, not at the limit, which on a file
    system gone silent would keep Ctrl-C waiting for a minute."""
    if _Server.lock.acquire(blocking=False):
        try:
            return _Server.ask(args, timeout_s, check)
        finally:
            _Server.lock.release()
    proc = _spawn(*args)
    try:
        out = _answer(proc, timeout_s, check, True)
    except BaseException:
        proc.kill()  # takes effect if and when the kernel lets go; not waited for
        raise
    assert proc.stdout is not None
    proc.stdout.close()  # it ends by itself once it has answered
    return out or ""


def _answer(proc: subprocess.Popen[bytes], timeout_s: float,
            check: Callable[[], None] | None, starting: bool) -> str | None:
    """A child's answer to the operation it was given (None: it ended without one);
    Stuck when it takes longer than ``timeout_s``. A child ``starting`` says "+" once
    its Python is up, before it looks at the file system: its start is given START_S
    and the operation's limit begins then (under emulation a start alone took over 5 s,
    and a look on a local file system was called one that does not respond)."""
    assert proc.stdout is not None
    fd, got = proc.stdout.fileno(), b""
    limit = START_S if starting else timeout_s
    ends = time.monotonic() + limit
    while not got.endswith(b"\n"):
        if check is not None:
            check()
        left = ends - time.monotonic()
        if left <= 0:
            raise Stuck(proc.pid, limit, started=not starting)
        ready, _, _ = select.select([fd], [], [], min(left, CHECK_EVERY_S) if check else left)
        if ready:
            if not (chunk := os.read(fd, 65536)):
                return None
            got += chunk
            if starting and got.startswith(b"+"):
                got, starting, limit = got[1:], False, timeout_s
                ends = time.monotonic() + timeout_s
    return str(json.loads(got)["out"])


def remove_marked(path: Path, timeout_s: float | None = None) -> bool:
    """Delete a directory that carries storbench's marker (others are left alone).

    With ``timeout_s``, in a child process: False when it did not
    finish in time (the file system does not respond); it goes on by itself, and a
    later run removes what is left.
    """
    # The lock goes first: on a FUSE file system a marker still open would only be
    # renamed (.fuse_hidden...) and the directory could not go.
    release(path)
    if timeout_s is None:
        remove(path)  # here, in this process
        return True
    try:
        call("remove", str(path), timeout_s=timeout_s)
    except Stuck:
        return False
    return True


def stat_mode(path: Path, timeout_s: float) -> int | None:
    """``path``'s st_mode, looked at in a child (None: it does not exist or cannot be
    looked at); Stuck when its file system does not answer within ``timeout_s``."""
    mode = json.loads(call("mode", str(path), timeout_s=timeout_s))
    return int(mode) if mode is not None else None
