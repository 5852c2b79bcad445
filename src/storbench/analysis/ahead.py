"""Figures' change points found while their series are still being read: a copy of this
process (fork), made as the read begins (or before what comes before it: made_early),
searches figures (one of each test a series
ran: histories._to_search) as their values come down a pipe, part after part
(edivisive.Splitter), and hands back its answers when they end. Reading 100,000 runs
(~0.2 s on SQLite) and searching them (~0.25 s with numpy's import) then take about the
time of the read and the search's last step, where they took both (a cold `check
--no-change`, `history SERIES`, or `history` over a store of many series).

The copy's answers are taken only for the very values it was sent: find_each takes one
for a question whose key (changepoints.key_of: a digest of the values and the settings,
the key the cache keeps answers by) is the key of values sent, and only when the copy's
digest of what it received is the digest of what was sent. A figure whose points are not
the values sent (a run measured twice: the median of its two) has another key, and is
found as before. As in analysis/forked.py nothing is copied with one CPU to use, another
thread, or no fork; a first part of fewer than PART rows sends nothing and the copy is
ended; and what goes wrong in the copy (it fails, dies, says nothing in time) leaves its
figures to this process.
"""

from __future__ import annotations

import array
import hashlib
import math
import os
import pickle
import select
import signal
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from storbench.analysis import forked

PART = 5_000  # rows of a first part (store.series.PARTS: 10,000) too few to be worth it
PIPE_BYTES = 1 << 20  # asked of the pipe (Linux lets anyone have 1 MiB: 131,072 values)

# a figure to send: what gives its values in a part of a series' rows, and whether it is
# better higher; those of a series chosen from its first part and what else its group of
# rows names (its suite)
Chosen = tuple[Callable[[Sequence[Any]], list[float]], bool]
Choose = Callable[[Any, Sequence[Any]], list[Chosen]]
# the rows of a part, by series: what else each names (its suite), and its rows
Groups = Mapping[str, tuple[Any, Sequence[Any]]]
_HEAD = struct.Struct("qq")  # a message: the figure's number, then its values' count (or
# -1: one value follows, 1.0 if the figure is better higher)
_SETTINGS = struct.Struct("ddq")  # the first message: min_change, max_pvalue, min_runs
# a copy made before its Reading (made_early), not yet taken: its pid, the pipes down to it
# and back, and when it was made
_early: tuple[int, int, int, float] | None = None


@contextmanager
def made_early(wanted: bool = True) -> Iterator[int]:
    """The copy of a Reading opened inside the block made as the block opens: its imports
    (numpy's, ~0.1 s) beside what the command does before its read (cli/common.
    searched_early: storbench's own start, the store opened, a kept answer looked for;
    ~0.1 s on SQLite, ~0.17 s with psycopg's import). The Reading sends it its
    settings; a copy no Reading took (an answer was kept) is ended as the block ends.
    Gives the copy's pid (0: none made). Inside another such block, its copy is the one
    given; or ended at once, not ``wanted`` (a series too short to be searched ahead)."""
    global _early
    if _early is not None and not wanted:
        unwanted, _early = _early, None
        _end(*unwanted[:3])
    if _early is not None or not wanted:
        yield _early[0] if _early is not None else 0
        return
    made = _fork() if forked.may_copy() else None
    _early = None if made is None else (*made, time.monotonic())
    try:
        yield made[0] if made else 0
    finally:
        left, _early = _early, None
        if left is not None:
            _end(*left[:3])


