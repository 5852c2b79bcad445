"""Application profiles' judges: the figures of a profile's tests (workload/apps.py) in
the application's own units, a verdict, and the figure that decided it.

Each estimate is a simple model of how the application spends a transaction, checked
against the real application on the test-bed's storage shapes (bench/apps.py,
docs/apps.md). One client's transaction waits for its commit (a write and an
fdatasync: ``L``, measured with the storage otherwise idle) plus the CPU time the
application spends on it (``CPU_S``, a constant per application measured with the real
application on tmpfs); and the storage takes at most ``C`` commits a second (measured
one after another as fast as they go). So: min(1 / (L + CPU_S), C). A volume capped in
IOPS answers a lone commit at once and limits the rate; a slow disk or a network
volume limits both the same way. ``low`` takes twice that CPU time; ``high`` the time
with the application's processes on one CPU (``ONE_CPU_S``, the quickest such runs,
0.12-0.13 of it) and the commit as it takes back to back. Most of ``CPU_S`` is not
computing but waking: a client and its server pass each statement back and forth, and on a virtual
machine an idle CPU sleeps and takes tens of microseconds to wake. With a busy neighbour
(CPUs that never idle) the real applications' one client went 2.5-4x as fast on tmpfs,
the application's own time 0.35-0.48 of ``CPU_S`` (bench/apps.py --busy 1, docs/apps.md);
with its processes on one CPU 0.13-0.15 of it, and on a second machine, idle, 0.22-0.88:
where the scheduler puts a client and its server decides (docs/apps.md, "A second
machine"). Where it weighs, an estimate is the test-bed's, and a note says so.
Where the application's own time exceeds the commit's, the verdict says so: the storage
does not decide, and a note says what the storage alone would allow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from storbench.analysis.metrics import metric, value
from storbench.analysis.stats import estimate
from storbench.result.model import TestResult
from storbench.result.sections import AppSection
from storbench.workload.sizes import format_latency

# CPU seconds the application spends per transaction beyond its commit's wait: 1 over
# the real application's rate on tmpfs (where a commit costs microseconds), less that
# commit, on the test-bed (2 vCPU, Debian 12; bench/apps.py --shapes tmpfs, docs/apps.md)
CPU_S = {
    "postgresql": 0.000745,  # a pgbench TPC-B transaction, 1 client: 1,338 TPS on tmpfs
    "mysql": 0.000479,  # a sysbench oltp_write_only transaction, 1 thread: 2,082 TPS
    "redis": 0.0000465,  # a redis-benchmark SET, 1 client, round trip included: 20,833/s
}
# the same with the application's processes on one CPU (taskset -c 0): a client and its
# server pass each statement by a context switch, not by waking an idle CPU. The fastest
# placement measured, the top of the 1-client range: on an Intel Xeon test-bed on
# 2026-12-05, the quickest of four real runs on tmpfs (9,272 TPS, 15,658 TPS, 130,435
# SETs/s; where the scheduler placed them the same hour 1,843, 2,356 and 82,589), less
# the commit there, rounded down (docs/apps.md, "A second machine")
ONE_CPU_S = {
    "postgresql": 0.000100,
    "mysql": 0.000060,
    "redis": 0.0000055,
}
# with many clients the application overlaps their round trips; what stays is its CPU
# per transaction when busy: 1 over the rate on tmpfs with that many clients
BUSY_S = {
    "postgresql": 1 / 5830,  # pgbench, 16 clients (-j 2): 5,830 TPS on tmpfs, 2 cores
    "redis": 1 / 126050,  # redis-benchmark SET, 50 clients: 126,050/s, one event loop
}
GROUP = {"postgresql": 16, "redis": 50}  # the clients of the "many clients" estimates
# pgbench TPC-B (scale 16) at 16 clients: transactions per WAL flush. Where the storage
# caps the rate (a lone flush is quick), ~1.8: its 16 branch rows are locked until each
# commit's flush, so most clients wait for another's (volumes capped at 300 and 3000
# IOPS); where each flush is slow (network latency), more pile up behind it: ~4.2
PER_FLUSH = {"capped": 1.8, "slow": 4.2}
# redis-benchmark's 50 clients: half of them in each event-loop pass. While a pass syncs,
# the clients it answered last time send again, and they make the next pass: two halves
# in turn. Counted with the real Redis (its fdatasyncs, by bpftrace) under
# redis-benchmark: 23-25.6 SETs a pass where a pass's flush takes a millisecond or more
# (capped at 300 IOPS, the image on the disk, 1 and 3 ms of network latency), 14.5 on a
# 3000-IOPS cap, whose shorter passes come more often (the estimate 0.74x there); the
# pass the profile writes (aof_always_50) is theirs: 25 SETs (docs/apps.md)
PER_PASS = GROUP["redis"] // 2
# a new MariaDB database: its redo log is preallocated (fallocate: unwritten extents on
# ext4), and a commit whose redo enters a block never written makes the file system
# convert that extent, a journal commit its fdatasync waits for, until the log has been
# written through once (innodb_log_file_size, 96 MiB by default). sysbench's write-only
# transaction writes ~1,536 bytes of redo (p50, strace): one commit in 2.7 enters a new
# 4 KiB block. Counted on 3 ms of network latency (bpftrace): 164 journal commits for 480
# transactions' fdatasyncs, those commits' fdatasync 29 ms against 14.7 (docs/apps.md)
REDO_BYTES, BLOCK_BYTES = 1536, 4096  # redo a transaction writes; the file system's block
NEW_REDO = REDO_BYTES / BLOCK_BYTES  # journal commits per commit while the log is new


@dataclass(frozen=True)
class Figure:
    """An estimate in the application's units, and what it comes from."""

    metric: str  # its key in assertions: postgresql.tps
    label: str  # "pgbench TPC-B TPS, 1 client"
    value: float
    low: float
    high: float
    unit: str  # "transactions/s", "ops/s", "ms", "MB/s"
    decided_by: str  # the measured figure it follows from, e.g. "wal_commit fdatasync p50"
    measured: bool = False  # a fio figure as it is (a p99), not estimated from figures

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Answer:
    profile: str  # the suite: postgresql, mysql, redis, etcd, kafka, prometheus
    application: str  # "PostgreSQL 15"
    figures: list[Figure]
    verdict: str  # one sentence
    validated: bool  # checked against the real application (docs/apps.md)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> AppSection:
        return {"profile": self.profile, "application": self.application,
                "estimates": [f.to_dict() for f in self.figures], "verdict": self.verdict,
                "validated": self.validated, "notes": self.notes}


