"""The binding limit judged again from the layers stored by real runs (tests/data/
explain-runs: a blkio cap, a loop device at depth 1 and 32, a buffered re-read, tmpfs),
and the kernel's buckets read back (analysis/explain.py), with no fio."""

from __future__ import annotations

import copy
import gzip
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from storbench.analysis.buckets import bucket_value, percentile
from storbench.analysis.explain import judge
from storbench.execute.beneath import Beneath, Place, kdev, kernel_at_least, place_of
from storbench.execute.layers import SYNC, Slices, parse, program
from storbench.result.sections import EXPLAIN
from storbench.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "explain-runs" / "runs.db.gz"
EXPECTED = {"capped": "throttle", "disk-qd1": "device", "disk-qd32": "queueing",
            "reread": "page_cache", "tmpfs": "cpu"}


def stored(tmp_path: Path) -> dict[str, Any]:
    db = tmp_path / "runs.db"
    db.write_bytes(gzip.decompress(DATA.read_bytes()))
    store = Store(db)
    runs = [store.get_run(i) for i in range(1, 6)]
    return {r.label: copy.deepcopy(next(iter((EXPLAIN.of(r) or {}).values()))) for r in runs}


def test_each_stored_shape_is_judged_as_it_was(tmp_path: Path) -> None:
    entries = stored(tmp_path)
    assert {label: e["limit"] for label, e in entries.items()} == EXPECTED
    for label, entry in entries.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label


def test_the_cap_is_named_only_with_the_cgroup_s_limit(tmp_path: Path) -> None:
    """Without the cgroup's limits on the device, a throttle layer still binds, named as
    "a limit"; the same layers with the device's time longest are the device's."""
    entry = stored(tmp_path)["capped"]
    entry["place"] = {**entry["place"], "throttle": {}}
    assert judge(entry)[0] == "throttle" and "a limit" in judge(entry)[1]
    entry["layers"] = {k: v for k, v in entry["layers"].items() if k != "throttle"}
    assert judge(entry)[0] == "device"


@pytest.mark.parametrize("ns", [0, 1, 7, 15, 16, 17, 100, 4096, 5000, 123_456, 9_876_543,
                                2**33 + 5])
def test_a_bucket_holds_its_value_within_6_percent(ns: int) -> None:
    """The bucket bpftrace computes (execute/layers._bucket), done here the same way."""
    m = ns.bit_length() - 1 if ns else 0
    b = (m - 2) * 8 + ((ns >> (m - 3)) & 7) if m >= 3 else ns
    assert bucket_value(b) == pytest.approx(ns, rel=0.0625, abs=1)


def test_percentiles_and_slices_of_bpftrace_s_maps() -> None:
    """bpftrace's printed maps: a slice before the measured I/O (the layout) is left out."""
    text = "\n".join(["@h[3, 10, 100]: 90", "@h[3, 10, 120]: 10", "@h[3, 9, 200]: 500",
                      "@b[0, 10]: 4096", "@b[0, 9]: 8192", "noise"])
    slices = parse(text, 10**8)
    kept = slices.between(int(9.5e8), int(11e8))
    assert kept.layer("device") == {100: 90, 120: 10}
    assert kept.device_bytes(0) == 4096
    assert percentile(kept.layer("device"), 0.5) == bucket_value(100)
    assert percentile(kept.layer("device"), 0.99) == bucket_value(120)
    assert isinstance(slices, Slices) and slices.layer("device")[200] == 500


def test_a_fuse_file_system_is_its_daemon_s_round_trips_when_they_hold_the_call() -> None:
    """sshfs behind the 1 ms-each-way proxy (a real run's explanation, sshfs.json): the
    daemon's answers are the call, so the network binds; were they under half of it, the
    file system's own side would be named, with them."""
    entry = json.loads((DATA.parent / "sshfs.json").read_text())
    assert judge(entry) == (entry["limit"], entry["said"]) and entry["limit"] == "network"
    assert "its daemon's answers take 2.75 ms of a call's 2.75 ms" in entry["said"]
    for q in ("p50_ns", "p99_ns"):
        entry["layers"]["remote"][q] = entry["layers"]["call_nobio"][q] / 3
    limit, said = judge(entry)
    assert limit == "fs" and "of which its daemon's answers 918 µs" in said, said
    del entry["layers"]["remote"]  # no request seen (NFS here): the type names it
    assert judge(entry)[0] == "network" and "a call takes" in judge(entry)[1]


