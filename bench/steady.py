"""--until-steady against fixed durations, on a volume capped at 3000 IOPS / 125 MiB/s.

Runs, on the same volume: the DBench script's own 9 fio command lines back to back
(2 s ramp + 15 s each, one shared file: the wall time a user of DBench waits, and its
figures), the dbench suite with --until-steady, and a reference with 60 s per test.
Prints the wall-time ratio steady/DBench and each headline figure's deviation from the
DBench script's and from the reference. Goal (#62): at most 1/4 of the DBench script's
wall time, every throughput and mean-latency figure within 3% of the script's.

    sudo .venv/bin/python bench/steady.py [--window 3] [--criterion iops_slope:0.5%]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "src"))
from tests.testbed import Throttled

from storbench.analysis.metrics import metric, value
from storbench.result.model import TestResult


def run(target: Path, db: Path, label: str, *args: str) -> tuple[int, float]:
    env = {**os.environ, "STORBENCH_DB": str(db)}
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "storbench", "run", str(target), "--suite", "dbench",
                    "--size", SIZE, "-l", label, *args], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    shown = subprocess.run([sys.executable, "-m", "storbench", "show", "last", "--json"],
                           check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(shown)["id"], wall


SIZE = "1g"
# DBench's docker-entrypoint.sh, as study 5 ran it (FIO_RAMP_TIME=2s, FIO_RUN_TIME=15s),
# with the same file size as the suite here (offset_increment: a quarter of it)
DBENCH = [
    ("read_iops", "--bs=4K --iodepth=64 --readwrite=randread --gtod_reduce=1"),
    ("write_iops", "--bs=4K --iodepth=64 --readwrite=randwrite --gtod_reduce=1"),
    ("read_bw", "--bs=128K --iodepth=64 --readwrite=randread --gtod_reduce=1"),
    ("write_bw", "--bs=128K --iodepth=64 --readwrite=randwrite --gtod_reduce=1"),
    ("read_latency", "--bs=4K --iodepth=4 --readwrite=randread"),
    ("write_latency", "--bs=4K --iodepth=4 --readwrite=randwrite"),
    ("read_seq", "--bs=1M --iodepth=16 --readwrite=read --thread --numjobs=4"
                 " --offset_increment=256M --size=256M"),
    ("write_seq", "--bs=1M --iodepth=16 --readwrite=write --thread --numjobs=4"
                  " --offset_increment=256M --size=256M"),
    ("rw_mix", "--bs=4k --iodepth=64 --readwrite=randrw --rwmixread=75 --gtod_reduce=1"),
]


def dbench_script(target: Path) -> tuple[float, dict[str, TestResult]]:
    """The 9 commands back to back, as the script runs them; its wall time and each
    command's figures (fio's JSON as storbench reads it: a test's jobs summed)."""
    from storbench.result.fio_json import parse_fio_json

    start = time.monotonic()
    figures = {}
    for name, args in DBENCH:
        size = [] if "--size" in args else [f"--size={SIZE}"]
        out = subprocess.run(["fio", "--randrepeat=0", "--verify=0", "--ioengine=libaio",
                              "--direct=1", f"--name={name}", f"--filename={target / 'fiotest'}",
                              *size, *args.split(), "--time_based", "--ramp_time=2s",
                              "--runtime=15s", "--output-format=json"],
                             check=True, capture_output=True, text=True).stdout
        figures[name] = parse_fio_json(out)[1][0]
    wall = time.monotonic() - start
    (target / "fiotest").unlink()
    return wall, figures