def measured(metric: str, label: str, v: float, unit: str, decided_by: str) -> Figure:
    """A figure the profile measured as it is (a p99 in ms): no range."""
    return Figure(metric, label, v, v, v, unit, decided_by, True)


def median_of(results: dict[str, list[TestResult]], test: str, key: str) -> float | None:
    """A test's figure over its repeats (the median; None where it failed or is absent):
    what every profile's judge reads, the applications' and the training models'."""
    found = estimate(value(r, metric(key)) for r in results.get(test, []) if not r.error)
    return None if found is None else found.center


def _commit_s(results: dict[str, list[TestResult]], test: str, rate: float) -> float:
    """A commit's latency in seconds as ``test`` makes them (alone, at one client's pace,
    or back to back): its write + fdatasync p50 (1 over the commit rate where that test
    is missing)."""
    write, sync = (median_of(results, test, k) for k in ("write.clat_p50", "sync.lat_p50"))
    if write is None or sync is None:
        return 1.0 / rate
    return (write + sync) / 1e9


def _one(latency_s: float, rate: float, cpu_s: float,
         one_cpu_s: float) -> tuple[float, float, float]:
    """(value, low, high) transactions/s of one client: min(1 / (L + CPU), C). Low: twice
    the CPU time (a machine half as fast). High: the application's processes on one CPU
    (``one_cpu_s``: no idle CPU to wake between client and server; with CPUs that never
    idle the own time lay between, 0.35-0.48 of CPU_S), the commit as it takes back to
    back (1 / C; a PostgreSQL commit on tmpfs takes ~25 µs alone, ~3 back to back). No
    CPU time at all gave ranges such as 665–77,616 on tmpfs."""
    return (min(1.0 / (latency_s + cpu_s), rate), min(1.0 / (latency_s + 2 * cpu_s), rate),
            min(1.0 / (min(latency_s, 1.0 / rate) + one_cpu_s), rate))


