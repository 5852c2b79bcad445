"""Published reference figures (../shared/context.md's studies), with provenance.

A reference is a named target of a study, the suite whose workload the study ran,
and figures in storbench's base units (IOPS, bytes/s, ns), keyed like the suite's
headline metrics. `compare --reference` shows them as rows marked "published",
never as measured runs. Users add their own sets from a JSON file of the same shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError
from storbench.result.model import Direction, Latency, SyncStats, TestResult
from storbench.result.record import Run, StoredTest

MIB = 1024.0**2
US = 1_000.0
MS = 1_000_000.0


@dataclass(frozen=True)
class Reference:
    name: str  # short, used with --reference: "ebs-gp3"
    target: str  # what was measured
    suite: str  # the storbench suite with the study's workload
    study: str
    source: str  # where the figures were published
    year: int | None
    figures: dict[str, dict[str, float]]  # test -> metric key -> value in base units
    note: str = ""


def _dbench(name: str, target: str, f: list[float]) -> Reference:
    r_iops, w_iops, mix_r, mix_w, r_bw, w_bw, seq_r, seq_w, r_lat, w_lat = f
    return Reference(
        name, target, "dbench",
        "5: AWS CSI drivers on Kubernetes (DBench: 2 s ramp + 15 s per test, 2 GiB file)",
        "public write-up of study 5, tables per metric", None,
        {"read_iops": {"read.iops": r_iops}, "write_iops": {"write.iops": w_iops},
         "rw_mix": {"read.iops": mix_r, "write.iops": mix_w},
         "read_bw": {"read.bw": r_bw * MIB}, "write_bw": {"write.bw": w_bw * MIB},
         "read_seq": {"read.bw": seq_r * MIB}, "write_seq": {"write.bw": seq_w * MIB},
         "read_latency": {"read.lat_mean": r_lat * US},
         "write_latency": {"write.lat_mean": w_lat * US}})


def _etcd(name: str, target: str, iops: float, p99_ms: float) -> Reference:
    return Reference(name, target, "etcd", "3: etcd disk check, collected across platforms",
                     "public wiki page of etcd disk-check results", None,
                     {"etcd": {"write.iops": iops, "sync.lat_p99": p99_ms * MS}})


def _randrw75(name: str, target: str, r: float, w: float) -> Reference:
    return Reference(name, target, "randrw75",
                     "2: a benchmark of AWS EFS (fio 2.1.5, randrw 75/25, 4k, qd64, 1 GiB)",
                     "public write-up of study 2", None,
                     {"randrw75": {"read.iops": r, "write.iops": w}})


def _app_mixed(name: str, target: str, r: float, w: float) -> Reference:
    return Reference(name, target, "app-mixed",
                     "1: AWS storage for Kubernetes (randrw 60/40, 4 jobs, qd16, 900 s)",
                     "public write-up of study 1", None,
                     {"app_mixed": {"read.iops": 4 * r, "write.iops": 4 * w}},
                     "published per job; here 4 jobs summed")


BUILTIN: list[Reference] = [
    _dbench("ebs-gp3", "EBS gp3", [16400, 16700, 12400, 4175, 114, 106, 121, 115, 478, 680]),
    _dbench("ebs-io2", "EBS io2", [19600, 19600, 14800, 4885, 542, 501, 554, 523, 208, 261]),
    _dbench("efs", "EFS", [10300, 5220, 5419, 1785, 144, 99.3, 157, 101, 2736, 10118]),
    _dbench("fsx-lustre", "FSx for Lustre", [1317, 1179, 951, 325, 81.8, 71.6, 30.9, 55.1,
                                              2945, 3413]),
    _etcd("nvme-vdo", "consumer NVMe (VDO)", 664, 4.2),
    _etcd("sata-ssd", "consumer SATA SSD", 428, 4.8),
    _etcd("hdd-5400", "5.4k rpm HDD", 42, 34),
    _etcd("vsan", "vSphere VSAN VM", 182, 18.0),
    Reference("ebs", "EBS", "sync-iops", "4: single-threaded IOPS (randwrite 4k, fsync=1)",
              "public write-up of study 4", None,
              {"sync_randwrite": {"write.iops": 1145, "write.clat_mean": 631 * US}}),
    _randrw75("efs", "EFS", 796, 267),
    _randrw75("glusterfs-r2", "GlusterFS, 2-node replica", 482, 161),
    _randrw75("nfs4", "NFS 4.0", 10178, 3417),
    _app_mixed("ebs-gp2", "EBS gp2 (30 GB)", 563, 376),
    _app_mixed("efs-gp", "EFS General Purpose", 81, 55),
    _app_mixed("efs-maxio", "EFS Max I/O (4 MB/s provisioned)", 54, 40),
]


def load_file(path: Path) -> list[Reference]:
    """A user's reference set: a JSON list of objects with the fields of Reference."""
    try:
        doc = json.loads(path.read_text())
        return [Reference(**{**item, "figures": {t: {k: float(v) for k, v in m.items()}
                                                 for t, m in item["figures"].items()}})
                for item in doc]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"{path}: not a reference set ({exc}); expected a JSON list of"
                          " {name, target, suite, study, source, year, figures}") from None


