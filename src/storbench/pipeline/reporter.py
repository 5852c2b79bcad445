"""What the run loop tells whoever watches it: progress callbacks (the CLI shows them,
a library user may ignore them)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from storbench.execute.base import Progress
from storbench.result.model import TestResult
from storbench.target.base import Leftover
from storbench.workload.plan import Plan, PlannedTest


class Reporter(Protocol):
    """Progress callbacks; the CLI shows them, a library user may ignore them."""

    def leftover_removed(self, leftover: Leftover) -> None: ...
    def run_started(self, run_id: int, plan: Plan, scratch: Path) -> None: ...
    def note(self, text: str) -> None: ...
    def test_started(self, index: int, test: PlannedTest) -> None: ...
    def progress(self, index: int, progress: Progress) -> None: ...
    def test_finished(self, index: int, results: list[TestResult], error: str) -> None: ...


class NullReporter:
    def leftover_removed(self, leftover: Leftover) -> None:
        pass

    def run_started(self, run_id: int, plan: Plan, scratch: Path) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def test_started(self, index: int, test: PlannedTest) -> None:
        pass

    def progress(self, index: int, progress: Progress) -> None:
        pass

    def test_finished(self, index: int, results: list[TestResult], error: str) -> None:
        pass
