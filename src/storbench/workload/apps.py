"""Application profiles as suites: fio jobs shaped like an application's own I/O.

Each test imitates one thing the application does to storage, with the block size,
sync pattern, file layout and concurrency of its defaults, and says where that shape
comes from (``origins``: the application's documentation or source). The judge that
turns the figures into the application's units is analysis/apps.py; `storbench run
TARGET --suite postgresql` runs one (docs/apps.md: the shapes, the estimates and how
they compare with the real applications).
"""

from __future__ import annotations

from storbench.workload.jobfile import Option
from storbench.workload.suite import Suite, TestSpec


def _o(**options: str | None) -> tuple[Option, ...]:
    return tuple(options.items())


# a commit: one write then fdatasync(), one at a time, 10 s, on a file written whole first
COMMITS = _o(ioengine="psync", rw="write", fdatasync="1", overwrite="1", time_based=None,
             runtime="10")


# a paced probe (50 a second for 4 s): one commit's latency, not a rate to keep up
IDLE = "a paced probe: 50 commits a second, each alone"


def _idle(commits: tuple[Option, ...], **options: str | None) -> tuple[Option, ...]:
    """The same commits at 50 a second for 4 s: how long one takes while the storage is
    otherwise idle (the test beside it says how many it can take a second: a volume
    capped in IOPS answers the first quickly and limits the second)."""
    return tuple({**dict(commits), "rate_iops": "50", "runtime": "4", **options}.items())


POSTGRESQL = Suite(
    name="postgresql",
    description="PostgreSQL 15 with its defaults: WAL commits, page reads, a checkpoint",
    study="PostgreSQL 15 documentation (WAL configuration, wal_sync_method) and defaults",
    defaults=_o(randrepeat="0"),
    tests=(
        TestSpec("wal_commit", "WAL commit: an 8 KiB page written, then fdatasync (1 client)",
                 _o(**dict(COMMITS), bs="8k", size="16m", filename="pg_wal.segment"),
                 ("write.iops", "sync.lat_p50", "sync.lat_p99")),
        TestSpec("wal_idle", "WAL commits at 50 a second: one commit's latency, the"
                             " storage otherwise idle",
                 _idle(COMMITS, bs="8k", size="16m", filename="pg_wal.idle"),
                 ("write.clat_p50", "sync.lat_p50"), brief=IDLE),
        TestSpec("wal_group", "WAL group commit: 16 KiB (the records of 16 commits), then"
                              " fdatasync",
                 _o(**dict(COMMITS), bs="16k", size="16m", filename="pg_wal.group"),
                 ("write.iops", "sync.lat_p99")),
        TestSpec("page_read", "8 KiB page reads that miss the caches (direct), one at a time",
                 _o(ioengine="psync", rw="randread", bs="8k", direct="1", size="256m",
                    time_based=None, runtime="8", filename="pg_data.table"),
                 ("read.iops", "read.clat_p99")),
        TestSpec("checkpoint", "a checkpoint: 32 MiB of 8 KiB pages written back, then fsync",
                 _o(ioengine="psync", rw="randwrite", bs="8k", direct="0", size="256m",
                    io_size="32m", end_fsync="1", filename="pg_data.table"),
                 ("write.bw",), brief="a checkpoint: one burst of writes and its fsync"),
    ),
    origins={
        "bs": "PostgreSQL: wal_block_size and block_size are 8 kB (compile-time defaults)",
        "fdatasync": "PostgreSQL on Linux: wal_sync_method = fdatasync; synchronous_commit ="
                     " on flushes the WAL at each commit",
        "overwrite": "PostgreSQL: WAL segments are written whole (wal_init_zero = on) and"
                     " recycled, never extended at a commit",
        "size": "PostgreSQL: wal_segment_size 16 MB; data files of a small database",
        "io_size": "a checkpoint's share of dirty pages (storbench's choice)",
        "rate_iops": "wal_idle: 50 commits a second, to see one commit's latency alone",
        "end_fsync": "PostgreSQL: a checkpoint fsyncs every data file it wrote",
        "direct": "PostgreSQL reads and writes data files through the OS page cache; a"
                  " read that misses shared_buffers and the page cache waits for storage",
    },
)

