"""Rates a test asked fio for (rate_iops=, rate=) against what it achieved.

A test that asked for a rate and fell behind measured a saturated system: its
latency is the latency of a queue that grew, not the latency at the requested
rate. The result says so wherever it appears (a warning, the table, the verdict
line). The latency curve (storbench curve) judges its steps the same way.

With ``rate_process=poisson`` fio draws each gap between I/Os at random, so the
number of I/Os in a run of T seconds at rate r is itself random (Poisson, mean rT,
standard deviation sqrt(rT)): 300 IOPS for 3 s gives 900 ± 30 I/Os, and a storage
that kept up can fall 5% short by chance one time in 15. Such a run is judged
saturated only when it fell short by more than three standard deviations too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from storbench.result.model import DIRECTIONS, TestResult
from storbench.workload.sizes import parse_size

KEPT = 0.95  # achieved / requested at or above this: the rate was kept
CHANCE_SIGMAS = 3.0  # Poisson arrivals: a shortfall within this many deviations is chance


def kept(requested: float, achieved: float, expected_ios: float, poisson: bool) -> bool:
    """Whether fio kept a ``requested`` rate (any unit), ``expected_ios`` being the
    number of I/Os that rate asks for over the run."""
    share = KEPT
    if poisson and expected_ios > 0:
        share = min(KEPT, 1.0 - CHANCE_SIGMAS / math.sqrt(expected_ios))
    return achieved >= share * requested


@dataclass(frozen=True)
class Rate:
    direction: str
    requested: float  # IOPS, or bytes/s when ``unit`` is "B/s"
    achieved: float
    unit: str  # "IOPS" or "B/s"
    expected_ios: float = 0.0  # I/Os the requested rate asks for over the run
    poisson: bool = False

    @property
    def kept(self) -> bool:
        return kept(self.requested, self.achieved, self.expected_ios, self.poisson)


def requested(r: TestResult) -> list[Rate]:
    """Each direction's requested rate (fio: one value for all, or 'read,write,trim')."""
    out = []
    for key, unit in (("rate_iops", "IOPS"), ("rate", "B/s")):
        text = r.options.get(key)
        if not text:
            continue
        parts = [p.strip() for p in text.split(",")]
        for i, name in enumerate(DIRECTIONS):
            value = parts[i] if i < len(parts) else (parts[-1] if len(parts) == 1 else "")
            d = r.direction(name)
            if not value or d is None:
                continue
            want = float(value) if unit == "IOPS" else parse_size(value)
            if not want:
                continue
            got = d.iops if unit == "IOPS" else d.bw_bytes_per_s
            ios = float(want) * d.runtime_ms / 1000
            if unit != "IOPS":
                ios = ios * d.total_ios / d.io_bytes if d.io_bytes else 0.0
            out.append(Rate(name, float(want), got, unit, ios,
                            r.options.get("rate_process") == "poisson"))
    return out


def shortfalls(r: TestResult) -> list[Rate]:
    return [rate for rate in requested(r) if not rate.kept]
