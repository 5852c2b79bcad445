"""Named metrics of a test result: ``read.iops``, ``write.bw``, ``sync.lat_p99``, ...

A metric key is ``<direction>.<field>``: direction is read, write, trim or sync;
field is iops, bw, or a latency (slat, clat, lat) statistic: ``_mean``, ``_max``
or a percentile ``_p50``, ``_p99``, ``_p99.9``. Values are in base units (IOPS,
bytes/s, ns); ``kind`` says which.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from storbench.result.model import DIRECTIONS, Latency, TestResult

Kind = Literal["iops", "bw", "latency"]
_FIELD = re.compile(r"^(slat|clat|lat)_(mean|min|max|stdev|p\d+(?:\.\d+)?)$")


@dataclass(frozen=True)
class Metric:
    key: str
    kind: Kind

    @property
    def direction(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def field(self) -> str:
        return self.key.split(".", 1)[1]

    @property
    def higher_is_better(self) -> bool:
        return higher_is_better(self.kind)

    @property
    def label(self) -> str:
        """'read IOPS', 'write BW', 'sync p99', 'read clat p99.9', 'write lat mean'."""
        if self.kind == "iops":
            return f"{self.direction} IOPS"
        if self.kind == "bw":
            return f"{self.direction} BW"
        which, stat = self.field.split("_", 1)
        if self.direction == "sync":
            return f"{self.direction} {stat}"
        return f"{self.direction} {which} {stat}"


def higher_is_better(kind: str) -> bool:
    """Of a figure of this kind (a test's, or a kind's answer: "tps", "seconds", ...):
    more is better, except for a time."""
    return kind not in ("latency", "seconds")


def metric(key: str) -> Metric:
    direction, _, field = key.partition(".")
    if direction not in (*DIRECTIONS, "sync"):
        raise ValueError(f"unknown direction in metric {key!r}")
    if field in ("iops", "bw") and direction != "sync":
        return Metric(key, "iops" if field == "iops" else "bw")
    if _FIELD.match(field):
        return Metric(key, "latency")
    raise ValueError(f"unknown metric {key!r}")


def latency_stat(lat: Latency | None, stat: str) -> float | None:
    if lat is None:
        return None
    if stat.startswith("p"):
        return lat.percentile(float(stat[1:]))
    value: float = getattr(lat, f"{stat}_ns")
    return value


def value(result: TestResult, m: Metric) -> float | None:
    """The metric's value in base units, or None when the test has no such figure
    (NaN, as in published references that give only some figures, is None too)."""
    v = _value(result, m)
    return None if v is None or math.isnan(v) else v


def _value(result: TestResult, m: Metric) -> float | None:
    if result.error:
        return None
    if m.kind in ("iops", "bw"):
        d = result.direction(m.direction)
        return None if d is None else d.iops if m.kind == "iops" else d.bw_bytes_per_s
    return latency_stat(_latency(result, m), m.field.split("_", 1)[1])


def _latency(result: TestResult, m: Metric) -> Latency | None:
    """The latency a latency metric is a statistic of (sync: the sync calls')."""
    if m.direction == "sync":
        return result.sync.lat if result.sync is not None else None
    d = result.direction(m.direction)
    lat: Latency | None = getattr(d, m.field.split("_", 1)[0]) if d is not None else None
    return lat


def percentiles_given(result: TestResult, m: Metric) -> list[float] | None:
    """Where ``m`` is a percentile fio did not report for this result (p97: fio's list
    is 1, 5, 10, ..., 99.99), the percentiles it reported of that latency; else None."""
    stat = m.field.partition("_")[2]
    if not stat.startswith("p") or result.error:
        return None
    lat = _latency(result, m)
    if lat is None or not lat.percentiles_ns or lat.percentile(float(stat[1:])) is not None:
        return None
    return sorted(lat.percentiles_ns)


def value_path(m: Metric) -> tuple[str, ...]:
    """Where ``value`` finds the metric in a stored result (``TestResult.to_dict``): the
    keys from the top, for a store to read one figure without loading whole results
    (`storbench history`). A result whose ``error`` is set has no value, as in ``value``."""
    if m.direction == "sync":
        return ("sync", "lat", *_stat_path(m.field.split("_", 1)[1]))
    if m.kind == "iops":
        return (m.direction, "iops")
    if m.kind == "bw":
        return (m.direction, "bw_bytes_per_s")
    which, stat = m.field.split("_", 1)
    return (m.direction, which, *_stat_path(stat))


def _stat_path(stat: str) -> tuple[str, ...]:
    return ("percentiles_ns", str(float(stat[1:]))) if stat.startswith("p") else (f"{stat}_ns",)


def default_metrics(result: TestResult) -> list[Metric]:
    """Headline metrics of a test that no suite describes: what it actually did."""
    return headline_metrics([name for name, _ in result.directions()], result.sync is not None)


def headline_metrics(directions: Iterable[str], syncs: bool) -> list[Metric]:
    """IOPS, bandwidth and completion p99 of each direction, and the sync p99."""
    out = [metric(f"{d}.{f}") for d in directions for f in ("iops", "bw", "clat_p99")]
    return out + ([metric("sync.lat_p99")] if syncs else [])