# the time a sysbench write-only transaction spends beyond its commit, in µs: the pace of
# one thread's commits (analysis/apps.CPU_S["mysql"], which tests check it is)
MYSQL_OWN_US = 479

MYSQL = Suite(
    name="mysql",
    description="MySQL/MariaDB InnoDB with its defaults: redo commits, page writes,"
                " doublewrite",
    study="MariaDB 10.11 documentation (InnoDB redo log, innodb_flush_method = O_DIRECT,"
          " innodb_flush_log_at_trx_commit = 1, doublewrite buffer)",
    defaults=_o(randrepeat="0", direct="1"),
    tests=(
        TestSpec("redo_commit", "redo log commit: 4 KiB written (O_DIRECT), then fdatasync",
                 _o(**dict(COMMITS), bs="4k", size="16m", filename="ib_logfile0"),
                 ("write.iops", "sync.lat_p50", "sync.lat_p99")),
        TestSpec("redo_idle", "redo commits at 50 a second: one commit's latency, the"
                              " storage otherwise idle",
                 _idle(COMMITS, bs="4k", size="16m", filename="ib_logfile1"),
                 ("write.clat_p50", "sync.lat_p50"), brief=IDLE),
        TestSpec("redo_paced", "redo commits at one thread's pace: each after the"
                               f" {MYSQL_OWN_US} µs of its own time a transaction takes",
                 _o(**{**dict(COMMITS), "runtime": "4"}, bs="4k", size="16m",
                    thinktime=str(MYSQL_OWN_US), filename="ib_logfile2"),
                 ("write.clat_p50", "sync.lat_p50"),
                 brief="a paced probe: commits at one thread's pace"),
        TestSpec("page_write", "16 KiB pages written back (O_DIRECT), 4 at a time",
                 _o(ioengine="libaio", rw="randwrite", bs="16k", iodepth="4", size="256m",
                    time_based=None, runtime="8", filename="ibdata.table"),
                 ("write.iops", "write.clat_p99")),
        TestSpec("doublewrite", "the doublewrite buffer: 1 MiB (64 pages) written, then fsync",
                 _o(ioengine="psync", rw="write", bs="1m", fsync="1", size="32m",
                    time_based=None, runtime="5", filename="ib_doublewrite"),
                 ("write.bw", "sync.lat_p99")),
    ),
    origins={
        "bs": "InnoDB: 16 KiB pages; the redo log written in 4 KiB blocks"
              " (innodb_log_write_ahead_size / the device's block size)",
        "direct": "MariaDB 10.11: innodb_flush_method = O_DIRECT",
        "fdatasync": "innodb_flush_log_at_trx_commit = 1: the redo log is flushed at each"
                     " commit (binlog off, as Debian's MariaDB has it: one sync a commit)",
        "overwrite": "InnoDB's redo log is one file of a fixed size, written in a circle",
        "iodepth": "the page cleaner writes several pages at once (storbench's choice: 4)",
        "rate_iops": "redo_idle: 50 commits a second, to see one commit's latency alone",
        "thinktime": "redo_paced: one sysbench thread's own time between its commits (its"
                     " server's and its own CPU, wakeups: analysis/apps.CPU_S, measured on"
                     " tmpfs)",
        "fsync": "InnoDB syncs the doublewrite buffer before writing the pages in place",
    },
)