def _capped(latency_s: float, rate: float, cpu_s: float) -> bool:
    """Whether the commits the storage takes a second hold one client below 1 / (L + CPU)."""
    return rate < 1.0 / (latency_s + cpu_s)


def _bound(latency_s: float, rate: float, cpu_s: float, what: str) -> str:
    if _capped(latency_s, rate, cpu_s):
        return f"bound by the commits the storage takes a second ({rate:,.0f})"
    if latency_s > cpu_s:
        return f"{what} bound"
    return ("bound by the application's own time, its CPU and its processes' wakeups, not"
            " by the storage")


def _alone(latency_s: float, rate: float, cpu_s: float, unit: str) -> list[str]:
    """Where the application's own time decides (as _bound says), what the storage alone
    would allow one client, said apart from the estimate."""
    if _capped(latency_s, rate, cpu_s) or latency_s > cpu_s:
        return []
    return [f"the storage alone would allow one client ~{min(1.0 / latency_s, rate):,.0f}"
            f" {unit} (1 over its commit); the estimate adds the application's own time on"
            f" an idle 2-vCPU test-bed ({format_latency(cpu_s * 1e9)} a transaction), mostly"
            " its processes waking on other CPUs: where the CPUs never idle it took"
            " 0.35-0.48 of that, with the application's processes on one CPU 0.13-0.15, on"
            " two idle ones up to 1.48 (where the scheduler puts them decides)"]


def oltp(p99_ns: float | None) -> str:
    """One judgement of a database's commit p99 for OLTP, whichever database (MySQL's
    93.8 ms went unjudged where PostgreSQL's same 93.8 ms was "slow for OLTP")."""
    if p99_ns is None:
        return "commit p99 not measured: not judged for OLTP"
    return ("fine for OLTP up to that rate" if p99_ns < 10e6
            else "commits wait more than 10 ms at p99: slow for OLTP")