class Reading:
    """Figures' values, as their series are read (``part``: those ``choose`` picks of
    each series), sent to a copy of this process that searches them as they come; ``end``
    when the read is done gives the keys of what was sent, ``answer`` the copy's change
    points of the values of a key, in the cache's form. A context manager: the copy is
    made as it opens (to be ready when the first part comes; made_early's, if one was
    made), and ended and reaped as it closes."""

    def __init__(self, min_change: float, max_pvalue: float, min_runs: int) -> None:
        self.min_change = min_change
        self.settings = (min_change, max_pvalue, min_runs)
        self.chosen: dict[str, list[tuple[int, Callable[[Sequence[Any]], list[float]]]]] | None
        self.chosen = None  # by series: its figures' numbers and what gives their values
        self.sent: list[array.array[float]] = []  # by number: the values sent
        self.better: list[bool] = []  # and whether each is better higher
        self.queued = bytearray()  # sent, not yet taken by the pipe
        self.pid = 0
        self.down = self.up = -1  # the pipes to the copy and back
        self.keys: dict[str, int] = {}  # the key of each figure's values sent: its number
        self.answers: dict[int, Any] | None = None  # the copy's, once it gave them
        self.began = self.took = 0.0  # the copy's start, and from it to the read's end

    def __enter__(self) -> Reading:
        global _early
        if _early is not None:
            (self.pid, self.down, self.up, self.began), _early = _early, None
        elif forked.may_copy() and (made := _fork()) is not None:
            (self.pid, self.down, self.up), self.began = made, time.monotonic()
        if self.down >= 0:
            self.queued += _SETTINGS.pack(*self.settings)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        """Nothing (more) sent, nothing taken from the copy: the copy ended and reaped now
        (until it is, each page this process writes to is copied for it first)."""
        self.keys = {}
        _end(self.pid, self.down, self.up)
        self.pid, self.down, self.up = 0, -1, -1

    def part(self, groups: Groups, choose: Choose) -> None:
        """The next rows read, by series: each series' figures' values in them sent on
        (the figures chosen by ``choose`` from the first part, whose rows are PART or
        more: else nothing is sent)."""
        if self.down < 0:
            return
        if self.chosen is None:
            self.chosen = {}
            if sum(len(rows) for _, rows in groups.values()) >= PART:
                for name, (tag, rows) in groups.items():
                    for values_in, better in choose(tag, rows):
                        self.chosen.setdefault(name, []).append((len(self.sent), values_in))
                        self.queued += _HEAD.pack(len(self.sent), -1)
                        self.queued += array.array("d", [float(better)]).tobytes()
                        self.sent.append(array.array("d"))
                        self.better.append(better)
            if not self.chosen:
                self._stop()
                return
        for name, (_, rows) in groups.items():
            for at, values_in in self.chosen.get(name, ()):
                more = array.array("d", values_in(rows))
                if more:
                    self.sent[at].extend(more)
                    self.queued += _HEAD.pack(at, len(more))
                    self.queued += more.tobytes()
        if not self._send(wait=False):
            self._stop()

    def end(self) -> set[str]:
        """The read is done: the rest sent and the pipe closed. The keys of the figures'
        values sent (changepoints.key_of's; none: nothing was sent)."""
        if self.down >= 0:
            if self.chosen and self._send(wait=True):
                os.close(self.down)
                self.down = -1
                self.took = time.monotonic() - self.began
                from storbench.analysis.changepoints import key_of

                self.keys = {key_of(values, better, *self.settings): at for at, (values, better)
                             in enumerate(zip(self.sent, self.better, strict=True))}
            else:
                self._stop()
        return set(self.keys)

    def answer(self, key: str) -> list[Any] | None:
        """The copy's change points of the values sent under ``key`` (changepoints.
        found_in's; all of them waited for once: as long again as the copy has taken,
        and forked.WAIT_S more); None: it gave none."""
        if key not in self.keys:
            return None
        if self.answers is None:
            self.answers = self._answers()
        return self.answers.get(self.keys[key])

    def _answers(self) -> dict[int, Any]:
        """The copy's answers by figure, each only where the copy's digest of the values
        it received is the digest of those sent."""
        if self.pid == 0:
            return {}
        data, reaped = forked.received(self.up, self.pid, time.monotonic() + self.took
                                       + forked.WAIT_S)
        if reaped:
            self.pid = 0
        if data is None:  # (a copy still running is ended as this closes)
            return {}
        try:
            said = pickle.loads(data)
            return {at: answer for at, (got, answer) in said.items()
                    if got == hashlib.sha256(self.sent[at].tobytes()).hexdigest()
                    and isinstance(answer, list)}
        except Exception:  # not what the copy meant to say: found here instead
            return {}

    def _send(self, wait: bool) -> bool:
        """What is queued written to the pipe, as much as it takes (``wait``: all of it,
        for at most forked.WAIT_S). False: the copy is gone, or took nothing in time."""
        deadline = time.monotonic() + forked.WAIT_S
        while self.queued:
            try:
                del self.queued[:os.write(self.down, self.queued)]
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


