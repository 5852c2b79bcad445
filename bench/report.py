"""Benchmark: `storbench report` on 20 runs whose tests each carry a 15-minute
per-second series (900 points per direction). Goal: built in under 2 s, under 5 MB.

Run by hand: .venv/bin/python bench/report.py

The runs are made from one real short fio run (tmpfs, the `quick` suite) whose
series are stretched to 900 s with the same values repeated and jittered: a
renderer benchmark needs the shape of 20 long runs, not 5 hours of fio. The
reference measured in the same run is the comparison table alone (what `compare`
renders), so the ratio says what charts and HTML cost on top.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storbench.analysis import charts
from storbench.analysis.compare import compare
from storbench.render import report
from storbench.render.table import comparison_table
from storbench.result.model import Series
from storbench.store import Store

RUNS, SECONDS = 20, 900


def stretched(s: Series, rng: random.Random) -> Series:
    n = len(s.t_s)
    pick = [i % n for i in range(SECONDS)]
    return Series(t_s=[float(i + 1) for i in range(SECONDS)],
                  iops=[s.iops[i] * rng.uniform(0.9, 1.1) for i in pick],
                  bw_bytes_per_s=[s.bw_bytes_per_s[i] * rng.uniform(0.9, 1.1) for i in pick],
                  clat_mean_ns=[s.clat_mean_ns[i] for i in pick])


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "r.db"
        subprocess.run([sys.executable, "-m", "storbench", "run", "/dev/shm", "--size", "16m",
                        "--runtime", "3", "--db", str(db)], check=True, capture_output=True)
        store = Store(db)
        base = store.get_run(1)
        rng = random.Random(1)
        runs = []
        for i in range(RUNS):
            tests = [replace(t, result=replace(t.result, series={
                k: stretched(v, rng) for k, v in t.result.series.items()}))
                for t in base.tests]
            runs.append(replace(base, id=i + 1, label=f"target-{i + 1:02d}", tests=tests))
        build_s, table_s, size = [], [], 0
        for _ in range(5):
            start = time.perf_counter()
            comp = compare(runs)
            comparison_table(comp)
            table_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            comp = compare(runs)
            html = report.render(comp, charts.build(comp))
            build_s.append(time.perf_counter() - start)
            size = len(html.encode())
        b, t = statistics.median(build_s), statistics.median(table_s)
        print(f"report of {RUNS} runs, {len(base.tests)} tests each, {SECONDS} s series:")
        print(f"  build  {b:.2f} s (median of 5; goal < 2 s: {'met' if b < 2 else 'NOT met'})")
        print(f"  size   {size / 1e6:.2f} MB (goal < 5 MB: {'met' if size < 5e6 else 'NOT met'})")
        print(f"  reference: the comparison table alone {t:.3f} s; report/table = {b / t:.0f}x")


if __name__ == "__main__":
    main()
