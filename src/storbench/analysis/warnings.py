"""Warnings about numbers that should not be trusted as they stand: a closed set.

Each warning says what was seen, why it skews the result, and what to do. They
are computed once when a test finishes, stored with the run, and shown wherever
the run is shown.
"""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import replace

from storbench.analysis import levels, rates
from storbench.analysis.caches import (
    beyond_link,
    device_not_reached,
    every_read_misses,
    flag,
    small_working_set,
)
from storbench.result.facts import RAM_FILESYSTEMS, TargetFacts
from storbench.result.model import Direction, Series, TestResult
from storbench.result.record import Warning
from storbench.workload.plan import seconds as seconds_of
from storbench.workload.sizes import format_bytes_iec, format_took, parse_count, parse_size

CACHE_NS = 20_000  # direct random reads faster than this come from a cache
MAX_CV = 0.10
MIN_SAMPLES = 5
MIN_SECONDS = 5.0  # a test that moved its data in less has not met caches, credits, write-back


class Kind(enum.StrEnum):
    PAGE_CACHE = "page-cache"
    CACHE_IN_FRONT = "cache-in-front"
    BURST_THEN_THROTTLE = "burst-then-throttle"
    STALL = "stall"
    NOT_STEADY = "not-steady"
    TOO_SHORT = "too-short"
    IODEPTH_SHORTFALL = "iodepth-shortfall"
    HIGH_VARIATION = "high-variation"
    RATE_NOT_REACHED = "rate-not-reached"
    RATE_EXCEEDED = "rate-exceeded"
    SMALL_WORKING_SET = "small-working-set"
    DEVICE_NOT_REACHED = "device-not-reached"
    UNWRITTEN_READS = "unwritten-reads"
    SYNC_IN_RAM = "sync-in-ram"
    IOPS_CAP = "iops-cap"
    NO_DEVICE_QUEUE = "no-device-queue"  # noisy neighbours on RAM
    BEYOND_LINK = "beyond-the-link"  # objects faster than their network link


def working_set_bytes(r: TestResult) -> int | None:
    """The bytes the test's jobs touch: one shared file (jobs at offset_increment apart
    in it), or a file per job."""
    size = parse_size(r.options.get("size", "")) if "size" in r.options else None
    if size is None:
        return None
    if not r.options.get("filename"):
        return size * r.jobs
    step = parse_size(r.options.get("offset_increment") or "0") or 0
    return size + step * (r.jobs - 1)


def objects(r: TestResult) -> bool:  # an s3:// TARGET's: no cache or device of ours in its way
    return r.options.get("ioengine") == "http"


def page_cache(r: TestResult, facts: TargetFacts,
               planned: dict[str, str] | None = None) -> Warning | None:
    """Buffered I/O on a working set that fits in the memory of the machine (each
    host, each pod) fio runs on; not random reads that fio keeps out of the cache, when
    the job as written (``planned``: its options in the job file) says so."""
    if flag(r.options, "direct") or r.options.get("buffered") == "0" or objects(r):
        return None
    if planned is not None and every_read_misses({**r.options, **planned}):
        return None
    hosts = facts.place == "hosts"
    ram, ws = facts.ram_bytes, working_set_bytes(r)
    workers = facts.workers
    if ws is not None and workers > 1 and not r.options.get("filename"):
        ws //= workers  # each host (pod) has its own files and its own page cache
    synced_each = any(r.options.get(k) == "1" for k in ("fsync", "fdatasync")) or r.options.get(
        "sync") in ("1", "sync", "dsync")
    if facts.fs_type in RAM_FILESYSTEMS or ws is None or (synced_each and r.read is None):
        return None  # RAM is the storage; or every write is made durable
    if hosts and not ram:
        return Warning(
            Kind.PAGE_CACHE, r.name,
            f"{r.name}: buffered I/O (direct=0) on a {format_bytes_iec(ws)} working set per"
            " host, and storbench cannot see how much memory the hosts have (fio's"
            " client/server protocol does not say): the page cache may be what was measured."
            " Use direct=1, or a size of at least twice the hosts' RAM.",
            {"working_set_bytes": ws, "ram_bytes": None},
        )
    if not ram or ws >= 2 * ram:
        return None
    whose = ("the pod's memory (its limit, or the node's RAM)" if facts.place == "pods"
             else "each host's RAM (the smallest)" if hosts
             else "the memory this run may use (its cgroup's limit, below the RAM)"
             if facts.memory_limited else "this machine's RAM")
    per = " per host" if hosts else " per pod" if workers > 1 else ""
    return Warning(
        Kind.PAGE_CACHE, r.name,
        f"{r.name}: buffered I/O (direct=0) on a {format_bytes_iec(ws)} working set{per},"
        f" under twice {whose} ({format_bytes_iec(ram)}): the page cache is being"
        f" measured, not the storage. Use direct=1, or a size of at least"
        f" {format_bytes_iec(2 * ram)}.",
        {"working_set_bytes": ws, "ram_bytes": ram},
    )


