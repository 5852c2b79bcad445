"""Where a test's time went and which limit bound it (``run --explain``): the layers'
figures from the kernel's histograms (execute/layers.py), and one sentence naming the
binding limit, judged from them and from fio's own figures.

An explanation is a dict (result/sections.ExplainEntry) stored per test in the run's
``explain`` section:

- ``layers``: per layer (execute/layers.LAYERS) ``n``, ``p50_ns``, ``p99_ns``, ``mean_ns``;
- ``fio``: fio's completion latency p50/p99 (ns) of the test's busier direction, its
  IOPS, its queue depth and CPU (percent of one core per job), and ``pace``: the rate the
  job asked of that direction (rate_iops=, rate=) and whether fio kept it;
- ``cache_percent``: of the bytes fio read, those that never reached the device;
- ``place``: the file system, the device (a loop device's backing file and its file
  system), the cgroup's I/O limits on the device;
- ``cap_ios_per_s``, ``cap_bytes_per_s``: the reads and writes a second that cgroup let
  through to the device in the test's measured I/O, and their bytes a second, by its own
  count (execute/capcount.py; where a cap is set and fio ran here). At 95% of a limit of
  IOPS or of bytes a second or more the cap set the rate: it is named first, then what
  holds p99 (blk-throttle holds the excess in bursts, beyond p99);
- ``limit``: the binding limit's key (``throttle``, ``device``, ``queueing``, ``network``,
  ``page_cache``, ``cpu``, ``no_block``, ``fs``, ``journal``, ``completion``, ``unknown``)
  and ``said``: the sentence.

A test that syncs (fsync=, fdatasync=) and waits longer in its syncs than in its writes
at p99 (etcd's fdatasync after each buffered write) is explained by its syncs' latency:
``fio``'s direction is then ``sync``. A sync's wait after fio's own writes completed is
the file system's: on ext4 the journal commit it waited for (execute/journals.py), named
when it is half of that wait or more; on xfs its log's write, which the sync forced and
may write from its own call, half of whichever of its own layers is longest (the file
system's, between its own I/Os or after them) or more.

A paced job's rate is its own, not a limit of the storage's: where fio kept the pace the
sentence says so after the layer that holds its time, and where it fell behind, that the
storage set its rate. Such a job's CPU is not what bound it: at short gaps (20,000 IOPS,
50 µs) fio waits for its next I/O by spinning, 100% of a core (measured on tmpfs: 85% user
time and 7 context switches in 3 s, where 2,000 IOPS took 7% and 5,980).
"""

from __future__ import annotations

from typing import Any

from storbench.analysis import rates
from storbench.analysis.buckets import beyond, layer_figures, part_of, share
from storbench.analysis.capped import cap_wait, cap_words, capped
from storbench.analysis.waking import waking
from storbench.result.model import TestResult
from storbench.result.sections import ExplainEntry
from storbench.workload.sizes import format_bytes_iec, format_latency

