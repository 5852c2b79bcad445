"""A cleanup's wait after a signal (execute/kubecleanup): what it waits for said once it
takes SAY_AFTER_S, and a second signal (a real one, to this process, caught by a real
SignalGuard) ends it. The cluster test stops a real kubelet under it
(tests/target/kubernetes/test_cluster.py)."""

from __future__ import annotations

import os
import signal

import pytest

from storbench.execute import kubecleanup
from storbench.execute.kubecleanup import SAY_AFTER_S, _hurried, left_error
from storbench.execute.signals import SignalGuard


def test_the_wait_after_a_signal_is_said_and_a_second_signal_ends_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [50.0]
    monkeypatch.setattr(kubecleanup.time, "monotonic", lambda: clock[0])
    said: list[str] = []
    with SignalGuard() as guard:
        os.kill(os.getpid(), signal.SIGINT)
        assert (guard.signum, guard.count) == (signal.SIGINT, 1)
        hurried = _hurried(guard, 120.0, said.append)
        left = ["Pod storbench-ab12-1", "PersistentVolumeClaim storbench-ab12"]
        assert hurried(left) is False and said == []  # quick deletions: nothing said
        clock[0] += SAY_AFTER_S
        assert hurried(left) is False
        assert said == ["waiting up to 115 s more for the cluster to delete Pod"
                        " storbench-ab12-1, PersistentVolumeClaim storbench-ab12 (Ctrl-C"
                        " again: stop waiting)"]
        clock[0] += 10
        assert hurried(left[1:]) is False and len(said) == 1  # said once
        os.kill(os.getpid(), signal.SIGTERM)  # the second signal, of either kind
        assert guard.count == 2 and guard.signum == signal.SIGINT
        assert hurried(left[1:]) is True


def test_what_a_cleanup_left_names_the_command_that_finishes_it() -> None:
    assert left_error([], "team-a") is None
    error = left_error(["Pod team-a/storbench-ab12-1, PersistentVolumeClaim"
                        " team-a/storbench-ab12: still there, not waited for after a second"
                        " signal"], "team-a")
    assert error is not None and str(error) == (
        "cleaning up: Pod team-a/storbench-ab12-1, PersistentVolumeClaim team-a/storbench-ab12:"
        " still there, not waited for after a second signal. Run `storbench k8s cleanup"
        " --namespace team-a`")
