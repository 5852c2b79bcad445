"""fio's normal text output (fio 2.x and 3.x) and terse output (version 3) -> job
entries shaped like fio 3's JSON, which ``fio_json.aggregate`` turns into results.

Text pasted from anywhere is accepted: a terminal log with a prompt around it, a blog
post with prose, HTML entities (``&gt;``), leading line numbers, whitespace re-wrapped
(a job's figures are read from its text with all whitespace runs made one space).

Units are converted as fio meant them: fio 2.x ``KB``, ``MB`` are 1024-based; fio 3.x
prints ``KiB/s`` (1024) and ``kB/s`` (1000); counts such as ``IOPS=19.6k`` and
``max=28046k`` use 1000. What text cannot give is left out, never invented:
histogram bins (so percentiles of several jobs cannot be merged and are left out),
options fio did not print. Latency sample counts are the I/O counts fio printed
(``issued rwts``), or IOPS x runtime where it printed none (terse, fio 2.x's sync).
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass
from typing import Any

DIRS = ("read", "write", "trim")
_NUM = r"(\d+(?:\.\d+)?)([kKMGT]?)"
_COUNT_SCALE = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_SCALE = {"nsec": 1.0, "usec": 1e3, "msec": 1e6, "sec": 1e9}
_NAME = r"(?:^|(?<=\s))(?P<name>[^\s:()\[\]]+)\s?"
_JOB = re.compile(_NAME + r": \(groupid=(?P<gid>\d+), jobs=(?P<jobs>\d+)\): err= ?(?P<err>\d+)")
_HEADER = re.compile(_NAME + r": \(g=\d+\): (?=rw=)")
_VERSION = re.compile(r"\bfio-(\d+\.\d+[\w.+-]*)")
_DIR = re.compile(r"\b(read|write|trim)\s?: (?=IOPS=|io=)")
_STATS = re.compile(r"\b(slat|clat|lat|sync) \((nsec|usec|msec|sec)\): min= ?" + _NUM
                    + r", max= ?" + _NUM + r", avg= ?(\d+(?:\.\d+)?), stdev= ?(\d+(?:\.\d+)?)")
_PCT_HEAD = re.compile(r"\b(clat|lat|slat|sync) percentiles \((nsec|usec|msec|sec)\):")
_PCT = re.compile(r"(\d+(?:\.\d+)?)th=\[ ?" + _NUM + r"\]")
_END = re.compile(r"\bRun status group \d+|\bDisk stats \(read/write\)|\bAll clients:")


class TextFormatError(ValueError):
    """fio text that cannot be read: ``line`` is the 1-based line of the original."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class TextOutput:
    fio_version: str
    jobs: list[dict[str, Any]]  # fio-3-JSON-shaped job entries
    kind: str  # "normal" or "terse"


# fio's status line ("Jobs: 4 (f=4): [m(4)][100.0%][r=2252KiB/s][r=563 IOPS][eta 00m:00s]"),
# printed while it runs and often pasted in front of its results
_STATUS = re.compile(r"Jobs: \d+ \(f=\d+\)(?:: ?(?:\[[^\]\n]*\])+)?")


