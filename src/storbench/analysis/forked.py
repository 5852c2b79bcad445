"""Work shared with a second process: the change points of many figures (`history` over
a store of many series, a series whose figures all moved) found on two CPUs at once.

A copy of this process (fork: nothing imported again, the figures already in memory)
finds about half of them and hands its answers back through a pipe; this one finds the
rest. The answers are those one process finds: the same function on the same values.
Nothing is shared when there is one CPU to use, too little work to be worth a process
(a few milliseconds), another thread in this process (a copy of a process with threads
may wait forever on a lock one of them held), or no fork on this system; and anything
that goes wrong in the copy (it fails, dies, says nothing in time) leaves its share to
this process, found again here.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MIN_WORK = 20_000  # points: E-Divisive means takes ~2.7 µs a point (~55 ms here), a
# second process ~3 ms to start
WAIT_S = 10.0  # for the copy's answers beyond the time this process took for its own


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def each(fn: Callable[[T], R], items: Sequence[T], sizes: Sequence[int],
         min_work: int | None = None) -> list[R]:
    """[fn(item) for item in items], about half of them (by ``sizes``, each item's work)
    in a copy of this process when that is worth it (``min_work``: at least this much
    work in all, MIN_WORK by default)."""
    least = MIN_WORK if min_work is None else min_work
    if len(items) < 2 or sum(sizes) < least or not may_copy():
        return [fn(x) for x in items]
    theirs = _share(sizes)
    mine = sorted(set(range(len(items))) - set(theirs))
    out: dict[int, R] = {}
    answers = _in_a_copy(fn, items, theirs, lambda: out.update((i, fn(items[i])) for i in mine))
    if answers is None or len(answers) != len(theirs):  # the copy's share: found here
        answers = [fn(items[i]) for i in theirs]
    out.update(zip(theirs, answers, strict=True))
    return [out[i] for i in range(len(items))]


def may_copy() -> bool:
    """Whether a copy of this process may work beside it: two CPUs to use, fork, and no
    other thread (a copy of a process with threads may wait forever on a lock one of
    them held)."""
    return cpus() >= 2 and hasattr(os, "fork") and threading.active_count() == 1


def send(write: int, value: Any) -> None:
    """A copy's answer, pickled, written whole down the pipe ``write`` (received's)."""
    said = memoryview(pickle.dumps(value))
    while said:
        said = said[os.write(write, said):]


def received(read: int, pid: int, deadline: float) -> tuple[bytes | None, bool]:
    """What copy ``pid`` wrote down the pipe ``read`` until it closed it, if that came
    before ``deadline`` (time.monotonic's) and the copy then ended well; and whether it
    was reaped here (else it is still running: the caller ends it)."""
    chunks = []
    waiting = select.poll()  # (not select(): a descriptor above 1023 is refused there)
    waiting.register(read, select.POLLIN)
    while (left := deadline - time.monotonic()) > 0 and waiting.poll(left * 1000):
        chunk = os.read(read, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    else:
        return None, False  # nothing in time
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None, True
    return b"".join(chunks), True


def _share(sizes: Sequence[int]) -> list[int]:
    """The items for the copy: the largest first, each to the lighter of two shares."""
    loads = [0, 0]
    shares: tuple[list[int], list[int]] = ([], [])
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lighter = 0 if loads[0] <= loads[1] else 1
        shares[lighter].append(i)
        loads[lighter] += sizes[i]
    return sorted(shares[1])


def _in_a_copy(fn: Callable[[T], R], items: Sequence[T], theirs: list[int],
               meanwhile: Callable[[], None]) -> list[R] | None:
    """fn of ``theirs`` items found in a copy of this process while ``meanwhile`` runs
    here; None when the copy could not give them."""
    try:
        read, write = os.pipe()
    except OSError:
        meanwhile()
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        meanwhile()
        return None
    if pid == 0:  # the copy: its answers down the pipe, then gone without a word
        code = 1
        try:
            os.close(read)
            send(write, [fn(items[i]) for i in theirs])
            code = 0
        finally:
            os._exit(code)  # no atexit, no buffers flushed, no database closed
    os.close(write)
    try:
        started = time.monotonic()
        meanwhile()
        deadline = time.monotonic() + (time.monotonic() - started) + WAIT_S
        data, reaped = received(read, pid, deadline)
        if reaped:
            pid = 0
        if data is None:  # (a copy still running is ended below)
            return None
        try:
            answers: list[R] = pickle.loads(data)
        except Exception:  # not what the copy meant to say: found here instead
            return None
        return answers
    finally:
        os.close(read)
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
