"""A figure searched while its series is read (analysis/ahead.py): a real fork and real
pipes; the answers are the ones this process finds alone, whatever becomes of the copy,
and the copy's are taken only for the values it was sent."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from storbench.analysis import ahead, changepoints, forked
from storbench.analysis.changepoints import MAX_PVALUE, MIN_CHANGE, MIN_RUNS

two_cpus = pytest.mark.skipif(forked.cpus() < 2, reason="a copy is made only with 2 CPUs")
ROOT = Path(__file__).resolve().parents[2]


def _rows(n: int, seed: int = 1, noise: float = 0.01) -> list[tuple[Any, ...]]:
    """Rows as a series' read gives them (run id, start, test, error, IOPS), the IOPS 30%
    lower from 0.7 n on."""
    rng = random.Random(seed)
    return [(i + 1, f"t{i}", "randread", 0, 24_000 * (0.7 if i >= 0.7 * n else 1)
             * rng.gauss(1, noise)) for i in range(n)]


def _iops(rows: Sequence[Any]) -> list[float]:
    return [float(r[4]) for r in rows if not r[3]]


def _read(reading: ahead.Reading, rows: list[tuple[Any, ...]], part: int) -> None:
    """The rows given as a read in parts gives them, then the read's end."""
    for at in range(0, len(rows), part):
        reading.part({"s": (None, rows[at:at + part])}, lambda suite, first: [(_iops, True)])
    reading.end()


def _gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # ended and reaped: no zombie left behind
        return True
    return False


@two_cpus
def test_a_figure_read_in_parts_is_searched_in_a_copy(monkeypatch):
    monkeypatch.setattr(ahead, "PART", 500)
    rows = _rows(6000)
    values = _iops(rows)
    with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:
        copy = reading.pid
        assert copy and copy != os.getpid()
        _read(reading, rows, 500)
        key = changepoints.key_of(values, True, MIN_CHANGE, MAX_PVALUE, MIN_RUNS)
        assert set(reading.keys) == {key}
        answer = reading.answer(key)
    assert answer == changepoints.found_in(values, True, MIN_CHANGE, MAX_PVALUE, MIN_RUNS)
    assert [a[0] for a in answer] == [4200]  # the drop, where it is
    assert _gone(copy)


@two_cpus
def test_find_each_takes_the_copys_answer_and_never_searches_here():
    """In a process of its own: the change points are the ones found alone, and this
    process never loaded the search (edivisive, numpy): the copy searched."""
    script = f"""
import sys
sys.path.insert(0, {str(ROOT / 'tests' / 'analysis')!r})
from storbench.analysis import ahead, changepoints
from test_ahead import _iops, _read, _rows
ahead.PART = 500
rows = _rows(6000)
question = (_iops(rows), [r[0] for r in rows], True)
with ahead.Reading(changepoints.MIN_CHANGE, changepoints.MAX_PVALUE,
                   changepoints.MIN_RUNS) as reading:
    _read(reading, rows, 500)
    (got,) = changepoints.find_each([question], ahead=reading)
print([c.run for c in got], "storbench.analysis.edivisive" in sys.modules,
      "numpy" in sys.modules)
(alone,) = changepoints.find_each([question])
print(got == alone)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True)
    assert out.stdout.split("\n")[:2] == ["[4201] False False", "True"], out


@two_cpus
@pytest.mark.parametrize("fate", ["is killed", "fails", "is too slow"])
def test_what_the_copy_does_not_give_is_found_here(fate, monkeypatch):
    from storbench.analysis import edivisive

    me = os.getpid()
    monkeypatch.setattr(ahead, "PART", 500)
    if fate == "is too slow":
        monkeypatch.setattr(forked, "WAIT_S", 0.2)
    end = edivisive.Splitter.end

    def ending(self: edivisive.Splitter) -> list[Any]:  # in the copy only
        if os.getpid() != me:
            if fate == "fails":
                raise RuntimeError("the copy fails")
            time.sleep(30)
        return end(self)

    monkeypatch.setattr(edivisive.Splitter, "end", ending)
    rows = _rows(4000, seed=2)
    question = (_iops(rows), [r[0] for r in rows], True)
    started = time.monotonic()
    with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:
        copy = reading.pid
        if fate == "is killed":
            os.kill(copy, signal.SIGKILL)
        _read(reading, rows, 500)
        (got,) = changepoints.find_each([question], ahead=reading)
    assert time.monotonic() - started < 20  # the slow copy was not waited for
    monkeypatch.setattr(edivisive.Splitter, "end", end)
    assert got == changepoints.find_each([question])[0] and [c.run for c in got] == [2801]
    assert _gone(copy)


@two_cpus
def test_the_copys_answer_is_taken_for_the_values_it_was_sent_only(monkeypatch):
    """A figure whose points are not the values sent (a run measured twice: the median
    of its two) is found here: the copy's answer is not even asked for."""
    monkeypatch.setattr(ahead, "PART", 500)
    rows = _rows(3000, seed=3)
    values = _iops(rows)
    medians = [*values[:100], (values[100] + values[101]) / 2, *values[102:]]
    asked: list[Any] = []
    answer = ahead.Reading.answer
    monkeypatch.setattr(ahead.Reading, "answer", lambda self, key: asked.append(key)
                        or answer(self, key))
    runs = list(range(1, len(medians) + 1))
    with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:
        _read(reading, rows, 500)
        (got,) = changepoints.find_each([(medians, runs, True)], ahead=reading)
    assert not asked
    assert got == changepoints.find_changes(medians, runs, True) and got


