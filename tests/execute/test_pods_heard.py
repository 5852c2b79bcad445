"""What fio in a pod said as it ran (execute/kubepods.Heard), and what a test stopped at
its time limit is said to be when a pod's fio went quiet (pipeline/failures.py). The lines
are fio 3.33's own status lines (--eta=always --eta-newline=1), as one printed them here:
a rate in brackets only for a second that did I/O. The cluster tests stop a real kubelet
(tests/target/kubernetes/test_cluster.py)."""

from __future__ import annotations

import time

import pytest

from storbench.execute import kubepods
from storbench.execute.base import Execution, Progress
from storbench.execute.kubepods import QUIET_S, Heard
from storbench.pipeline.failures import failure
from storbench.target.base import Deadline

NO_RATE = "Jobs: 1 (f=1): [R(1)][66.7%][eta 00m:02s]\n"
RATE = "Jobs: 1 (f=1): [R(1)][83.3%][r=4KiB/s][r=1 IOPS][eta 00m:01s]\n"


def test_what_fio_said_is_heard_in_any_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(kubepods.time, "monotonic", lambda: clock[0])
    got: list[Progress] = []
    heard = Heard(got.append)
    assert (heard.word, heard.io) == (None, None)
    heard.feed(NO_RATE[:20])  # half a line: said something, no status yet
    assert (heard.word, heard.io, got) == (100.0, None, [])
    clock[0] = 101.0
    heard.feed(NO_RATE[20:])  # a second without I/O: no rate
    assert (heard.word, heard.io) == (101.0, None) and len(got) == 1
    clock[0] = 102.0
    heard.feed(RATE + NO_RATE[:5])
    assert (heard.word, heard.io) == (102.0, 102.0) and len(got) == 2
    assert got[1].iops == "r=1" and got[1].percent == 83.3
    clock[0] = 103.0
    heard.feed(NO_RATE[5:])
    assert (heard.word, heard.io) == (103.0, 102.0) and len(got) == 3
    clock[0] = 104.0
    heard.feed("fio-3.33\n")  # not a status line: words, no progress
    assert (heard.word, heard.io) == (104.0, 102.0) and len(got) == 3
    # without a display: heard all the same
    alone = Heard()
    alone.feed(RATE)
    assert alone.io == 104.0


def test_quiet_only_after_it_spoke_and_for_long_enough() -> None:
    heard = Heard()
    now = time.monotonic()
    assert heard.quiet_s(now + 3600) is None  # never spoke (laying out its files)
    heard.feed(NO_RATE)
    assert heard.word is not None
    assert heard.quiet_s(heard.word + QUIET_S - 0.1) is None
    assert heard.quiet_s(heard.word + QUIET_S + 5) == pytest.approx(QUIET_S + 5)


def test_a_test_stopped_while_a_pod_was_quiet_says_so_not_the_storage() -> None:
    limit = Deadline(66.0, "its runtime and ramp, and 60 s")
    quiet = Execution("", "", -1, 66.2, timed_out=True, idle_s=21.0,
                      quiet=(("storbench-ab12-1", 21.4),))
    said = failure("randread", quiet, [], [], "pod", limit)
    assert said == (
        "fio went quiet during test 'randread': no word from it in pod storbench-ab12-1 for"
        " 21 s, where it says how it goes every second; the run was stopped at its time"
        " limit of 66 s (its runtime and ramp, and 60 s). That is the connection to fio,"
        " not the storage: a pod's passes through its node's kubelet (does the node"
        " answer?)")
    # fio went on saying how it went, with no I/O: that is the storage
    idle = Execution("", "", -1, 66.2, timed_out=True, idle_s=40.0)
    assert failure("randread", idle, [], [], "pod", limit).startswith(
        "the target stopped responding during test 'randread' (no I/O for 40 s;")