def test_a_paced_job_s_rate_is_its_own_and_its_spinning_cpu_binds_nothing() -> None:
    """Real runs asked for a rate (paced.json, README): 20,000 reads a second on tmpfs,
    where fio waits for each next read by spinning (100% of a core), is no block layer
    with its rate the job's own, not fio's CPU; 1,000 and 6,000 a second on a volume capped
    at 3,000: the first kept (its pace said), the second fell behind (the cap said, and
    that the storage set its rate). An older storbench stored no pace: judged as before."""
    runs = json.loads((DATA.parent / "paced.json").read_text())
    for label, entry in runs.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
    tmpfs, kept, behind = runs["tmpfs-20000"], runs["capped-1000"], runs["capped-6000"]
    assert tmpfs["fio"]["cpu_percent"] >= 90 and tmpfs["limit"] == "no_block"
    assert tmpfs["said"].endswith("its rate was the job's own pace, not the storage's:"
                                  " 20,000 read IOPS asked (rate_iops), 19,995 done")
    assert "waiting for its next I/O at the job's pace" in tmpfs["said"]
    assert kept["said"].endswith("1,000 read IOPS asked (rate_iops), 1,000 done")
    assert behind["limit"] == "throttle" and behind["said"].endswith(
        "it fell behind the job's pace (6,000 read IOPS asked by rate_iops, 2,998 done):"
        " the storage set its rate")
    del tmpfs["fio"]["pace"]
    assert judge(tmpfs) == ("cpu", "fio's CPU: 100% of a core per job, on tmpfs (no block"
                            " layer: the time is the file system's and fio's own)")


def test_a_wake_up_that_waits_is_a_busy_machine_s_only_when_tasks_waited_for_a_cpu() -> None:
    """The same paced reads on the cap (paced.json): on an idle machine (tasks here waited
    for a CPU 2.2% of the time) most of p99 was fio's wake-up after each read, its CPU
    asleep between them; beside two spinning neighbours (11%: the CPUs never sleep) the
    wake-up is quick and the device binds. The same layers with a busy machine's wait are
    said as one; without the wait measured (an older run's, another host's) both causes."""
    runs = json.loads((DATA.parent / "paced.json").read_text())
    idle, busy = runs["capped-1000"], runs["capped-1000-busy"]
    assert idle["limit"] == "completion" and "not a busy machine (tasks here waited for a" \
        " CPU 2.2% of the time): its CPU slept between I/Os" in idle["said"], idle["said"]
    assert busy["limit"] == "device"
    assert idle["fio"]["p99_ns"] > 2 * busy["fio"]["p99_ns"]  # the idle CPU's wake-up
    idle["fio"]["cpu_waited_percent"] = 40.0
    assert "this machine was busy: tasks here waited for a CPU 40% of the time" in judge(idle)[1]
    del idle["fio"]["cpu_waited_percent"]
    assert "a busy machine, or a CPU that slept and took this long to wake" in judge(idle)[1]


def test_a_sync_s_journal_commit_is_timed_on_ext4_and_xfs_only() -> None:
    """jbd2's commits on the file system's own device, for syncs only (@sy), where the
    file system is ext4 on a block device; on xfs, a sync's force of its log (in fio's
    thread) to the log's write done, on its device; the layer's number is read back as its
    name. Every place marks a sync (fsync, fdatasync, sync_file_range) as one, and counts
    its time and its I/O under a layer's number plus SYNC."""
    loop = Beneath("loop0", kdev(7, 0), kdev(7, 0), 0)
    text = program("abc", [1], Place("ext4", loop), "x86_64", 10**8)
    assert f"tracepoint:jbd2:jbd2_end_commit /args->dev == {kdev(7, 0)}/" in text
    assert "xfs:" not in text
    xfs = program("abc", [1], Place("xfs", loop, xfs_log=True), "x86_64", 10**8)
    assert "jbd2" not in xfs
    assert f"tracepoint:xfs:xfs_log_force /@in[tid] && args->dev == {kdev(7, 0)}/" in xfs
    assert f"tracepoint:xfs:xlog_iclog_sync_done /args->dev == {kdev(7, 0)}/" in xfs
    assert "if ($k && @xf[tid] > $i && @je > @xf[tid]) { $j = @je - @xf[tid];" in xfs
    # (a kernel before 5.14 has no xlog_iclog_* tracepoints: bpftrace would not start)
    for elsewhere in (Place("xfs", loop, xfs_log=True), Place("xfs", loop),
                      Place("btrfs", loop), Place("tmpfs", None), Place("fuse.sshfs", None),
                      Place("xfs", None, xfs_log=True)):
        marked = program("abc", [1], elsewhere, "x86_64", 10**8)
        assert "jbd2" not in marked
        assert f"if ($id == 74 || $id == 75 || $id == 277) {{ @sy[tid] = {SYNC}; }}" in marked
        assert "$k = @sy[tid];" in marked and "@h[6 + $k, " in marked  # call_nobio's, by kind
        journal = "xfs" if elsewhere == Place("xfs", loop, xfs_log=True) else None
        assert elsewhere.journal == journal and elsewhere.record()["journal"] == journal
        assert ("xfs_log_force" in marked) == (journal == "xfs")
        assert place_of(json.loads(json.dumps(asdict(elsewhere)))) == elsewhere
    assert Place("ext4", loop).record()["journal"] == "jbd2"
    assert [kernel_at_least(r, (5, 14)) for r in ("6.1.0-18-amd64", "5.14.0-362.el9.x86_64",
                                                  "5.10.0-28-amd64", "4.18.0", "x")] == [
        True, True, False, False, False]
    assert parse("@h[8, 3, 100]: 5", 10**8).layer("journal") == {100: 5}


