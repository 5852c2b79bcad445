"""Caches that hide the storage: evidence that the figures were answered by memory
(a page cache, a controller's, a host's under a virtual disk) rather than the device.

- A working set small for the speed measured: storage testers use a file at least
  25x the per-second bandwidth. That alone flags a honest 2 GiB run at 125 MiB/s, so
  it takes a second piece of evidence: the test went over its working set again and
  again (at least 3 times: after the first pass every byte could come from a cache
  the size of the file), or reads returned faster than a device answers.
- What the device served: fio's json+ ``disk_util`` counts the I/O the block device
  under the file system really did. Far fewer reads than fio made: a cache answered
  them. Far fewer writes than fio had acknowledged with direct I/O: they were
  absorbed above the device. Where there is no device (network file systems, pods),
  nothing is said. Other processes' I/O on the device only make the device's counts
  larger: the check can be silent wrongly, never alarm wrongly.
- Objects got faster than the link they come over: an s3:// TARGET's GETs measured from
  this machine moved more bits a second than the interface its endpoint is reached
  through carries (as the kernel states its speed): a cache on this side of the link
  answered them (a proxy's, a gateway's page cache: minio/warp#188), not the bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storbench.result.model import TestResult
from storbench.workload.sizes import format_bytes_iec

FILE_PER_BW_S = 25  # the rule of thumb: a working set of at least 25 s of the bandwidth
PASSES = 3.0  # went over its working set at least this many times
DEVICE_SHARE = 0.10  # the device served under this share of fio's reads: a cache did
WRITE_SHARE = 0.50  # the device wrote under this share of fio's direct writes
MIN_IOS = 1000  # too few I/Os to judge
# fio reads the devices' counters every 250 ms (its disk-util thread, DISK_UTIL_MSEC): a
# test that ends before two readings may show its devices untouched, which says nothing
DISK_SAMPLE_MS = 250


@dataclass(frozen=True)
class Evidence:
    message: str
    details: dict[str, Any]


def small_working_set(r: TestResult, working_set: int | None,
                      direct: bool = False) -> Evidence | None:
    """The working set is small for the bandwidth measured, and the test re-read it."""
    if working_set is None or working_set <= 0:
        return None
    for name, d in r.directions():
        if d.bw_bytes_per_s <= 0 or working_set >= FILE_PER_BW_S * d.bw_bytes_per_s:
            continue
        passes = d.io_bytes / working_set
        if passes < PASSES:
            continue
        needed = FILE_PER_BW_S * d.bw_bytes_per_s
        caches = ("a controller's, the host's under a virtual disk" if direct
                  else "the page cache, a controller's, the host's under a virtual disk")
        return Evidence(
            f"{r.name}: {name} at {format_bytes_iec(d.bw_bytes_per_s)}/s on a"
            f" {format_bytes_iec(working_set)} working set, gone over {passes:.0f} times: a"
            f" cache of {format_bytes_iec(working_set)} ({caches}) could have answered, not"
            " the storage. A"
            f" working set of {FILE_PER_BW_S} s of this bandwidth rules that out: --size"
            f" {format_bytes_iec(needed)} or more.",
            {"direction": name, "working_set_bytes": working_set,
             "bw_bytes_per_s": d.bw_bytes_per_s, "passes": passes, "needed_bytes": needed})
    return None


def device_not_reached(r: TestResult, direct: bool) -> Evidence | None:
    """fio did far more I/O than the device below the file system served."""
    if not r.devices:
        return None
    served_reads = sum(dev.read_ios + dev.read_merges for dev in r.devices)
    served_writes = sum(dev.write_ios + dev.write_merges for dev in r.devices)
    ran_ms = max((d.runtime_ms for _, d in r.directions()), default=0)
    if ran_ms < 2 * DISK_SAMPLE_MS:
        # fio read the counters at most once during the test: none, or a count that stops
        # short of its end (a 207 ms test: 227 of its 1,024 writes, a full run of
        # 2026-12-06), which says nothing of a cache
        return None
    names = ", ".join(dev.name for dev in r.devices)
    if r.read is not None and r.read.total_ios >= MIN_IOS:
        share = served_reads / r.read.total_ios
        if share < DEVICE_SHARE:
            return Evidence(
                f"{r.name}: fio read {r.read.total_ios:,} times, the device below ({names})"
                f" served {served_reads:,} reads: {100 * (1 - share):.0f}% of the reads"
                " never reached it, a cache answered them. Use direct=1 and a working set"
                " larger than the cache.",
                {"direction": "read", "fio_ios": r.read.total_ios, "device_ios": served_reads,
                 "devices": names})
    if direct and r.write is not None and r.write.total_ios >= MIN_IOS:
        share = served_writes / r.write.total_ios
        if share < WRITE_SHARE:
            return Evidence(
                f"{r.name}: fio wrote {r.write.total_ios:,} times with direct I/O, the device"
                f" below ({names}) wrote {served_writes:,} times: {100 * (1 - share):.0f}% of"
                " what fio was told is written never reached it (a write cache above the"
                " device acknowledged it).",
                {"direction": "write", "fio_ios": r.write.total_ios,
                 "device_ios": served_writes, "devices": names})
    return None


def flag(options: dict[str, str], key: str) -> bool:
    """Whether a fio option is on (set, and not 0, false or none)."""
    value = options.get(key)
    return value is not None and value.strip().lower() not in ("0", "false", "none")


def every_read_misses(options: dict[str, str]) -> bool:
    """Whether fio's own cache drop makes each buffered read reach the storage: random
    reads with its random map (each block once a pass) after ``invalidate`` (its
    default, at every pass). Measured on a virtio disk: 18,000 IOPS at a 51-µs p50,
    1.2 million at 0.5 µs with norandommap (blocks read again within a pass).
    ``options`` must be the job file's: fio's JSON leaves bare flags (norandommap) out."""
    o = options
    shared = bool(o.get("filename")) and int(o.get("numjobs", "1") or 1) > 1
    return (o.get("rw", o.get("readwrite")) == "randread" and not flag(o, "norandommap")
            and o.get("random_distribution", "random") == "random"
            and o.get("invalidate", "1") != "0" and not flag(o, "pre_read") and not shared)


LINK_MARGIN = 1.05  # above the link's stated speed by more than this (framing aside)


def beyond_link(r: TestResult, link: tuple[str, int] | None) -> Evidence | None:
    """GETs (an object store's reads) faster than the link they crossed can carry."""
    if link is None or r.read is None or r.read.bw_bytes_per_s <= 0:
        return None
    interface, mbps = link
    bits = r.read.bw_bytes_per_s * 8
    if bits <= LINK_MARGIN * mbps * 1e6:
        return None
    return Evidence(
        f"{r.name}: GETs at {format_bytes_iec(r.read.bw_bytes_per_s)}/s"
        f" ({bits / 1e9:,.2f} Gb/s), more than the {mbps / 1000:g} Gb/s of {interface}, the"
        " link this machine reaches the endpoint through: a cache on this side of it"
        " answered them (a proxy's, a gateway's page cache), not the bucket's storage",
        {"gbps": round(bits / 1e9, 3), "link": interface, "link_gbps": mbps / 1000})