def clean_lines(text: str) -> list[str]:
    """HTML entities decoded; fio's status lines dropped; leading line numbers removed
    when most lines have them, also glued to the text (``7file1: (groupid=0``)."""
    lines = html.unescape(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    numbered = re.compile(r"^\s*\d+(?:[:|.]\s?|\s+)(?=\S)")
    unglued = _unglued(lines)  # first: an indented line's glued number looks separated
    filled = [ln for ln in lines if ln.strip()]
    hits = [ln for ln in filled if numbered.match(ln) and not re.match(r"^\s*\d;", ln)]
    worded = [ln for ln in filled if not re.fullmatch(r"\s*\d+\s*", ln)]  # not a bare number
    if unglued is not lines and len(hits) < 0.9 * len(worded):  # a gutter: every line
        lines = unglued                                         # has its separator
    elif filled and len(hits) >= 0.6 * len(filled):
        lines = [numbered.sub("", ln, count=1) for ln in lines]
    return [_STATUS.sub("", ln) if "Jobs: " in ln else ln for ln in lines]


def _unglued(lines: list[str]) -> list[str]:
    """Lines numbered 1, 2, 3, ... with the number glued to each (a page's code block
    copied with its gutter, prose around it): the numbers gone. Within the block, most
    lines must carry the very number their place gives them."""
    at = [(i, ln.lstrip()) for i, ln in enumerate(lines) if ln.strip()]
    tried = set()
    for i0, first in at[:50]:
        number = first[:len(first) - len(first.lstrip("0123456789"))]
        for width in range(1, len(number) + 1):
            offset = int(number[:width]) - i0  # "17file" is line 1 or line 17
            if offset in tried:
                continue
            tried.add(offset)
            hit = [i for i, ln in at if ln.startswith(str(i + offset))]
            block = [i for i, _ in at if hit and hit[0] <= i <= hit[-1]]
            # most of the text, in one stretch: never a few lines that happen to begin
            # with their own number (re-wrapped figures)
            if len(hit) >= max(5, 0.5 * len(at)) and len(hit) >= 0.8 * len(block):
                keep = set(hit)
                return [ln.lstrip().removeprefix(str(i + offset)) if i in keep else ln
                        for i, ln in enumerate(lines)]
    return lines


def looks_like_text(text: str) -> bool:
    return _JOB.search(re.sub(r"\s+", " ", html.unescape(text))) is not None


def looks_like_terse(text: str) -> bool:
    return any(_is_terse(ln) for ln in clean_lines(text))


def _is_terse(line: str) -> bool:
    parts = line.strip().split(";")
    return len(parts) > 2 and parts[0] == "3" and parts[1].startswith("fio-")


class _Flat:
    """The cleaned text with whitespace runs made one space, offsets mapped to lines."""

    def __init__(self, lines: list[str]) -> None:
        chunks, self.starts, self.numbers = [], [], []
        pos = 0
        for number, line in enumerate(lines, start=1):
            flat = " ".join(line.split())
            if not flat:
                continue
            self.starts.append(pos)
            self.numbers.append(number)
            chunks.append(flat)
            pos += len(flat) + 1
        self.text = " ".join(chunks)

    def line(self, offset: int) -> int:
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.numbers[max(i, 0)] if self.numbers else 1


def parse_text(text: str) -> TextOutput:
    """fio's normal output (2.x or 3.x) in ``text``; TextFormatError when damaged."""
    flat = _Flat(clean_lines(text))
    options = _header_options(flat.text)
    version = _VERSION.search(flat.text)
    starts = list(_JOB.finditer(flat.text))
    if not starts:
        raise TextFormatError("no fio job results found (a line like 'name: (groupid=0,"
                              " jobs=1): err= 0: ...')", 1)
    jobs = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(flat.text)
        stop = _END.search(flat.text, m.end(), end)
        body_end = stop.start() if stop else end
        jobs.append(_job(flat, m, body_end, options.get(m["name"].strip(), {})))
    return TextOutput(f"fio-{version.group(1)}" if version else "", _grouped(jobs), "normal")


def _grouped(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Jobs that ran together as copies of one job (one group, names that differ only in
    a number: file1 ... file4) become one test, as fio's group report sums them: named
    without the number ("file"), their figures summed when results are formed."""
    by_group: dict[int, set[str]] = {}
    for job in jobs:
        by_group.setdefault(job["groupid"], set()).add(job["jobname"])
    rename = {}
    for gid, names in by_group.items():
        stems = {n.rstrip("0123456789").rstrip("-_.") for n in names}
        if len(names) > 1 and len(stems) == 1 and (stem := stems.pop()):
            rename[gid] = stem
    for job in jobs:
        if job["groupid"] in rename:
            job["jobname"] = rename[job["groupid"]]
    return jobs


def _header_options(flat: str) -> dict[str, dict[str, str]]:
    """The 'name: (g=0): rw=randread, bs=..., ioengine=..., iodepth=...' lines."""
    found: dict[str, dict[str, str]] = {}
    for m in _HEADER.finditer(flat):
        end = re.search(r": \((?:g|groupid)=|\bfio-\d|\bStarting \d", flat[m.end():])
        rest = flat[m.end():m.end() + (end.start() if end else 300)]
        opts = {}
        for key in ("rw", "ioengine", "iodepth"):
            v = re.search(rf"\b{key}=([^,\s]+)", rest)
            if v:
                opts[key] = v.group(1)
        bs = re.search(r"bs=\(R\) ?([\d.]+[KMG]?i?B?)-", rest) or re.search(
            r"bs=([\d.]+[KMGkmg]?i?B?)-", rest)
        if bs:
            opts["bs"] = bs.group(1)
        found.setdefault(m["name"], opts)
    return found


def mixed_said(how: str) -> str:
    """Why fio's output of a job whose reads and writes it reported only as one ("mixed",
    unified_rw_reporting; ``how`` it said so) is not read, and what to do."""
    return (f"fio reported its reads and writes as one ({how}), which storbench does not"
            " read: it keeps reads and writes apart; run fio without it (or with"
            " unified_rw_reporting=both)")


def _job(flat: _Flat, m: re.Match[str], end: int, options: dict[str, str]) -> dict[str, Any]:
    text = flat.text
    name = m["name"].strip()
    body = text[m.end():end]
    base = m.end()
    job: dict[str, Any] = {"jobname": name, "groupid": int(m["gid"]), "error": int(m["err"]),
                           "job options": dict(options)}
    if int(m["jobs"]) > 1:
        job["job options"].setdefault("numjobs", m["jobs"])
        job["job options"]["group_reporting"] = ""
    marks = list(_DIR.finditer(body))
    tail = _first(body, (r"\blat \((?:nsec|usec|msec)\)\s*: \d", r"\bcpu\s*:",
                         r"\bfsync/fdatasync/sync_file_range:", r"\bIO depths\s*:"))
    issued = _issued(body)
    # unified_rw_reporting=both: reads and writes, then both as one ("mixed"), which is
    # not read; a direction's block ends where it begins (the write's took mixed's p99)
    mixed = re.search(r"\bmixed\s*:\s*IOPS=", body)
    for k, d in enumerate(marks):
        seg_end = marks[k + 1].start() if k + 1 < len(marks) else (tail if tail > d.end()
                                                                     else len(body))
        if mixed is not None and d.end() < mixed.start() < seg_end:
            seg_end = mixed.start()
        seg = body[d.start():seg_end]
        direction = _direction(seg, flat.line(base + d.start()), issued.get(d.group(1)))
        direction["total_ios"] = issued.get(d.group(1), {}).get("total", 0) or round(
            direction["iops"] * direction["runtime"] / 1000)
        for kind in ("slat", "clat", "lat"):
            if f"{kind}_ns" in direction:
                direction[f"{kind}_ns"].setdefault("N", direction["total_ios"])
        job[d.group(1)] = direction
    if not marks and not job["error"]:
        if mixed is not None:
            raise TextFormatError(f"job {name!r}: {mixed_said('mixed: unified_rw_reporting')}",
                                  flat.line(m.start()))
        raise TextFormatError(f"job {name!r} has no read, write or trim figures: the output"
                              " is cut short or damaged", flat.line(m.start()))
    sync_at = body.find("fsync/fdatasync/sync_file_range:")
    if sync_at != -1:
        seg = body[sync_at:_first(body[sync_at:], (r"\bcpu\s*:", r"\bIO depths")) + sync_at]
        stats = _stats(seg)
        if "sync" in stats:
            calls = round(sum(job[d]["total_ios"] for d in DIRS if d in job)
                          / max(1, int(options.get("fsync") or options.get("fdatasync") or 1)))
            stats["sync"].setdefault("N", calls)
            job["sync"] = {"lat_ns": stats["sync"]}
    cpu = re.search(r"\bcpu\s*: usr=([\d.]+)%, sys=([\d.]+)%, ctx=(\d+)", body)
    if cpu:
        job.update(usr_cpu=float(cpu[1]), sys_cpu=float(cpu[2]), ctx=int(cpu[3]))
    depths = re.search(r"\bIO depths\s*: ((?:>?=?\d+=[\d.]+%,? ?)+)", body)
    if depths:
        job["iodepth_level"] = {k: float(v) for k, v in
                                re.findall(r"(>?=?\d+)=([\d.]+)%", depths.group(1))}
    runtimes = [job[d]["runtime"] for d in DIRS if d in job]
    job["elapsed"] = max(runtimes) / 1000 if runtimes else 0
    return job


def _first(text: str, patterns: tuple[str, ...]) -> int:
    found = [m.start() for p in patterns if (m := re.search(p, text))]
    return min(found) if found else len(text)


def _issued(body: str) -> dict[str, dict[str, int]]:
    """I/O counts per direction: fio 3 'issued rwts: total=a,b,c,d short=... dropped=...',
    fio 2 'issued : total=r=a/w=b/d=c, short=r=0/w=0/d=0'."""
    out: dict[str, dict[str, int]] = {}
    m3 = re.search(r"issued rwts?: total=((?:\d+,){2,3}\d+) short=((?:\d+,){2,3}\d+)"
                   r"(?: dropped=((?:\d+,){2,3}\d+))?", body)
    if m3:
        totals, shorts = m3[1].split(","), m3[2].split(",")
        drops = m3[3].split(",") if m3[3] else ["0"] * len(totals)
        for i, d in enumerate(DIRS):
            if i < min(len(totals), len(shorts), len(drops)):
                out[d] = {"total": int(totals[i]), "short": int(shorts[i]),
                          "dropped": int(drops[i])}
        return out
    m2 = re.search(r"issued ?: total=r=(\d+)/w=(\d+)/d=(\d+), short=r=(\d+)/w=(\d+)/d=(\d+)", body)
    if m2:
        for i, d in enumerate(DIRS):
            out[d] = {"total": int(m2[1 + i]), "short": int(m2[4 + i]), "dropped": 0}
    return out


_BW3 = re.compile(r"IOPS=" + _NUM + r", BW=([\d.]+)([KMGT]i)?B/s(?: \([\d.]+[kMGT]?B/s\))?"
                  r" ?\(([\d.]+)([KMGT]i)?B/(\d+)msec\)")
_BW2 = re.compile(r"io=([\d.]+)([KMGT]?)B, bw=([\d.]+)([KMGT]?)B/s, iops=" + _NUM
                  + r", runt= ?(\d+)msec")


def _direction(seg: str, line: int, issued: dict[str, int] | None) -> dict[str, Any]:
    m3 = _BW3.search(seg)
    if m3:
        d: dict[str, Any] = {
            "iops": float(m3[1]) * _COUNT_SCALE[m3[2]],
            "bw_bytes": float(m3[3]) * _binary(m3[4]),
            "io_bytes": round(float(m3[5]) * _binary(m3[6])),
            "runtime": int(m3[7]),
        }
    else:
        m2 = _BW2.search(seg)
        if m2 is None:
            raise TextFormatError(f"cannot read this {seg.split(':')[0].strip()} line: "
                                  f"{seg[:90]!r}", line)
        d = {  # fio 2.x: K, M, G are 1024-based
            "io_bytes": round(float(m2[1]) * _binary(m2[2] + "i" if m2[2] else None)),
            "bw_bytes": float(m2[3]) * _binary(m2[4] + "i" if m2[4] else None),
            "iops": float(m2[5]) * _COUNT_SCALE[m2[6]],
            "runtime": int(m2[7]),
        }
    d["io_kbytes"] = d["io_bytes"] // 1024
    if issued:
        d["short_ios"], d["drop_ios"] = issued["short"], issued["dropped"]
    d.update({f"{k}_ns": v for k, v in _stats(seg).items() if k != "sync"})
    return d


def _binary(prefix: str | None) -> float:
    return {None: 1, "": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}[prefix]


def _stats(seg: str) -> dict[str, dict[str, Any]]:
    """slat/clat/lat/sync min, max, mean, stdev (ns) and percentiles from a segment."""
    out: dict[str, dict[str, Any]] = {}
    for m in _STATS.finditer(seg):
        scale = _TIME_SCALE[m[2]]
        out.setdefault(m[1], {
            "min": float(m[3]) * _COUNT_SCALE[m[4]] * scale,
            "max": float(m[5]) * _COUNT_SCALE[m[6]] * scale,
            "mean": float(m[7]) * scale,
            "stddev": float(m[8]) * scale,
        })
    heads = list(_PCT_HEAD.finditer(seg))
    for i, h in enumerate(heads):
        block = seg[h.end():heads[i + 1].start() if i + 1 < len(heads) else len(seg)]
        stop = re.search(r"(?<![\d.])[a-zA-Z]{2,}", block)  # the next section's words end it
        block = block[:stop.start()] if stop else block
        scale = _TIME_SCALE[h[2]]
        pct = {f"{float(p):f}": float(v) * _COUNT_SCALE[s] * scale
               for p, v, s in _PCT.findall(block)}
        if pct and h[1] in out:
            out[h[1]]["percentile"] = pct
    return out


# -- terse ---------------------------------------------------------------------------------

_TERSE_DIR = 41  # fields per direction in terse v3


def parse_terse(text: str) -> TextOutput:
    """fio's terse output, version 3 (fio 2.x and 3.x): one line per job."""
    jobs = []
    version = ""
    for number, line in enumerate(clean_lines(text), start=1):
        if not line.strip().startswith("3;"):
            continue
        f = line.strip().split(";")
        if not _is_terse(line) or len(f) < 5 + 2 * _TERSE_DIR + 12:
            raise TextFormatError(f"terse line with {len(f)} fields: fio's terse version 3"
                                  f" has at least {5 + 2 * _TERSE_DIR + 12}", number)
        try:
            version = f[1]
            job: dict[str, Any] = {"jobname": f[2], "groupid": int(f[3]), "error": int(f[4]),
                                   "job options": {}}
            for i, d in enumerate(("read", "write")):
                direction = _terse_direction(f[5 + i * _TERSE_DIR: 5 + (i + 1) * _TERSE_DIR])
                if direction is not None:
                    job[d] = direction
            cpu = 5 + 2 * _TERSE_DIR
            job.update(usr_cpu=float(f[cpu].rstrip("%")), sys_cpu=float(f[cpu + 1].rstrip("%")),
                       ctx=int(f[cpu + 2]))
            levels = ("1", "2", "4", "8", "16", "32", ">=64")
            job["iodepth_level"] = {k: float(v.rstrip("%"))
                                    for k, v in zip(levels, f[cpu + 5: cpu + 12], strict=True)}
            runtimes = [job[d]["runtime"] for d in ("read", "write") if d in job]
            job["elapsed"] = max(runtimes) / 1000 if runtimes else 0
        except (ValueError, IndexError) as exc:
            raise TextFormatError(f"damaged terse line ({exc})", number) from None
        jobs.append(job)
    if not jobs:
        raise TextFormatError("no terse (version 3) line found", 1)
    return TextOutput(version, jobs, "terse")


def _terse_direction(f: list[str]) -> dict[str, Any] | None:
    io_kib, bw_kib, iops, runtime = int(f[0]), float(f[1]), float(f[2]), int(f[3])
    if not io_kib and not iops:
        return None
    n = round(iops * runtime / 1000)

    def lat(at: int) -> dict[str, Any]:
        return {"min": float(f[at]) * 1e3, "max": float(f[at + 1]) * 1e3,
                "mean": float(f[at + 2]) * 1e3, "stddev": float(f[at + 3]) * 1e3, "N": n}

    clat = lat(8)
    clat["percentile"] = {f"{float(p.rstrip('%')):f}": float(v) * 1e3 for p, v in
                          (x.split("=") for x in f[12:32]) if float(p.rstrip("%")) > 0}
    d = {"io_bytes": io_kib * 1024, "io_kbytes": io_kib, "bw_bytes": bw_kib * 1024,
         "iops": iops, "runtime": runtime, "total_ios": n, "clat_ns": clat, "lat_ns": lat(32)}
    if float(f[5]) > 0:  # slat max: fio prints zeros when it did not measure slat
        d["slat_ns"] = lat(4)
    return d