def test_a_sync_that_forced_xfs_s_log_is_explained_by_it() -> None:
    """Real runs on xfs (xfs.json, README): etcd's fdatasync forced the log after 56% of
    its writes (where the file grew), and its wait for the log's write holds most of its
    p99, whichever of its own layers was longest (the work before a log write it issued
    itself is "file system", after its data write "between"); sync-iops' fsync after each
    direct write forced it every time. A page rewritten (wal_idle) forced none: its wait
    between its page and its flush is said as before. Without the log's layer (a run
    stored before it was timed), what the layers say, as before."""
    runs = json.loads((DATA.parent / "xfs.json").read_text())
    for label, entry in runs.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
    etcd, direct = runs["etcd-xfs"], runs["sync_randwrite-xfs"]
    for entry, part in ((etcd, "56%"), (direct, "100%")):
        assert entry["limit"] == "journal" and entry["said"].startswith(
            f"the file system's log (xfs): {part} of fio's syncs forced it and waited for its"
            " write (xfs's writes to its log): "), entry["said"]
    shares = {k: etcd["layers"][k]["p99_ns"] for k in ("fs", "between", "completion")}
    assert max(shares, key=lambda k: shares[k]) == "between"
    assert max(direct["layers"], key=lambda k: direct["layers"][k]["p99_ns"]
               if k in ("fs", "queue", "device", "between", "completion") else 0) == "fs"
    assert runs["wal_idle-xfs"]["limit"] == "completion"
    assert "journal" not in runs["wal_idle-xfs"]["layers"]
    for entry in (etcd, direct):
        del entry["layers"]["journal"]
        entry["place"]["journal"] = None
    assert judge(etcd)[0] == "completion" and "fio's syncs waiting between their own I/Os" \
        in judge(etcd)[1]
    assert judge(direct)[0] == "fs" and judge(direct)[1].startswith(
        "the file system and submission (xfs: page cache, journal, locks, allocation)")


def test_a_sync_s_layers_are_read_apart_from_the_other_calls() -> None:
    """A layer's number plus SYNC is a sync's: read with its kind, or with every call's."""
    text = "\n".join(["@h[3, 10, 100]: 90", f"@h[{3 + SYNC}, 10, 120]: 10",
                      f"@h[{6 + SYNC}, 10, 200]: 7", "@h[6, 10, 90]: 3"])
    slices = parse(text, 10**8)
    assert slices.layer("device") == {100: 90, 120: 10}  # every call's
    assert slices.layer("device", 0) == {100: 90}
    assert slices.layer("device", SYNC) == {120: 10}
    assert slices.layer("call_nobio", SYNC) == {200: 7} and slices.layer("journal", SYNC) == {}


