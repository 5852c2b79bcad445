"""How long does storbench take to answer? The commands people type many times a day.

Times `--help`, `list`, `show` and `compare` end to end as a user runs them: the
median of N rounds (each command once a round, so that a slow spell of the machine
lands on all alike), wall time and the CPU time the process used. Beside them, as
references measured in the same rounds: `python -c pass` (the floor: the interpreter
alone), the import of click and rich alone (what any CLI built on them pays) and
`import storbench.cli`.
The store holds runs imported from recorded real fio output (tests/data/fio). Goal:
each command within 200 ms.

    .venv/bin/python bench/startup.py [--runs 20] [--load 2]

With ``--load N`` the same rounds run twice: quiet, then beside N busy processes (a
spinning loop each, the machine's cores kept busy as a build or a test suite keeps
them), and both are printed.

Python's byte-code cache must be writable (PYTHONDONTWRITEBYTECODE unset), as it
is on a user's machine: without it every start compiles every module again.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "fio" / "randread.json"
GOAL_S = 0.200


def once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One run of ``argv``: its wall time and the CPU time it used (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def busy(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes spinning on a core each."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="also measure beside N busy processes")
    args = ap.parse_args()
    for load in ([0, args.load] if args.load else [0]):
        spinning = busy(load)
        try:
            print(f"\n== {'quiet' if not load else f'beside {load} busy processes'} ==")
            measure(args.runs)
        finally:
            for proc in spinning:
                proc.kill()
                proc.wait()


def measure(runs: int) -> None:
    py = sys.executable
    storbench = [py, "-m", "storbench"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="sb-startup-") as tmp:
        env["STORBENCH_DB"] = str(Path(tmp) / "results.db")
        for label in ("a", "b", "c"):
            subprocess.run([*storbench, "import", str(RECORDED), "--label", label], env=env,
                           check=True, capture_output=True)
        commands: list[tuple[str, list[str], bool]] = [
            ("python -c pass (floor)", [py, "-c", "pass"], False),
            # what any CLI built on click and rich pays before its own code
            ("import click, rich (ref.)", [py, "-c", "import click, rich.console, rich.table"],
             False),
            ("import storbench.cli", [py, "-c", "import storbench.cli"], False)]
        for name, argv in (("storbench --help", ["--help"]), ("storbench list", ["list"]),
                           ("storbench show last", ["show", "last"]),
                           ("storbench compare 1 2", ["compare", "1", "2"])):
            commands.append((name, [*storbench, *argv], True))
        # in rounds, each command once a round: a slow spell of the machine (a busy
        # neighbour) lands on every command alike, not on whichever ran then
        walls: dict[str, list[float]] = {name: [] for name, _, _ in commands}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in commands}
        for n in range(runs + 1):
            for name, argv, _ in commands:
                wall, cpu = once(argv, env)
                if n:  # the first round warms the caches
                    walls[name].append(wall)
                    cpus[name].append(cpu)
    floor = statistics.median(walls[commands[0][0]])
    print(f"median of {runs} rounds; goal: within {GOAL_S * 1000:.0f} ms (wall)")
    print(f"{'command':<26} {'wall ms':>8} {'cpu ms':>7} {'over floor':>10}  goal")
    for name, _, judged in commands:
        t, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        mark = ("met" if t <= GOAL_S else "MISSED") if judged else ""
        print(f"{name:<26} {t * 1000:8.0f} {cpu * 1000:7.0f} {t / floor:9.1f}×  {mark}")


if __name__ == "__main__":
    main()