def postgresql(results: dict[str, list[TestResult]]) -> Answer | None:
    commits = median_of(results, "wal_commit", "write.iops")
    if not commits:
        return None
    p50, p99 = (median_of(results, "wal_commit", k) for k in ("sync.lat_p50", "sync.lat_p99"))
    cpu = CPU_S["postgresql"]
    lat = _commit_s(results, "wal_idle", commits)
    one = _one(lat, commits, cpu, ONE_CPU_S["postgresql"])
    figures = [Figure("tps", "pgbench TPC-B TPS, 1 client", *one, "transactions/s",
                      f"wal_idle: a commit (8 KiB WAL page + fdatasync) takes"
                      f" {format_latency(lat * 1e9)} alone; wal_commit: {commits:,.0f} a second at"
                      " most")]
    group = median_of(results, "wal_group", "write.iops")
    n = GROUP["postgresql"]
    if group:
        cap = 1 / BUSY_S["postgresql"]
        # slow flushes: a commit, while commits come one after another, takes at least
        # half of their period. Not a lone commit's latency: on a volume whose image is on
        # a disk a lone commit took 624 µs where back to back they took 225 µs at p50 and
        # the cap (1,500 a second) was what held them, and its 16 clients did 3,055 TPS,
        # as a capped volume's (bench/apps.py --shapes diskcap3000, docs/apps.md)
        flush = p50 / 1e9 if p50 is not None else lat
        regime = "slow" if flush * commits >= 0.5 else "capped"
        per = PER_FLUSH[regime]
        # low: a busy machine, neighbours holding half of the CPU (16 clients beside a
        # busy loop did 3,737-3,922 TPS on tmpfs, docs/apps.md)
        many = (min(per * group, cap), min(per / 1.5 * group, cap / 2),
                min(per * 1.5 * group, cap))
        why = (f"wal_group: {group:,.0f} group commits a second, more than the CPU takes:"
               f" at most {cap:,.0f}/s, the CPU of the test-bed's 2 cores (more on more or"
               " faster ones; half of it with a busy neighbour)"
               if per / 1.5 * group >= cap else
               f"wal_group: {group:,.0f} group commits a second, ~{per} transactions each"
               f" ({regime} flushes); at most {cap:,.0f}/s: the CPU of the test-bed's 2"
               " cores (more on more or faster ones)")
        figures.append(Figure(f"tps_{n}", f"pgbench TPC-B TPS, {n} clients", *many,
                              "transactions/s", why))
    if p99 is not None:
        figures.append(measured("commit_p99", "commit latency p99", p99 / 1e6, "ms",
                                "wal_commit fdatasync p99"))
    verdict = (f"PostgreSQL here: ~{one[0]:,.0f} TPS at 1 client (commit p99 {format_latency(p99)},"
               f" {_bound(lat, commits, cpu, 'WAL fsync')})")
    if group:
        verdict += f", ~{figures[1].value:,.0f} at {n} clients"
    verdict += "; " + oltp(p99)
    page = median_of(results, "page_read", "read.clat_p99")
    notes = [f"a page read that misses the caches waits {format_latency(page)} at p99"
             " (page_read)"] if page is not None else []
    notes += _alone(lat, commits, cpu, "transactions/s")
    if p50 is not None:
        notes.append(f"commits one after another: fdatasync p50 {format_latency(p50)} (wal_commit)")
    return Answer("postgresql", "PostgreSQL 15", figures, verdict, True, notes)


def mysql(results: dict[str, list[TestResult]]) -> Answer | None:
    commits = median_of(results, "redo_commit", "write.iops")
    if not commits:
        return None
    p99 = median_of(results, "redo_commit", "sync.lat_p99")
    cpu = CPU_S["mysql"]
    # a commit as one thread makes them, each after its own time (redo_paced): on a disk
    # that idles between lone commits, twice as quick as one alone (a run stored before
    # the profile had redo_paced: the lone commit, as it was judged then)
    test, how = (("redo_paced", "at one thread's pace takes {}") if "redo_paced" in results
                 else ("redo_idle", "takes {} alone"))
    lat = _commit_s(results, test, commits)
    one = _one(lat, commits, cpu, ONE_CPU_S["mysql"])
    took = (f"{test}: a commit (4 KiB redo write, O_DIRECT, + fdatasync) "
            + how.format(format_latency(lat * 1e9)))
    figures = [Figure("tps", "sysbench oltp_write_only TPS, 1 thread", *one,
                      "transactions/s", f"{took}; redo_commit: {commits:,.0f} a second at"
                      " most")]
    new = _one(lat * (1 + NEW_REDO), commits / (1 + NEW_REDO), cpu, ONE_CPU_S["mysql"])
    figures.append(Figure("tps_new", "sysbench oltp_write_only TPS, 1 thread, a new"
                          " database", *new, "transactions/s",
                          f"{test}'s commit and redo_commit's rate, one commit in"
                          f" {1 / NEW_REDO:.1f} also waiting for a journal commit (its redo"
                          " entering a block of the preallocated log never written)"))
    if p99 is not None:
        figures.append(measured("commit_p99", "commit latency p99", p99 / 1e6, "ms",
                                "redo_commit fdatasync p99"))
    verdict = (f"MariaDB/MySQL here: ~{one[0]:,.0f} write transactions/s at 1 thread"
               f" (commit p99 {format_latency(p99)},"
               f" {_bound(lat, commits, cpu, 'redo log fsync')}); {oltp(p99)}")
    notes = [f"a new database: ~{new[0]:,.0f} transactions/s until its redo log has been"
             " written through once (innodb_log_file_size, 96 MiB by default), where the"
             " file system preallocates it unwritten (ext4, measured; others not): a commit"
             " whose redo enters a block never written waits for the file system's journal"
             f" too (sysbench's write-only transaction writes ~{REDO_BYTES:,} bytes of redo:"
             f" one commit in {1 / NEW_REDO:.1f})"]
    return Answer("mysql", "MariaDB 10.11 (InnoDB)", figures, verdict, True,
                  notes + _alone(lat, commits, cpu, "transactions/s"))