NETWORK_FS = ("fuse", "nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "glusterfs", "lustre")
RAM_FS = ("tmpfs", "ramfs")
BINDING_SHARE = 50.0  # a layer holding at least this % of p99 binds; else the largest
CACHE_BOUND = 90.0  # % of the bytes read never reaching the device: the page cache answers
CPU_BOUND = 90.0  # % of a core per job
JOURNAL_SHARE = 0.01  # of the syncs, waiting for a journal commit
WAKE_MAX_NS = 1e6  # a CPU's wake-up after a completion takes less (tens of µs idle)
SYNC_P99 = "fio's sync p99"  # how a sync's p99 is named (a test explained by its syncs)


def busier(result: TestResult) -> tuple[str, Any] | None:
    """The direction with more I/Os (read or write), and its figures."""
    found = [(name, d) for name, d in (("read", result.read), ("write", result.write))
             if d is not None and d.total_ios > 0]
    return max(found, key=lambda x: x[1].total_ios) if found else None


def fio_figures(result: TestResult) -> dict[str, Any]:
    side = busier(result)
    depth = result.options.get("iodepth") or "1"
    cpu = (result.usr_cpu_percent + result.sys_cpu_percent) / max(1, result.jobs)
    out: dict[str, Any] = {"iodepth": int(depth) if depth.isdigit() else 1,
                           "jobs": result.jobs, "cpu_percent": round(cpu, 1),
                           "engine": result.options.get("ioengine") or "psync",
                           "synced": result.sync is not None}
    if side is not None:
        name, d = side
        out.update(direction=name, iops=d.iops, bw_bytes_per_s=d.bw_bytes_per_s,
                   p50_ns=d.clat.percentile(50.0) if d.clat else None,
                   p99_ns=d.clat.percentile(99.0) if d.clat else None)
        for rate in rates.requested(result):
            if rate.direction == name:  # (rate_iops= first, as fio applies it first)
                out["pace"] = {"option": "rate_iops" if rate.unit == "IOPS" else "rate",
                               "direction": name, "unit": rate.unit, "asked": rate.requested,
                               "done": rate.achieved, "kept": rate.kept}
                break
    if result.sync is not None and (side is None or (result.sync.lat.percentile(99.0) or 0)
                                    > (out.get("p99_ns") or 0)):
        # a test that syncs and waits longest in its syncs (etcd's fdatasync after each
        # buffered write): their latency is the one explained, as its verdicts judge it
        out.update(direction="sync", p50_ns=result.sync.lat.percentile(50.0),
                   p99_ns=result.sync.lat.percentile(99.0))
        out.setdefault("iops", None)
    return out


def explains_syncs(result: TestResult) -> bool:
    """Whether a test's explanation is of its syncs (fio_figures' direction): its layers
    are then its syncs' alone (execute/layers.SYNC), else those of its other calls."""
    return fio_figures(result).get("direction") == "sync"


def cache_percent(result: TestResult, layers: dict[str, dict[str, Any]]) -> float | None:
    """Of the read calls fio made, those that queued no I/O at the device (the page cache
    answered, read ahead or kept); None for direct I/O (every read goes to the device) or
    a test that mostly writes."""
    direct = (result.options.get("direct") or "0") not in ("0", "false")
    side = busier(result)
    if direct or side is None or side[0] != "read":
        return None
    hits = (layers.get("call_nobio") or {}).get("n", 0)
    reached = (layers.get("call_bio") or {}).get("n", 0)
    return round(100.0 * hits / (hits + reached), 1) if hits + reached else None


def judge(entry: dict[str, Any]) -> tuple[str, str]:
    """The binding limit's key and the sentence that names it: the layer that holds the
    time, and for a paced job whose rate was its own pace or the storage's."""
    limit, said = capped(entry, *_held(entry))
    fio: dict[str, Any] = entry["fio"]
    pace = fio.get("pace")
    if not pace:
        return limit, said

    def amount(value: float) -> str:
        if pace["unit"] == "B/s":
            return f"{format_bytes_iec(value)}/s"
        side = pace.get("direction", fio.get("direction"))  # (stored without: the side's)
        return " ".join(x for x in (rates.amount(value), side, "IOPS") if x)

    asked = amount(pace["asked"])
    done = amount(pace["done"]) if pace["unit"] == "B/s" else rates.amount(pace["done"])
    if pace["kept"]:
        return limit, (f"{said}; its rate was the job's own pace, not the storage's:"
                       f" {asked} asked ({pace['option']}), {done} done")
    return limit, (f"{said}; it fell behind the job's pace ({asked} asked by {pace['option']},"
                   f" {done} done): the storage set its rate")


def _held(entry: dict[str, Any]) -> tuple[str, str]:
    """The binding limit's key and sentence by the layers (and fio's CPU)."""
    lat = format_latency  # '127 µs', '88.1 ms', 'n/a'
    layers: dict[str, dict[str, Any]] = entry["layers"]
    fio: dict[str, Any] = entry["fio"]
    place: dict[str, Any] = entry["place"]
    fs = place.get("fs_type") or ""
    device = place.get("device")
    p99 = fio.get("p99_ns")
    depth = int(fio.get("iodepth") or 1)
    cpu = fio.get("cpu_percent") or 0.0
    # a job that kept its pace spent its CPU waiting for its next I/O (fio spins at short
    # gaps): not what bound it
    spun = bool((fio.get("pace") or {}).get("kept")) and cpu >= CPU_BOUND

    def at(name: str, q: str = "p99_ns") -> float | None:
        layer = layers.get(name) or {}
        return layer.get(q) if layer.get("n") else None

    def n(name: str) -> int:
        return int((layers.get(name) or {}).get("n", 0))

    cache = entry.get("cache_percent")
    reached, nobio = n("device"), n("call_nobio")
    if cache is not None and cache >= CACHE_BOUND and fio.get("direction") == "read":
        read = float(fio.get("bw_bytes_per_s") or 0) * float(entry.get("window_s") or 0)
        came = (entry.get("device_bytes") or {}).get("read", 0)
        ahead = f"; {100 * came / read:.0f}% of the bytes came from it, read ahead" \
            if read and came / read >= 0.05 else ""
        return "page_cache", (f"the page cache: {cache:.1f}% of the reads never reached"
                              f" the device ({place_words(place)}{ahead})")
    if device is None or (not reached and nobio):
        network = fs.split(".")[0] in NETWORK_FS or fs.startswith("fuse")
        call = at("call_nobio")
        remote, call_p50 = at("remote", "p50_ns"), at("call_nobio", "p50_ns")
        if network and remote is not None and call_p50 and remote >= call_p50 / 2:
            return "network", (f"the network file system's round trips ({fs}): its daemon's"
                               f" answers take {lat(remote)} of a call's {lat(call_p50)} at"
                               f" p50, {lat(at('remote'))} of {lat(call)} at p99 (fio's p99"
                               f" {lat(p99)}); no block device beneath it")
        if network and remote is not None:
            return "fs", (f"the file system's own side ({fs}): a call takes {lat(call_p50)}"
                          f" at p50, of which its daemon's answers {lat(remote)}; {lat(call)}"
                          " at p99, with no block device beneath it")
        if network:
            return "network", (f"the network file system's round trips ({fs}): a call takes"
                               f" {lat(at('call_nobio', 'p50_ns'))} at p50, {lat(call)} at p99"
                               f" of fio's {lat(p99)}; no block device beneath it")
        if device is not None and fio.get("direction") == "sync":
            return _unqueued_syncs(entry)
        if cpu >= CPU_BOUND and not spun:
            return "cpu", (f"fio's CPU: {cpu:.0f}% of a core per job, on"
                           f" {fs or 'a file system with no block device'} (no block layer:"
                           " the time is the file system's and fio's own)")
        if fs in RAM_FS:
            return "no_block", (f"no block layer ({fs}): the time is the file system's and"
                                f" fio's CPU ({cpu:.0f}% of a core per job"
                                + (", most of it waiting for its next I/O at the job's pace"
                                   if spun else "") + "): a call takes"
                                f" {lat(at('call_nobio', 'p50_ns'))} at p50, {lat(call)} at p99")
        if device is not None:  # there is one: fio's own calls put nothing on it
            return "fs", (f"the file system ({fs or 'unknown'}): {lat(call)} per call at p99;"
                          f" none of fio's calls put I/O on the device beneath ({device}):"
                          " the page cache took it, and what was written the kernel's own"
                          " threads write back")
        return "fs", (f"the file system ({fs or 'unknown'}): {lat(call)} per call at p99 with"
                      " no I/O reaching a block device")
    shares = {name: share(at(name), p99) for name in
              ("fs", "throttle", "queue", "device", "completion", "between")}
    # blk-throttle holds a bio before it is queued: its wait is the throttle layer's; a
    # cgroup's limits on the device name it
    throttle = place.get("throttle") or {}
    ranked = sorted(((v, k) for k, v in shares.items() if v is not None), reverse=True)
    if not ranked:
        return "unknown", "no I/O of fio's was seen in the block layer's trace"
    top_share, top = ranked[0]
    if top == "throttle" or (throttle and top in ("fs", "queue") and
                             (shares.get("throttle") or 0) >= BINDING_SHARE / 2):
        limits = ", ".join(cap_words(throttle)) or "a limit"
        wait, few = cap_wait(entry)
        rate = (f"; fio's rate {fio['iops']:,.0f} IOPS" if few and fio.get("iops")
                and "cap_ios_per_s" not in entry else "")  # (else the cap's rate is said)
        return "throttle", f"waiting in a cgroup's I/O cap ({limits}): {wait}{rate}"
    if top == "device":
        inflight = _in_flight(layers, fio)
        what = f"the device ({device_words(place)})"
        if place.get("backing_fs") and (place["backing_fs"].split(".")[0] in NETWORK_FS
                                        or place["backing_fs"].startswith("fuse")):
            return "network", (f"the network beneath the device: {device_words(place)};"
                               f" its time is {part_of(at('device'), p99, reached)}")
        if inflight is not None and inflight >= 2 and depth > 1:
            return "queueing", (f"queueing at the device: {inflight:.1f} I/Os in flight on"
                                f" average at queue depth {depth}; its time is "
                                + (f"{over}, at p50 {lat(at('device', 'p50_ns'))}"
                                   if (over := beyond(at("device"), p99, reached)) else
                                   f"{top_share:.0f}% of p99 ({lat(at('device'))}; at p50"
                                   f" {lat(at('device', 'p50_ns'))})"))
        return "device", (f"{what}: its own time is {part_of(at('device'), p99, reached)}"
                          f" at queue depth {depth}")
    journal = at("journal")
    if top in ("fs", "completion", "between") and fio.get("direction") == "sync":
        # (a sync's wait after its own writes, before them or between them: xfs's log,
        # which a sync forces, is written from its own call, the log's work before)
        took = at(top)
        # (of the syncs: those that reached the device, and, where the layers are of the
        # syncs alone, those that did not: both may wait for a commit)
        syncs = n("call_bio") + (nobio if entry.get("calls") == "syncs" else 0)
        commits = n("journal") / max(1, syncs)
        # (a p99 can be the journal's only where 1% of the syncs or more waited for it)
        if (place.get("journal") and journal is not None and took
                and journal >= took * BINDING_SHARE / 100 and commits >= JOURNAL_SHARE):
            began = _waited_for_journal(place, commits, ", after fio's own"
                                        if place.get("journal") == "jbd2" else "")
            return "journal", (f"{began}:"
                               f" {lat(at('journal', 'p50_ns'))} at p50, "
                               + (f"{over}; the device's own time {lat(at('device'))} at p99"
                                  if (over := beyond(journal, p99, n("journal"), SYNC_P99))
                                  else f"{lat(journal)} at p99, {share(journal, p99):.0f}% of"
                                  f" fio's sync p99 {lat(p99)} (the device's own time"
                                  f" {lat(at('device'))} at p99)"))
        if top == "completion" and (not place.get("journal") or (took or 0) > WAKE_MAX_NS):
            # the journal not timed here, or a wait longer than a wake-up: what it may be
            log = _journal_words(place)
            others = [f"for its {log[0]} ({min(commits, 1):.0%} of them {log[1]}"
                      + (f", {lat(journal)} at p99)" if journal is not None else ")")
                      if place.get("journal") else "for its journal or log (not timed here)",
                      "for writes of theirs that the cgroup's cap held and its worker issued"
                      if throttle else "for writes of theirs that another thread issued"]
            if (took or 0) <= WAKE_MAX_NS:
                others.append("for a CPU")
            return "completion", (f"fio's syncs waiting after their own writes completed:"
                                  f" {part_of(took, p99, n('completion'), SYNC_P99)},"
                                  f" in the file system ({fs or 'unknown'}): "
                                  + ", ".join(others[:-1]) + " or " + others[-1])
    if top in ("completion", "between"):
        return "completion", waking(entry, top, shares)
    if top == "queue":
        return "queueing", ("waiting in the block layer's queue (the scheduler, the device's"
                            " tags): " + (beyond(at("queue"), p99, n("queue"))
                                          or f"{top_share:.0f}% of p99")
                            + f" at queue depth {depth}")
    return "fs", (f"the file system and submission ({fs}: page cache, journal, locks,"
                  " allocation): " + (beyond(at("fs"), p99, n("fs"))
                                      or f"{top_share:.0f}% of p99 ({lat(at('fs'))})"))


# how the journal a sync waited for is named (execute/beneath.Place.journal): its name,
# what a sync did (and of what, in a sentence of its own), and whose writes those are
JOURNAL_WORDS = {"jbd2": ("journal", "waited for a commit", " of it", "jbd2's writes"),
                 "xfs": ("log", "forced it and waited for its write", "",
                         "xfs's writes to its log")}


def _journal_words(place: dict[str, Any]) -> tuple[str, str, str, str]:
    """JOURNAL_WORDS of the place's journal (jbd2's for one stored before it was named)."""
    return JOURNAL_WORDS.get(place.get("journal") or "", JOURNAL_WORDS["jbd2"])


def _waited_for_journal(place: dict[str, Any], part: float, after: str = "") -> str:
    """How a sync's wait for the journal begins: its file system, and the ``part`` of the
    syncs that waited for a commit (``after``: when, beside its writes)."""
    name, did, of, whose = _journal_words(place)
    return (f"the file system's {name} ({place.get('fs_type') or 'unknown'}):"
            f" {min(part, 1):.0%} of fio's syncs {did}{of} ({whose}{after})")


def _unqueued_syncs(entry: dict[str, Any]) -> tuple[str, str]:
    """A test explained by its syncs, none of which put I/O of its own on the device
    (what they made durable was written before them: fio's direct writes, or the
    kernel's threads): their wait is the file system's, its journal's commit where 1% of
    them or more waited for one (ext4's, timed)."""
    lat = format_latency
    layers: dict[str, dict[str, Any]] = entry["layers"]
    place: dict[str, Any] = entry["place"]
    fs, device = place.get("fs_type") or "unknown", place.get("device")
    p99 = entry["fio"].get("p99_ns")
    syncs = (layers.get("call_nobio") or {}).get("n", 0)
    journal = layers.get("journal") or {}
    waited = journal.get("n", 0) / max(1, syncs)
    none = (f"fio's syncs put no I/O of their own on the device beneath ({device}): what they"
            " made durable was written before them (by fio's direct writes or the kernel's"
            " threads)")
    if place.get("journal") and journal.get("n") and waited >= JOURNAL_SHARE:
        return "journal", (f"{_waited_for_journal(place, waited)}:"
                           f" {lat(journal.get('p50_ns'))} at p50, "
                           f"{part_of(journal.get('p99_ns'), p99, journal['n'], SYNC_P99)};"
                           f" {none}")
    call = (layers.get("call_nobio") or {}).get("p99_ns")
    return "fs", (f"the file system ({fs}): {lat(call)} per sync at p99 ({SYNC_P99}"
                  f" {lat(p99)}); {none}, and what a sync waits for is the file system's"
                  " (its journal, a flush)")


def _in_flight(layers: dict[str, dict[str, Any]], fio: dict[str, Any]) -> float | None:
    """I/Os at the device on average (Little's law: rate × mean time there)."""
    mean = (layers.get("device") or {}).get("mean_ns")
    iops = fio.get("iops")
    if mean is None or not iops:
        return None
    return round(float(iops) * float(mean) / 1e9, 1)


def device_words(place: dict[str, Any]) -> str:
    name = place.get("device") or "?"
    if place.get("backing"):
        return (f"{name}, a loop device over a file on {place.get('backing_fs') or '?'}")
    return str(name)


def place_words(place: dict[str, Any]) -> str:
    fs = place.get("fs_type")
    device = place.get("device")
    return ", ".join(x for x in (fs, device and f"on {device_words(place)}") if x) or "?"


def explain(layers_seen: dict[str, dict[int, int]],
            device_bytes: tuple[int, int] | None, window_s: float, result: TestResult,
            place: dict[str, Any], cpu_waited: float | None = None,
            through: tuple[float, float, float | None, float | None] | None = None,
            calls: tuple[str, int] | None = None) -> ExplainEntry:
    """A test's explanation (module docstring) from the kernel's histograms of its measured
    I/O (layer -> bucket -> count: execute/layers.Slices.layer), the bytes
    read and written at the device in those ``window_s`` seconds (None: no device), fio's
    result and where it ran, and the share of the time tasks here waited for a CPU while
    it ran (``cpu_waited``, phases.CpuWait; None: not known, fio ran on another host), and
    the reads and writes a second a cgroup's cap let through to the device, and their
    bytes a second (``through``, execute/capcount.Served; bytes None: not counted; None: no
    cap, or not counted here); for a test that synced, whose calls the layers are of
    (``calls``: "syncs" or "others", and how many of the other kind were left out)."""
    layers = {name: layer_figures(seen) for name, seen in layers_seen.items()}
    fio = fio_figures(result)
    if cpu_waited is not None:
        fio["cpu_waited_percent"] = cpu_waited
    reached = device_bytes[0] if device_bytes is not None else 0
    cache = cache_percent(result, layers) if device_bytes is not None else None
    entry: dict[str, Any] = {
        "layers": {k: v for k, v in layers.items() if v["n"]}, "fio": fio,
        "cache_percent": cache,
        "device_bytes": {"read": reached,
                         "written": device_bytes[1] if device_bytes is not None else 0},
        "place": place, "window_s": round(window_s, 3)}
    if through is not None:
        entry["cap_ios_per_s"] = {"read": round(through[0], 1), "write": round(through[1], 1)}
        if through[2] is not None and through[3] is not None:
            entry["cap_bytes_per_s"] = {"read": round(through[2]), "write": round(through[3])}
    limit, said = judge(entry)
    issued = (entry["layers"].get("queue") or {}).get("n", 0)
    done = (entry["layers"].get("device") or {}).get("n", 0)
    notes = [f"{done:,} of {issued:,} requests' completions were seen ({100 * done / issued:.0f}%):"
             " the kernel skips a tracing program that would run inside another on the same"
             " CPU (a completion interrupting a traced call); the device's figures are of"
             " those seen"] if issued and done < 0.95 * issued else []
    if calls is not None and calls[1]:
        notes.append(f"the layers are of fio's syncs alone, as its sync p99 is: its"
                     f" {calls[1]:,} other calls' (writes, reads) are left out"
                     if calls[0] == "syncs" else
                     f"the layers are of fio's writes and reads alone, as its"
                     f" {fio.get('direction') or 'busier'} p99 is: its {calls[1]:,} syncs'"
                     " are left out")
    out = ExplainEntry(notes=notes, layers=entry["layers"], fio=fio, cache_percent=cache,
                       device_bytes=entry["device_bytes"], place=place,
                       window_s=entry["window_s"], limit=limit, said=said)
    if "cap_ios_per_s" in entry:
        out["cap_ios_per_s"] = entry["cap_ios_per_s"]
    if "cap_bytes_per_s" in entry:
        out["cap_bytes_per_s"] = entry["cap_bytes_per_s"]
    if calls is not None:
        out["calls"] = calls[0]
    return out
