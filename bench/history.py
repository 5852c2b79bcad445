"""Does the history stay fast? `storbench history` over a series of 10,000 runs.

Builds a SQLite store with one series of N runs (default 10,000): recorded real fio
output (tests/data/fio/randread.json) replayed, its IOPS varied by ±2% from run to run
and lowered by 30% from run 0.7 N on, as a volume that got slower would be. Then
times, as a user runs them (the median of R rounds, each command once a round):

- `history SERIES --metric randread.read.iops` (the figure and its change points),
- `history SERIES` (every headline figure),
- `history` (the list of series, with each one's last change),

beside the reference `storbench list --limit 1` (storbench's own start and one query)
measured in the same rounds, and prints each as seconds and as a ratio to it: "cold"
with an empty cache of change points and none kept in the store, "warm" with the answer
of the command before it kept, "cold, a used cache" with none kept but 3,900 answers to
other questions in the cache (as one holds after a while: it keeps 4,000; each answer
kept is put beside them), and once more after one run more is stored with
`storbench import` (which keeps its series' answers as it ends, as `run` does, in its
cache and in the store): on the machine that stored it, and on another (its cache empty,
the store's answers read).
Goal: each history command within 1 s at 100,000 runs, cold as well as warm and after a
new run (`check --no-change` within 0.5 s); the change found at run 0.7 N. First, in
this process, E-Divisive means over the N points as storbench finds them
(analysis/edivisive.py) against Otava's own, and whether both find the same. Each run
is stored with an environment, settings and data of the size measured runs keep (a
history reads past them). Building 100,000 runs takes ~5 min (~9 with --tests 5):
--store PATH keeps the store for the next time (the copy timed gets the new run).

    .venv/bin/python bench/history.py [--runs 10000] [--rounds 5] [--postgres URL]
                                      [--store PATH] [--series K] [--tests T]

With --series K the runs are spread over K series ('bench' every K-th run, the others
in K - 1 more), as a team's store of many series is: `history` then lists K series.

With --postgres URL the series is copied there (`storbench db copy`) and timed too.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
RECORDED = ROOT / "tests" / "data" / "fio" / "randread.json"
STORBENCH = [sys.executable, "-m", "storbench"]
GOAL_S = 1.0
GOALS = {"check bench --no-change": 0.5}  # a gate in CI: half the history's second


# what a measured run keeps beside its results (~0.9 KB and ~0.4 KB, as a run on a loop
# volume kept them): a history reads past them, and they are what makes runs' rows wide
ENVIRONMENT = {
    "hostname": "bench", "os": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.18.44",
    "machine": "x86_64", "cpu_count": 2, "cpu_model": "AMD EPYC", "ram_bytes": 25275973632,
    "confinement": "Landlock ABI 7: fio may write only to the run's scratch directory or"
                   " device",
    "target": {"kind": "directory", "path": "/mnt/bench", "mount_point": "/mnt/bench",
               "fs_type": "ext4", "mount_source": "/dev/loop0", "mount_options": "rw,relatime",
               "block_device": {"name": "loop0", "size_bytes": 629145600,
                                "logical_sector_bytes": 512, "physical_sector_bytes": 512,
                                "nr_requests": 128, "rotational": False, "scheduler": "none",
                                "write_cache": "write back", "discard": True,
                                "loop_backing_file": "/var/tmp/bench.img"},
               "free_bytes": 557490176, "total_bytes": 601563136},
    "fio_path": "/usr/bin/fio", "fio_version": "fio-3.33", "storbench_version": "bench"}
# and in its data: the phases it went through and the host's load (pipeline/phases.py:
# ~0.4 KB), beside which a series' applications' answers and curves are found
RUN_DATA = {"phases": [{"name": name, "start_s": start, "end_s": end} for name, start, end in
                       (("probe", 0.0, 0.41), ("layout", 0.41, 2.87), ("precondition", 2.87,
                        2.87), ("measure", 2.87, 13.92), ("cleanup", 13.92, 14.05))],
            "host_load": {"loadavg": [0.52, 0.61, 0.58], "cpus": 2,
                          "cpu_steal_percent": 0.0, "cpu_busy_percent": 51.3}}
SETTINGS = {"suite": "imported", "size": None, "runtime_s": None, "threshold_ms": None,
            "job_file": None, "repeat": 1, "until_steady": None, "assertions": [],
            "rate_iops": None, "profile": None, "workload": "imported:randread"}


def build(db: Path, n: int, series: int = 1, tests: int = 1) -> None:
    """The store of n runs, IOPS dropping at run 0.7 n: in one series 'bench', or with
    ``series`` > 1 each run i in series 'bench' when i is a multiple of it, else in
    'other-(i mod series)' (a team's store: nightly runs of many series, interleaved).
    With ``tests`` > 1 each run holds that many tests (the recorded job again, as
    randread, randread-2, ...: a suite's nightly run), each one's IOPS varied apart."""
    from storbench.result.fio_json import parse_fio_json
    from storbench.result.record import Invocation
    from storbench.store import Store

    doc = json.loads(RECORDED.read_text())
    job = doc["jobs"][0]
    base = job["read"]["iops"]
    doc["jobs"] = [{**json.loads(json.dumps(job)),
                    "jobname": "randread" if t == 0 else f"randread-{t + 1}"}
                   for t in range(tests)]
    drop = int(0.7 * n)
    rng = random.Random(42)
    store = Store(db)
    started = time.perf_counter()
    for i in range(n):
        for each in doc["jobs"]:
            each["read"]["iops"] = base * (0.7 if i >= drop else 1.0) * rng.gauss(1, 0.01)
        raw = json.dumps(doc)
        _, results = parse_fio_json(raw)
        run_id = store.begin_run(uid=f"bench-{i}", suite="imported", target="recorded",
                                 environment=ENVIRONMENT, settings=SETTINGS,
                                 storbench_version="bench",
                                 fio_version=None, origin="imported",
                                 series="bench" if i % series == 0 else f"other-{i % series}")
        store.add_invocation(run_id, Invocation(0, "", raw, 0, "", 1.0), list(enumerate(results)))
        store.finish_run(run_id, "completed", verdicts=[], data=RUN_DATA)
        if (i + 1) % 1000 == 0:
            print(f"  stored {i + 1:,} runs ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr)
    store.close()


# what each series' latest run kept as it ended (cli/trend.refresh), in the machine's
# cache and in the store, for a store built without storbench's runs and imports
KEEP_EVERY_SERIES = """
import sys
from storbench.cli.trend import refresh
from storbench.store import Store
from storbench.store.series import series_last, series_list
store = Store(sys.argv[1])
refresh(store, [store.get_run(series_last(store, name), with_results=False)
                for name, *_ in series_list(store)])
store.close()
"""


def timed(argv: list[str], db: str, cache: str) -> float:
    env = {"STORBENCH_DB": db, "PATH": "/usr/bin:/bin", "COLUMNS": "200",
           "XDG_CACHE_HOME": cache}
    start = time.perf_counter()
    proc = subprocess.run([*STORBENCH, *argv], env={**env, "PYTHONPATH": str(ROOT / "src")},
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0 and not (argv[0] == "check" and proc.returncode == 3):
        sys.exit(f"storbench {' '.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    return elapsed


def measure(db: str, rounds: int, drop_run: int) -> bool:
    import shutil

    commands = {
        "list --limit 1 (reference)": ["list", "--limit", "1"],
        "history bench --metric randread.read.iops":
            ["history", "bench", "--metric", "randread.read.iops"],
        "history bench": ["history", "bench"],
        "history": ["history"],
        # (exit 3: the series' IOPS dropped, at run 0.7 n)
        "check bench --no-change": ["check", "bench", "--no-change"],
    }
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as used:
        # a cache as one in use for a while holds it: 3,900 answers to other questions
        # (it keeps 4,000), which the answers a command keeps are put beside
        other = Path(used) / "storbench" / "changes"
        other.mkdir(parents=True, mode=0o700)
        for i in range(3900):
            (other / f"q{i:024x}-{i:064x}").write_text("[]")
        for _ in range(rounds):
            for name, argv in commands.items():
                for state in ("cold", "warm", "cold, a used cache"):
                    if state.startswith("cold"):
                        shutil.rmtree(Path(cache) / "storbench", ignore_errors=True)
                    if state == "cold, a used cache":
                        shutil.copytree(Path(used) / "storbench", Path(cache) / "storbench")
                    key = name if name.endswith("(reference)") else f"{name} ({state})"
                    times.setdefault(key, []).append(timed(argv, db, cache))
        # a new run, as users add one: `storbench import` keeps its series' answers as
        # it ends (cli/trend.refresh), here and in the store; the questions after it are
        # the ones that count. Every series' answers are kept first, as each series' own
        # latest run kept them (the rounds' last cold question emptied the cache of all
        # but 'bench', and the store kept none yet)
        subprocess.run([sys.executable, "-c", KEEP_EVERY_SERIES, db], check=True,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin",
                            "XDG_CACHE_HOME": cache})
        started = time.perf_counter()
        imported = subprocess.run([*STORBENCH, "import", str(RECORDED), "--series", "bench"],
                                  env={"STORBENCH_DB": db, "PATH": "/usr/bin:/bin",
                                       "XDG_CACHE_HOME": cache,
                                       "PYTHONPATH": str(ROOT / "src")},
                                  capture_output=True, text=True)
        import_s = time.perf_counter() - started
        if imported.returncode != 0:
            sys.exit(f"storbench import failed: {imported.stderr}")
        for name, argv in commands.items():
            if not name.endswith("(reference)"):
                times[f"{name} (after a new run)"] = [timed(argv, db, cache)]
        # and on another machine reading the same store (a CI runner, a dashboard): its
        # cache empty, each question in a new one; the store holds what the import kept
        for name, argv in commands.items():
            if not name.endswith("(reference)"):
                with tempfile.TemporaryDirectory() as elsewhere:
                    times[f"{name} (after a run, another machine)"] = [
                        timed(argv, db, elsewhere)]
    ref = statistics.median(times["list --limit 1 (reference)"])
    ok = True
    for name, ts in times.items():
        t = statistics.median(ts)
        goal = next((g for command, g in GOALS.items() if name.startswith(command)), GOAL_S)
        mark = "" if name.endswith("(reference)") else ("  ok" if t <= goal else "  SLOW")
        ok &= t <= goal or name.endswith("(reference)")  # cold too (the goal)
        print(f"  {name:62} {t:6.2f} s  {t / ref:5.1f}x the reference{mark}")
    print(f"  (the import of that new run took {import_s:.2f} s, its series' change points"
          " found and kept as it ended)")
    env = {"STORBENCH_DB": db, "PYTHONPATH": str(ROOT / "src")}
    found = json.loads(subprocess.run(
        [*STORBENCH, "history", "bench", "--metric", "randread.read.iops", "--json"],
        env=env, capture_output=True, text=True, check=True).stdout)
    runs = [c["run"] for c in found["change_points"]]
    right = runs == [drop_run]
    print(f"  change points at runs {runs}: {'right' if right else 'WRONG'}"
          f" (the drop began at run {drop_run})")
    return ok and right


def detectors(n: int) -> None:
    """E-Divisive means over the n points of the series' IOPS (as build() makes them):
    analysis/edivisive.py against Otava's own compute_change_points, in this process."""
    from otava.analysis import compute_change_points

    from storbench.analysis import edivisive

    rng = random.Random(42)
    drop = int(0.7 * n)
    values = [24_000 * (0.7 if i >= drop else 1.0) * rng.gauss(1, 0.01) for i in range(n)]
    started = time.perf_counter()
    ours = edivisive.compute_change_points(values, 0.001, 0.05)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    theirs, _ = compute_change_points(list(values), window_len=edivisive.WINDOW,
                                      max_pvalue=0.001, min_magnitude=0.05)
    theirs_s = time.perf_counter() - started
    same = [c.index for c in ours] == [c.index for c in theirs]
    print(f"  E-Divisive means over {n:,} points: {ours_s:.2f} s, Otava's own"
          f" {theirs_s:.2f} s ({ours_s / theirs_s:.2f}x); change points"
          f" {'the same' if same else 'DIFFERENT'}: {[int(c.index) for c in ours]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--postgres", metavar="URL", help="also time a PostgreSQL store")
    ap.add_argument("--series", type=int, default=1, metavar="K",
                    help="spread the runs over K series, 'bench' holding every K-th run"
                         " (default: one series of them all)")
    ap.add_argument("--tests", type=int, default=1, metavar="T",
                    help="tests in each run (default 1): a suite's run of 5 (quick) or 9"
                         " (dbench) tests is read as that many rows")
    ap.add_argument("--store", metavar="PATH", type=Path,
                    help="build the store here and keep it (a copy of it is timed); one"
                         " already there of --runs runs is used again")
    args = ap.parse_args()
    for name in ("runs", "rounds", "series", "tests"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be 1 or more, not {getattr(args, name)}")
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "results.db"
        drop = int(0.7 * args.runs)
        if args.store is not None and args.store.exists():
            print(f"using {args.store}", file=sys.stderr)
            import sqlite3

            kept = sqlite3.connect(args.store)
            (runs,), (series,), (tests,) = (kept.execute(q).fetchone() for q in (
                "SELECT count(*) FROM runs", "SELECT count(DISTINCT name) FROM run_series",
                "SELECT count(*) FROM result_figures WHERE run_id = 1"))
            kept.close()
            if (runs, series, tests) != (args.runs, args.series, args.tests):
                sys.exit(f"{args.store} holds {runs:,} runs of {tests} test(s) in {series}"
                         f" series, not {args.runs:,} of {args.tests} in {args.series}:"
                         " another --store PATH")
        else:
            print(f"storing {args.runs:,} runs of {args.tests} test(s) in {args.series}"
                  " series", file=sys.stderr)
            build(args.store or db, args.runs, args.series, args.tests)
        if args.store is not None:
            import shutil

            shutil.copyfile(args.store, db)  # the timed one gets a new run: the kept does not
        # ids start at 1; 'bench' holds runs i = 0, K, 2K, ...: its first at or past the drop
        drop_run = -(-drop // args.series) * args.series + 1
        if args.postgres:  # copied before SQLite's timing adds its new run to it
            print(f"copying the {args.runs:,} runs to PostgreSQL", file=sys.stderr)
            subprocess.run([*STORBENCH, "db", "copy", str(db), args.postgres], check=True,
                           env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
                           stdout=subprocess.DEVNULL)
            # the copy kept its series' answers in the store, for every machine: taken out,
            # so that "cold" is cold there too (else it timed the store's answers read)
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute("DELETE FROM kept_answers")
                # the copy's tables vacuumed and analyzed now, not by the server's
                # autovacuum beside the rounds (it took SQLite's cold list from 0.95 s to
                # 1.07 s)
                conn.execute("VACUUM ANALYZE")
        detectors(args.runs)
        print(f"SQLite, {args.runs:,} runs:")
        ok = measure(str(db), args.rounds, drop_run)
        if args.postgres:
            print(f"PostgreSQL, {args.runs:,} runs:")
            ok &= measure(args.postgres, args.rounds, drop_run)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