def cache_in_front(r: TestResult, facts: TargetFacts) -> Warning | None:
    fs = facts.fs_type
    rw = r.options.get("rw", r.options.get("readwrite", ""))
    if fs in RAM_FILESYSTEMS or not flag(r.options, "direct") or r.read is None:
        return None
    if rw not in ("randread", "randrw") or r.read.clat is None:
        return None
    # a third of the reads answered faster than a device answers: a cache answered
    # at least those (the 30th percentile, steadier under a busy machine than the median)
    p30, p50 = r.read.clat.percentile(30.0), r.read.clat.percentile(50.0)
    if p30 is None or p30 >= CACHE_NS:
        return None
    median = f" (median {p50 / 1000:.1f} µs)" if p50 is not None else ""
    return Warning(
        Kind.CACHE_IN_FRONT, r.name,
        f"{r.name}: 30% of the direct random reads took under {p30 / 1000:.1f} µs{median}"
        f"{f' on {fs}' if fs else ''}: faster than any disk or network storage, so a cache"
        " answered (the host's, a controller's or the hypervisor's). Use a working set larger"
        " than that cache.",
        {"read_clat_p30_ns": p30, "read_clat_p50_ns": p50, "limit_ns": CACHE_NS,
         "fs_type": fs},
    )


def unwritten_reads(r: TestResult, facts: TargetFacts) -> Warning | None:
    """Reads from a block device that was blank when the run began (no signature on
    it) and was not written first (--precondition): its blocks may never have been
    written, and those a device answers without reading its media."""
    if r.read is None or r.read.total_ios == 0:
        return None
    blank = sorted({d.name for d in facts.devices if d.blank and not d.preconditioned})
    if not blank:
        return None
    return Warning(
        Kind.UNWRITTEN_READS, r.name,
        f"{r.name}: read from {', '.join(blank)}, blank when the run began and not written"
        " first: blocks never written (a new or trimmed SSD, a thin or lazily restored cloud"
        " volume, a sparse file) may be answered without reading the media, faster than"
        " written ones. Write the device first: --precondition.",
        {"devices": blank})


