"""`run --explain` beside any kind of run: each step's fio followed by the kernel's
tracepoints (execute/layers.py), each of its results explained (analysis/explain.py), kept
in the run's ``explain`` section (what is said of it: analysis/views/explain.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from storbench.analysis.explain import explain, explains_syncs
from storbench.execute import beneath, layers
from storbench.pipeline.phases import CpuWait
from storbench.result.model import TestResult
from storbench.result.sections import EXPLAIN, ExplainEntry


class Here:
    """This machine's fio followed by this machine's kernel (execute/layers.LayerTrace)."""

    def __init__(self, path: Path, directory: Path) -> None:
        self.place = beneath.locate(path)
        self.directory = directory  # storbench's work directory (0700): the program, output
        self.notes: list[str] = []

    def trace(self, expected_s: float | None) -> layers.LayerTrace:
        return layers.LayerTrace(self.place, expected_s, self.directory)


class Tracer(Protocol):
    """What follows each step's fio: here (``Here``), or on hosts over SSH
    (execute/hosttrace.HostsTracer). ``place``: what the explanation names; ``notes``:
    what to say as the run starts."""

    place: beneath.Place
    notes: list[str]

    def trace(self, expected_s: float | None) -> Any: ...


class Explained:
    """The explanations of a run's tests, as they are measured."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.place = tracer.place
        self.entries: dict[str, ExplainEntry] = {}
        self.began: CpuWait | None = None  # this machine's CPU wait as the step began

    def trace(self, expected_s: float | None) -> Any:
        # whether tasks here waited for a CPU while fio ran here: a wake-up that waits
        # (the completion layer) is a busy machine's, or an idle CPU's (not over SSH)
        self.began = CpuWait.now() if isinstance(self.tracer, Here) else None
        return self.tracer.trace(expected_s)

    def add(self, trace: Any, timed: dict[str, Any], t0: float,
            results: list[TestResult], note: Callable[[str], None]) -> None:
        """Each of a step's ``results`` explained from the slices of its measured I/O
        (``timed``: its phase, on the run's clock that began at monotonic ``t0``)."""
        if trace.slices is None or "io_start_s" not in timed:
            note(f"--explain: {timed.get('test')}: "
                 + (trace.error or "fio measured no I/O to explain"))
            return
        start = int((t0 + float(timed["io_start_s"])) * 1e9)
        end = int((t0 + float(timed["end_s"])) * 1e9)
        seen = trace.slices.between(start, end)
        moved = (seen.device_bytes(0), seen.device_bytes(1)) \
            if self.place.device is not None else None
        waited = CpuWait.now().percent_since(self.began) if self.began else None
        counted = trace.counted  # (this machine's cap: over SSH, none)
        through = counted.rate(start, end) if counted is not None else None
        for result in results:
            # a test that synced: its syncs' layers, or its other calls' (execute/layers.SYNC)
            kind = layers.SYNC if explains_syncs(result) else 0
            found = {name: seen.layer(name, kind) for name in layers.LAYERS}
            calls = None if result.sync is None else (
                "syncs" if kind else "others",
                sum(sum(seen.layer(name, layers.SYNC - kind).values())
                    for name in ("call_bio", "call_nobio")))
            entry = explain(found, moved, trace.slices.span_s(start, end), result,
                            self.place.record(), waited, through, calls)
            if len(results) > 1:
                entry["together"] = [r.name for r in results if r is not result]
            self.entries[result.name] = entry
            note(f"{result.name}: bound by {entry['said']}")

    def section(self) -> dict[str, Any]:
        return EXPLAIN.put(dict(self.entries)) if self.entries else {}


def tracing(explained: Explained | None, expected_s: float | None
            ) -> tuple[Any, AbstractContextManager[Any]]:
    """The trace of one step (None: not asked), and what to run the step inside."""
    if explained is None:
        return None, contextlib.nullcontext()
    trace = explained.trace(expected_s)
    return trace, trace