def test_a_sync_is_explained_by_the_journal_commit_it_waited_for() -> None:
    """Real runs that sync (syncs.json, README) on ext4 under the 3,000-IOPS cap: etcd's
    fdatasync after each 2,300-byte write waits for a journal commit whenever the write
    enters a new 4 KiB block (56% of them: 2,300 / 4,096), and those commits are most of
    the wait after fio's own write; its syncs' latency is the one explained (its write
    returns from the page cache). PostgreSQL's WAL page rewrites its file: one commit in
    13,351 syncs, so the wait after its writes is its CPU's wake-up, not the journal's.
    Stored where the journal is not timed (xfs, before): said, as not timed."""
    runs = json.loads((DATA.parent / "syncs.json").read_text())
    for label, entry in runs.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
    etcd, wal = runs["etcd-ext4-capped"], runs["wal_commit-ext4-capped"]
    assert etcd["fio"]["direction"] == "sync" and etcd["limit"] == "journal"
    waited = etcd["layers"]["journal"]["n"] / etcd["layers"]["call_bio"]["n"]
    assert 0.45 <= waited <= 0.65 and f"{waited:.0%} of fio's syncs waited" in etcd["said"]
    assert etcd["layers"]["journal"]["p99_ns"] >= 0.5 * etcd["layers"]["completion"]["p99_ns"]
    assert "fio's sync p99" in etcd["said"]
    assert wal["fio"]["direction"] == "sync" and wal["limit"] == "completion"
    assert "its CPU slept between I/Os" in wal["said"]
    for entry in (etcd, wal):
        entry["place"]["journal"] = None
        limit, said = judge(entry)
        assert limit == "completion" and "in the file system (ext4): for its journal or log" \
            " (not timed here), for writes of theirs that the cgroup's cap held and its worker" \
            " issued or for a CPU" in said, said
    # Redis' AOF once a second: 6 MB a sync; its journal commit 344 µs at p99 of a wait of
    # 5 ms after fio's own writes, the rest writes the cap held: no CPU takes that to wake
    everysec = runs["aof_everysec-ext4-capped"]
    assert everysec["limit"] == "completion" and "for a CPU" not in everysec["said"]
    assert "for its journal (100% of them waited for a commit, 344 µs at p99) or for writes" \
        " of theirs that the cgroup's cap held and its worker issued" in everysec["said"]
    assert runs["aof_always_50-ext4-capped"]["limit"] == "journal"


def test_a_cap_that_held_a_few_i_os_long_is_said_as_the_tail_beyond_p99() -> None:
    """PostgreSQL's page reads, one at a time on the 3,000-IOPS cap (syncs.json): at the
    cap's rate blk-throttle held 70 of 20,701 reads for ~88 ms each, beyond fio's p99 (125
    µs), not "72,000% of p99"; where more than 1% were held, the share of p99 is said."""
    entry = json.loads((DATA.parent / "syncs.json").read_text())["page_read-ext4-capped"]
    limit, said = judge(entry)
    assert limit == "throttle" and "it held 70 of 20,701 I/Os (0.3%), 88.1 ms at p99 of" \
        " those, beyond fio's p99 125 µs: in its last percent; fio's rate 3,000 IOPS" in said
    entry["layers"]["throttle"]["n"] = 300  # 1.4% held: fio's p99 is then theirs
    entry["fio"]["p99_ns"] = 90.7e6
    assert "97% of p99 (88.1 ms of fio's 90.7 ms)" in judge(entry)[1]


