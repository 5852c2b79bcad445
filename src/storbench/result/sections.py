"""The run record's sections: what a kind of run keeps beyond its tests' figures.

A run's ``data`` holds, under one key each, a kind's section (a curve's steps and
answers, preconditioning rounds, a volume lifecycle, a failover) and what the loop
keeps of every run (its phases, the metadata probe, where an import came from). Each
is a ``Section``: its key and its type (a TypedDict, checked by mypy where it is read).
Code outside this file never tests ``Run.data`` by key (tests/test_layout.py): it asks
a section, ``CURVE.of(run)``; a kind names its section and returns its typed record, which
the loop stores with ``put``; what is said of it is its view's (analysis/views/).

Old runs are read as they were stored: a section is the JSON a kind wrote, no
migration. The inner records (a curve step, a lifecycle volume) stay dicts, whose
fields the producing module documents (analysis/curve.py step_record, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, NotRequired, Protocol, TypedDict, TypeVar, cast

T = TypeVar("T")


class HasData(Protocol):
    @property
    def data(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Section(Generic[T]):
    """One key of ``Run.data`` and the type of what it holds."""

    key: str
    title: str  # how `show` and the report name it

    def of(self, run: HasData) -> T | None:
        """What ``run`` holds in this section; None when it has none (or it is empty)."""
        value = run.data.get(self.key)
        return cast(T, value) if value else None

    def put(self, value: T) -> dict[str, Any]:
        """The section as ``data`` stores it."""
        return {self.key: value}


class CurveSection(TypedDict):
    workload: str
    engine: str  # "sync" or "async"
    # what its latency is of (analysis/curve.waited_by): "completion" (each I/O's), the
    # call that syncs each write ("fdatasync", "fsync": what a synced write waits for), or
    # "completion and fsync" (a sync every few writes); absent in runs stored before
    latency: NotRequired[str]
    closed_loop: list[dict[str, Any]]  # steps (analysis/curve.step_record)
    steps: list[dict[str, Any]]  # open-loop steps, by requested rate
    max_iops: float | None
    max_at: str | None
    knee_iops: float | None
    knee_bent: NotRequired[str | None]  # what ended the knee (analysis/curve.bend)
    floor_ns: dict[str, float | None] | None
    answers: list[dict[str, Any]]  # per objective (analysis/curve.answers)
    cpu_bound: bool
    max_cpu_percent: float
    # in the step that took most CPU: the share of it tasks here waited for a CPU
    cpu_waited_percent: NotRequired[float | None]


class RoundsEntry(TypedDict):
    values: list[float]  # each round's figure
    results: list[str]  # the results each round stores
    kind: str  # "iops" or "bw"
    reached_round: int | None
    window: list[int]  # the repeats whose results are the test's figures
    criterion: str


class LifecycleSection(TypedDict):
    volumes: list[dict[str, Any]]  # per volume, its phases' seconds (target/kubernetes)
    summary: dict[str, dict[str, Any]]  # per phase: n, of, p50, p90, max
    binding_mode: str
    not_measured: dict[str, str]
    # how the first write was made durable ("O_SYNC"); absent: stored before it was, its
    # first_write is the write alone (analysis/lifecycle.first_write_unsynced)
    first_write_sync: NotRequired[str]


class FailoverSection(TypedDict, total=False):
    rate_iops: int
    acknowledged_writes: int
    ended_by: str
    pause_s: float
    parts: dict[str, float]
    delete_to_old_gone_s: float
    wrote_after_delete_s: float
    status_interval_s: float
    intact: bool
    verify_message: str


class AppSection(TypedDict):
    profile: str  # the application profile (suite): postgresql, mysql, redis, ...
    application: str  # "PostgreSQL 15"
    estimates: list[dict[str, Any]]  # metric, label, value, unit, low, high, decided_by
    verdict: str  # one sentence, with the figure that decided it
    validated: bool  # checked against the real application (docs/apps.md)
    notes: list[str]


class ReplaySection(TypedDict):
    workload: str  # its name (`storbench record`)
    method: str  # how it was captured: "file level (strace)"
    timed: bool  # on the recorded timeline (False: as fast as fio can)
    engine: str  # fio's ioengine and depth: "libaio, iodepth 4"
    recorded: dict[str, int]  # reads, writes, syncs (and bytes, files) in the trace
    issued: dict[str, int]  # reads, writes, syncs fio issued (every worker's together)
    workers: NotRequired[int]  # fio workers that each replayed the trace (hosts); 1 if absent
    recorded_s: float  # the trace's span, first I/O to last
    replay_s: float  # how long the replay's I/O took
    lag_s: float | None  # timed: how far the replay fell behind the recorded timeline
    prefilled: dict[str, int]  # file -> bytes written before the replay (what it reads)
    notes: list[str]


class ExplainEntry(TypedDict):
    """A test's time by the kernel's layers and the limit that bound it (run --explain;
    analysis/explain.py says each field)."""

    layers: dict[str, dict[str, Any]]  # layer -> n, p50_ns, p99_ns, mean_ns
    fio: dict[str, Any]  # fio's clat p50/p99 (ns), direction, iops, iodepth, cpu_percent
    cache_percent: float | None  # of the read calls, those that never reached the device
    device_bytes: dict[str, int]  # read, written at the device by fio's I/O
    window_s: float  # the measured I/O the layers cover (s)
    place: dict[str, Any]  # fs_type, device, backing, backing_fs, throttle
    # read, write: the I/Os a second a cgroup's cap let through (its own count), where one
    # is set and counted
    cap_ios_per_s: NotRequired[dict[str, float]]
    cap_bytes_per_s: NotRequired[dict[str, float]]  # and their bytes a second
    # a test that synced: its layers are of its "syncs" alone, or of its "others" (absent:
    # of every call, a test that did not sync or a run stored before 2026-12-06)
    calls: NotRequired[str]
    limit: str  # the binding limit's key
    said: str  # the sentence that names it (analysis/views/explain.bound adds to it)
    together: NotRequired[list[str]]  # the other tests of its fio invocation
    notes: NotRequired[list[str]]  # what the trace could not see


class NeighboursSection(TypedDict):
    """`storbench neighbours`: the victim at its rate, alone then beside aggressors
    (pipeline/kinds/neighbours.py says each field)."""

    victims: dict[str, dict[str, Any]]  # randread -> words ("4k random reads"), rate_iops
    # (as fio offers it)
    aggressor: str  # one aggressor, in words ("1M sequential writes, qd32")
    limit: str | None  # the victims' objective (p99<=10ms), where one was given
    steps: list[dict[str, Any]]  # aggressors, isolated; per victim p50/p99 (ns), growth,
    # kept; theirs
    said: str  # the answer in one sentence
    # --isolate: limits (as given), words, cgroup, device, scheduler, ignored (why, or None)
    isolation: NotRequired[dict[str, Any]]
    # at several workers (--hosts): victims -> the first's label, aggressors -> the others'
    places: NotRequired[dict[str, Any]]


# the kinds' sections (what is said of each: its view, analysis/views/)
CURVE = Section[CurveSection]("curve", "IOPS-latency curve")
ROUNDS = Section[dict[str, RoundsEntry]]("steady_rounds", "steady state in rounds")
LIFECYCLE = Section[LifecycleSection]("lifecycle", "volume lifecycle")
FAILOVER = Section[FailoverSection]("failover", "failover")
APP = Section[AppSection]("app", "application profile")
REPLAY = Section[ReplaySection]("replay", "replay of a recorded workload")
NEIGHBOURS = Section[NeighboursSection]("neighbours", "noisy neighbours")
# beside any kind's: where each test's time went (run --explain), test -> its entry
EXPLAIN = Section[dict[str, ExplainEntry]]("explain", "latency by layer")

# what the loop and the importer keep of any run
PHASES = Section[list[dict[str, Any]]]("phases", "where the time went")
HOST_LOAD = Section[dict[str, Any]]("host_load", "this machine's load")
PROBE = Section[dict[str, dict[str, dict[str, Any]]]]("metadata_probe", "metadata latency")
PROBE_TIMELINE = Section[list[list[Any]]]("metadata_probe_timeline", "metadata latency")
PROBE_START = Section[float]("metadata_probe_start_s", "metadata probe start")
IMPORT_SOURCES = Section[list[dict[str, Any]]]("import_sources", "imported from")
IMPORT_LEFT_OUT = Section[list[dict[str, Any]]]("import_left_out", "left out of the import")
# what each of the probe's operations is called where it is shown: a file system's (stat,
# listdir, create_unlink) and an S3 bucket's (head, list, first_byte)
PROBE_OPS = {"stat": "stat", "listdir": "listdir", "create_unlink": "create+unlink",
             "head": "HEAD", "list": "LIST", "first_byte": "GET's first byte"}


def probe_op(op: str) -> str:
    return PROBE_OPS.get(op, op.replace("_", " "))


def probe_names(probes: list[dict[str, Any]]) -> tuple[str, str]:
    """(what, which operations how often) the probe timed, from the operations it holds:
    a file system's metadata, or an S3 bucket's requests."""
    if {op for probe in probes for op in probe} & {"head", "list", "first_byte"}:
        return "Request latency", "HEAD, LIST of up to 1,000 keys, a GET's first byte, every 0.5 s"
    return "Metadata latency", "stat, listing, create+unlink every 0.5 s"