def _fork() -> tuple[int, int, int] | None:
    """A copy made (it loads what it searches with, and waits for its settings and
    values): its pid, the pipe down to it (not blocking) and the one back; None: a pipe or
    the fork refused."""
    try:
        down_read, down = os.pipe()
    except OSError:
        return None
    try:
        up, up_write = os.pipe()
    except OSError:
        _end(0, down_read, down)
        return None
    try:
        import fcntl

        fcntl.fcntl(down, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass  # a smaller pipe: parts wait here, queued, until the copy takes them
    try:
        pid = os.fork()
    except OSError:
        _end(0, down_read, down, up, up_write)
        return None
    if pid == 0:  # the copy: never returns
        try:
            os.close(down)
            os.close(up)
            _search(down_read, up_write)
        finally:
            os._exit(1)
    os.close(down_read)
    os.close(up_write)
    os.set_blocking(down, False)
    return pid, down, up


def _end(pid: int, *fds: int) -> None:
    """The pipes ``fds`` closed and copy ``pid`` (0: none) ended and reaped (until it is,
    each page this process writes to is copied for it first)."""
    for fd in fds:
        if fd >= 0:
            os.close(fd)
    if pid:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _search(down: int, up: int) -> None:
    """The copy: its settings, then each figure's messages (whether it is better higher,
    then its values) searched as they come; at their end the answers, each with a digest
    of its values, sent back. Then gone without a word (no atexit, no buffers flushed, no
    database closed)."""
    code = 1
    try:
        from storbench.analysis import edivisive
        from storbench.analysis.changepoints import found_in

        settings: tuple[float, float, int] | None = None
        splitters: dict[int, edivisive.Splitter] = {}
        better: dict[int, bool] = {}
        digests: dict[int, Any] = {}
        # a figure's values held until they vary by more than min_change (until then
        # find_each would not search it: a figure that never does is not asked for)
        held: dict[int, array.array[float]] = {}
        lows: dict[int, float] = {}
        highs: dict[int, float] = {}
        data = bytearray()
        while chunk := os.read(down, 1 << 20):
            data += chunk
            at = 0  # each whole message taken, the rest kept for the next chunk
            if settings is None:
                if len(data) < _SETTINGS.size:
                    continue
                settings = min_change, max_pvalue, min_runs = _SETTINGS.unpack_from(data)
                at = _SETTINGS.size
            while len(data) - at >= _HEAD.size:
                figure, count = _HEAD.unpack_from(data, at)
                size = _HEAD.size + 8 * max(count, 1)
                if len(data) - at < size:
                    break
                values = array.array("d")
                values.frombytes(data[at + _HEAD.size:at + size])
                if count < 0:  # a new figure
                    better[figure] = bool(values[0])
                    splitters[figure] = edivisive.Splitter(edivisive.first_pvalue(max_pvalue))
                    digests[figure] = hashlib.sha256()
                    held[figure], lows[figure], highs[figure] = values[:0], math.inf, -math.inf
                else:
                    digests[figure].update(values)
                    if figure not in held:
                        splitters[figure].feed(values)
                    else:
                        held[figure].extend(values)
                        lows[figure] = lo = min(lows[figure], min(values))
                        highs[figure] = max(highs[figure], max(values))
                        if lo <= 0 or highs[figure] / lo - 1 > min_change:
                            splitters[figure].feed(held.pop(figure))
                at += size
            del data[:at]
        if not data and settings is not None:
            said = {}
            for figure, splitter in splitters.items():
                if figure in held:  # never varied: not searched
                    continue
                values_sent = cast(list[float], splitter.values[:splitter.n].tolist())
                said[figure] = (digests[figure].hexdigest(), found_in(
                    values_sent, better[figure], min_change, max_pvalue, min_runs,
                    weak=splitter.end()))
            forked.send(up, said)
            code = 0
    finally:
        os._exit(code)
