"""A child's Python start is not its file system's time (execute/fsops.py).

Under QEMU's emulation (tests/target/test_nvme.py, in CI) the child that looks at a
target took over 5 s to start, and a directory on a local ext4 was said not to respond.
The stand-in here for a slow start is a shell that sleeps before it becomes the real
child; the operations then run on a real directory."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import pytest

from storbench.execute import fsops

HELD_S = 2.0
SLOW_START = ("sh", "-c", f'sleep {HELD_S}; exec "$0" -m storbench.execute.scratchops "$@"',
              sys.executable)


@pytest.fixture
def slow_children(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(fsops, "CHILD", SLOW_START)
    monkeypatch.setattr(fsops._Server, "proc", None)
    yield
    fsops._Server.end()  # its stdin closed: the serving child started here ends


@pytest.mark.parametrize("busy", [False, True], ids=["served", "one-off"])
def test_a_slow_start_is_not_counted_against_the_file_system(
        slow_children: None, tmp_path: Path, busy: bool) -> None:
    """A limit of 1 s on a look, a child that takes 2 s to start: the look is answered
    (its limit begins once the child is up), by the serving child or, while that one is
    busy, by a child of its own."""
    began = time.monotonic()
    with fsops._Server.lock if busy else contextlib.nullcontext():
        seen = json.loads(fsops.call("look", str(tmp_path), timeout_s=1))
    assert seen["is_dir"] and seen["writable"], seen
    assert time.monotonic() - began >= HELD_S  # the start really was held
    assert (fsops._Server.proc is None) == busy
    if not busy:  # the same child serves the next one, with no start to wait for
        began = time.monotonic()
        assert json.loads(fsops.call("mode", str(tmp_path), timeout_s=1)) is not None
        assert time.monotonic() - began < HELD_S


def test_a_start_has_a_limit_of_its_own(slow_children: None, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that never comes up is Stuck after START_S, named by its PID."""
    monkeypatch.setattr(fsops, "START_S", 1.0)
    with pytest.raises(fsops.Stuck, match=r"no answer within 1 s \(PID \d+ left running\)"):
        fsops.call("look", str(tmp_path), timeout_s=30)
    assert fsops._Server.proc is None
