"""Rates a test asked fio for (rate_iops=, rate=) against what it achieved.

A test that asked for a rate and fell behind measured a saturated system: its
latency is the latency of a queue that grew, not the latency at the requested
rate. The result says so wherever it appears (a warning, the table, the verdict
line). The latency curve (storbench curve) judges its steps the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from storbench.result.model import DIRECTIONS, TestResult
from storbench.workload.sizes import parse_size

KEPT = 0.95  # achieved / requested at or above this: the rate was kept


@dataclass(frozen=True)
class Rate:
    direction: str
    requested: float  # IOPS, or bytes/s when ``unit`` is "B/s"
    achieved: float
    unit: str  # "IOPS" or "B/s"

    @property
    def kept(self) -> bool:
        return self.achieved >= KEPT * self.requested


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
            out.append(Rate(name, float(want), got, unit))
    return out


def shortfalls(r: TestResult) -> list[Rate]:
    return [rate for rate in requested(r) if not rate.kept]
