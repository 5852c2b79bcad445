"""A cgroup's I/O cap in an explanation (``run --explain``, analysis/explain.py): whether
it set a test's rate (its own count of what it let through, of IOPS or of bytes a second:
execute/capcount.py), what it held of fio's I/Os, and its limits in words."""

from __future__ import annotations

from typing import Any

from storbench.analysis.buckets import BUCKET, part_of, share
from storbench.workload.sizes import format_bytes_iec, format_latency

AT_CAP = 0.95  # of a cap's limit let through, in a test's measured I/O: the cap sets its rate


def capped(entry: dict[str, Any], limit: str, said: str) -> tuple[str, str]:
    """A cgroup's cap that let through its limit of IOPS or of bytes a second (the
    cgroup's own count, ``cap_ios_per_s``, ``cap_bytes_per_s``: execute/capcount.py) sets
    the test's rate, whatever holds its p99 (``limit``, ``said``: what explain._held
    found, then said after it); the limit nearest to its own is named. Not for a job that
    kept its own pace."""
    caps: dict[str, int] = entry["place"].get("throttle") or {}
    fio: dict[str, Any] = entry["fio"]
    at = [(rate / caps[f"{d}_{unit}"], d, rate, unit)
          for unit, key in (("iops", "cap_ios_per_s"), ("bps", "cap_bytes_per_s"))
          for d, rate in (entry.get(key) or {}).items()
          if caps.get(f"{d}_{unit}") and rate >= AT_CAP * caps[f"{d}_{unit}"]]
    if not at or (fio.get("pace") or {}).get("kept"):
        return limit, said
    _, side, rate, unit = max(at)
    if limit == "throttle":  # the cap holds p99 too: its wait
        wait, few = cap_wait(entry)
        held = wait if few else f"its wait in the cap, {wait}"
    else:
        held = said
    if unit == "bps":
        # (fio's bytes a second are its busier direction's: said where that is the cap's)
        moved = fio.get("bw_bytes_per_s") if fio.get("direction") == side else None
        return "throttle", (f"a cgroup's I/O cap ({_per_s(caps[f'{side}_bps'])} {side}), which"
                            f" set the rate: it let {_per_s(rate)} of {side}s through"
                            + (f", where fio's rate was {_per_s(moved)}" if moved else "")
                            + f". At p99: {held}")
    own = fio.get("iops")
    mine = "" if not own else (
        f", where fio made {own:,.0f} writes a second, each synced (a sync's flush is a"
        " write to the cap too)" if fio.get("synced") and side == "write" and rate >= 1.5 * own
        else f", where fio's rate was {own:,.0f} IOPS")
    return "throttle", (f"a cgroup's I/O cap ({caps[f'{side}_iops']:,} {side} IOPS), which"
                        f" set the rate: it let {rate:,.0f} {side} I/Os a second through{mine}."
                        f" At p99: {held}")


def _per_s(value: float) -> str:
    """Bytes a second, as a cap's limit and its rate are said: '125.0 MiB/s'."""
    return f"{format_bytes_iec(value)}/s"


def cap_wait(entry: dict[str, Any]) -> tuple[str, bool]:
    """What a cgroup's cap held of fio's I/Os (its layer, ``throttle``): its share of p99;
    or, where it held 1% of them or fewer long (blk-throttle's slices of time), those
    few, beyond fio's p99, in its last percent (then True). A cap of bytes a second holds
    about one I/O a slice of 100 ms, 1% of 1,000 IOPS: the trace's window and fio's may
    then count them a hair over (60 of 5,901), and most of them waiting longer than fio's
    p99 (beyond a bucket) says that they are its last percent too."""
    lat = format_latency
    layers: dict[str, dict[str, Any]] = entry["layers"]
    p99 = entry["fio"].get("p99_ns")
    held = layers.get("throttle") or {}
    wait, most = (held.get("p99_ns"), held.get("p50_ns")) if held.get("n") else (None, None)
    part = share(wait, p99) or 0.0
    few, calls = held.get("n", 0), (layers.get("queue") or {}).get("n", 0)
    last = few <= calls / 100 or (few <= calls / 50 and bool(p99) and (most or 0) > p99 * BUCKET)
    if part > 100 and 0 < few and last:
        return (f"it held {few:,} of {calls:,} I/Os ({100 * few / calls:.1f}%), {lat(wait)}"
                f" at p99 of those, beyond fio's p99 {lat(p99)}: in its last percent"), True
    return part_of(wait, p99, few), False


def cap_words(throttle: dict[str, int]) -> list[str]:
    """A cgroup's limits as said: '3,000 read IOPS', '125.0 MiB/s write'."""
    return [f"{_per_s(v)} {k.removesuffix('_bps')}" if k.endswith("_bps")
            else f"{v:,} {k.removesuffix('_iops')} IOPS" if k.endswith("_iops")
            else f"{v:,} {k}" for k, v in throttle.items()]
