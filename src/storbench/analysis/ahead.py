"""A figure's change points found while its series is still being read: a copy of this
process (fork), made as the read begins, searches the windows of one figure as its
values come down a pipe, part after part (edivisive.Splitter), and hands back its answer
when they end. Reading 100,000 runs (~0.2 s on SQLite) and searching them (~0.25 s with
numpy's import) then take about the time of the read and the search's last step, where
they took both (a cold `check --no-change` or `history SERIES` of a long series).

The copy's answer is taken only for the very values it was sent: find_each takes it for
the question whose key (changepoints._key: a digest of the values and the settings, the
key the cache keeps answers by) is the key of the values sent, and only when the copy's
digest of what it received is the digest of what was sent. A figure whose points are not
the values sent (a run measured twice: the median of its two) has another key, and is
found as before. As in analysis/forked.py nothing is copied with one CPU to use, another
thread, or no fork; a series read in one part (under PART rows) sends nothing and the
copy is ended; and what goes wrong in the copy (it fails, dies, says nothing in time)
leaves the figure to this process.
"""

from __future__ import annotations

import array
import hashlib
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from storbench.analysis import forked

PART = 10_000  # rows: a first part smaller than this is the whole series, too little
PIPE_BYTES = 1 << 20  # asked of the pipe (Linux lets anyone have 1 MiB: 131,072 values)

# a figure to send: what gives its values in a part of the rows, and whether it is better
# higher; chosen from a series' first part (None: none is worth it)
Chosen = tuple[Callable[[Sequence[Any]], list[float]], bool]
Choose = Callable[[Sequence[Any]], Chosen | None]


