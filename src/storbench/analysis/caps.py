"""A volume capped in IOPS (throttled, provisioned), told by its signature: per-second
IOPS that barely move, and tests of different block sizes at the same rate."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

from storbench.analysis.warnings import Kind
from storbench.result.model import Series, TestResult
from storbench.result.record import Warning
from storbench.workload.sizes import format_bytes_iec, parse_size


def flat_rate(s: Series | None) -> float | None:
    """The per-second IOPS when they barely moved: three in four whole seconds (the first
    and last are partial) within 5% of their median, a cap's signature. One second in
    four may stray (a busy machine's late throttle timer): with 4 whole seconds, one. A
    timer late more often moves I/O from one second to the next, which catches up: then
    the means of each two seconds side by side are held to that rule, and three in four
    seconds to within 10%."""
    if s is None or len(s.iops) < 5:
        return None
    inner = list(s.iops[1:-1])
    pairs = [(a + b) / 2 for a, b in itertools.pairwise(inner)]
    return _flat(inner, 0.05) or (_flat(inner, 0.10) and _flat(pairs, 0.05))


def _flat(seconds: list[float], within: float) -> float | None:
    """Their median when three in four are ``within`` it."""
    mid = statistics.median(seconds)
    if mid <= 0:
        return None
    near = sum(1 for v in seconds if abs(v - mid) <= within * mid)
    return mid if near >= len(seconds) - len(seconds) // 4 else None


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
    every: list[tuple[str, str, int, float]] = []  # the same for every test, flat or not
    for name, results in tests.items():
        r = results[0]
        if r.error:
            continue
        for direction, d in r.directions():
            rate, bs = flat_rate(r.series.get(direction)), _block(r, direction)
            if bs and d.iops > 0:
                every.append((name, direction, bs, d.iops))
                if rate is not None:
                    flat.append(every[-1])
    caps: list[_Capped] = []
    for name, direction, bs, iops in flat:
        alike = [(n, b) for n, dr, b, v in flat if dr == direction and b != bs
                 and abs(v - iops) <= 0.05 * max(v, iops)]
        if alike:
            caps.append(_Capped(name, direction, bs, iops, *alike[0], flat=True))
    shown = list(caps)
    for name, direction, bs, iops in every:  # too short to look flat, or one side of a mix
        if not any(c.test == name and c.direction == direction for c in shown):
            at = [c for c in shown if c.direction == direction
                  and abs(c.iops - iops) <= 0.05 * c.iops]
            if at:
                caps.append(_Capped(name, direction, bs, iops, at[0].test, at[0].block,
                                    flat=False))
    return [c.warning() for c in caps]


@dataclass(frozen=True)
class _Capped:
    """A test whose IOPS in one direction are a cap's: flat itself beside ``other`` (a
    test of another block size at the same rate), or at the rate such a pair showed."""

    test: str
    direction: str
    block: int
    iops: float
    other: str
    other_block: int
    flat: bool

    def warning(self) -> Warning:
        name, bs, other_bs = self.test, format_bytes_iec(self.block), format_bytes_iec(
            self.other_block)
        how = (f"{name}: {self.direction} IOPS held flat at {self.iops:,.0f}/s with {bs}"
               f" blocks, the same as {self.other} with {other_bs} blocks: the mark of an"
               " IOPS cap (a throttled or provisioned volume)." if self.flat else
               f"{name}: {self.direction} IOPS at {self.iops:,.0f}/s with {bs} blocks, the"
               f" rate {self.other} ({other_bs} blocks) and another test of other blocks"
               " held flat: an IOPS cap (a throttled or provisioned volume).")
        return Warning(Kind.IOPS_CAP, name,
                       how + " The figure is the cap's, not the device's, and latency at a"
                             " queue depth above 1 is mostly the wait for it.",
                       {"direction": self.direction, "iops": self.iops,
                        "block_bytes": self.block, "other": self.other,
                        "other_block_bytes": self.other_block})
