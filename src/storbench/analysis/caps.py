"""A volume capped in IOPS (throttled, provisioned), told by its signature: per-second
IOPS that barely move, and tests of different block sizes at the same rate."""

from __future__ import annotations

import statistics

from storbench.analysis.warnings import Kind
from storbench.result.model import Series, TestResult
from storbench.result.record import Warning
from storbench.workload.sizes import format_bytes_iec, parse_size


def flat_rate(s: Series | None) -> float | None:
    """The per-second IOPS when they barely moved: four in five whole seconds (the first
    and last are partial) within 5% of their median, a cap's signature."""
    if s is None or len(s.iops) < 5:
        return None
    inner = list(s.iops[1:-1])
    mid = statistics.median(inner)
    if mid <= 0:
        return None
    near = sum(1 for v in inner if abs(v - mid) <= 0.05 * mid)
    return mid if near >= 0.8 * len(inner) else None


def _block(r: TestResult, direction: str) -> int | None:
    """The test's block size in ``direction`` (bs=4k, or bs=4k,64k for read,write)."""
    sizes = (r.options.get("bs") or r.options.get("blocksize") or "").split(",")
    i = {"read": 0, "write": 1, "trim": 2}[direction]
    return parse_size(sizes[min(i, len(sizes) - 1)]) if sizes[0] else None


def iops_cap(tests: dict[str, list[TestResult]]) -> list[Warning]:
    """Tests of one run with different block sizes that ran at one flat IOPS (within 5%):
    a volume capped in IOPS (throttled, provisioned), whatever the suite. Each such test
    is told: its IOPS are the cap's, its latency mostly the wait for it."""
    flat: list[tuple[str, str, int, float]] = []  # test, direction, block size, IOPS
    for name, results in tests.items():
        r = results[0]
        if r.error:
            continue
        for direction, d in r.directions():
            rate, bs = flat_rate(r.series.get(direction)), _block(r, direction)
            if rate is not None and bs and d.iops > 0:
                flat.append((name, direction, bs, d.iops))
    out = []
    for name, direction, bs, iops in flat:
        alike = [(n, b, v) for n, dr, b, v in flat if dr == direction and b != bs
                 and abs(v - iops) <= 0.05 * max(v, iops)]
        if not alike:
            continue
        other, other_bs, _ = alike[0]
        out.append(Warning(
            Kind.IOPS_CAP, name,
            f"{name}: {direction} IOPS held flat at {iops:,.0f}/s with"
            f" {format_bytes_iec(bs)} blocks, the same as {other} with"
            f" {format_bytes_iec(other_bs)} blocks: the mark of an IOPS cap (a throttled or"
            " provisioned volume). The figure is the cap's, not the device's, and latency"
            " at a queue depth above 1 is mostly the wait for it.",
            {"direction": direction, "iops": iops, "block_bytes": bs, "other": other,
             "other_block_bytes": other_bs},
        ))
    return out
