"""Does `storbench neighbours` give the victim's p99 a user gets by hand? (#60's truth)

On each shape, R rounds, each of them: `storbench neighbours` (the victim alone, then
beside one aggressor, in one fio) and then the same two jobs started by hand at the same
time as two fio processes, the victim's and the aggressor's, each on its own file. Prints
the victim's p99 beside the aggressor both ways, and their ratio (storbench's over by
hand's), per round and the median. Goal: within ±15%.

Shapes (ext4 on a loop device, tests/testbed.Throttled):
- `cap`: its image in RAM, reads capped at 3,000/s by a blkio cgroup both runs are in;
  4k random reads at 200/s beside a 4k random reader at queue depth 32;
- `ram`: its image in RAM, no cap; the reads beside 1M sequential writes at qd32 (the
  loop device's queue is what they share);
- `disk`: its image on the machine's disk (/var/tmp), no cap; the same jobs as `ram`.

    .venv/bin/python bench/neighbours.py [--rounds 5] [--shapes cap,ram,disk]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.testbed import Throttled  # noqa: E402

STORBENCH = [sys.executable, "-m", "storbench"]
VICTIM = "rw=randread\nbs=4k\niodepth=32\nrate_iops=200\nrate_process=poisson\n"
AGGRESSORS = {"randread": "rw=randread\nbs=4k\niodepth=32\n",
              "seqwrite": "rw=write\nbs=1m\niodepth=32\n"}
SHAPES = {"cap": ("/dev/shm", True, "randread"), "ram": ("/dev/shm", False, "seqwrite"),
          "disk": ("/var/tmp", False, "seqwrite")}


def ours(wrap: Callable[[list[str]], list[str]], mnt: Path, aggressor: str, db: Path) -> float:
    env = {**os.environ, "STORBENCH_DB": str(db)}
    proc = subprocess.run(wrap([*STORBENCH, "neighbours", str(mnt), "--victim", "randread",
                                "--aggressor", aggressor, "--max-aggressors", "1",
                                "--step-time", "5", "--size", "128m"]),
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    shown = subprocess.run([*STORBENCH, "show", "last", "--json"], env=env, check=True,
                           capture_output=True, text=True).stdout
    return float(json.loads(shown)["data"]["neighbours"]["steps"][1]["victims"]["randread"]
                 ["p99_ns"])


def by_hand(wrap: Callable[[list[str]], list[str]], d: Path, aggressor: str) -> float:
    common = (f"[global]\nioengine=libaio\ndirect=1\nsize=128m\ntime_based\nruntime=5\n"
              f"ramp_time=1\nrandrepeat=0\ndirectory={d}\n")
    texts = {"v": f"{common}[v]\n{VICTIM}filename=v.data\n",
             "a": f"{common}[a]\n{AGGRESSORS[aggressor]}filename=a.data\n"}
    for name, text in texts.items():
        (d / f"{name}.fio").write_text(text)
        subprocess.run(["fio", "--create_only=1", str(d / f"{name}.fio")], check=True,
                       capture_output=True)
    started = [subprocess.Popen(wrap(["fio", "--output-format=json", str(d / f"{n}.fio")]),
                                stdout=subprocess.PIPE, text=True) for n in texts]
    out = [p.communicate()[0] for p in started]
    return float(json.loads(out[0])["jobs"][0]["read"]["clat_ns"]["percentile"]["99.000000"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="cap,ram,disk")
    args = parser.parse_args()
    for shape in args.shapes.split(","):
        backing, capped, aggressor = SHAPES[shape]
        ratios = []
        with Throttled(backing_dir=backing, size="1G") as vol, \
                tempfile.TemporaryDirectory() as tmp:
            wrap = vol.wrap if capped else (lambda argv: argv)
            if not capped:  # a cap no run is in: nothing limits the device
                vol.set_limits(10**6, 10**6, 2**40)
            hand = vol.mnt / "by-hand"
            hand.mkdir()
            for r in range(args.rounds):
                a = ours(wrap, vol.mnt, aggressor, Path(tmp) / "results.db")
                b = by_hand(wrap, hand, aggressor)
                ratios.append(a / b)
                print(f"{shape} round {r + 1}: storbench {a / 1e6:.2f} ms, by hand"
                      f" {b / 1e6:.2f} ms, ratio {a / b:.3f}", flush=True)
        print(f"{shape}: median ratio {statistics.median(ratios):.3f} (goal 0.85-1.15),"
              f" {min(ratios):.3f}-{max(ratios):.3f}", flush=True)


if __name__ == "__main__":
    main()
