"""fio's JSON and json+ output -> TestResult, one per job name.

Handles fio >= 3 (``*_ns`` latency) and fio 2.x (``clat`` etc. in µs), text
before the JSON (fio prints warnings into the output file), and client/server
output (``client_stats``; its "All clients" entry is skipped: hosts are merged
from their bins instead).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from storbench.errors import FioError
from storbench.result.merge import merge_latency
from storbench.result.model import (
    DIRECTIONS,
    DeviceIO,
    Direction,
    Latency,
    SteadyState,
    SyncStats,
    TestResult,
)

# fio prints an undefined number as a bare -nan (a steady-state slope over one sample):
# not JSON; read as NaN, which Python's decoder takes
_BARE_NAN = re.compile(r"(:\s*)-?nan\b")


def load_fio_json(text: str) -> dict[str, Any]:
    """The JSON document in fio's output, skipping any text fio printed before it; an
    output that is not JSON only for fio's bare -nan is read again with NaN there (only
    then: a string holding ': nan' in a well-formed output is left as it is)."""
    try:
        return _load_fio_json(text)
    except FioError:
        fixed = _BARE_NAN.sub(r"\1NaN", text)
        if fixed == text:
            raise
        return _load_fio_json(fixed)


def _load_fio_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    while start != -1:
        try:
            doc, _ = json.JSONDecoder().raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
            continue
        if isinstance(doc, dict) and ("jobs" in doc or "client_stats" in doc):
            return doc
        start = text.find("{", start + 1)
    snippet = text.strip().splitlines()[:3]
    raise FioError(
        "fio's output holds no JSON result"
        + (f"; it begins with: {' | '.join(snippet)}" if snippet else " (it is empty)")
    )


def combine_outputs(names: list[str], raws: list[str]) -> str:
    """Several separate fio JSON outputs (one per pod) as one client/server-shaped
    document: every job entry verbatim, tagged with its name as ``hostname`` (what
    parse_per_host groups by); an output that holds no JSON contributes nothing."""
    docs = []
    for raw in raws:
        try:
            docs.append(load_fio_json(raw))
        except FioError:
            docs.append({})
    first = next((d for d in docs if d), {})
    combined = {
        "fio version": first.get("fio version", ""),
        "global options": first.get("global options", {}),
        "client_stats": [{**job, "hostname": name}
                         for name, doc in zip(names, docs, strict=True)
                         for job in doc.get("jobs", [])],
    }
    return json.dumps(combined)


def job_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """fio's entries of its jobs (or groups of them), but for those it left empty: it
    counts a job with stats=0 as an entry of its own unless it is group_reporting, fills
    none for it, and writes each it counted, the unfilled ones last, without a job name
    and in group -1 (a job file with such a job failed as "fio's job '' did no I/O")."""
    entries = doc["jobs"] if "jobs" in doc else [
        j for j in doc.get("client_stats", []) if j.get("jobname") != "All clients"]
    return [j for j in entries if j.get("jobname") or j.get("groupid") not in _UNFILLED]


_UNFILLED = (-1, 2**32 - 1)  # the group of an entry fio counted and left empty


# by fio's name of a host ("" for a local fio): each entry of its report, in its order, as
# its job file makes them: its first job's name and how many jobs it holds
# (workload/jobfile.JobFile.reported)
Reported = Mapping[str, Sequence[tuple[str, int]]]


def parse_fio_json(text: str, reported: Reported | None = None
                   ) -> tuple[str, list[TestResult]]:
    """fio's version string and one TestResult per job name, in first-seen order."""
    return results_of(load_fio_json(text), reported)