def redis(results: dict[str, list[TestResult]]) -> Answer | None:
    always = median_of(results, "aof_always_1", "write.iops")
    if not always:
        return None
    cpu = CPU_S["redis"]
    lat = _commit_s(results, "aof_idle", always)
    one = _one(lat, always, cpu, ONE_CPU_S["redis"])
    figures = [Figure("ops", "SET ops/s, appendfsync always, 1 client", *one, "ops/s",
                      f"aof_idle: an append + fdatasync takes {format_latency(lat * 1e9)} alone;"
                      f" aof_always_1: {always:,.0f} a second at most")]
    batch = median_of(results, "aof_always_50", "write.iops")
    n = GROUP["redis"]
    if batch:
        k = PER_PASS
        busy = BUSY_S["redis"] * k

        # a pass's own flush as passes come back to back: aof_always_50's write + fdatasync
        # p50 (a cap holds some of its flushes: their mean is its pace, their median not;
        # a lone flush, aof_idle's, found the disk idle and took longer)
        own = _commit_s(results, "aof_always_50", batch)

        def per_pass(cpu_s: float) -> float:
            # a pass takes the longer of the storage's pace (1 / C_50: a volume capped in
            # IOPS spaces its flushes so, and the loop's CPU between them is time the cap
            # would have waited anyway) and its own time (its flush and the loop's CPU, one
            # after the other): docs/apps.md, "The loop within the cap"
            return max(1 / batch, own + cpu_s)

        # at most all n SETs in each pass, the loop's CPU time halved (no CPU at all gave
        # 26,212,500 SETs/s on tmpfs)
        many = (k / per_pass(busy), k / per_pass(2 * busy),
                n / per_pass(n * BUSY_S["redis"] / 2))
        every = format_latency(1e9 / batch)
        figures.append(Figure(
            f"ops_{n}", f"SET ops/s, appendfsync always, {n} clients", *many, "ops/s",
            f"aof_always_50: an event-loop pass's append + fdatasync every {every}, ~{k}"
            f" SETs each (half of the {n} clients); a pass takes the longer of that and its"
            f" own flush ({format_latency(own * 1e9)}, their p50) with the loop's CPU"
            f" ({format_latency(busy * 1e9)})"))
    second = median_of(results, "aof_everysec", "sync.lat_p99")
    if second is not None:
        figures.append(measured("everysec_fsync_p99", "fdatasync of a second's AOF, p99",
                                second / 1e6, "ms", "aof_everysec fdatasync p99"))
    stalls = second is not None and second > 1e9
    verdict = (f"Redis here: ~{one[0]:,.0f} SETs/s at 1 client with appendfsync always"
               f" ({_bound(lat, always, cpu, 'AOF fsync')})"
               + (f", ~{figures[1].value:,.0f} at {n} clients" if batch else "")
               + ("; everysec: the background fsync takes over a second at p99, so writes"
                  " will stall" if stalls else "; everysec keeps up"))
    return Answer("redis", "Redis 7 (AOF)", figures, verdict, True,
                  _alone(lat, always, cpu, "SETs/s"))


