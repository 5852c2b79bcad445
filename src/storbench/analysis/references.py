"""Published reference figures (../shared/context.md's studies), with provenance.

A reference is a named target of a study, the suite whose workload the study ran,
and figures in storbench's base units (IOPS, bytes/s, ns), keyed like the suite's
headline metrics. `compare --reference` shows them as rows marked "published",
never as measured runs. Users add their own sets from a JSON file of the same shape.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from storbench.analysis.metrics import metric
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
    printed: dict[str, dict[str, str]] | None = None  # the same figures as the study printed


@dataclass(frozen=True)
class Printed:
    """A figure as the study printed it: "4.752 ms", "99.3 MiB/s", "16400"."""

    text: str
    value: float  # in base units (IOPS, bytes/s, ns)
    decimals: int  # digits after the point, as printed
    divisor: float  # the printed unit in base units (ms: 1e6)

    def decimals_in(self, divisor: float) -> int:
        """The same precision in another unit: 4.2 ms is 4,200 µs, not 4,200.0."""
        return max(0, self.decimals + round(math.log10(divisor / self.divisor)))


_UNITS = {"": 1.0, "IOPS": 1.0, "ns": 1.0, "µs": US, "us": US, "ms": MS, "s": 1e9,
          "B/s": 1.0, "KiB/s": 1024.0, "MiB/s": MIB, "GiB/s": 1024.0**3, "KB/s": 1e3,
          "MB/s": 1e6, "GB/s": 1e9}
_PRINTED = re.compile(r"^\s*(?P<num>[\d,]+(?:\.(?P<dec>\d+))?)\s*(?P<unit>[A-Za-zµ/]*)\s*$")


def printed(text: str) -> Printed:
    """Parse a figure as printed; ConfigError for anything else."""
    m = _PRINTED.match(text)
    if m is None or m["unit"] not in _UNITS:
        raise ConfigError(f"{text!r} is not a figure as printed (e.g. 4.752 ms, 99.3 MiB/s,"
                          f" 16400); units: {', '.join(u for u in _UNITS if u)}")
    divisor = _UNITS[m["unit"]]
    return Printed(text.strip(), float(m["num"].replace(",", "")) * divisor,
                   len(m["dec"] or ""), divisor)


def _ref(name: str, target: str, suite: str, study: str, source: str,
         figures: dict[str, dict[str, str]], note: str = "") -> Reference:
    """A reference from the figures as printed (the text keeps their precision)."""
    return Reference(name, target, suite, study, source, None,
                     {t: {k: printed(v).value for k, v in m.items()} for t, m in figures.items()},
                     note, figures)


def _dbench(name: str, target: str, f: list[str]) -> Reference:
    r_iops, w_iops, mix_r, mix_w, r_bw, w_bw, seq_r, seq_w, r_lat, w_lat = f
    mib, us = " MiB/s", " µs"
    return _ref(
        name, target, "dbench",
        "5: AWS CSI drivers on Kubernetes (DBench: 2 s ramp + 15 s per test, 2 GiB file)",
        "public write-up of study 5, tables per metric",
        {"read_iops": {"read.iops": r_iops}, "write_iops": {"write.iops": w_iops},
         "rw_mix": {"read.iops": mix_r, "write.iops": mix_w},
         "read_bw": {"read.bw": r_bw + mib}, "write_bw": {"write.bw": w_bw + mib},
         "read_seq": {"read.bw": seq_r + mib}, "write_seq": {"write.bw": seq_w + mib},
         "read_latency": {"read.lat_mean": r_lat + us},
         "write_latency": {"write.lat_mean": w_lat + us}})


def _etcd(name: str, target: str, iops: str, p99: str) -> Reference:
    return _ref(name, target, "etcd", "3: etcd disk check, collected across platforms",
                "public wiki page of etcd disk-check results",
                {"etcd": {"write.iops": iops, "sync.lat_p99": p99}},
                "fdatasync p99 as collected from the page's table (in ms, as rounded there);"
                " fio's own output on the page has it in µs, not held here")


def _randrw75(name: str, target: str, r: str, w: str) -> Reference:
    return _ref(name, target, "randrw75",
                "2: a benchmark of AWS EFS (fio 2.1.5, randrw 75/25, 4k, qd64, 1 GiB)",
                "public write-up of study 2", {"randrw75": {"read.iops": r, "write.iops": w}})


def _app_mixed(name: str, target: str, r: int, w: int) -> Reference:
    return _ref(name, target, "app-mixed",
                "1: AWS storage for Kubernetes (randrw 60/40, 4 jobs, qd16, 900 s)",
                "public write-up of study 1",
                {"app_mixed": {"read.iops": str(4 * r), "write.iops": str(4 * w)}},
                f"published per job ({r} read, {w} write IOPS); here 4 jobs summed")


BUILTIN: list[Reference] = [
    _dbench("ebs-gp3", "EBS gp3", "16400 16700 12400 4175 114 106 121 115 478 680".split()),
    _dbench("ebs-io2", "EBS io2", "19600 19600 14800 4885 542 501 554 523 208 261".split()),
    _dbench("efs", "EFS", "10300 5220 5419 1785 144 99.3 157 101 2736 10118".split()),
    _dbench("fsx-lustre", "FSx for Lustre",
            "1317 1179 951 325 81.8 71.6 30.9 55.1 2945 3413".split()),
    _etcd("nvme-vdo", "consumer NVMe (VDO)", "664", "4.2 ms"),
    _etcd("sata-ssd", "consumer SATA SSD", "428", "4.8 ms"),
    _etcd("hdd-5400", "5.4k rpm HDD", "42", "34 ms"),
    _etcd("vsan", "vSphere VSAN VM", "182", "18.0 ms"),
    _ref("ebs", "EBS", "sync-iops", "4: single-threaded IOPS (randwrite 4k, fsync=1)",
         "public write-up of study 4",
         {"sync_randwrite": {"write.iops": "1145", "write.clat_mean": "631 µs"}}),
    _randrw75("efs", "EFS", "796", "267"),
    _randrw75("glusterfs-r2", "GlusterFS, 2-node replica", "482", "161"),
    _randrw75("nfs4", "NFS 4.0", "10178", "3417"),
    _app_mixed("ebs-gp2", "EBS gp2 (30 GB)", 563, 376),
    _app_mixed("efs-gp", "EFS General Purpose", 81, 55),
    _app_mixed("efs-maxio", "EFS Max I/O (4 MB/s provisioned)", 54, 40),
]


def load_file(path: Path) -> list[Reference]:
    """A user's reference set: a JSON list of objects with the fields of Reference."""
    try:
        doc = json.loads(path.read_text())
        return [_from_json(item) for item in doc]
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ConfigError) as exc:
        raise ConfigError(f"{path}: not a reference set ({exc}); expected a JSON list of"
                          " {name, target, suite, study, source, year, figures}, a figure"
                          " in base units (IOPS, bytes/s, ns) or as printed (\"4.752 ms\")"
                          ) from None


