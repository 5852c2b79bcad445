"""Live progress for ``storbench run``: a bar per test on a terminal, plain lines otherwise."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from storbench.analysis.summary import OBJECT_OPERATIONS
from storbench.execute.base import Progress as FioProgress
from storbench.render import units
from storbench.render.text import harmless
from storbench.result.model import TestResult
from storbench.target.base import Leftover
from storbench.workload.plan import Plan, PlannedTest

LAYOUT_SAID_AFTER_S = 1.0  # fio's jobs still setting up after this long: laying out
# their files or, on a block device (nothing to lay out), still starting
IO_LATE_S = 2.0  # fio's first status line comes a second after it starts: a first line
# later than this followed a silent layout (or a slow start)
WAITING = {"files": ("laying out files", "layout and start-up"),
           "device": ("starting fio (no I/O yet)", "start-up")}


def about(seconds: float) -> str:
    """A test's expected time as a person reads it: "11 s", "25 min", "10 h", "32 years";
    under a second "< 1 s" (a short replay's; "0 s" read as no time at all)."""
    if seconds < 1:
        return "< 1 s"
    for unit, size, below in (("s", 1, 120), ("min", 60, 7200), ("h", 3600, 172_800),
                              ("days", 86_400, 2 * 31_557_600)):
        if seconds < below:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds / 31_557_600:,.0f} years"


class ConsoleReporter:
    """Implements pipeline.loop.Reporter. Costs a redraw twice a second at most."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.bars: Progress | None = None
        self.tasks: list[TaskID] = []
        self._started: dict[int, float] = {}  # non-terminal: when each test began
        self._said: dict[int, str] = {}  # non-terminal: the phase last printed per test
        self._waiting, self._before_io = WAITING["files"]

    def leftover_removed(self, leftover: Leftover) -> None:
        self.console.print(f"[yellow]Removed[/yellow] {escape(str(leftover.path))}, left by"
                           f" crashed run {leftover.run_uid} (started {leftover.created})")

    def note(self, text: str) -> None:
        self.console.print(harmless(text), markup=False, highlight=False)

    def run_started(self, run_id: int, plan: Plan, scratch: Path) -> None:
        # fio's scratch is a device (a block device TARGET, on hosts, a pod's Block volume),
        # not a directory under /dev (/dev/shm); only a path in /dev is looked at here
        on_device = scratch.parts[:2] == ("/", "dev") and not scratch.is_dir()
        self._waiting, self._before_io = WAITING["device" if on_device else "files"]
        self.console.print(f"Run #{run_id}: suite {escape(plan.suite_name)},"
                           f" {len(plan.tests)} test(s) in {escape(str(scratch))}")
        if not self.live:
            return
        self.bars = Progress(
            TextColumn("{task.description:<14}", markup=False),
            BarColumn(bar_width=24),
            TextColumn("{task.percentage:>3.0f}%"),
            TextColumn("{task.fields[eta]}"),
            TextColumn("{task.fields[live]}", markup=False),
            console=self.console,
            refresh_per_second=2,
        )
        for t in plan.tests:
            self.tasks.append(self.bars.add_task(t.name, total=100, eta="", live="waiting"))
        self.bars.start()

    def test_started(self, index: int, test: PlannedTest) -> None:
        said = about(test.expected_s) if test.expected_s else ""
        expected = f", {'' if said.startswith('<') else '~'}{said}" if said else ""
        if self.bars is not None:
            while index >= len(self.tasks):  # steps chosen as the run goes (a curve)
                self.tasks.append(self.bars.add_task(test.name, total=100, eta="", live=""))
            self.bars.update(self.tasks[index], description=test.name,
                             live=f"{test.description}{expected}")
        else:
            self._started[index] = time.monotonic()
            self.console.print(f"[{index + 1}] {test.name}: {test.description}{expected}",
                               markup=False)

    def progress(self, index: int, p: FioProgress) -> None:
        if self.bars is None:
            self._phase_line(index, p)
            return
        live = "  ".join(x for x in (p.iops and f"{p.iops} IOPS", p.bandwidth) if x)
        eta = f"eta {p.eta_s // 60}m{p.eta_s % 60:02d}s" if p.eta_s is not None else ""
        state = {False: self._waiting, True: "running", None: "started"}[p.io_running]
        self.bars.update(self.tasks[index], completed=p.percent or 0, eta=eta,
                         live=live or state)

    def _phase_line(self, index: int, p: FioProgress) -> None:
        """Plain output: a line when fio's jobs are still not doing I/O (laying out
        files; on a device: starting), and when I/O begins late (with how long that
        took), so a log shows where a slow run's time went. fio prints no status line
        while it lays out files, its first a second after it starts, and its rates from
        its third second on: the first line that counts running jobs is the start of
        I/O (a throttled run's I/O was once said to start after "3.2 s of layout", at
        its first rates, where it had started at 0.3 s)."""
        running = p.io_running
        if running is None:
            return
        seen = self._said.get(index)
        took = time.monotonic() - self._started.get(index, time.monotonic())
        if not running:
            if seen is None and took >= LAYOUT_SAID_AFTER_S:
                self._said[index] = "layout"
                self.console.print(f"[{index + 1}] {self._waiting}", markup=False)
            return
        self._said[index] = "io"
        if seen == "layout" or (seen is None and took >= IO_LATE_S):
            self.console.print(f"[{index + 1}] I/O running (after {took:.1f} s of"
                               f" {self._before_io})", markup=False)

    def test_finished(self, index: int, results: list[TestResult], error: str) -> None:
        if error:
            text = "FAILED: " + error
            if self.bars is not None:
                self.bars.update(self.tasks[index], eta="", live=text[:80])
            else:
                self.console.print(f"[{index + 1}] {text}", markup=False)
            return
        parts = []
        several = len({r.name for r in results}) > 1  # a job file's jobs: each named
        for r in results:
            objects = r.options.get("ioengine") == "http"  # an s3:// TARGET's
            for name, d in r.directions():
                bw = units.choose("bw", [d.bw_bytes_per_s])
                op = OBJECT_OPERATIONS.get(name, name) if objects else name
                moved = "" if op == "DELETE" else f" {bw.fmt(d.bw_bytes_per_s)} {bw.name}"
                parts.append(f"{f'{r.name} ' if several else ''}{op}"
                             f" {units.IOPS.fmt(d.iops)} {'objects/s' if objects else 'IOPS'}"
                             f"{moved}")
        text = "done: " + ", ".join(parts) if parts else "done"
        if self.bars is not None:
            self.bars.update(self.tasks[index], completed=100, eta="", live=text)
        else:
            self.console.print(f"[{index + 1}] {text}", markup=False)

    def close(self) -> None:
        if self.bars is not None:
            self.bars.stop()
            self.bars = None
