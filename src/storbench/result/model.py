"""Result model. Units are in field names: ``_ns``, ``_bytes``, ``_bytes_per_s``, ``_ms``.

Percentiles are keyed by their percentage (``99.9``). ``bins`` holds fio's json+
latency histogram (bucket value in ns -> count) so that results of several jobs
or hosts can be merged exactly; it is empty when fio's output had no bins.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DIRECTIONS = ("read", "write", "trim")


@dataclass(frozen=True)
class Latency:
    samples: int
    min_ns: float
    max_ns: float
    mean_ns: float
    stdev_ns: float
    percentiles_ns: dict[float, float] = field(default_factory=dict)
    bins: dict[int, int] = field(default_factory=dict)

    def percentile(self, p: float) -> float | None:
        return self.percentiles_ns.get(p)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Latency:
        return cls(
            samples=d["samples"],
            min_ns=d["min_ns"],
            max_ns=d["max_ns"],
            mean_ns=d["mean_ns"],
            stdev_ns=d["stdev_ns"],
            percentiles_ns={float(k): v for k, v in d["percentiles_ns"].items()},
            bins={int(k): v for k, v in d.get("bins", {}).items()},  # absent: read lean
        )


@dataclass(frozen=True)
class Direction:
    """One direction (read, write or trim) of a test: all its jobs together."""

    iops: float
    bw_bytes_per_s: float
    io_bytes: int
    total_ios: int
    runtime_ms: int
    short_ios: int
    dropped_ios: int
    slat: Latency | None
    clat: Latency | None
    lat: Latency | None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Direction:
        return cls(
            **{k: v for k, v in d.items() if k not in ("slat", "clat", "lat")},
            slat=_lat(d.get("slat")),
            clat=_lat(d.get("clat")),
            lat=_lat(d.get("lat")),
        )


@dataclass(frozen=True)
class SyncStats:
    """fsync / fdatasync / sync_file_range calls: their count and latency."""

    calls: int
    lat: Latency

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SyncStats:
        return cls(calls=d["calls"], lat=Latency.from_dict(d["lat"]))


@dataclass(frozen=True)
class Series:
    """Per-second figures of one direction of a test (fio logs, log_avg_msec=1000).

    ``t_s[i]`` is the end of the i-th one-second window, in seconds since the
    test's measurement started. Values are summed over jobs (IOPS, bandwidth) or
    IOPS-weighted (mean completion latency).
    """

    t_s: list[float]
    iops: list[float]
    bw_bytes_per_s: list[float]
    clat_mean_ns: list[float | None]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Series:
        return cls(**d)


@dataclass(frozen=True)
class SteadyState:
    """fio's steady-state detection (``steadystate=``) for a test."""

    criterion: str  # as fio reports it, e.g. "iops_slope:0.5%"
    attained: bool  # for every job of the test
    window_s: float  # ss_dur: the rolling window judged
    stopped_after_s: float  # how long the test ran (the longest job)
    value: str  # the criterion's measured value at the end, as fio reports it

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SteadyState:
        return cls(**d)


@dataclass(frozen=True)
class DeviceIO:
    """fio's ``disk_util`` for one block device: the I/O the device itself served during
    the invocation (from every process on the machine, not fio's alone)."""

    name: str
    read_ios: int
    write_ios: int
    read_merges: int
    write_merges: int
    util_percent: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceIO:
        return cls(**d)


@dataclass(frozen=True)
class TestResult:
    """One test: the fio jobs of one name in one invocation, aggregated.

    IOPS and bandwidth are summed over jobs, latency percentiles are merged from
    the histogram bins, runtime is the longest job's.
    """

    name: str
    jobs: int
    error: int  # fio's errno for the first job that failed, 0 if none
    read: Direction | None
    write: Direction | None
    trim: Direction | None
    sync: SyncStats | None
    usr_cpu_percent: float  # summed over jobs: percent of one core
    sys_cpu_percent: float
    context_switches: int
    iodepth_percent: dict[str, float]  # fio's "iodepth_level": depth bucket -> % of time
    elapsed_s: float
    options: dict[str, str]  # the job's options as fio reported them
    series: dict[str, Series] = field(default_factory=dict)  # direction -> per-second figures
    steady_state: SteadyState | None = None
    devices: list[DeviceIO] = field(default_factory=list)  # disk_util of its invocation

    def direction(self, name: str) -> Direction | None:
        if name not in DIRECTIONS:
            raise ValueError(f"unknown direction {name!r}")
        result: Direction | None = getattr(self, name)
        return result

    def directions(self) -> list[tuple[str, Direction]]:
        return [(n, d) for n in DIRECTIONS if (d := self.direction(n)) is not None]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TestResult:
        values = dict(d)
        for name in DIRECTIONS:
            values[name] = Direction.from_dict(d[name]) if d.get(name) else None
        values["sync"] = SyncStats.from_dict(d["sync"]) if d.get("sync") else None
        values["series"] = {k: Series.from_dict(v) for k, v in d.get("series", {}).items()}
        ss = d.get("steady_state")
        values["steady_state"] = SteadyState.from_dict(ss) if ss else None
        values["devices"] = [DeviceIO.from_dict(x) for x in d.get("devices", [])]
        return cls(**values)


def _lat(d: dict[str, Any] | None) -> Latency | None:
    return Latency.from_dict(d) if d else None
