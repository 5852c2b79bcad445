"""fio's size syntax ("22m", "2g", "1GiB", "4096") as bytes, and back."""

from __future__ import annotations

import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(text: str) -> int | None:
    """Bytes for a fio size value, or None when it is not a plain size (e.g. "50%").

    fio's default ``kb_base=1024`` makes "k", "m", "g" powers of 1024, as here.
    """
    m = _SIZE.match(text)
    if m is None:
        return None
    number, unit = float(m.group(1)), m.group(2).lower()
    return int(number * 1024 ** _POWERS[unit])


def parse_count(text: str | None, default: int = 1) -> int:
    """A fio integer option (numjobs=4, numjobs=0x2, nrfiles=1k) as fio reads it;
    ``default`` when absent or not a number fio could mean (fio judges it)."""
    if text is None or not text.strip():
        return default
    try:
        return int(text.strip(), 0)
    except ValueError:
        pass
    size = parse_size(text)
    return size if size is not None else default


def format_bytes_iec(n: float) -> str:
    """1536 -> '1.5 KiB'. Used in messages; tables pick one unit per column."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


LATENCY_UNITS = (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))


def format_latency(ns: float | None) -> str:
    """One latency in its own unit, for sentences: '4.20 ms', '422 ns', 'n/a'. Tables
    pick one unit per column (render/units.py, on the same scale)."""
    if ns is None:
        return "n/a"
    name, divisor = LATENCY_UNITS[0]
    for n, d in LATENCY_UNITS:
        if abs(ns) >= d:
            name, divisor = n, d
    x = ns / divisor
    text = f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"
    return f"{text} {name}"


def format_took(seconds: float) -> str:
    """How long something took, as one reads it: "0.4 ms", "17 ms", "2.3 s", "45 s"."""
    ms = seconds * 1000
    if ms < 1:
        return f"{ms:.2g} ms"
    if seconds < 1:
        return f"{ms:.0f} ms"
    return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:,.0f} s"


def fio_seconds(seconds: float) -> str:
    """A time as a fio option's value: whole seconds as they are ("30", "1000000"), else
    in milliseconds ("2500ms"). fio drops a fraction of a second ("2.5" and "2.5s" run
    2 s) and reads "1e+06" as no time: no I/O at all (Python's ``:g`` writes that above
    999,999)."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{max(1, round(seconds * 1000))}ms"


def fio_size(n: int) -> str:
    """Bytes as a fio size option value, exact (kb_base 1024)."""
    for unit, power in (("g", 3), ("m", 2), ("k", 1)):
        if n % 1024**power == 0:
            return f"{n // 1024**power}{unit}"
    return str(n)
