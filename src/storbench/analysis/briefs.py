"""A stored warning in a few words, for a table cell or a list beside the figure it
concerns ("too short (47 ms)", "qd 1.0 of 32 achieved")."""

from __future__ import annotations

from storbench.analysis.warnings import Kind
from storbench.result.record import Warning
from storbench.workload.sizes import format_took


def brief(w: Warning) -> str:
    """A warning in a few words, for a table cell beside the figure it concerns."""
    try:
        return _brief(w)
    except (KeyError, TypeError, ZeroDivisionError):  # stored by an older storbench
        return str(w.kind).replace("-", " ")


def _brief(w: Warning) -> str:
    d = w.details
    if w.kind == Kind.IODEPTH_SHORTFALL:
        return f"qd {d['achieved']:.1f} of {d['requested']} achieved"
    if w.kind == Kind.HIGH_VARIATION:
        across = f" over {d['repeats']} repeats" if "repeats" in d else ""
        return f"{d['direction']} IOPS varied {100 * d['cv']:.0f}%{across}"
    if w.kind == Kind.RATE_NOT_REACHED:
        return f"rate not reached ({d['achieved']:,.0f} of {d['requested']:,.6g} {d['unit']})"
    if w.kind == Kind.RATE_EXCEEDED:
        return f"rate exceeded ({d['achieved']:,.0f} of {d['requested']:,.6g} {d['unit']})"
    if w.kind == Kind.BURST_THEN_THROTTLE:
        return f"burst then {100 * (1 - d['after_iops'] / d['before_iops']):.0f}% lower"
    if w.kind == Kind.STALL:
        return f"stall of {d['length_s']:.0f} s at {d['start_s']:.0f} s"
    if w.kind == Kind.TOO_SHORT and "file_full" in d:
        return f"its file filled in {format_took(d['seconds'])}"
    if w.kind == Kind.TOO_SHORT:
        return f"too short ({format_took(d['seconds'])})"
    if w.kind == Kind.SYNC_IN_RAM:
        return f"fsync on {d['fs_type']}: a no-op"
    if w.kind == Kind.IOPS_CAP:
        return f"{d['direction']} IOPS capped at {d['iops']:,.0f}/s"
    return str(w.kind).replace("-", " ")
