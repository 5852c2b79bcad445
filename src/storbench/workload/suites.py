"""The built-in suites, as data: one small table per suite.

Parameters follow the public studies storbench was created from (see the
``study`` field); ``--size`` and ``--runtime`` override them. ``gtod_reduce`` is
never used (it drops latency), and fio always reports json+.
"""

from __future__ import annotations

from storbench.errors import ConfigError
from storbench.workload.apps import APPS
from storbench.workload.jobfile import Option
from storbench.workload.suite import Profile, Suite, TestSpec
from storbench.workload.training import TRAINING

# What storbench adds to every job, whatever the suite (shown by `storbench suites NAME`).
ALWAYS_ADDED = (
    ("directory", "the TARGET (fio's files go there, named for storbench)"),
    ("--output-format=json+", "fio's full output with latency histogram bins"),
    ("write_iops_log, write_bw_log, write_lat_log, log_avg_msec=1000",
     "per-second figures for the timeline and the warnings"),
)


def _o(**options: str | None) -> tuple[Option, ...]:
    return tuple(options.items())


SWEEP = (1, 4, 16)  # the s3-sweep suite's requests at a time

SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            name="quick",
            description="The default: IOPS, bandwidth and sync-write latency in under a minute",
            study="storbench default (10 s per test, 1 GiB file, direct I/O)",
            defaults=_o(
                ioengine="libaio", direct="1", size="1g", filename="storbench.data",
                time_based=None, runtime="10", ramp_time="1", randrepeat="0",
            ),
            tests=(
                TestSpec("randread", "4k random read IOPS, qd32",
                         _o(rw="randread", bs="4k", iodepth="32"), ("read.iops", "read.clat_p99")),
                TestSpec("randwrite", "4k random write IOPS, qd32",
                         _o(rw="randwrite", bs="4k", iodepth="32"),
                         ("write.iops", "write.clat_p99")),
                TestSpec("seqread", "1M sequential read bandwidth, qd16",
                         _o(rw="read", bs="1m", iodepth="16"), ("read.bw",)),
                TestSpec("seqwrite", "1M sequential write bandwidth, qd16",
                         _o(rw="write", bs="1m", iodepth="16"), ("write.bw",)),
                TestSpec("synclat", "4k qd1 O_SYNC write latency",
                         _o(rw="randwrite", bs="4k", iodepth="1", ioengine="psync", sync="1"),
                         ("write.clat_p50", "write.clat_p99")),
            ),
        ),
        Suite(
            name="dbench",
            description="The 9 tests of DBench (study 5: AWS CSI drivers on Kubernetes)",
            study="5: DBench; 2 s ramp + 15 s per test, 2 GiB file, libaio, direct",
            defaults=_o(
                ioengine="libaio", direct="1", size="2g", filename="dbench.data",
                time_based=None, ramp_time="2", runtime="15", randrepeat="0", verify="0",
            ),
            tests=(
                TestSpec("read_iops", "random read IOPS, 4k qd64",
                         _o(rw="randread", bs="4k", iodepth="64"), ("read.iops",)),
                TestSpec("write_iops", "random write IOPS, 4k qd64",
                         _o(rw="randwrite", bs="4k", iodepth="64"), ("write.iops",)),
                TestSpec("read_bw", "random read bandwidth, 128k qd64",
                         _o(rw="randread", bs="128k", iodepth="64"), ("read.bw",)),
                TestSpec("write_bw", "random write bandwidth, 128k qd64",
                         _o(rw="randwrite", bs="128k", iodepth="64"), ("write.bw",)),
                TestSpec("read_latency", "read latency, 4k qd4",
                         _o(rw="randread", bs="4k", iodepth="4"),
                         ("read.lat_mean", "read.clat_p99")),
                TestSpec("write_latency", "write latency, 4k qd4",
                         _o(rw="randwrite", bs="4k", iodepth="4"),
                         ("write.lat_mean", "write.clat_p99")),
                TestSpec("read_seq", "sequential read, 1M qd16, 4 jobs",
                         _o(rw="read", bs="1m", iodepth="16", numjobs="4", thread=None),
                         ("read.bw",), split_size=True),
                TestSpec("write_seq", "sequential write, 1M qd16, 4 jobs",
                         _o(rw="write", bs="1m", iodepth="16", numjobs="4", thread=None),
                         ("write.bw",), split_size=True),
                TestSpec("rw_mix", "mixed random 75/25 IOPS, 4k qd64",
                         _o(rw="randrw", rwmixread="75", bs="4k", iodepth="64"),
                         ("read.iops", "write.iops")),
            ),
            origins={"filename": "study 5 (DBench's one /data/fiotest; named by storbench)",
                     "size": "study 5 (2 GiB; split among the jobs of a multi-job test)",
                     "offset_increment": "study 5 (the file's share of each of the 4 jobs)",
                     "thread": "study 5 (DBench runs its jobs as threads)"},
        ),
        Suite(
            name="etcd",
            description="etcd's disk check: fdatasync p99 must stay under 10 ms",
            study="3: etcd disk check (rw=write ioengine=sync fdatasync=1 bs=2300 size=22m)",
            defaults=(),
            tests=(
                TestSpec("etcd", "2300-byte sequential writes, fdatasync after each",
                         _o(rw="write", ioengine="sync", fdatasync="1", bs="2300", size="22m"),
                         ("write.iops", "sync.lat_p99"), rated=True),
            ),

            profiles={
                "upstream": Profile(("etcd.fdatasync.p99 < 10ms",),
                                    "etcd guidance: fdatasync p99 below 10 ms"),
                "openshift": Profile(("etcd.fdatasync.p99 < 20ms",),
                                     "OpenShift: fdatasync p99 below 20 ms"),
            },
        ),
        Suite(
            name="sync-iops",
            description="What one thread with fsync after every write gets",
            study="4: single-threaded IOPS (randwrite 4k, direct, fsync=1, 1 job, 30 s)",
            defaults=(),
            tests=(
                TestSpec("sync_randwrite", "4k random writes, fsync after each, 1 thread",
                         _o(rw="randwrite", bs="4k", direct="1", numjobs="1", fsync="1",
                            time_based=None, runtime="30", size="1g"),
                         ("write.iops", "write.clat_mean", "sync.lat_p99")),
            ),
            origins={"time_based": "study 4 (it ran for its 30 s, whatever the size)"},
        ),
        Suite(
            name="randrw75",
            description="4k random 75/25 read/write mix at qd64 (study 2: EFS vs GlusterFS vs NFS)",
            study="2: benchmark of AWS EFS (randrw 75/25, 4k, qd64, libaio, direct, 1 GiB)",
            defaults=(),
            tests=(
                TestSpec("randrw75", "4k randrw 75/25, qd64, direct",
                         _o(randrepeat="1", ioengine="libaio", direct="1", bs="4k",
                            iodepth="64", size="1g", rw="randrw", rwmixread="75"),
                         ("read.iops", "write.iops", "read.clat_p99", "write.clat_p99")),
            ),
            dropped={"gtod_reduce=1": "it turns off the clock reads latency needs"},
        ),
        Suite(
            name="app-mixed",
            description="An application-like 60/40 mix, 4 jobs at qd16, buffered (study 1)",
            study="1: AWS storage for Kubernetes (randrw 60/40, 4k, 4 jobs, qd16, 900 s, 10 GiB)",
            defaults=(),
            tests=(
                TestSpec("app_mixed", "4k randrw 60/40, 4 jobs, qd16, buffered, time based",
                         _o(rw="randrw", rwmixread="60", bs="4k", direct="0", numjobs="4",
                            time_based=None, runtime="900", size="10g", ioengine="libaio",
                            iodepth="16", filename="app-mixed.data"),
                         ("read.iops", "write.iops", "read.clat_p99", "write.clat_p99")),
            ),
            origins={"filename": "study 1 (its 4 jobs shared one 10 GiB file; named by"
                                 " storbench)"},
        ),
        Suite(
            name="s3",
            description="S3 objects of 4 KiB, 1 MiB and 16 MiB: PUT, GET and DELETE, 4 at a"
                        " time (an s3:// TARGET)",
            study="minio/warp's and elbencho's object sizes; fio's http engine, one request"
                  " per job at a time",
            defaults=_o(numjobs="4", randrepeat="0"),
            tests=tuple(
                spec for size, total in (("4k", "1m"), ("1m", "32m"), ("16m", "128m"))
                for spec in (
                    TestSpec(f"put_{size}", f"PUT of each {size} object, 4 at a time",
                             _o(rw="write", bs=size, size=total, filename=f"obj_{size}"),
                             ("write.iops", "write.bw", "write.clat_p50", "write.clat_p99"),
                             brief="one PUT of each object the GET reads next: a pass over"
                                   " them, not timed"),
                    TestSpec(f"get_{size}", f"GET of the {size} objects, 4 at a time",
                             _o(rw="read", bs=size, size=total, filename=f"obj_{size}",
                                time_based=None, runtime="5", ramp_time="1"),
                             ("read.iops", "read.bw", "read.clat_p50", "read.clat_p99")),
                    TestSpec(f"delete_{size}", f"DELETE of each {size} object, 4 at a time",
                             _o(rw="trim", bs=size, size=total, filename=f"obj_{size}"),
                             ("trim.iops", "trim.clat_p50", "trim.clat_p99"),
                             brief="one DELETE of each object the PUT left: a pass over"
                                   " them, not timed"),
                )),
            origins={"size": "storbench: bytes of objects per job (objects = size / bs)"},
        ),
        Suite(
            name="s3-sweep",
            description="S3 objects of 4 KiB and 1 MiB: PUT, GET and DELETE 1, 4 and 16 at"
                        " a time (how an s3:// TARGET's rate grows with concurrency)",
            study="minio/warp's concurrency (its --concurrent), elbencho's threads; fio's"
                  " http engine, one request per job at a time",
            defaults=_o(randrepeat="0"),
            tests=tuple(
                spec for size, total in (("4k", "256k"), ("1m", "8m"))
                for jobs in SWEEP for spec in (
                    TestSpec(f"put_{size}_c{jobs}", f"PUT of each {size} object, {jobs} at a"
                             " time", _o(rw="write", bs=size, size=total, numjobs=str(jobs),
                                         filename=f"obj_{size}_c{jobs}"),
                             ("write.iops", "write.bw", "write.clat_p50", "write.clat_p99"),
                             brief="one PUT of each object the GET reads next: a pass over"
                                   " them, not timed"),
                    TestSpec(f"get_{size}_c{jobs}", f"GET of the {size} objects, {jobs} at a"
                             " time", _o(rw="read", bs=size, size=total, numjobs=str(jobs),
                                         filename=f"obj_{size}_c{jobs}", time_based=None,
                                         runtime="5", ramp_time="1"),
                             ("read.iops", "read.bw", "read.clat_p50", "read.clat_p99")),
                    TestSpec(f"delete_{size}_c{jobs}", f"DELETE of each {size} object,"
                             f" {jobs} at a time",
                             _o(rw="trim", bs=size, size=total, numjobs=str(jobs),
                                filename=f"obj_{size}_c{jobs}"),
                             ("trim.iops", "trim.clat_p50", "trim.clat_p99"),
                             brief="one DELETE of each object the PUT left: a pass over"
                                   " them, not timed"),
                )),
            origins={"size": "storbench: bytes of objects per job (objects = size / bs)",
                     "numjobs": "the sweep's concurrency: requests at a time"},
        ),
        Suite(
            name="s3-mixed",
            description="S3 objects of 1 MiB: GETs and PUTs mixed 75/25 at 16 at a time,"
                        " warp's mix as far as fio's http engine goes (an s3:// TARGET)",
            study="minio/warp's `mixed` (45% GET, 30% STAT, 15% PUT, 10% DELETE): its GETs and"
                  " PUTs in their ratio; fio's http engine sends no HEAD (STAT), and a DELETE"
                  " in the mix would leave a later GET a 404",
            defaults=_o(numjobs="16", randrepeat="0"),
            tests=(
                TestSpec("put_1m", "PUT of each 1m object, 16 at a time",
                         _o(rw="write", bs="1m", size="8m", filename="obj_1m"),
                         ("write.iops", "write.bw", "write.clat_p50", "write.clat_p99"),
                         brief="one PUT of each object the mix reads: a pass over them, not"
                               " timed"),
                TestSpec("mixed_1m", "GETs and PUTs of the 1m objects, 75/25, 16 at a time",
                         _o(rw="randrw", rwmixread="75", bs="1m", size="8m",
                            filename="obj_1m", time_based=None, runtime="10",
                            ramp_time="1"),
                         ("read.iops", "write.iops", "read.clat_p99", "write.clat_p99")),
                TestSpec("delete_1m", "DELETE of each 1m object, 16 at a time",
                         _o(rw="trim", bs="1m", size="8m", filename="obj_1m"),
                         ("trim.iops", "trim.clat_p50", "trim.clat_p99"),
                         brief="one DELETE of each object the PUT left: a pass over them,"
                               " not timed"),
            ),
            origins={"size": "storbench: bytes of objects per job (objects = size / bs)",
                     "rwmixread": "warp's mixed: 45% GET to 15% PUT"},
        ),
        *APPS,
        *TRAINING,
    )
}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise ConfigError(
            f"unknown suite {name!r}; choose one of: {', '.join(SUITES)} (see `storbench suites`)"
        ) from None