def rate_not_reached(r: TestResult, paced: bool = False) -> list[Warning]:
    """A rate fio was asked for (rate_iops=, rate=) and did not keep: a saturated
    figure, or one of a faster rate than asked (``paced``: than fio's pace)."""
    out = []
    for rate in rates.requested(r):
        unit = "IOPS" if rate.unit == "IOPS" else "bytes/s"
        asked = f"{rates.amount(rate.requested)} {rate.direction} {unit} requested" + (
            f" ({rates.amount(rate.per_job)} a job × {rate.jobs})" if rate.jobs > 1 else "")
        details = {"direction": rate.direction, "requested": rate.requested,
                   "achieved": rate.achieved, "unit": rate.unit}
        unpaced = math.isinf(rate.offered)
        pace = ("" if not rate.unlike_asked else
                " (fio times Poisson gaps in whole microseconds: above 1,000,000 IOPS a job"
                " they are 0 µs, so it set no pace and ran as fast as the queue allowed;"
                " rate_process=linear keeps the rate)" if unpaced else
                " (fio times Poisson gaps in whole microseconds: for"
                f" {rates.amount(rate.per_job)} IOPS a job it offers"
                f" {rates.amount(rate.offered / rate.jobs)}; rate_process=linear keeps the rate)")
        if not rate.kept:
            out.append(Warning(
                Kind.RATE_NOT_REACHED, r.name,
                f"{r.name}: achieved {rate.achieved:,.1f} of {asked}{pace}: the storage"
                " could not keep up; its latency is a saturated one (a growing queue), not"
                " the latency at the requested rate.", details))
        elif rate.beyond_pace if paced else rate.exceeded:
            out.append(Warning(
                Kind.RATE_EXCEEDED, r.name,
                f"{r.name}: achieved {rate.achieved:,.1f} of {asked}: fio issued I/O faster"
                f" than asked{pace}; its latency is the latency at the rate it ran, not at the"
                " requested one.", details))
    return out


