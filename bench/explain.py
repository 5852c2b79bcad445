"""What does `run --explain` cost? The same job run by storbench with and without
--explain, paired and alternated, on tmpfs and on a loop device (ext4, its image in RAM:
the fastest block device here, where tracing costs most). Prints each pair's IOPS and
the median ratio (with / without). Goal (issue #58): at most 5% fewer IOPS at 100k IOPS.

    sudo .venv/bin/python bench/explain.py [--pairs 5] [--runtime 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.testbed import Throttled, tmpfs

JOB = """[randread]
ioengine={engine}
iodepth={depth}
direct=1
rw=randread
bs=4k
size=256m
time_based
runtime={runtime}
ramp_time=1
randrepeat=0
"""


def iops(target: Path, job: Path, db: Path, explain: bool) -> float:
    argv = [sys.executable, "-m", "storbench", "run", str(target), "--job", str(job), "--json"]
    env = {**os.environ, "STORBENCH_DB": str(db)}
    out = subprocess.run(argv + (["--explain"] if explain else []), check=True,
                         capture_output=True, text=True, env=env).stdout
    (result,) = json.loads(out)["tests"]
    return float(result["read"]["iops"])


def pairs(name: str, target: Path, job: Path, n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "bench.db"
        ratios = []
        for i in range(n):
            first = i % 2 == 0  # alternate which goes first
            a = iops(target, job, db, explain=not first)
            b = iops(target, job, db, explain=first)
            plain, traced = (a, b) if first else (b, a)
            ratios.append(traced / plain)
            print(f"  {name} pair {i + 1}: {plain:,.0f} IOPS plain, {traced:,.0f} traced"
                  f" ({traced / plain:.3f})", flush=True)
        print(f"{name}: median traced/plain {statistics.median(ratios):.3f}"
              f" (min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--runtime", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for engine, depth in (("psync", 1), ("libaio", 16)):
            job = Path(d) / f"{engine}.fio"
            job.write_text(JOB.format(runtime=args.runtime, engine=engine, depth=depth))
            with tmpfs("1g") as where:
                pairs(f"tmpfs, {engine} qd{depth}", where, job, args.pairs)
            with Throttled(backing_dir="/dev/shm", size="1G") as loop:
                pairs(f"loop device (image in RAM), {engine} qd{depth}", loop.mnt, job,
                      args.pairs)


if __name__ == "__main__":
    main()