def test_a_cap_that_let_its_limit_through_set_the_rate() -> None:
    """Real runs on the 3,000-IOPS cap with the cgroup's own count of what it let through
    (rates.json, README). etcd's, PostgreSQL's and MariaDB's commits (a write and its
    sync's flush: two of the cap's writes, ~1,500 commits a second), PostgreSQL's page
    reads and Redis' AOF (one I/O each) went at the cap's rate, where their p99 is held by
    the journal, a CPU's wake-up, the device or the cap's tail: the cap is named, then what
    holds p99. Without the count (a run stored before it; a host over SSH) each is judged
    as before; a rate under 95% of the cap, or a job that kept its own pace, is not the
    cap's."""
    runs = json.loads((DATA.parent / "rates.json").read_text())
    for label, entry in runs.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
    before = {"etcd": "journal", "wal_commit": "completion", "redo_commit": "device",
              "redo_paced": "throttle", "page_read": "throttle", "aof_always_1": "journal"}
    for label, was in before.items():
        entry = runs[label]
        side = "read" if label == "page_read" else "write"
        assert entry["limit"] == "throttle", entry["said"]
        assert entry["said"].startswith(f"a cgroup's I/O cap (3,000 {side} IOPS), which set"
                                        f" the rate: it let {entry['cap_ios_per_s'][side]:,.0f}"
                                        f" {side} I/Os a second through, where fio"), entry["said"]
        synced = label in ("etcd", "wal_commit", "redo_commit", "redo_paced")
        assert ("each synced (a sync's flush is a write to the cap too)" in entry["said"]) \
            == synced, entry["said"]
        alone = {k: v for k, v in entry.items() if k != "cap_ios_per_s"}
        assert judge(alone)[0] == was, label
        held = judge(alone)[1].split("; fio's rate")[0]  # (said once, as the cap's)
        assert entry["said"].endswith(held.split("): ", 1)[1] if was == "throttle"
                                      else held), label
    assert "At p99: the file system's journal (ext4): " in runs["etcd"]["said"]
    assert "fio's rate 3,000 IOPS" not in runs["page_read"]["said"]  # (said once, as the cap's)
    assert runs["wal_idle"]["limit"] != "throttle"  # 50 commits a second: not the cap's
    # buffered writes the kernel's threads write back: the cap counted none of fio's
    assert runs["checkpoint"]["cap_ios_per_s"]["write"] == 0.0
    assert "none of fio's calls put I/O on the device beneath" in runs["checkpoint"]["said"]
    under = copy.deepcopy(runs["etcd"])
    under["cap_ios_per_s"]["write"] = 2800.0
    assert judge(under)[0] == "journal"
    paced = copy.deepcopy(runs["page_read"])
    paced["fio"]["pace"] = {"option": "rate_iops", "direction": "read", "unit": "IOPS",
                            "asked": 3000, "done": 2999.7, "kept": True}
    assert judge(paced)[0] == "throttle" and "which set the rate" not in judge(paced)[1]
    assert "its rate was the job's own pace" in judge(paced)[1]


def test_syncs_after_direct_writes_are_their_own_and_wait_for_the_journal() -> None:
    """The sync-iops suite on the 3,000-IOPS cap (syncs.json, a real run): 4k direct
    writes, fsync after each. Its writes reach the device; its syncs put nothing of their
    own on it and wait for ext4's journal commit. The layers are its syncs' alone (the
    whole call's p50 and p99 are fio's sync p50 and p99, within a bucket), and the
    journal is named; with every call's layers (before), the writes' device and wake-up
    were set beside the syncs' p99."""
    entry = json.loads((DATA.parent / "syncs.json").read_text())["sync_randwrite-ext4-capped"]
    assert judge(entry) == (entry["limit"], entry["said"])
    assert entry["calls"] == "syncs" and entry["fio"]["direction"] == "sync"
    assert set(entry["layers"]) == {"call_nobio", "journal"}, entry["layers"]
    call = entry["layers"]["call_nobio"]
    assert call["p50_ns"] == pytest.approx(entry["fio"]["p50_ns"], rel=0.07)
    assert call["p99_ns"] == pytest.approx(entry["fio"]["p99_ns"], rel=0.07)
    assert entry["said"].startswith("a cgroup's I/O cap (3,000 write IOPS), which set the"
                                    " rate: ")
    assert ("At p99: the file system's journal (ext4): 100% of fio's syncs waited for a"
            " commit of it (jbd2's writes): ") in entry["said"]
    assert entry["said"].endswith("; fio's syncs put no I/O of their own on the device"
                                  " beneath (loop0): what they made durable was written"
                                  " before them (by fio's direct writes or the kernel's"
                                  " threads)")
    assert "its 23,709 other calls' (writes, reads) are left out" in entry["notes"][0]
    alone = {k: v for k, v in entry.items() if k != "cap_ios_per_s"}
    assert judge(alone)[0] == "journal"
    # fewer than 1% of the syncs waited for a commit: the file system, not its journal
    quiet = copy.deepcopy(alone)
    quiet["layers"]["journal"]["n"] = 100
    limit, said = judge(quiet)
    assert limit == "fs" and said.startswith("the file system (ext4): ") \
        and "per sync at p99 (fio's sync p99 " in said, said


