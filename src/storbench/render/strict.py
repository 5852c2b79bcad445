"""Strict JSON: what every parser reads (no NaN, no Infinity). Light: `--help` and
`list --json` load it without the rest of the JSON export."""

from __future__ import annotations

import math
from typing import Any


def finite(o: Any) -> Any:
    """NaN (a figure a published reference does not give) and ±Infinity become null:
    strict JSON that every parser reads."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [finite(v) for v in o]
    return o