class Reading:
    """One figure's values, as its series is read (``part``), sent to a copy of this
    process that searches them as they come; ``end`` when the read is done gives the key
    of what was sent, ``answer`` the copy's change points in the cache's form. A context
    manager: the copy is made as it opens (to be ready when the first part comes), and
    ended and reaped as it closes."""

    def __init__(self, min_change: float, max_pvalue: float, min_runs: int) -> None:
        self.min_change = min_change
        self.settings = (min_change, max_pvalue, min_runs)
        self.values: Callable[[Sequence[Any]], list[float]] | None = None
        self.higher_is_better = True
        self.sent = array.array("d")
        self.queued = b""  # sent, not yet taken by the pipe
        self.pid = 0
        self.down = self.up = -1  # the pipes to the copy and back
        self.key: str | None = None
        self.began = self.took = 0.0  # the copy's start, and from it to the read's end

    def __enter__(self) -> Reading:
        if forked.cpus() >= 2 and hasattr(os, "fork") and threading.active_count() == 1:
            self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.down, self.up):
            if fd >= 0:
                os.close(fd)
        self.down = self.up = -1
        if self.pid:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0

    def parts(self, choose: Choose) -> Callable[[Sequence[Any]], None]:
        """``part``, for a read that gives its rows in parts."""
        return lambda rows: self.part(rows, choose)

    def part(self, rows: Sequence[Any], choose: Choose) -> None:
        """The next rows read: the figure's values in them sent on (the figure chosen by
        ``choose`` at the first)."""
        if self.down < 0:
            return
        if self.values is None:
            chosen = choose(rows) if len(rows) >= PART else None
            if chosen is None:
                self._stop()
                return
            self.values, self.higher_is_better = chosen
            # (the copy is told first whether the figure is better higher)
            self.queued = array.array("d", [float(self.higher_is_better)]).tobytes()
        more = array.array("d", self.values(rows))
        self.sent.extend(more)
        self.queued += more.tobytes()
        if not self._send(wait=False):
            self._stop()

    def end(self) -> str | None:
        """The read is done: the rest sent and the pipe closed. The key of the values
        sent (None: none were)."""
        if self.down >= 0:
            if self.values is not None and self._send(wait=True):
                os.close(self.down)
                self.down = -1
                self.took = time.monotonic() - self.began
                from storbench.analysis.changepoints import _key

                self.key = _key(self.sent, self.higher_is_better, *self.settings)
            else:
                self._stop()
        return self.key

    def answer(self) -> list[Any] | None:
        """The copy's change points of the values sent (changepoints.found_in's), waited
        for (as long again as the copy has taken, and forked.WAIT_S more); None: it gave
        none."""
        if self.key is None or self.pid == 0:
            return None
        deadline = time.monotonic() + self.took + forked.WAIT_S
        chunks = []
        waiting = select.poll()  # (not select(): a descriptor above 1023 is refused there)
        waiting.register(self.up, select.POLLIN)
        while (left := deadline - time.monotonic()) > 0 and waiting.poll(left * 1000):
            chunk = os.read(self.up, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            return None  # nothing in time: the copy is ended as this closes
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return None
        try:
            got, answer = pickle.loads(b"".join(chunks))
        except Exception:  # not what the copy meant to say: found here instead
            return None
        if got != hashlib.sha256(self.sent.tobytes()).hexdigest():
            return None
        return answer if isinstance(answer, list) else None

    def _start(self) -> None:
        """The copy made: it loads what it searches with, and waits for values."""
        try:
            down_read, self.down = os.pipe()
        except OSError:
            return
        try:
            self.up, up_write = os.pipe()
        except OSError:
            self._stop()
            os.close(down_read)
            return
        try:
            import fcntl

            fcntl.fcntl(self.down, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (ImportError, AttributeError, OSError):
            pass  # a smaller pipe: parts wait here, queued, until the copy takes them
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            os.close(self.down)
            os.close(self.up)
            _search(down_read, up_write, self.settings)  # never returns
        os.close(down_read)
        os.close(up_write)
        if pid < 0:
            self._stop()
            return
        os.set_blocking(self.down, False)
        self.pid, self.began = pid, time.monotonic()

    def _send(self, wait: bool) -> bool:
        """What is queued written to the pipe, as much as it takes (``wait``: all of it,
        for at most forked.WAIT_S). False: the copy is gone, or took nothing in time."""
        deadline = time.monotonic() + forked.WAIT_S
        while self.queued:
            try:
                self.queued = self.queued[os.write(self.down, self.queued):]
            except BlockingIOError:
                if not wait:
                    return True
                ready = select.poll()
                ready.register(self.down, select.POLLOUT)
                if (left := deadline - time.monotonic()) <= 0 or not ready.poll(left * 1000):
                    return False
            except OSError:  # (BrokenPipeError: the copy is gone)
                return False
        return True

    def _stop(self) -> None:
        """Nothing (more) sent, and nothing taken from the copy: it ends as its pipe
        closes, or as this closes."""
        self.key = None
        if self.down >= 0:
            os.close(self.down)
            self.down = -1


def _search(down: int, up: int, settings: tuple[float, float, int]) -> None:
    """The copy: whether the figure is better higher, then its values, searched as they
    come; the answer and a digest of the values sent back. Then gone without a word (no
    atexit, no buffers flushed, no database closed)."""
    code = 1
    try:
        from storbench.analysis import edivisive
        from storbench.analysis.changepoints import found_in

        min_change, max_pvalue, min_runs = settings
        splitter = edivisive.Splitter(edivisive.first_pvalue(max_pvalue))
        digest = hashlib.sha256()
        data, flag = b"", None
        while chunk := os.read(down, 1 << 20):
            data += chunk
            if flag is None and len(data) >= 8:
                flag, data = array.array("d", data[:8])[0], data[8:]
            whole = len(data) - len(data) % 8
            if flag is not None and whole:
                digest.update(data[:whole])
                values = array.array("d")
                values.frombytes(data[:whole])
                splitter.feed(values)
                data = data[whole:]
        if flag is not None and not data:
            values_sent = cast(list[float], splitter.values[:splitter.n].tolist())
            answer = found_in(values_sent, bool(flag), min_change, max_pvalue, min_runs,
                              weak=splitter.end())
            said = memoryview(pickle.dumps((digest.hexdigest(), answer)))
            while said:
                said = said[os.write(up, said):]
            code = 0
    finally:
        os._exit(code)