@pytest.mark.parametrize("why", ["one part", "one CPU", "a thread", "no figure"])
def test_nothing_is_sent_where_nothing_would_be_gained(why, monkeypatch):
    """A series read in one part, one CPU to use, another thread in this process, no
    figure worth searching: nothing sent, no key, the copy (if one was made) ended and
    reaped; the answers are found here."""
    monkeypatch.setattr(ahead, "PART", 5000 if why == "one part" else 500)
    if why == "one CPU":
        monkeypatch.setattr(forked, "cpus", lambda: 1)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    if why == "a thread":
        other.start()
    rows = _rows(3000, seed=4)
    try:
        with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:
            copy = reading.pid
            for at in range(0, len(rows), 2000 if why == "one part" else 500):
                reading.part({"s": (None, rows[at:at + 2000 if why == "one part"
                                            else at + 500])},
                             lambda suite, first: [] if why == "no figure" else [(_iops, True)])
            assert reading.end() == set() and reading.answer("any") is None
            assert not reading.sent
    finally:
        stop.set()
        if other.is_alive():
            other.join()
    if why in ("one CPU", "a thread") or forked.cpus() < 2:
        assert copy == 0
    else:
        assert copy and _gone(copy)


@two_cpus
def test_a_figure_is_searched_from_where_it_begins_to_vary(monkeypatch):
    """A figure steady in its first parts (within --min-change: find_each would not
    search it yet) is held by the copy, and searched from its first value once it
    varies; one that never varies is not searched, and nobody waits for it."""
    monkeypatch.setattr(ahead, "PART", 500)
    rows = _rows(6000, seed=5, noise=0.002)  # steady until the drop at 4200
    steady = [(*r[:4], 1000.0) for r in rows]
    values = _iops(rows)
    questions = [(values, [r[0] for r in rows], True),
                 (_iops(steady), [r[0] for r in rows], True)]
    assert max(values[:4200]) / min(values[:4200]) - 1 < MIN_CHANGE
    with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:
        for at in range(0, len(rows), 500):
            reading.part({"moves": (None, rows[at:at + 500]),
                          "steady": (None, steady[at:at + 500])},
                         lambda suite, first: [(_iops, True)])
        started = time.monotonic()
        got = changepoints.find_each(questions, ahead=reading)
        assert time.monotonic() - started < 5
        key = changepoints.key_of(values, True, MIN_CHANGE, MAX_PVALUE, MIN_RUNS)
        assert reading.answers is not None and set(reading.answers) == {reading.keys[key]}
    assert got == changepoints.find_each(questions)
    assert [c.run for c in got[0]] == [4201] and got[1] == []


@two_cpus
def test_a_copy_made_early_searches_with_the_settings_of_the_reading_that_takes_it(
        monkeypatch):
    """made_early's copy (`check --no-change` makes it as it begins) is the Reading's,
    which sends it its settings: asked for 2,000 runs on each side of a change, it finds
    none 1,800 runs before the end, where the default finds it. One that no Reading took
    (an answer was kept) is ended and reaped as the block ends; one made by an outer
    block, at once where the inner one does not want it."""
    monkeypatch.setattr(ahead, "PART", 500)
    rows = _rows(6000, seed=6)
    values = _iops(rows)
    with ahead.made_early() as early:
        assert early and early != os.getpid()
        with ahead.Reading(MIN_CHANGE, MAX_PVALUE, 2000) as reading:
            assert reading.pid == early
            _read(reading, rows, 500)
            answer = reading.answer(changepoints.key_of(values, True, MIN_CHANGE,
                                                        MAX_PVALUE, 2000))
        assert _gone(early)
    assert answer == changepoints.found_in(values, True, MIN_CHANGE, MAX_PVALUE, 2000) == []
    assert [a[0] for a in changepoints.found_in(values, True, MIN_CHANGE, MAX_PVALUE,
                                                MIN_RUNS)] == [4200]
    with ahead.made_early() as unused, ahead.made_early() as inner:
        assert unused and inner == unused  # (`check` makes it, then `history`'s code asks)
    assert _gone(unused)
    with ahead.made_early() as outer:  # (made as a command began: cli/common.searched_early)
        with ahead.made_early(wanted=False) as short:  # a series too short: ended at once
            assert short == 0 and _gone(outer)
        with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:
            assert reading.pid not in (0, outer)  # one of its own
    with ahead.made_early(wanted=False) as none:  # (a series too short)
        assert none == 0
    with ahead.Reading(MIN_CHANGE, MAX_PVALUE, MIN_RUNS) as reading:  # one of its own
        assert reading.pid not in (0, early, unused)