def _pct(deviation: float | None) -> str:
    return "-" if deviation is None else f"{deviation:+.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=float, default=3.0, help="--steady-window seconds")
    ap.add_argument("--criterion", default="iops_slope:0.5%")
    ap.add_argument("--reference-runtime", type=float, default=60.0)
    ap.add_argument("--time-only", action="store_true",
                    help="only the DBench script and --until-steady: the wall-time ratio and"
                         " the figures against the script's")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, Throttled(size="3G") as vol:
        (vol.cgroup / "cgroup.procs").write_text(str(os.getpid()))
        db = Path(d) / "bench.db"
        script_wall, script = dbench_script(vol.mnt)
        print(f"the DBench script (9 fio commands, 2 s + 15 s each): {script_wall:.0f} s",
              flush=True)
        steady_id, steady_wall = run(vol.mnt, db, "steady", "--until-steady", args.criterion,
                                     "--steady-window", f"{args.window:g}", "--runtime", "60")
        print(f"until-steady: {steady_wall:.0f} s ({steady_wall / script_wall:.2f} of the"
              " DBench script's)", flush=True)
        ids, walls = {"steady": steady_id}, {"steady": steady_wall}
        if not args.time_only:
            ids["fixed"], walls["fixed"] = run(vol.mnt, db, "fixed")
            print(f"storbench's dbench suite as published (2 s + 15 s per test):"
                  f" {walls['fixed']:.0f} s", flush=True)
            ids["ref"], walls["ref"] = run(vol.mnt, db, "reference", "--runtime",
                                           f"{args.reference_runtime:g}")
            print(f"reference ({args.reference_runtime:g} s per test): {walls['ref']:.0f} s",
                  flush=True)
        env = {**os.environ, "STORBENCH_DB": str(db)}
        order = [k for k in ("ref", "fixed", "steady") if k in ids]
        comp = json.loads(subprocess.run(
            [sys.executable, "-m", "storbench", "compare", *(str(ids[k]) for k in order),
             "--json"], check=True, capture_output=True, text=True, env=env).stdout)
        run_ = json.loads(subprocess.run([sys.executable, "-m", "storbench", "show",
                                          str(steady_id), "--json"], check=True,
                                         capture_output=True, text=True, env=env).stdout)
    cols = comp["comparison"]["columns"]
    rows = dict(zip(order, (r["values"] for r in comp["comparison"]["rows"]), strict=True))
    ref, fixed, steady = (rows.get(k, [None] * len(cols)) for k in ("ref", "fixed", "steady"))
    print(f"\nwall time until-steady / the DBench script: {steady_wall / script_wall:.2f}"
          " (goal <= 0.25)" + "".join(
              f"; / {what}: {steady_wall / walls[k]:.2f}" for k, what in
              (("fixed", "storbench's fixed suite"), ("ref", "the reference")) if k in walls))
    print(f"{'test':<14} {'figure':<16} {'fixed vs ref':>13} {'steady vs ref':>14}"
          f" {'steady vs script':>17}  stopped")
    stops = {t["name"]: t.get("steady_state") for t in run_["tests"]}
    worst = worst_script = 0.0
    for c, r, f, s in zip(cols, ref, fixed, steady, strict=True):
        if s is None:
            continue
        ss = stops.get(c["test"]) or {}
        theirs = value(script[c["test"]], metric(c["metric"])) if c["test"] in script else None
        dev_s = None if r is None else 100 * (s / r - 1)
        dev_f = None if r is None or f is None else 100 * (f / r - 1)
        dev_script = None if not theirs else 100 * (s / theirs - 1)
        if c["kind"] != "latency" or "mean" in c["metric"]:
            if dev_script is None:  # every such figure is one the script's fio gives
                sys.exit(f"the DBench script's {c['test']} gave no {c['metric']}")
            worst = max(worst, abs(dev_s or 0.0))
            worst_script = max(worst_script, abs(dev_script))
        # (its throughput tests run with gtod_reduce=1: no latency percentiles)
        print(f"{c['test']:<14} {c['metric']:<16} {_pct(dev_f):>13} {_pct(dev_s):>14}"
              f" {_pct(dev_script):>17}  {'attained' if ss.get('attained') else 'NOT attained'}"
              f" after {ss.get('stopped_after_s', 0):.1f} s")
    print(f"\nlargest deviation of a throughput or mean-latency figure: {worst_script:.1f}% from"
          " the DBench script's (goal <= 3%)"
          + ("" if args.time_only else f", {worst:.1f}% from the reference"))


if __name__ == "__main__":
    main()
