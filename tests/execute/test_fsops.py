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

from storbench.cli.targets import is_block_device
from storbench.errors import StorbenchError, TargetHung
from storbench.execute import fsops

HELD_S = 2.0
SLOW_START = ("sh", "-c", f'sleep {HELD_S}; exec "$0" -I "$@"', sys.executable,
              fsops.scratchops.__file__)


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
    """A child that never comes up is Stuck after START_S, named by its PID, and said
    not to have started (not the file system's fault: a target is not called silent for
    it)."""
    monkeypatch.setattr(fsops, "START_S", 1.0)
    with pytest.raises(fsops.Stuck, match=r"child process did not start within 1 s \(PID"
                       r" \d+ left running\); is the machine overloaded\?") as stuck:
        fsops.call("look", str(tmp_path), timeout_s=30)
    assert not stuck.value.started
    assert fsops._Server.proc is None
    with pytest.raises(StorbenchError, match="did not start") as said:
        is_block_device(tmp_path)  # (`storbench run TARGET`'s first look at it)
    assert not isinstance(said.value, TargetHung)
