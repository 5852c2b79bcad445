"""Where a run's time went: its phases (preflight, prepare, the idle probe, each test
with its layout and start-up, cleanup) on one clock, and how busy this machine was.

All times are seconds since the run began, so that a test's per-second series and
the metadata probe's samples can be placed on the same timeline.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storbench.analysis.warnings import io_seconds
from storbench.result.model import TestResult
from storbench.workload.plan import seconds


class Phases:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.items: list[dict[str, Any]] = []
        self._cpu0 = _cpu_times()

    def now(self) -> float:
        return time.monotonic() - self.t0

    @contextlib.contextmanager
    def phase(self, name: str, **extra: Any) -> Iterator[dict[str, Any]]:
        """Time what runs inside; ``extra`` and what the caller adds to the yielded
        dict are stored with it."""
        item: dict[str, Any] = {"name": name, "start_s": round(self.now(), 3), **extra}
        try:
            yield item
        finally:
            item["end_s"] = round(self.now(), 3)
            self.items.append(item)

    @contextlib.contextmanager
    def around(self, outer: AbstractContextManager[Any], name: str, **extra: Any
               ) -> Iterator[None]:
        """Inside ``outer`` (a test's trace, ``run --explain``): its entering and its leaving
        timed as two phases, "NAME: attach" and "NAME: stop" (bpftrace attaching its probes
        and printing its maps: a second or more each), apart from what runs inside."""
        start = self.now()
        with outer:
            self.items.append({"name": f"{name}: attach", "start_s": round(start, 3),
                               "end_s": round(self.now(), 3), **extra})
            try:
                yield
            finally:
                stop = self.now()
        self.items.append({"name": f"{name}: stop", "start_s": round(stop, 3),
                           "end_s": round(self.now(), 3), **extra})

    def since(self, name: str, start_s: float = 0.0) -> None:
        """A phase from ``start_s`` (the run's start) until now."""
        self.items.append({"name": name, "start_s": start_s, "end_s": round(self.now(), 3)})

    def record(self) -> dict[str, Any]:
        """What a run stores: {"phases": [...], "host_load": {...}}."""
        load: dict[str, Any] = {}
        with contextlib.suppress(OSError):
            load["loadavg"] = [float(x) for x in os.getloadavg()]
        load["cpus"] = os.cpu_count()
        cpu1 = _cpu_times()
        if self._cpu0 is not None and cpu1 is not None:
            total = sum(cpu1) - sum(self._cpu0)
            if total > 0 and len(cpu1) > 7:
                load["cpu_steal_percent"] = round(100 * (cpu1[7] - self._cpu0[7]) / total, 2)
                load["cpu_busy_percent"] = round(
                    100 * (1 - (cpu1[3] + cpu1[4] - self._cpu0[3] - self._cpu0[4]) / total), 1)
        return {"phases": sorted(self.items, key=lambda p: float(p["start_s"])),
                "host_load": load}


def io_phase(timed: dict[str, Any], results: list[TestResult]) -> None:
    """A test's phase, split: fio's measured I/O (its runtime, ramp excluded) ends with
    the invocation; what came before it, past the ramp, was layout and start-up."""
    io = max((s for r in results if (s := io_seconds(r)) is not None), default=None)
    if io is None or "end_s" not in timed:
        return
    ramp = max((seconds(r.options.get("ramp_time") or "0") or 0.0 for r in results),
               default=0.0)
    wall = float(timed["end_s"]) - float(timed["start_s"])
    timed["results"] = [r.name for r in results]  # the tests this invocation measured
    timed["io_s"] = round(io, 3)
    timed["io_start_s"] = round(float(timed["end_s"]) - io, 3)
    timed["ramp_s"] = ramp
    timed["setup_s"] = round(max(0.0, wall - io - ramp), 3)


@dataclass(frozen=True)
class CpuWait:
    """How long tasks here could not run, at one moment: the microseconds some task
    waited for a CPU (/proc/pressure/cpu, the kernel's pressure stall information; None
    where it keeps none) and /proc/stat's ticks, of which steal (a hypervisor's)."""

    waited_us: int | None
    steal: int
    total: int
    at: float

    @classmethod
    def now(cls) -> CpuWait:
        waited = None
        with contextlib.suppress(OSError, IndexError, ValueError):
            some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
            waited = next((int(f[6:]) for f in some if f.startswith("total=")), None)
        ticks = _cpu_times() or []
        return cls(waited, ticks[7] if len(ticks) > 7 else 0, sum(ticks), time.monotonic())

    def percent_since(self, before: CpuWait) -> float | None:
        """The share of the time since ``before`` a task here could not run: waiting for
        a CPU another held, or its CPU taken by the hypervisor (steal, per CPU)."""
        if self.waited_us is None or before.waited_us is None:
            return None
        wall = max(self.at - before.at, 1e-3)
        waited = (self.waited_us - before.waited_us) / 1e4 / wall
        ticks = self.total - before.total
        stolen = 100 * (self.steal - before.steal) / ticks if ticks > 0 else 0.0
        return round(min(100.0, waited + stolen), 1)


def _cpu_times() -> list[int] | None:
    """/proc/stat's first line: user nice system idle iowait irq softirq steal …"""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    return [int(x) for x in first[1:]] if first and first[0] == "cpu" else None
