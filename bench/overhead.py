"""Does storbench measure what raw fio measures, and what does watching fio cost?

The same job, run by raw fio and by storbench, paired and alternated, on tmpfs
and on a 3000-IOPS throttled volume. Prints the median storbench/fio ratio of
IOPS and of mean latency, and storbench's own CPU seconds as a share of wall time.
Goal: ratios within 0.97..1.03; own CPU under 1% of the run's wall time.

    sudo .venv/bin/python bench/overhead.py [--pairs 5] [--runtime 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.testbed import Throttled, tmpfs

JOB = """[global]
ioengine=libaio
direct=1
size=256m
time_based
runtime={runtime}
ramp_time=1
randrepeat=0

[randread]
rw=randread
bs=4k
iodepth=16
"""


def raw_fio(target: Path, job: Path) -> tuple[float, float]:
    d = target / "raw-fio"
    d.mkdir()
    try:
        out = subprocess.run(["fio", "--output-format=json+", f"--directory={d}", str(job)],
                             check=True, capture_output=True, text=True).stdout
    finally:
        subprocess.run(["rm", "-rf", str(d)], check=True)
    read = json.loads(out[out.index("{"):])["jobs"][0]["read"]
    return read["iops"], read["clat_ns"]["mean"]


def storbench(target: Path, job: Path, db: Path) -> tuple[float, float, float, float]:
    with tempfile.NamedTemporaryFile() as cpu:
        env = {**os.environ, "STORBENCH_DB": str(db), "CPU_OUT": cpu.name}
        start = time.monotonic()
        subprocess.run([sys.executable, str(Path(__file__).parent / "cpu_wrapper.py"), "run",
                        str(target), "--job", str(job)], check=True, env=env,
                       capture_output=True)
        wall = time.monotonic() - start
        own_cpu = float(Path(cpu.name).read_text())
    shown = subprocess.run([sys.executable, "-m", "storbench", "show", "last", "--json"],
                           check=True, capture_output=True, text=True,
                           env={**os.environ, "STORBENCH_DB": str(db)}).stdout
    read = json.loads(shown)["tests"][0]["read"]
    return read["iops"], read["clat"]["mean_ns"], own_cpu, wall


def measure(name: str, target: Path, pairs: int, runtime: int, db: Path) -> None:
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "randread.fio"
        job.write_text(JOB.format(runtime=runtime))
        iops_ratios, lat_ratios, cpu_shares, cpus = [], [], [], []
        for i in range(pairs):
            order = ("fio", "sb") if i % 2 == 0 else ("sb", "fio")
            got = {}
            for who in order:
                got[who] = raw_fio(target, job) if who == "fio" else storbench(target, job, db)
            (f_iops, f_lat), (s_iops, s_lat, cpu, wall) = got["fio"], got["sb"]
            iops_ratios.append(s_iops / f_iops)
            lat_ratios.append(s_lat / f_lat)
            cpu_shares.append(cpu / wall)
            cpus.append(cpu)
            print(f"  {name} pair {i + 1}: fio {f_iops:,.0f} IOPS {f_lat / 1e3:.1f} µs |"
                  f" storbench {s_iops:,.0f} IOPS {s_lat / 1e3:.1f} µs |"
                  f" own CPU {cpu:.2f} s of {wall:.1f} s wall", flush=True)
        # What watching costs while fio runs: own CPU per extra second of fio runtime.
        job.write_text(JOB.format(runtime=3 * runtime))
        _, _, cpu_long, wall_long = storbench(target, job, db)
        job.write_text(JOB.format(runtime=runtime))
        _, _, cpu_short, wall_short = storbench(target, job, db)
        watching = max(cpu_long - cpu_short, 0.0) / (wall_long - wall_short)
        print(f"{name}: median storbench/fio IOPS ratio {statistics.median(iops_ratios):.3f},"
              f" mean-latency ratio {statistics.median(lat_ratios):.3f},"
              f" own CPU {statistics.median(cpus):.2f} s ="
              f" {100 * statistics.median(cpu_shares):.2f}% of wall time (start-up included);"
              f" watching fio costs {100 * watching:.2f}% of a core", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--runtime", type=int, default=10, help="seconds per fio run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "bench.db"
        with tmpfs() as t:
            measure("tmpfs", t, args.pairs, args.runtime, db)
        with Throttled() as t:
            (t.cgroup / "cgroup.procs").write_text(str(os.getpid()))  # fio and storbench inherit
            measure("throttled-3000iops", t.mnt, args.pairs, args.runtime, db)


if __name__ == "__main__":
    main()