def results_of(doc: dict[str, Any], reported: Reported | None = None
               ) -> tuple[str, list[TestResult]]:
    """A fio JSON document (or one shaped like it) -> version and results; ``reported``:
    the jobs of each entry, where the job files run are known (else as _members finds
    them)."""
    groups: dict[str, list[tuple[dict[str, Any], int | None]]] = {}
    for job, held in _held(doc, reported):
        groups.setdefault(str(job.get("jobname", "")), []).append((job, held))
    defaults = {str(k): str(v) for k, v in (doc.get("global options") or {}).items()}
    devices = _devices(doc.get("disk_util"))
    return str(doc.get("fio version", "")), [
        replace(aggregate(name, [j for j, _ in jobs], defaults, [h for _, h in jobs]),
                devices=devices)
        for name, jobs in groups.items()
    ]


def _host(job: dict[str, Any], doc: dict[str, Any]) -> str:
    """fio's name of the host an entry is from: "addr:port" ("" for a local fio; a unix
    socket's path and a Kubernetes run's pod without a port: fio prints its default one
    beside a path)."""
    if "hostname" not in job or "jobs" in doc:
        return ""
    if "port" in job and not str(job["hostname"]).startswith("/"):
        return f"{job['hostname']}:{job['port']}"
    return str(job["hostname"])


def _held(doc: dict[str, Any], reported: Reported | None
          ) -> list[tuple[dict[str, Any], int | None]]:
    """Each entry of ``doc`` with how many jobs it holds by ``reported`` (None: not known,
    or its host's entries are not those its job file makes: as many, named so)."""
    entries = job_entries(doc)
    hosts: dict[str, list[int]] = {}  # each host's entries, by their place in ``entries``
    for at, job in enumerate(entries):
        hosts.setdefault(_host(job, doc), []).append(at)
    held: list[int | None] = [None] * len(entries)
    for host, mine in hosts.items():
        layout = (reported or {}).get(host)
        if layout is not None and [str(entries[at].get("jobname", "")) for at in mine] == [
                name for name, _ in layout]:
            for at, (_, n) in zip(mine, layout, strict=True):
                held[at] = n
    return list(zip(entries, held, strict=True))


def _devices(entries: Any) -> list[DeviceIO]:
    """fio's disk_util: what each block device below the files served."""
    out = []
    for e in entries if isinstance(entries, list) else []:
        try:
            out.append(DeviceIO(str(e["name"]), int(e["read_ios"]), int(e["write_ios"]),
                                int(e.get("read_merges", 0)), int(e.get("write_merges", 0)),
                                float(e.get("util", 0.0))))
        except (KeyError, TypeError, ValueError):
            continue  # a shape fio does not write: no device facts, rather than wrong ones
    return out


def parse_per_host(text: str, reported: Reported | None = None
                   ) -> dict[str, list[TestResult]]:
    """Client/server output: one TestResult per job name for each host ("addr:port";
    a Kubernetes run's combined output names pods, without a port).

    Empty for output of a local run (no ``client_stats``).
    """
    doc = load_fio_json(text)
    defaults = {str(k): str(v) for k, v in (doc.get("global options") or {}).items()}
    hosts: dict[str, dict[str, list[tuple[dict[str, Any], int | None]]]] = {}
    for job, held in _held(doc, reported):
        if host := _host(job, doc):
            hosts.setdefault(host, {}).setdefault(str(job.get("jobname", "")), []).append(
                (job, held))
    return {
        host: [aggregate(name, [j for j, _ in jobs], defaults, [h for _, h in jobs])
               for name, jobs in groups.items()]
        for host, groups in hosts.items()
    }


def _latency(stats: dict[str, Any] | None, scale: float, samples: int = 0) -> Latency | None:
    """fio's latency block; fio 2.x gives no sample count ("N"): ``samples`` stands in."""
    if not stats:
        return None
    n = int(stats.get("N", 0)) or (samples if stats.get("max") else 0)
    if not n:
        return None
    percentiles = {float(k): float(v) * scale for k, v in (stats.get("percentile") or {}).items()}
    bins = {int(k): int(v) for k, v in (stats.get("bins") or {}).items()} if scale == 1 else {}
    return Latency(
        samples=n,
        min_ns=float(stats["min"]) * scale,
        max_ns=float(stats["max"]) * scale,
        mean_ns=float(stats["mean"]) * scale,
        stdev_ns=float(stats.get("stddev", 0.0)) * scale,
        percentiles_ns=percentiles,
        bins=bins,
    )