def test_a_cap_of_bytes_a_second_that_let_its_limit_through_set_the_rate() -> None:
    """Sequential I/O on the test-bed's cap (bytes.json, real runs): its 125 MiB/s binds
    before its 3,000 IOPS, and the cgroup's own count of bytes says it let that through:
    the cap is named as what set the rate, by its bytes a second, then what holds p99.
    128 KiB reads at ~1,000 IOPS: the cap held one a slice of 100 ms (60 of 5,901, 1.02%),
    beyond fio's p99, and they are said as its last percent. Without the count of bytes
    (a run stored before it; a v1 cgroup whose io_service_bytes was not read) the cap is
    named by its wait, as before; under 95% of the limit it did not set the rate."""
    runs = json.loads((DATA.parent / "bytes.json").read_text())
    assert set(runs) == {"seqread-128k", "seqread-1m", "seqwrite-1m-qd4"}
    for label, entry in runs.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
        side = "write" if "write" in label else "read"
        moved = entry["cap_bytes_per_s"][side]
        assert 0.95 * 125 * 2**20 <= moved <= 125 * 2**20 * 1.01, label
        assert entry["said"].startswith(
            f"a cgroup's I/O cap (125.0 MiB/s {side}), which set the rate: it let"
            f" {moved / 2**20:.1f} MiB/s of {side}s through, where fio's rate was"), entry["said"]
        alone = {k: v for k, v in entry.items() if k != "cap_bytes_per_s"}
        assert judge(alone)[0] == "throttle", label
        assert judge(alone)[1].startswith("waiting in a cgroup's I/O cap (3,000 read IOPS,"
                                          " 3,000 write IOPS, 125.0 MiB/s read, 125.0 MiB/s"
                                          " write): "), judge(alone)[1]
        under = copy.deepcopy(entry)
        under["cap_bytes_per_s"][side] = 0.9 * 125 * 2**20
        assert judge(under) == judge(alone), label
    assert runs["seqread-128k"]["said"].endswith(
        ". At p99: it held 60 of 5,901 I/Os (1.0%), 96.5 ms at p99 of those, beyond fio's"
        " p99 4.29 ms: in its last percent")
    assert runs["seqread-1m"]["said"].endswith(
        ". At p99: its wait in the cap, all of p99 (105 ms at p99, fio's p99 101 ms: the"
        " same within the trace's buckets)")
    # fio's bytes a second are its busier direction's: not said beside another's cap
    other = copy.deepcopy(runs["seqread-128k"])
    other["fio"]["direction"] = "write"
    assert "which set the rate" in judge(other)[1]
    assert "where fio's rate was" not in judge(other)[1]
    # 2% held, most of them no longer than fio's p99: not said as its last percent
    spread = copy.deepcopy(runs["seqread-128k"])
    spread["layers"]["throttle"].update(n=118, p50_ns=spread["fio"]["p99_ns"])
    assert "last percent" not in judge(spread)[1]


def test_a_layer_longer_than_fio_s_p99_is_never_said_as_a_share_over_100() -> None:
    """Redis' aof_idle on the 3,000-IOPS cap (syncs.json): 200 syncs, of which the trace
    kept 198. Their journal wait's p99 (their 2nd longest, 1.90 ms) was longer than fio's
    sync p99 (its 3rd longest of 200, 1.20 ms), and was said as "158% of fio's sync p99".
    A layer is within its call, so that is no share: it is said as what it is. Within a
    bucket of the trace's (104% of a capped read's p99, paced.json) the two are the same."""
    import re

    from storbench.analysis.buckets import beyond, part_of

    stored = {f"{name}:{label}": entry for name in ("syncs", "rates", "paced")
              for label, entry in json.loads((DATA.parent / f"{name}.json").read_text()).items()}
    for label, entry in stored.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
        shares = [float(x) for x in re.findall(r"([\d.]+)% of (?:p99|fio's)", entry["said"])]
        assert all(x <= 100 for x in shares), (label, entry["said"])
    idle = stored["syncs:aof_idle-ext4-capped"]
    assert idle["limit"] == "journal" and "156 µs at p50, as long as fio's sync p99 or longer" \
        " (1.90 ms at p99, fio's sync p99 1.20 ms: at 198 calls a p99 is their 2nd longest," \
        " too few to set beside fio's); the device's own time 442 µs at p99" in idle["said"]
    assert "all of p99 (96.5 ms at p99, fio's p99 92.8 ms: the same within the trace's" \
        " buckets)" in stored["paced:capped-6000"]["said"]
    many = copy.deepcopy(idle)
    many["layers"]["journal"]["n"] = 5000  # a p99 of many calls: no rank to tell
    assert "as long as fio's sync p99 or longer (1.90 ms at p99, fio's sync p99 1.20 ms);" \
        in judge(many)[1]
    # made by hand: 6 I/Os at the device on average, its p99 a bucket above fio's
    queued = {"layers": {name: {"n": 5000, "p50_ns": p50, "p99_ns": p99, "mean_ns": p50}
                         for name, p50, p99 in (("device", 3e5, 2.0e6), ("queue", 1e3, 2e3),
                                                ("call_bio", 1e6, 2.1e6))},
              "fio": {"iodepth": 8, "jobs": 1, "cpu_percent": 3, "engine": "libaio",
                      "direction": "read", "iops": 20000, "p50_ns": 1e6, "p99_ns": 1.9e6},
              "place": {"fs_type": "ext4", "device": "sda"}, "window_s": 4}
    assert judge(queued) == ("queueing", "queueing at the device: 6.0 I/Os in flight on"
                             " average at queue depth 8; its time is all of p99 (2.00 ms at"
                             " p99, fio's p99 1.90 ms: the same within the trace's buckets),"
                             " at p50 300 µs")
    assert part_of(58_000, 100_000, 500) == "58% of p99 (58.0 µs of fio's 100 µs)"
    assert beyond(100_000, 100_000, 500) is None
    assert "their longest," in (beyond(200_000, 100_000, 50) or "")
    assert "their 4th longest," in (beyond(200_000, 100_000, 300) or "")


