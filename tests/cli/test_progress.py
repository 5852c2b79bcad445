"""The plain progress lines (a log, not a terminal): what fio is said to be doing
before its first I/O, on files and on a device."""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

import pytest
from rich.console import Console

from storbench.cli.progress import LAYOUT_SAID_AFTER_S, ConsoleReporter
from storbench.execute.base import Progress
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

IDLE = Progress(percent=None, eta_s=None, bandwidth="", iops="")
RUNNING = Progress(percent=40.0, eta_s=3, bandwidth="r=47.3MiB/s", iops="r=12.1k")


@pytest.mark.parametrize("scratch, waiting, before", [
    (Path("/var/tmp/storbench-x1"), "[1] laying out files", "of layout and start-up)"),
    (Path("/dev/nvme0n1"), "[1] starting fio (no I/O yet)", "of start-up)"),
    # a directory under /dev (tmpfs) has files laid out: a CI log said "starting fio" there
    (None, "[1] laying out files", "of layout and start-up)"),
])
def test_what_fio_is_said_to_do_before_its_first_io(scratch, waiting, before):
    if scratch is None:  # a run's scratch directory in /dev/shm, made as the run makes it
        with tempfile.TemporaryDirectory(prefix="storbench-", dir="/dev/shm") as made:
            said(Path(made), waiting, before)
    else:
        said(scratch, waiting, before)


def said(scratch, waiting, before):
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, force_terminal=False, width=200))
    test = PlannedTest("randread", "4k random read", JobFile(()), 5.0)
    reporter.run_started(1, Plan("quick", [test]), scratch)
    reporter.test_started(0, test)
    time.sleep(LAYOUT_SAID_AFTER_S + 0.1)
    reporter.progress(0, IDLE)
    reporter.progress(0, RUNNING)
    lines = out.getvalue().splitlines()
    assert lines[2] == waiting
    assert lines[3].startswith("[1] I/O running (after 1.") and lines[3].endswith(before)
    assert ("laying out" in out.getvalue()) == ("storbench-" in scratch.name)
