"""fio's averaged logs (write_iops_log / write_bw_log / write_lat_log with
log_avg_msec) -> a Series per direction, jobs of one test combined.

fio names a log ``PREFIX_KIND.N.log`` (N: the job's number) and writes a line per
interval: ``time_ms, value, direction, ...``. Its timestamps drift past the
interval (1000, 2003, 3003 ms is still one sample a second), so a sample belongs
to the interval nearest its time. Each job's samples within one second are
averaged, then jobs are summed (IOPS, bandwidth) or weighted by IOPS (latency).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

from storbench.result.model import DIRECTIONS, Series

_LOG = re.compile(r"^(?P<prefix>.+)_(?P<kind>iops|bw|clat)\.(?P<job>\d+)\.log$")
LOG_OPTIONS = ("write_iops_log", "write_bw_log", "write_lat_log")

# direction -> second -> job -> values within that second
Samples = dict[str, dict[int, dict[str, list[float]]]]


def _read(path: Path, job: str, into: Samples, scale: float, interval_ms: int) -> None:
    for line in path.read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not (parts[0].isascii() and parts[0].isdigit()):
            continue
        try:
            t_ms, value, ddir = int(parts[0]), float(parts[1]), int(parts[2])
        except ValueError:
            continue
        if ddir >= len(DIRECTIONS) or not math.isfinite(value):
            continue
        interval = max(1, round(t_ms / interval_ms))  # the interval this sample closes
        second = max(1, math.ceil(interval * interval_ms / 1000 - 1e-9))
        into[DIRECTIONS[ddir]].setdefault(second, {}).setdefault(job, []).append(value * scale)


def read_series(directory: Path, prefix: str, interval_ms: int = 1000) -> dict[str, Series]:
    """The series of the test whose jobs logged with ``prefix`` in ``directory``,
    averaged by fio over ``interval_ms`` (log_avg_msec)."""
    data: dict[str, Samples] = {k: defaultdict(dict) for k in ("iops", "bw", "clat")}
    for path in sorted(directory.glob(f"{glob_escape(prefix)}_*.log")):
        m = _LOG.match(path.name)
        if m is None or m.group("prefix") != prefix:
            continue
        kind = m.group("kind")
        _read(path, m.group("job"), data[kind], 1024.0 if kind == "bw" else 1.0,  # KiB/s
              interval_ms)
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
            pairs = [(_mean(lat), _mean(iops[s].get(job, []))) for job, lat in
                     clat.get(s, {}).items()]
            if pairs and all(w is not None for _, w in pairs) and sum(
                    w or 0.0 for _, w in pairs) > 0:
                lat_means.append(sum((la or 0.0) * (w or 0.0) for la, w in pairs)
                                 / sum(w or 0.0 for _, w in pairs))
            elif pairs:
                lat_means.append(sum(la or 0.0 for la, _ in pairs) / len(pairs))
            else:
                lat_means.append(None)
        out[direction] = Series(
            t_s=[float(s) for s in seconds],
            iops=[_sum_jobs(iops[s]) for s in seconds],
            bw_bytes_per_s=[_sum_jobs(bw.get(s, {})) for s in seconds],
            clat_mean_ns=lat_means,
        )
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _sum_jobs(by_job: dict[str, list[float]]) -> float:
    return sum(sum(v) / len(v) for v in by_job.values() if v)


def is_log_file(name: str) -> bool:
    """Whether a file name is one of fio's logs (PREFIX_iops.1.log, _bw, _lat, ...)."""
    return re.fullmatch(r".+_(iops|bw|lat|clat|slat)\.\d+\.log", name) is not None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def logged_prefix(options: dict[str, str]) -> str | None:
    """The file name prefix a job's options told fio to log under (the directory it
    named is where the logs were; they are looked for beside the JSON instead)."""
    for key in LOG_OPTIONS:
        value = options.get(key)
        if value:
            return Path(value).name
    return None


def interval_of(options: dict[str, str]) -> int | None:
    """log_avg_msec in ms; None when fio logged every I/O (no averaging: not read)."""
    raw = options.get("log_avg_msec", "0").strip().lower().removesuffix("ms")
    try:
        ms = int(float(raw))
    except ValueError:
        return None
    return ms if ms > 0 else None


def bench_fio_prefix(json_path: Path) -> str | None:
    """bench-fio (fio-plot) names its JSON MODE-IODEPTH-NUMJOBS.json and its logs
    MODE-iodepth-IODEPTH-numjobs-NUMJOBS_*.log."""
    m = re.fullmatch(r"(?P<mode>.+)-(?P<qd>\d+)-(?P<jobs>\d+)", json_path.stem)
    return f"{m['mode']}-iodepth-{m['qd']}-numjobs-{m['jobs']}" if m else None


def has_logs(directory: Path, prefix: str) -> bool:
    for path in directory.glob(f"{glob_escape(prefix)}_*.log"):
        m = _LOG.match(path.name)
        if m is not None and m["prefix"] == prefix:
            return True
    return False
