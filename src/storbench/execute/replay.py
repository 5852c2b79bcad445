"""A stand-in Executor that replays fio output recorded from real fio runs.

It runs nothing: each call returns the next recording (fio's json+, stderr and exit
status, verbatim as a real fio wrote them; tests/data/fio and scripts/record-fio-json
say how they were made), or raises what the recording says fio's worker raised.
What comes after fio (parse, warnings, store, verdicts, compare, render) then runs
for real, deterministically, and the run loop can be driven down paths a real fio
cannot be made to take on demand (a failure at a chosen test, an interrupt between
two tests). It is never chosen by the CLI: the real executors are the proof that
each target works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storbench.errors import StorbenchError
from storbench.execute.base import Execution, FioJob, Progress


@dataclass(frozen=True)
class Recording:
    """What one real fio invocation left."""

    raw_json: str
    stderr: str = ""
    returncode: int = 0
    raises: StorbenchError | None = None  # the worker died instead (a pod OOM-killed)

    @classmethod
    def load(cls, json_path: Path, returncode: int = 0) -> Recording:
        """A recording from tests/data/fio: FILE.json, and FILE.stderr when there is one."""
        stderr = json_path.with_suffix(".stderr")
        return cls(json_path.read_text(), stderr.read_text() if stderr.exists() else "",
                   returncode)


class ReplayExecutor:
    """Returns ``recordings`` in order, one per ``run``; ``after_run`` (if given) is
    called with the number of runs so far, e.g. to send the process a signal."""

    def __init__(self, recordings: list[Recording],
                 after_run: Callable[[int], None] | None = None) -> None:
        self.recordings = list(recordings)
        self.after_run = after_run
        self.ran: list[list[FioJob]] = []

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        if not self.recordings:
            raise StorbenchError(f"replay: no recording left for invocation {len(self.ran) + 1}")
        self.ran.append(jobs)
        rec = self.recordings.pop(0)
        if on_progress is not None:
            on_progress(Progress(100.0, 0, "", ""))
        if self.after_run is not None:
            self.after_run(len(self.ran))
        if rec.raises is not None:
            raise rec.raises
        return Execution(rec.raw_json, rec.stderr, rec.returncode, 0.0)
