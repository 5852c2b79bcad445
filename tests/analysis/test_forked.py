"""Work shared with a copy of the process (analysis/forked.py): real fork, real pipe; the
answers are the ones one process gives, whatever becomes of the copy."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from storbench.analysis import changepoints, forked

two_cpus = pytest.mark.skipif(forked.cpus() < 2, reason="a copy is made only with 2 CPUs")


def _doubled(x: int) -> tuple[int, int]:
    return 2 * x, os.getpid()


@two_cpus
def test_about_half_the_work_is_done_in_a_copy_with_the_same_answers():
    items = list(range(7))
    sizes = [5, 1, 9, 2, 7, 3, 4]
    got = forked.each(_doubled, items, sizes, min_work=0)
    assert [v for v, _ in got] == [2 * x for x in items]
    pids = {x: pid for x, (_, pid) in zip(items, got, strict=True)}
    copy = {x for x, pid in pids.items() if pid != os.getpid()}
    assert copy and len(copy) < len(items)
    # the shares are about even by size: 31 in all, neither above 16
    assert abs(sum(sizes[x] for x in copy) - sum(sizes) / 2) <= max(sizes) / 2
    # and the copy is gone (reaped: no zombie left behind)
    (pid,) = {pids[x] for x in copy}
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


@pytest.mark.parametrize("why", ["little work", "a thread"])
def test_no_copy_for_little_work_or_beside_another_thread(why):
    if why == "a thread":
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
    try:
        got = forked.each(_doubled, list(range(4)), [10] * 4,
                          min_work=100 if why == "little work" else 0)
    finally:
        if why == "a thread":
            stop.set()
            other.join()
    assert got == [(2 * x, os.getpid()) for x in range(4)]


@two_cpus
@pytest.mark.parametrize("fate", ["fails", "is killed", "is too slow"])
def test_what_the_copy_does_not_give_is_found_here(fate, tmp_path: Path, monkeypatch):
    me = os.getpid()
    if fate == "is too slow":
        monkeypatch.setattr(forked, "WAIT_S", 0.2)

    def work(x: int) -> tuple[int, int]:
        if os.getpid() != me:
            (tmp_path / "copy").write_text(str(os.getpid()))
            if fate == "fails":
                raise RuntimeError("the copy fails")
            if fate == "is killed":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(30)
        return _doubled(x)

    started = time.monotonic()
    got = forked.each(work, list(range(6)), [1] * 6, min_work=0)
    assert got == [(2 * x, me) for x in range(6)]
    assert time.monotonic() - started < 20  # the slow copy was not waited for
    copy = int((tmp_path / "copy").read_text())
    assert copy != me
    with pytest.raises(ChildProcessError):  # ended and reaped
        os.waitpid(copy, os.WNOHANG)


def _series(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    level = 1000.0
    values = []
    for i in range(n):
        if i and i % (n // 3) == 0:
            level *= rng.choice([0.7, 1.3])
        values.append(level * rng.uniform(0.97, 1.03))
    return values


@two_cpus
def test_the_change_points_of_many_figures_are_found_alike_on_two_cpus(monkeypatch):
    """find_each over figures that all moved, shared with a copy, gives each figure's
    change points as find_changes gives them alone (and the copy really took a share)."""
    questions = [(_series(seed, n), list(range(100, 100 + n)), seed % 2 == 0)
                 for seed, n in enumerate([600, 900, 300, 1200, 450])]
    alone = [changepoints.find_changes(v, r, h) for v, r, h in questions]
    assert all(alone)  # each has a change to find
    shared: list[int] = []
    each = forked.each

    def counted(fn, items, sizes, min_work=None):  # the real one, with no minimum
        got = each(lambda i: (fn(i), os.getpid()), items, sizes, min_work=0)
        shared.extend(pid for _, pid in got if pid != os.getpid())
        return [found for found, _ in got]

    monkeypatch.setattr(forked, "each", counted)
    assert changepoints.find_each(questions) == alone
    assert shared