REDIS = Suite(
    name="redis",
    description="Redis 7 AOF: appendfsync always (1 and 50 clients) and everysec",
    study="Redis persistence documentation (AOF, appendfsync) and redis 7 source"
          " (flushAppendOnlyFile in beforeSleep)",
    defaults=_o(ioengine="sync", rw="write", file_append="1", fallocate="none",
                time_based=None, runtime="8"),
    tests=(
        TestSpec("aof_always_1", "appendfsync always, 1 client: a 64-byte SET appended, then"
                                 " fdatasync",
                 _o(bs="64", fdatasync="1", size="64m", filename="appendonly.aof"),
                 ("write.iops", "sync.lat_p99")),
        TestSpec("aof_idle", "appendfsync always at 50 SETs a second: one append's"
                             " latency, the storage otherwise idle",
                 _o(bs="64", fdatasync="1", size="4m", rate_iops="50", runtime="4",
                    filename="appendonly-idle.aof"),
                 ("write.clat_p50", "sync.lat_p50"), brief=IDLE),
        TestSpec("aof_always_50", "appendfsync always, 50 clients: 25 SETs (1,600 bytes) per"
                                  " event-loop pass, then fdatasync",
                 _o(bs="1600", fdatasync="1", size="256m", filename="appendonly-50.aof"),
                 ("write.iops", "sync.lat_p99")),
        TestSpec("aof_everysec", "appendfsync everysec: appends at 6 MB/s, fdatasync of each"
                                 " second's data",
                 _o(bs="64k", fdatasync="100", rate="6m", size="256m",
                    filename="appendonly-everysec.aof"),
                 ("write.bw", "sync.lat_p99")),
    ),
    origins={
        "file_append": "Redis appends to the AOF: the file grows, so each fdatasync also"
                       " commits its new size",
        "fdatasync": "appendfsync always: fdatasync() after each event-loop pass's write, on"
                     " the main thread, before the replies go out; everysec: once a second,"
                     " in a background thread",
        "bs": "a SET of a 3-byte value as the AOF stores it (~64 bytes); at 50 clients, the"
              " SETs of half of them in one pass (while a pass syncs, the clients it answered"
              " last send again: they make the next one; counted with the real Redis and"
              " redis-benchmark, docs/apps.md)",
        "rate": "about 100,000 SETs a second (storbench's choice for everysec)",
        "fallocate": "Redis never preallocates its AOF: each append extends the file"
                     " (fio's default preallocation would add a metadata write to each"
                     " fdatasync, halving the rate on a volume capped in IOPS)",
        "rate_iops": "aof_idle: 50 a second, to see one append's latency alone",
        "size": "an AOF of 64 MiB, Redis's auto-aof-rewrite-min-size (after a rewrite Redis 7"
                " appends to a new file); 256 MiB at 50 clients. fio ends an appending job"
                " when its file is full: sizes that durable storage does not fill in 8 s",
    },
)

KAFKA = Suite(
    name="kafka",
    description="Kafka's log (not validated): buffered appends, a segment's flush",
    study="Kafka documentation (log.flush.interval.messages unset: the OS flushes;"
          " log.segment.bytes)",
    defaults=_o(ioengine="psync", rw="write", direct="0"),
    tests=(
        TestSpec("log_append", "buffered sequential appends of 128 KiB batches, 15 s",
                 _o(bs="128k", size="2g", time_based=None, runtime="15",
                    filename="kafka.log"),
                 ("write.bw",)),
        TestSpec("segment_flush", "a finished 64 MiB segment written, then fsync",
                 _o(bs="1m", size="64m", end_fsync="1", filename="kafka.segment"),
                 ("write.bw",)),
    ),
    origins={"fsync": "Kafka does not fsync each message by default; a segment is flushed"
                      " asynchronously when it rolls"},
)

PROMETHEUS = Suite(
    name="prometheus",
    description="Prometheus TSDB (not validated): WAL pages, a fsync per segment, compaction",
    study="Prometheus TSDB documentation (WAL: 32 KiB pages, 128 MiB segments) and"
          " prometheus/tsdb/wlog source",
    defaults=_o(ioengine="psync", rw="write", direct="0"),
    tests=(
        TestSpec("wal", "32 KiB WAL pages, buffered, fsync once per 32 MiB",
                 _o(bs="32k", fsync="1024", size="256m", time_based=None, runtime="15",
                    filename="prometheus.wal"),
                 ("write.bw", "sync.lat_p99")),
        TestSpec("compaction", "a 128 MiB block written by compaction, then fsync",
                 _o(bs="1m", size="128m", end_fsync="1", filename="prometheus.block"),
                 ("write.bw",)),
    ),
    origins={"fsync": "Prometheus syncs a WAL segment when it is full (storbench: every"
                      " 32 MiB, a quarter of a 128 MiB segment, to see several in 15 s)"},
)

APPS: tuple[Suite, ...] = (POSTGRESQL, MYSQL, REDIS, KAFKA, PROMETHEUS)
