"""storbench's charts against fio-plot's, on the same 18 fio runs.

18 real fio runs in bench-fio's layout (randread and randwrite; iodepth 1, 4, 16;
numjobs 1, 2, 4; json+ with per-second logs) on a directory of the disk. Then the
chart set a fio-plot user makes of them, one fio-plot call per chart (2D bars
against queue depth and against numjobs, the 3D chart, the latency histogram, IOPS,
bandwidth and latency lines from the logs, per mode), timed; and storbench's, from
the same folder: `import --label-from filename`, then one `report --png` of the 18
runs (the same kinds of chart and more), timed. Prints both and their ratio.
Goal: storbench in at least 10x less time.

fio-plot is installed into a benchmark-only environment (a venv under
~/.cache/storbench-bench, made with uv from PyPI), never into storbench's.

    .venv/bin/python bench/fioplot.py [--dir /var/tmp] [--runtime 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.pipeline.test_import_folders import bench_fio  # noqa: E402

ENV = Path.home() / ".cache" / "storbench-bench" / "fio-plot"
MODES, DEPTHS, JOBS = ("randread", "randwrite"), (1, 4, 16), (1, 2, 4)
GOAL = 10.0


def fio_plot() -> Path:
    exe = ENV / "bin" / "fio-plot"
    if not exe.exists():
        print(f"installing fio-plot into {ENV} (benchmark only)", file=sys.stderr)
        subprocess.run(["uv", "venv", "--quiet", str(ENV)], check=True)
        subprocess.run(["uv", "pip", "install", "--quiet", "--python",
                        str(ENV / "bin" / "python"), "fio-plot"], check=True)
    return exe


# as on a user's machine: Python's byte-code cache written and used (both tools)
BASE_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], **kw: object) -> float:
    kw.setdefault("env", BASE_ENV)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp", help="where fio's files go (direct I/O)")
    ap.add_argument("--runtime", type=int, default=4,
                    help="seconds per fio run (fio-plot's line charts need 4)")
    args = ap.parse_args()
    exe = fio_plot()
    with tempfile.TemporaryDirectory(prefix="sb-fioplot-", dir=args.dir) as tmp:
        top, data = Path(tmp) / "results", Path(tmp) / "data"
        data.mkdir()
        print(f"making {len(MODES) * len(DEPTHS) * len(JOBS)} fio runs ...", file=sys.stderr)
        for mode in MODES:
            for qd in DEPTHS:
                for jobs in JOBS:
                    bench_fio(top, data, mode, qd, jobs, runtime=args.runtime, fmt="json+")
        shutil.rmtree(data)
        # fio-plot: one call per chart, in its output folder
        out = Path(tmp) / "fio-plot-charts"
        out.mkdir()
        per_mode = []
        for mode in MODES:
            folder = str(top / "target" / mode / "4k")
            common = [str(exe), "-i", folder, "-T", f"{mode} 4k", "-r", mode]
            per_mode += [
                [*common, "-l"],                        # 2D bars against iodepth
                [*common, "-N"],                        # 2D bars against numjobs
                [*common, "-L", "-t", "iops"],          # 3D: iodepth x numjobs
                [*common, "-H", "-d", "1", "-n", "1"],  # latency histogram
                *([*common, "-g", "-t", t, "-d", "1", "4", "16", "-n", "1"]
                  for t in ("iops", "bw", "lat")),      # lines from the logs
            ]
        fio_plot_s = sum(timed(argv, cwd=out) for argv in per_mode)
        theirs = len(list(out.glob("*.png")))
        # storbench: the same folder, one import and one report
        env = {**BASE_ENV, "STORBENCH_DB": str(Path(tmp) / "results.db")}
        storbench = [sys.executable, "-m", "storbench"]
        import_s = timed([*storbench, "import", str(top), "--label-from", "filename"], env=env)
        pngs = Path(tmp) / "storbench-charts"
        report_s = timed([*storbench, "report", *[str(i) for i in range(1, 19)], "-o",
                          str(Path(tmp) / "report.html"), "--png", str(pngs)], env=env)
        html_s = timed([*storbench, "report", *[str(i) for i in range(1, 19)], "-o",
                        str(Path(tmp) / "report2.html")], env=env)
        ours = len(list(pngs.glob("*.png")))
    total = import_s + report_s
    print(f"fio-plot   {len(per_mode)} calls, {theirs} PNG charts: {fio_plot_s:6.1f} s")
    print(f"storbench  import {import_s:.1f} s + report --png {report_s:.1f} s, {ours} PNG"
          f" charts: {total:6.1f} s  (HTML report alone: {html_s:.1f} s)")
    ratio = fio_plot_s / total
    print(f"fio-plot / storbench = {ratio:.1f}x for PNGs, {fio_plot_s / (import_s + html_s):.1f}x"
          f" for the HTML report (goal >= {GOAL:g}x: {'met' if ratio >= GOAL else 'NOT met'}"
          " for PNGs)")


if __name__ == "__main__":
    main()