def _from_json(item: dict[str, Any]) -> Reference:
    """Figures as numbers in base units, or as printed ("7.5 ms": its precision kept)."""
    figures: dict[str, dict[str, float]] = {}
    shown: dict[str, dict[str, str]] = {}
    for test, metrics in item["figures"].items():
        for key, v in metrics.items():
            metric(key)  # a metric storbench knows, or ValueError
            if isinstance(v, str):
                p = printed(v)
                figures.setdefault(test, {})[key] = p.value
                shown.setdefault(test, {})[key] = p.text
            else:
                figures.setdefault(test, {})[key] = float(v)
    fields = {k: v for k, v in item.items() if k not in ("figures", "printed")}
    return Reference(**{"year": None, **fields, "figures": figures, "printed": shown})


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
    run = Run(id=0, uid=f"reference-{index}", created_at=str(ref.year or ""), finished_at=None,
              status="completed", origin="published", label=f"{ref.name} (published)",
              suite=ref.suite, target=ref.target, error=None,
              environment={"study": ref.study, "source": ref.source,
                           "printed": ref.printed or {},
                           "figures": {t: list(m) for t, m in ref.figures.items()}},
              settings={}, storbench_version="", fio_version=None, tests=tests,
              verdicts=[])
    # judged by its suite's profile like a measured run (etcd: fdatasync p99 < 10 ms)
    from storbench.analysis.verdicts import evaluate  # only for references shown as runs

    return replace(run, verdicts=evaluate(run, unresolvable="fail"))


def _latency(fields: dict[str, float], which: str) -> Latency | None:
    """slat/clat/lat from the figures a study gave: mean, min, max, percentiles."""
    nan = float("nan")
    stats = {k[len(which) + 1:]: v for k, v in fields.items() if k.startswith(f"{which}_")}
    if not stats:
        return None
    return Latency(samples=1, min_ns=stats.get("min", nan), max_ns=stats.get("max", nan),
                   mean_ns=stats.get("mean", nan), stdev_ns=stats.get("stdev", nan),
                   percentiles_ns={float(k[1:]): v for k, v in stats.items()
                                   if k.startswith("p")})


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
        return Direction(iops=f.get("iops", nan), bw_bytes_per_s=f.get("bw", nan), io_bytes=0,
                         total_ios=0, runtime_ms=0, short_ios=0, dropped_ios=0,
                         slat=_latency(f, "slat"), clat=_latency(f, "clat"),
                         lat=_latency(f, "lat"))

    sync = by_dir.get("sync")
    sync_lat = _latency(sync, "lat") if sync else None
    return TestResult(
        name=test, jobs=1, error=0, read=direction("read"), write=direction("write"),
        trim=direction("trim"),
        sync=SyncStats(1, sync_lat) if sync_lat is not None else None,
        usr_cpu_percent=float("nan"), sys_cpu_percent=float("nan"), context_switches=0,
        iodepth_percent={}, elapsed_s=float("nan"), options={})


def describe(ref: Reference) -> dict[str, Any]:
    return {"name": ref.name, "target": ref.target, "suite": ref.suite, "study": ref.study,
            "source": ref.source, "year": ref.year, "figures": ref.figures, "note": ref.note,
            "printed": ref.printed or {}}
