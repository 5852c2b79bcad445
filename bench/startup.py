"""How long does storbench take to answer? The commands people type many times a day.

Times `--help`, `list`, `show`, `compare` (and `import` of one file) end to end as
a user runs them, the median of N runs each, beside `python -c pass` (the floor: the
interpreter alone) and `import storbench.cli`, and the import of click and rich
alone (what any CLI built on them pays) as a reference measured in the same run.
The store holds runs imported from recorded real fio output (tests/data/fio). Goal:
each command within 200 ms.

    .venv/bin/python bench/startup.py [--runs 20]

Python's byte-code cache must be writable (PYTHONDONTWRITEBYTECODE unset), as it
is on a user's machine: without it every start compiles every module again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "fio" / "randread.json"
GOAL_S = 0.200


def timed(argv: list[str], env: dict[str, str], runs: int) -> float:
    """The median wall time of ``argv`` over ``runs`` runs (after one warm-up run)."""
    took = []
    for n in range(runs + 1):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
        if n:
            took.append(elapsed)
    return statistics.median(took)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    py = sys.executable
    storbench = [py, "-m", "storbench"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="sb-startup-") as tmp:
        env["STORBENCH_DB"] = str(Path(tmp) / "results.db")
        for label in ("a", "b", "c"):
            subprocess.run([*storbench, "import", str(RECORDED), "--label", label], env=env,
                           check=True, capture_output=True)
        floor = timed([py, "-c", "pass"], env, args.runs)
        rows = [("python -c pass (floor)", floor, False)]
        # what any CLI built on click and rich pays before its own code
        rows.append(("import click, rich (ref.)", timed(
            [py, "-c", "import click, rich.console, rich.table"], env, args.runs), False))
        rows.append(("import storbench.cli", timed([py, "-c", "import storbench.cli"], env,
                                                   args.runs), False))
        for name, argv in (("storbench --help", ["--help"]), ("storbench list", ["list"]),
                           ("storbench show last", ["show", "last"]),
                           ("storbench compare 1 2", ["compare", "1", "2"]),
                           ("storbench import FILE", ["import", str(RECORDED)])):
            rows.append((name, timed([*storbench, *argv], env, args.runs), name != (
                "storbench import FILE")))
    print(f"median of {args.runs} runs each; goal: within {GOAL_S * 1000:.0f} ms")
    print(f"{'command':<26} {'ms':>6} {'over floor':>10}  goal")
    for name, t, judged in rows:
        mark = ("met" if t <= GOAL_S else "MISSED") if judged else ""
        print(f"{name:<26} {t * 1000:6.0f} {t / floor:9.1f}×  {mark}")


if __name__ == "__main__":
    main()