def _lat_of(d: dict[str, Any], kind: str) -> Latency | None:
    if f"{kind}_ns" in d:
        return _latency(d[f"{kind}_ns"], 1.0)
    # fio 2.x: microseconds, and no sample count: the I/Os done stand in for it
    ios = int(d.get("total_ios", 0)) or round(float(d.get("iops", 0)) * d.get("runtime", 0) / 1000)
    return _latency(d.get(kind), 1000.0, ios)


EARLY = 0.98  # a clone whose runtime is under this share of the longest ended early


def _runtime_ms(text: str | None) -> float | None:
    """fio's runtime= (seconds unless a unit says otherwise) in ms; None if not given."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?\s*", text or "")
    if m is None:
        return None
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}
    return float(m[1]) * scale[m[2] or "s"]


def _direction(parts: Sequence[dict[str, Any]], runtime_ms: float | None = None
               ) -> Direction | None:
    parts = [p for p in parts if p.get("total_ios", 0) or p.get("io_bytes", 0)]
    if not parts:
        return None

    def merged(kind: str) -> Latency | None:
        return merge_latency([x for p in parts if (x := _lat_of(p, kind)) is not None])

    # a clone that ended early (size-bound, its files smaller than the others') moved its
    # bytes within the longest one's runtime: its rate counts over that window, as in fio's
    # group reporting (summed as it is, a clone that ran 2 of 10 s at the whole cap added
    # the cap again). Clones that ran alike are summed as they are: time based, each ran
    # the whole ``runtime_ms`` (hosts each timing their own: on a busy machine one may
    # overrun it by 5%, and the others did not end early); so are runtimes not known.
    longest = max(int(p.get("runtime", 0)) for p in parts)
    whole = EARLY * min(longest, runtime_ms or longest)

    def share(p: dict[str, Any]) -> float:
        runtime = int(p.get("runtime", 0))
        return runtime / longest if 0 < runtime < whole else 1.0

    return Direction(
        iops=sum(float(p.get("iops", 0.0)) * share(p) for p in parts),
        bw_bytes_per_s=sum(
            (float(p["bw_bytes"]) if "bw_bytes" in p else float(p.get("bw", 0)) * 1024)
            * share(p) for p in parts
        ),
        io_bytes=sum(_io_bytes(p) for p in parts),
        total_ios=sum(int(p.get("total_ios", 0)) for p in parts),
        runtime_ms=max(int(p.get("runtime", 0)) for p in parts),
        short_ios=sum(int(p.get("short_ios", 0)) for p in parts),
        dropped_ios=sum(int(p.get("drop_ios", 0)) for p in parts),
        slat=merged("slat"),
        clat=merged("clat"),
        lat=merged("lat"),
    )


def _criterion(ss: str) -> str:
    """fio's steady-state criterion as the user wrote it: 'bw_slope:2.000000%' is
    'bw_slope:2%' (it was 'bw_slope:2.%'), 'iops_slope:0.500000%' 'iops_slope:0.5%'."""
    m = re.fullmatch(r"(\w+):(\d+(?:\.\d*)?)(%?)", ss)
    return f"{m[1]}:{float(m[2]):g}{m[3]}" if m else ss


def _members(jobs: Sequence[dict[str, Any]], numjobs: str,
             held: Sequence[int | None] | None = None) -> list[int]:
    """How many of fio's jobs each entry is: ``held``'s, where its job file said (fio's
    JSON names neither group_reporting nor an entry's jobs); else a host's only entry of a
    job name is its ``numjobs`` reported as one group (with --hosts, one such entry per
    host), else 1 (each job an entry of its own)."""
    n = max(1, int(numjobs)) if numjobs.isascii() and numjobs.isdigit() else 1
    hosts = Counter((j.get("hostname"), j.get("port")) for j in jobs)
    return [h if h is not None else n if hosts[j.get("hostname"), j.get("port")] == 1 else 1
            for j, h in zip(jobs, held or [None] * len(jobs), strict=True)]


def _ran_ms(job: dict[str, Any], members: int) -> float:
    """How long a job entry ran, in ms: its directions' longest runtime (fio gives a
    group_reporting entry's direction the runtime of its longest job), else its
    job_runtime, which fio sums over the ``members`` jobs of a group (4 jobs of 3.4 s:
    13.6 s)."""
    ran = max((int(job[k].get("runtime", 0)) for k in DIRECTIONS
               if isinstance(job.get(k), dict)), default=0)
    return ran or float(job.get("job_runtime", 0)) / members


def _io_bytes(d: dict[str, Any]) -> int:
    if "io_kbytes" in d or "bw_bytes" in d:  # fio 3: io_bytes is bytes
        return int(d.get("io_bytes", int(d.get("io_kbytes", 0)) * 1024))
    return int(d.get("io_bytes", 0)) * 1024  # fio 2.x: "io_bytes" held KiB


def aggregate(
    name: str, jobs: Sequence[dict[str, Any]], defaults: dict[str, str] | None = None,
    held: Sequence[int | None] | None = None,
) -> TestResult:
    """One TestResult from the fio job entries that share a job name.

    ``defaults`` are fio's "global options"; the result's options are those plus
    the job's own, as fio applied them. ``held``: how many jobs each entry holds, where
    its job file said (_members).
    """
    options = dict(defaults or {})
    options.update({str(k): str(v) for k, v in (jobs[0].get("job options") or {}).items()})
    runtime = _runtime_ms(options.get("runtime"))
    directions = {d: _direction([j[d] for j in jobs if d in j], runtime) for d in DIRECTIONS}
    sync_lats = [x for j in jobs if "sync" in j if (x := _lat_of(j["sync"], "lat")) is not None]
    sync_lat = merge_latency(sync_lats)
    sync = SyncStats(calls=sync_lat.samples, lat=sync_lat) if sync_lat is not None else None
    error = next((int(j["error"]) for j in jobs if j.get("error")), 0)
    levels: dict[str, float] = {}
    for j in jobs:
        for k, v in (j.get("iodepth_level") or {}).items():
            levels[k] = levels.get(k, 0.0) + float(v) / len(jobs)
    members = _members(jobs, options.get("numjobs", "1"), held)

    def cpu(key: str) -> float:
        """Percent of one core, the jobs' summed: fio gives a group's entry one job's
        share (their CPU time over their times summed), so it counts its jobs times."""
        return sum(float(j.get(key, 0.0)) * n for j, n in zip(jobs, members, strict=True))

    steady = [j["steadystate"] for j in jobs if j.get("steadystate")]
    steady_state = None
    if steady:
        steady_state = SteadyState(
            criterion=_criterion(str(steady[0].get("ss", ""))),
            attained=all(bool(s.get("attained")) for s in steady),
            window_s=float(steady[0].get("duration", 0)),
            stopped_after_s=max(map(_ran_ms, jobs, members)) / 1000,
            value=str(steady[0].get("criterion", "")),
        )
    return TestResult(
        name=name,
        jobs=sum(members),
        error=error,
        read=directions["read"],
        write=directions["write"],
        trim=directions["trim"],
        sync=sync,
        usr_cpu_percent=cpu("usr_cpu"),
        sys_cpu_percent=cpu("sys_cpu"),
        context_switches=sum(int(j.get("ctx", 0)) for j in jobs),
        iodepth_percent=levels,
        elapsed_s=max(float(j.get("elapsed", 0)) for j in jobs),
        options=options,
        steady_state=steady_state,
    )