def caches(r: TestResult, facts: TargetFacts, already: set[str]) -> list[Warning]:
    """A working set small for the speed, or I/O the device below never saw."""
    if facts.fs_type in RAM_FILESYSTEMS or facts.place == "pods" or objects(r):
        return []
    out = []
    if not already & {Kind.PAGE_CACHE, Kind.CACHE_IN_FRONT}:
        ws = working_set_bytes(r)
        # each host's share: of the hosts that ran it (a job of each: numjobs a host; a
        # kind may give jobs to some hosts only, as neighbours' aggressors)
        per_host = parse_count(r.options.get("numjobs"))
        workers = min(facts.workers, max(1, r.jobs // max(1, per_host))) \
            if facts.place == "hosts" else 1
        if ws is not None and workers > 1 and not r.options.get("filename"):
            ws //= workers
        share = replace(r, read=_scaled(r.read, workers), write=_scaled(r.write, workers),
                        trim=None) if workers > 1 else r
        found = small_working_set(share, ws, flag(r.options, "direct"))
        if found is not None:
            out.append(Warning(Kind.SMALL_WORKING_SET, r.name, found.message, found.details))
    if facts.place != "hosts":
        found = device_not_reached(r, flag(r.options, "direct"))
        if found is not None:
            out.append(Warning(Kind.DEVICE_NOT_REACHED, r.name, found.message, found.details))
    return out


def _scaled(d: Direction | None, workers: int) -> Direction | None:
    """One worker's share of a direction summed over workers."""
    if d is None:
        return None
    return replace(d, bw_bytes_per_s=d.bw_bytes_per_s / workers, io_bytes=d.io_bytes // workers)


def burst(direction: str, s: Series, name: str) -> Warning | None:
    """A plateau, then a drop of >= 30% that lasts (burst credits running out); or a
    dip that comes back to the earlier level (a stall), with its length."""
    shift = levels.find(list(s.t_s), list(s.iops))
    if shift is None:
        return None
    b, a = shift.before, shift.low
    if shift.kind == "dip" and shift.end_s is not None:
        length = shift.end_s - shift.start_s
        return Warning(
            Kind.STALL, name,
            f"{name}: {direction} IOPS fell from {b:,.0f} to {a:,.0f} for {length:.0f} s"
            f" ({shift.start_s:.0f}–{shift.end_s:.0f} s into the test), then came back to"
            f" {shift.back or 0:,.0f}: a stall, not a throttle. The average includes it;"
            f" see `storbench show RUN --timeline`.",
            {"direction": direction, "before_iops": b, "low_iops": a, "back_iops": shift.back,
             "start_s": shift.start_s, "end_s": shift.end_s, "length_s": length},
        )
    return Warning(
        Kind.BURST_THEN_THROTTLE, name,
        f"{name}: {direction} IOPS ran at {b:,.0f} for {shift.start_s:.0f} s, then dropped to"
        f" {a:,.0f} ({100 * (1 - a / b):.0f}% lower) — burst credits or a throttle. The"
        f" sustained figure is the lower one; run longer to see where it settles.",
        {"direction": direction, "before_iops": b, "after_iops": a,
         "drop_at_s": shift.start_s},
    )


def variation(direction: str, s: Series, name: str) -> Warning | None:
    if len(s.iops) < MIN_SAMPLES:
        return None
    mean = statistics.fmean(s.iops)
    if mean <= 0:
        return None
    cv = statistics.stdev(s.iops) / mean
    if cv <= MAX_CV:
        return None
    return Warning(
        Kind.HIGH_VARIATION, name,
        f"{name}: {direction} IOPS varied by {100 * cv:.0f}% (coefficient of variation of"
        f" the per-second figures) around {mean:,.0f}: the average hides that. See"
        f" `storbench show RUN --timeline`; run longer or use --repeat.",
        {"direction": direction, "cv": cv, "mean_iops": mean},
    )


def not_steady(r: TestResult) -> Warning | None:
    ss = r.steady_state
    if ss is not None and not ss.attained:
        return Warning(
            Kind.NOT_STEADY, r.name,
            f"{r.name}: steady state ({ss.criterion}) was not reached in"
            f" {ss.stopped_after_s:.0f} s; the figures may still be moving. Give the test more"
            f" --runtime.",
            {"criterion": ss.criterion, "stopped_after_s": ss.stopped_after_s},
        )
    return None


def io_seconds(r: TestResult) -> float | None:
    """How long the test moved data (fio's runtime: ramp excluded), None if unknown."""
    ms = max((d.runtime_ms for _, d in r.directions()), default=0)
    return ms / 1000 if ms > 0 else None


def too_short(r: TestResult, longer: str = "",
              planned: dict[str, str] | None = None) -> Warning | None:
    """A test over in under MIN_SECONDS: a sub-second one as much as a 4-second one."""
    seconds = io_seconds(r)
    if r.steady_state is not None or seconds is None or seconds >= MIN_SECONDS:
        return None
    took = format_took(seconds)
    options = {**r.options, **(planned or {})}
    size = parse_size(options.get("size", "") or "")
    runtime = seconds_of(options.get("runtime", ""))
    if flag(options, "file_append") and size and not longer and (
            runtime is None or seconds < runtime * 0.98):
        # fio ends an appending job when its file is full, time_based or not
        return Warning(
            Kind.TOO_SHORT, r.name,
            f"{r.name}: its appends filled the {format_bytes_iec(size)} file in {took}"
            + (f", before its {format_took(runtime)} runtime" if runtime else "")
            + " (fio ends an appending job when its file is full, time based or not): too"
            " short to know whether the storage reached a steady state or to give a stable"
            " figure. Give it a larger --size, room permitting.",
            {"seconds": seconds, "min_seconds": MIN_SECONDS, "file_full": size},
        )
    return Warning(
        Kind.TOO_SHORT, r.name,
        f"{r.name}: moved its data in {took} only, too short to know whether the storage"
        f" reached a steady state (caches, burst credits, write-back) or to give a stable"
        f" figure. " + (longer[0].upper() + longer[1:] + "." if longer else
                        f"Use a larger size, time_based with a --runtime of at least"
                        f" {MIN_SECONDS:.0f} s, or --until-steady."),
        {"seconds": seconds, "min_seconds": MIN_SECONDS},
    )


_DEPTH_BUCKETS = {"1": 1, "2": 2, "4": 4, "8": 8, "16": 16, "32": 32, ">=64": 64}


def iodepth_shortfall(r: TestResult) -> Warning | None:
    requested = parse_count(r.options.get("iodepth"))
    if requested < 4 or not r.iodepth_percent:
        return None
    if r.options.get("rate_iops") or r.options.get("rate"):
        return None  # a rate, not the queue, sets the load: the depth is only room
    achieved = sum(_DEPTH_BUCKETS.get(k, 0) * v for k, v in r.iodepth_percent.items()) / max(
        sum(r.iodepth_percent.values()), 1e-9)
    engine = r.options.get("ioengine", "psync")
    if engine == "libaio" and not flag(r.options, "direct"):
        # fio counts queued I/Os, but io_submit() does buffered I/O synchronously
        achieved, why = 1.0, "libaio does buffered I/O (direct=0) synchronously in io_submit()"
    elif achieved < requested / 4:
        why = (f"ioengine={engine} is synchronous and ignores iodepth"
               if engine in ("sync", "psync", "vsync", "pvsync", "pvsync2")
               else "the storage or the engine did not keep that many I/Os in flight")
    else:
        return None
    return Warning(
        Kind.IODEPTH_SHORTFALL, r.name,
        f"{r.name}: iodepth={requested} was requested, about {achieved:.1f} was achieved:"
        f" {why}. The result is a lower queue depth's.",
        {"requested": requested, "achieved": achieved, "ioengine": engine},
    )


def syncs(r: TestResult) -> bool:
    """The test syncs what it writes (fsync=, fdatasync=, sync=) or timed its syncs."""
    return r.sync is not None or any(flag(r.options, k) for k in ("fsync", "fdatasync")) or (
        r.options.get("sync") in ("1", "sync", "dsync"))


def sync_in_ram(r: TestResult, facts: TargetFacts) -> Warning | None:
    """Syncs on a file system in RAM make nothing durable: a figure of no disk, whatever
    the suite (etcd's verdict said so; sync-iops and app profiles did not); on hosts
    whose path is on different file systems, those in RAM (their figures are merged)."""
    ram = facts.in_ram()
    if ram is None or r.write is None or not syncs(r):
        return None
    return Warning(
        Kind.SYNC_IN_RAM, r.name,
        f"{r.name}: fsync on {ram[1]} is a no-op: RAM is the storage and nothing is"
        " made durable, so its write and sync figures say nothing about a disk's.",
        {"fs_type": ram[0]},
    )


def compute(r: TestResult, facts: TargetFacts, paced: bool = False,
            planned: dict[str, str] | None = None, brief: str = "",
            longer: str = "") -> list[Warning]:
    """Every warning that applies to one test, on a target of these facts (``paced``:
    its rate is named as fio paces it, PlannedTest.paced; ``planned``: its job's options
    as written, which name the bare flags fio's JSON leaves out; None: not known;
    ``brief``: why it is short by design, PlannedTest.brief; ``longer``: how to make it
    longer where the usual advice does not apply)."""
    if r.error:
        return []
    found = [page_cache(r, facts, planned), cache_in_front(r, facts), not_steady(r),
             None if brief else too_short(r, longer, planned),
             iodepth_shortfall(r), unwritten_reads(r, facts), sync_in_ram(r, facts),
             *rate_not_reached(r, paced)]
    for direction, s in r.series.items():
        b = burst(direction, s, r.name)
        found.append(b if b is not None else variation(direction, s, r.name))
    seen = {w.kind for w in found if w is not None}
    found += caches(r, facts, seen)
    if objects(r) and (link := beyond_link(r, facts.link)) is not None:
        found.append(Warning(Kind.BEYOND_LINK, r.name, link.message, link.details))
    return [w for w in found if w is not None]


def across_repeats(name: str, results: list[TestResult]) -> list[Warning]:
    """High variation between the repeats of one test (CV of IOPS > 10%)."""
    if len(results) < 2 or any(r.error for r in results):
        return []
    out = []
    for direction, _ in results[0].directions():
        values = [d.iops for r in results if (d := r.direction(direction)) is not None]
        mean = statistics.fmean(values)
        if len(values) < 2 or mean <= 0:
            continue
        cv = statistics.stdev(values) / mean
        if cv > MAX_CV:
            out.append(Warning(
                Kind.HIGH_VARIATION, name,
                f"{name}: {direction} IOPS varied by {100 * cv:.0f}% between {len(values)}"
                f" repeats (from {min(values):,.0f} to {max(values):,.0f}): one run of this"
                f" test says little; use the median and its confidence interval.",
                {"direction": direction, "cv": cv, "repeats": len(values)},
            ))
    return out