def select(names: list[str], suite: str, extra: list[Reference]) -> list[Reference]:
    """The references called ``names`` for ``suite`` (the same name may exist per study)."""
    pool = [*BUILTIN, *extra]
    out = []
    for name in names:
        found = [r for r in pool if r.name == name and r.suite == suite]
        if not found:
            known = sorted({r.name for r in pool if r.suite == suite})
            raise ConfigError(
                f"no published reference {name!r} for suite {suite}"
                + (f"; for {suite}: {', '.join(known)}" if known
                   else "; `storbench reference list` shows them"))
        out += found
    return out


def as_run(ref: Reference, index: int) -> Run:
    """A reference as a row for comparisons: origin "published", id 0, figures only."""
    tests = [StoredTest(i, 0, _result(test, figures)) for i, (test, figures)
             in enumerate(ref.figures.items())]
    return Run(id=0, uid=f"reference-{index}", created_at=str(ref.year or ""), finished_at=None,
               status="completed", origin="published", label=f"{ref.name} (published)",
               suite=ref.suite, target=ref.target, error=None,
               environment={"study": ref.study, "source": ref.source},
               settings={}, storbench_version="", fio_version=None, tests=tests,
               verdicts=[])


def _latency(mean: float | None, p99: float | None) -> Latency | None:
    if mean is None and p99 is None:
        return None
    nan = float("nan")
    return Latency(samples=1, min_ns=nan, max_ns=nan, mean_ns=mean if mean is not None else nan,
                   stdev_ns=nan, percentiles_ns={99.0: p99} if p99 is not None else {})


def _result(test: str, figures: dict[str, float]) -> TestResult:
    by_dir: dict[str, dict[str, float]] = {}
    for key, value in figures.items():
        where, _, field = key.partition(".")
        by_dir.setdefault(where, {})[field] = value

    def direction(name: str) -> Direction | None:
        f = by_dir.get(name)
        if f is None:
            return None
        nan = float("nan")
        lat = _latency(f.get("lat_mean"), f.get("lat_p99"))
        clat = _latency(f.get("clat_mean"), f.get("clat_p99"))
        return Direction(iops=f.get("iops", nan), bw_bytes_per_s=f.get("bw", nan), io_bytes=0,
                         total_ios=0, runtime_ms=0, short_ios=0, dropped_ios=0, slat=None,
                         clat=clat, lat=lat)

    sync = by_dir.get("sync")
    sync_lat = _latency(sync.get("lat_mean"), sync.get("lat_p99")) if sync else None
    return TestResult(
        name=test, jobs=1, error=0, read=direction("read"), write=direction("write"),
        trim=direction("trim"),
        sync=SyncStats(1, sync_lat) if sync_lat is not None else None,
        usr_cpu_percent=float("nan"), sys_cpu_percent=float("nan"), context_switches=0,
        iodepth_percent={}, elapsed_s=float("nan"), options={})


def describe(ref: Reference) -> dict[str, Any]:
    return {"name": ref.name, "target": ref.target, "suite": ref.suite, "study": ref.study,
            "source": ref.source, "year": ref.year, "figures": ref.figures, "note": ref.note}
