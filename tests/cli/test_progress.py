"""The plain progress lines (a log, not a terminal): what fio is said to be doing
before its first I/O, on files and on a device."""

from __future__ import annotations

import io
import re
import tempfile
import time
from pathlib import Path

import pytest
from rich.console import Console

from storbench.cli.progress import IO_LATE_S, LAYOUT_SAID_AFTER_S, ConsoleReporter
from storbench.execute.base import parse_status_line
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest

# fio's status lines, as fio 3.33 prints them: none while it lays out files, the count
# of running jobs from its first second, their states and rates from its third
FIRST = parse_status_line("Jobs: 1 (f=1)")
WAITING = parse_status_line("Jobs: 0 (f=0): [_(1),P(1)][-.-%][eta 00m:08s]")
RUNNING = parse_status_line(
    "Jobs: 1 (f=1): [r(1)][40.0%][r=47.3MiB/s][r=12.1k IOPS][eta 00m:03s]")


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
    reporter.progress(0, WAITING)  # a job before it still to finish: this one waits
    reporter.progress(0, RUNNING)
    lines = out.getvalue().splitlines()
    assert lines[2] == waiting
    assert lines[3].startswith("[1] I/O running (after 1.") and lines[3].endswith(before)
    assert ("laying out" in out.getvalue()) == ("storbench-" in scratch.name)


def test_a_late_first_status_line_is_a_layout_s_end():
    """fio prints nothing while it lays out files: its first line, late, starts the I/O."""
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, force_terminal=False, width=200))
    test = PlannedTest("big", "a file to lay out", JobFile(()), 5.0)
    reporter.run_started(1, Plan("job", [test]), Path("/var/tmp/storbench-x3"))
    reporter.test_started(0, test)
    time.sleep(IO_LATE_S + 0.1)
    reporter.progress(0, FIRST)
    reporter.progress(0, RUNNING)
    [line] = out.getvalue().splitlines()[2:]
    assert re.fullmatch(r"\[1\] I/O running \(after 2\.\d s of layout and start-up\)", line)


def test_no_layout_is_claimed_where_fio_said_nothing():
    """A throttled etcd run: fio's status gives no rates for 3 s, then shows them; its
    I/O began long before. No "after 3.2 s of layout" is said."""
    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, force_terminal=False, width=200))
    test = PlannedTest("etcd", "fdatasync per write", JobFile(()), 5.0)
    reporter.run_started(1, Plan("etcd", [test]), Path("/var/tmp/storbench-x2"))
    reporter.test_started(0, test)
    time.sleep(0.3)
    reporter.progress(0, FIRST)  # a second after fio's start (here sooner): I/O runs
    time.sleep(LAYOUT_SAID_AFTER_S)
    for _ in range(2):
        reporter.progress(0, FIRST)
    reporter.progress(0, parse_status_line(
        "Jobs: 1 (f=1): [W(1)][60.0%][w=345KiB/s][w=150 IOPS][eta 00m:02s]"))
    assert out.getvalue().splitlines()[2:] == []


def test_a_long_test_s_time_is_said_in_a_unit_one_reads():
    """A test of --runtime 86400 said "~86401 s"; one of 1e9 s "~1000000001 s"."""
    from storbench.cli.progress import about

    assert [about(s) for s in (11, 119, 1500, 36_000, 86_401, 1e9 + 1)] == [
        "11 s", "119 s", "25 min", "10 h", "24 h", "32 years"]
    # a replay of a 0.3 s recording said "~0 s"
    assert [about(s) for s in (0.3, 0.99, 1, 1.4)] == ["< 1 s", "< 1 s", "1 s", "1 s"]