def etcd(results: dict[str, list[TestResult]]) -> Answer | None:
    test = "etcd_rated" if "etcd_rated" in results else "etcd"
    p99 = median_of(results, test, "sync.lat_p99")
    if p99 is None:
        return None
    fine = p99 < 10e6
    figures = [measured("wal_fsync_p99", "WAL fsync p99", p99 / 1e6, "ms", f"{test} fdatasync p99")]
    verdict = (f"etcd here: WAL fsync p99 {format_latency(p99)}: "
               + ("fine (etcd's guidance: under 10 ms)" if fine else
                  "too slow (etcd's guidance: under 10 ms; expect leader elections)"))
    return Answer("etcd", "etcd 3.x", figures, verdict, True)


def _stream(profile: str, application: str, tests: tuple[str, str],
            results: dict[str, list[TestResult]]) -> Answer | None:
    bw = median_of(results, tests[0], "write.bw")
    if bw is None:
        return None
    figures = [measured("write_mbps", "sustained buffered writes", bw / 1e6, "MB/s",
                        f"{tests[0]} write bandwidth")]
    flush = median_of(results, tests[1], "write.bw")
    if flush:
        figures.append(measured("flush_mbps", "a segment written and fsynced", flush / 1e6,
                                "MB/s", f"{tests[1]} write bandwidth, fsync included"))
    verdict = (f"{application} here: ~{bw / 1e6:,.0f} MB/s of buffered log writes"
               + (f", {flush / 1e6:,.0f} MB/s with its fsync" if flush else "")
               + " (not validated against the application)")
    return Answer(profile, application, figures, verdict, False)


def kafka(results: dict[str, list[TestResult]]) -> Answer | None:
    return _stream("kafka", "Kafka", ("log_append", "segment_flush"), results)


def prometheus(results: dict[str, list[TestResult]]) -> Answer | None:
    return _stream("prometheus", "Prometheus TSDB", ("wal", "compaction"), results)


# each profile's answers: (name, label, unit), as its judge gives them (a test holds the
# two equal on real runs): what `storbench suites NAME` lists for --assert and history
_STREAM = (("write_mbps", "sustained buffered writes", "MB/s"),
           ("flush_mbps", "a segment written and fsynced", "MB/s"))
ANSWERS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "postgresql": (("tps", "pgbench TPC-B TPS, 1 client", "transactions/s"),
                   ("tps_16", "pgbench TPC-B TPS, 16 clients", "transactions/s"),
                   ("commit_p99", "commit latency p99", "ms")),
    "mysql": (("tps", "sysbench oltp_write_only TPS, 1 thread", "transactions/s"),
              ("tps_new", "sysbench oltp_write_only TPS, 1 thread, a new database",
               "transactions/s"),
              ("commit_p99", "commit latency p99", "ms")),
    "redis": (("ops", "SET ops/s, appendfsync always, 1 client", "ops/s"),
              ("ops_50", "SET ops/s, appendfsync always, 50 clients", "ops/s"),
              ("everysec_fsync_p99", "fdatasync of a second's AOF, p99", "ms")),
    "etcd": (("wal_fsync_p99", "WAL fsync p99", "ms"),),
    "kafka": _STREAM,
    "prometheus": _STREAM,
}

Judge = Callable[[dict[str, list[TestResult]]], "Answer | None"]
JUDGES: dict[str, Judge] = {"postgresql": postgresql, "mysql": mysql, "redis": redis,
                            "etcd": etcd, "kafka": kafka, "prometheus": prometheus}


# an estimate's unit -> (the figure kind verdicts use, its base unit per estimate unit)
KINDS = {"transactions/s": ("tps", 1.0), "ops/s": ("ops", 1.0), "ms": ("latency", 1e6),
         "MB/s": ("bw", 1e6), "samples/s": ("ops", 1.0), "accelerators": ("count", 1.0),
         "%": ("count", 1.0), "s/GB": ("seconds", 1.0)}