def p50s(layers: dict[str, Any], names: list[str]) -> float:
    """The sum of layers' p50s along one WAL commit: its two I/Os' queue and device."""
    return sum(layers[n]["p50_ns"] * (2 if n in ("queue", "device") else 1) for n in names)


def test_a_syncs_time_between_its_own_i_os_is_a_layer_of_its_own() -> None:
    """PostgreSQL's WAL commits on the 3,000-IOPS cap (between.json, real runs): each
    fdatasync writes its page, then, once that completed, the device's cache flush. The
    time between the two (fio's thread woken after the first, the file system making the
    second) is timed (``between``): one a sync, and with it the layers' p50s add up to
    nine tenths of the whole call's (without it, under six at 50 commits a second, where
    the CPU sleeps deepest). There it holds p99's most and is named, the wake-up after
    the last I/O beside it; stored without it, the same sync is said by the device."""
    runs = json.loads((DATA.parent / "between.json").read_text())
    for label, entry in runs.items():
        assert judge(entry) == (entry["limit"], entry["said"]), label
        layers = entry["layers"]
        syncs = layers["call_bio"]["n"]
        assert 0.95 * syncs <= layers["between"]["n"] <= syncs, label
        assert layers["device"]["n"] == pytest.approx(2 * syncs, rel=0.02), label

        whole = ["fs", "queue", "device", "completion"]
        assert p50s(layers, [*whole, "between"]) >= 0.85 * layers["call_bio"]["p50_ns"], label
        assert p50s(layers, whole) <= 0.75 * layers["call_bio"]["p50_ns"], label
    idle = runs["wal_idle-ext4-capped"]
    assert idle["limit"] == "completion" and idle["said"].startswith(
        "fio's syncs waiting between their own I/Os, from one's completion to their next"
        " (waking up, and the file system making it: a cache flush, a log write): 50% of"
        " p99 (139 µs; fio's CPU 1% of a core per job), and for a CPU after their last I/O"
        " completed: 31% of p99 (86.0 µs): not a busy machine"), idle["said"]
    before = copy.deepcopy(idle)
    del before["layers"]["between"]
    assert judge(before)[1].startswith("the device (loop0, a loop device over a file on"
                                       " tmpfs): its own time is 31% of p99")
    # the wake-up after the last I/O holding more: it is named, the time between beside it
    swapped = copy.deepcopy(idle)
    swapped["layers"]["completion"], swapped["layers"]["between"] = (
        idle["layers"]["between"], idle["layers"]["completion"])
    assert judge(swapped)[1].startswith(
        "fio waiting for a CPU after its I/O completed: 50% of p99 (139 µs; fio's CPU 1% of"
        " a core per job), and between their own I/Os, from one's completion to their next")
    # a read's next I/O (the rest of a read ahead) is no flush: said without one
    read = copy.deepcopy(idle)
    read["fio"]["direction"] = "read"
    assert judge(read)[1].startswith(
        "fio's calls waiting between their own I/Os, from one's completion to their next"
        " (waking up, and the file system making it): 50% of p99"), judge(read)[1]
