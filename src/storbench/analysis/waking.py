"""A test's p99 held by fio's thread waking (``run --explain``, analysis/explain.py):
after its I/O completed, or between a call's own I/Os (execute/layers.py's
``completion`` and ``between``)."""

from __future__ import annotations

from typing import Any

from storbench.analysis.buckets import beyond
from storbench.workload.sizes import format_latency

BUSY_WAITED = 10.0  # % of the time tasks here waited for a CPU (/proc/pressure/cpu): busy


def waking(entry: dict[str, Any], top: str, shares: dict[str, float | None]) -> str:
    """The sentence of a test whose p99 is held by fio's thread waking: after its I/O
    completed (``completion``), or between a call's own I/Os (``between``: from one's
    completion to its next, a sync's flush after its page); the other named beside it
    where it holds half as much of p99 or more (each is a wake-up: both make a sync)."""
    fio, layers, lat = entry["fio"], entry["layers"], format_latency
    cpu, p99 = fio.get("cpu_percent") or 0.0, fio.get("p99_ns")
    waited = fio.get("cpu_waited_percent")
    why = ("a busy machine, or a CPU that slept and took this long to wake" if waited is None
           else f"this machine was busy: tasks here waited for a CPU {waited:.0f}% of the"
           " time" if waited >= BUSY_WAITED else
           f"not a busy machine (tasks here waited for a CPU {waited:.1f}% of the time):"
           " its CPU slept between I/Os and took this long to wake (an idle virtual CPU"
           " takes tens of microseconds)")
    took = layers[top]["p99_ns"]
    over = beyond(took, p99, int(layers[top]["n"]))
    woke = (f"{over}, fio's CPU {cpu:.0f}% of a core per job" if over else
            f"{shares[top]:.0f}% of p99 ({lat(took)}; fio's CPU {cpu:.0f}% of a core per job)")
    syncs = fio.get("direction") == "sync"  # (a sync's next I/O: its flush, a log write)
    words = {"completion": "for a CPU after their last I/O completed",
             "between": "between their own I/Os, from one's completion to their next (waking"
                        " up, and the file system making it"
                        + (": a cache flush, a log write)" if syncs else ")")}
    other = "between" if top == "completion" else "completion"
    also = shares.get(other)
    beside = (f", and {words[other]}: {also:.0f}% of p99 ({lat(layers[other]['p99_ns'])})"
              if also is not None and also >= (shares[top] or 0) / 2 else "")
    if top == "completion":
        return f"fio waiting for a CPU after its I/O completed: {woke}{beside}: {why}"
    return f"fio's {'syncs' if syncs else 'calls'} waiting {words[top]}: {woke}{beside}: {why}"
