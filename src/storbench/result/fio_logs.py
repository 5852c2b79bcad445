"""fio's per-second logs (write_iops_log / write_bw_log / write_lat_log with
log_avg_msec=1000) -> a Series per direction, jobs of one test combined."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from storbench.result.model import DIRECTIONS, Series

_LOG = re.compile(r"^(?P<prefix>.+)_(?P<kind>iops|bw|clat)\.(?P<job>\d+)\.log$")

Samples = dict[str, dict[int, list[float]]]  # direction -> second -> values (one per job)


def _read(path: Path, into: Samples, scale: float) -> None:
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not (parts[0].isascii() and parts[0].isdigit()):
            continue
        t_ms, value, ddir = int(parts[0]), float(parts[1]), int(parts[2])
        if ddir >= len(DIRECTIONS):
            continue
        second = max(1, round(t_ms / 1000))
        into[DIRECTIONS[ddir]].setdefault(second, []).append(value * scale)


def read_series(directory: Path, prefix: str) -> dict[str, Series]:
    """The series of the test whose jobs logged with ``prefix`` in ``directory``."""
    data: dict[str, Samples] = {k: defaultdict(dict) for k in ("iops", "bw", "clat")}
    for path in sorted(directory.glob(f"{prefix}_*.log")):
        m = _LOG.match(path.name)
        if m is None or m.group("prefix") != prefix:
            continue
        kind = m.group("kind")
        _read(path, data[kind], 1024.0 if kind == "bw" else 1.0)  # bw log is KiB/s
    out: dict[str, Series] = {}
    for direction in DIRECTIONS:
        iops = data["iops"].get(direction, {})
        if not iops:
            continue
        bw = data["bw"].get(direction, {})
        clat = data["clat"].get(direction, {})
        seconds = sorted(iops)
        lat_means: list[float | None] = []
        for s in seconds:
            lats, weights = clat.get(s, []), iops.get(s, [])
            if lats and len(lats) == len(weights) and sum(weights) > 0:
                lat_means.append(sum(la * w for la, w in zip(lats, weights, strict=True))
                                 / sum(weights))
            elif lats:
                lat_means.append(sum(lats) / len(lats))
            else:
                lat_means.append(None)
        out[direction] = Series(
            t_s=[float(s) for s in seconds],
            iops=[sum(iops[s]) for s in seconds],
            bw_bytes_per_s=[sum(bw.get(s, [0.0])) for s in seconds],
            clat_mean_ns=lat_means,
        )
    return out
