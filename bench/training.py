"""Do the training profiles' estimates agree with DLIO, MLPerf Storage's own benchmark?

For each storage shape (ext4 on loop devices whose reads a blkio cgroup caps at 50, 150
and 400 MB/s, images in RAM so the cap is the only limit; and ``sshfs``: sshfs through a
proxy adding 1 ms each way), and each model (unet3d, resnet50, cosmoflow; MLPerf
Storage's H100 and A100 configurations as DLIO 2.0 ships them, with TensorFlow's data
loader on the CPU), runs:

- DLIO itself (scripts/install-dlio's environment): its data set generated on the volume,
  the page cache dropped, then one epoch with 1, 2, 3 … simulated accelerators (MPI
  ranks, each sleeping the model's computation time a batch) until the accelerator
  utilisation (AU) falls under the model's threshold: the number that passed is DLIO's
  answer (0 when one accelerator already fails), and its AU with one accelerator;
- `storbench run VOLUME --suite MODEL` on the same volume, in the same cgroup: its
  ``accelerators`` (H100) and ``accelerators_a100`` estimates and one H100's AU.

Run by hand, as root, on the test-bed machine:

    .venv/bin/python bench/training.py [--models unet3d,resnet50,cosmoflow]
        [--shapes cap50,cap150,cap400,sshfs] [--accelerators h100,a100] [--markdown]

Goals (issue #61): DLIO's count within ±1 of the estimate (±30% when larger), the
shapes ranked alike, a profile in ≤ 90 s. DLIO runs on 2 cores here: its loader decodes
what it reads, so a volume faster than the CPU can decode is not a storage test (its
ceiling is printed first, on tmpfs, with ``--ceiling``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.testbed import TOOLS, DelayedSSHFS, Throttled, tmpfs  # noqa: E402

from storbench.workload.training import MODELS  # noqa: E402

STORBENCH = [sys.executable, "-m", "storbench"]
DLIO = Path(os.environ.get("STORBENCH_DLIO") or TOOLS / "dlio/venv")
Wrap = Callable[[list[str]], list[str]]
# files in DLIO's data set: enough steps for each of the accelerators tried that the
# batches its loader prefetched during the first step (which DLIO leaves out of the AU:
# about 3) do not make the rest look busier (with 12 steps, 1.4× too busy) (unet3d: 40
# steps of 7 samples at 1; resnet50: 50 steps of 400 at 1, 10 at 5; cosmoflow: 256 at 1,
# 32 at 8)
FILES = {"unet3d": 280, "resnet50": 16, "cosmoflow": 256}
# unet3d's samples (147 MB) and its computation time both divided by this in DLIO: the
# bytes an accelerator needs a second (what the AU follows) are unchanged, and 40 steps
# fit in RAM and in a minute at 50 MB/s (at full size, 41 GB and 14 minutes a try)
SCALE = {"unet3d": 16}
MAX_N = 8


def plain(argv: list[str]) -> list[str]:
    return argv


@contextlib.contextmanager
def shape(name: str) -> Iterator[tuple[Path, Wrap]]:
    """A mounted volume of this shape, and how to run a process so the shape applies."""
    if name.startswith("cap"):
        mbps = int(name[3:])
        with Throttled(1_000_000, 1_000_000, read_bps=mbps * 10**6, size="12G",
                       write_bps=4 * 2**30, backing_dir="/dev/shm") as t:
            yield t.mnt, t.wrap
    elif name == "sshfs":
        with DelayedSSHFS(delay_ms=1) as s:
            yield s.mount(proxied=True), plain
    elif name == "tmpfs":  # RAM: DLIO's own ceiling here (its loader's CPU)
        with tmpfs("8g") as where:
            yield where, plain
    else:
        raise SystemExit(f"unknown shape {name!r}")


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def dlio_args(model: str, acc: str, data: Path, out: Path, files: int) -> list[str]:
    m, k = MODELS[model], SCALE.get(model, 1)
    scaled = [f"++workload.dataset.record_length={m.sample_bytes / k:.0f}",
              f"++workload.dataset.record_length_stdev={m.sample_stdev / k:.0f}",
              f"++workload.train.computation_time={m.compute_s[acc] / k}"] if k > 1 else []
    return [f"workload={model}_{acc}", "++workload.framework=tensorflow",
            "++workload.reader.data_loader=tensorflow", "++workload.workflow.checkpoint=False",
            f"++workload.dataset.data_folder={data}",
            f"++workload.dataset.num_files_train={files}",
            "++workload.train.epochs=1", f"++workload.output.folder={out}", *scaled]


def dlio(argv: list[str], cwd: Path) -> None:
    # DLIO runs tfrecord2idx (scripts/install-dlio) from PATH
    env = {**os.environ, "PATH": f"{DLIO / 'bin'}:{os.environ.get('PATH', '')}"}
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"DLIO failed ({proc.returncode}): {proc.stdout[-1500:]}"
                           f"{proc.stderr[-1500:]}")


def generate(model: str, where: Path, cwd: Path, files: int | None = None) -> Path:
    """DLIO's data set for ``model`` on ``where`` (its size: FILES, or ``files``)."""
    data = where / "dlio-data"
    argv = [str(DLIO / "bin/dlio_benchmark"),
            *dlio_args(model, "h100", data, cwd / "gen", files or FILES[model]),
            "++workload.workflow.generate_data=True", "++workload.workflow.train=False"]
    dlio(argv, cwd)
    return data


def train(model: str, acc: str, data: Path, cwd: Path, wrap: Wrap, n: int,
          files: int | None = None) -> dict[str, float]:
    """One epoch with n simulated accelerators: AU (%), MB/s, samples/s."""
    out = cwd / f"{model}-{acc}-{n}"
    shutil.rmtree(out, ignore_errors=True)
    drop_caches()
    argv = wrap([str(DLIO / "bin/mpiexec"), "-n", str(n), str(DLIO / "bin/dlio_benchmark"),
                 *dlio_args(model, acc, data, out, files or FILES[model]),
                 "++workload.workflow.generate_data=False", "++workload.workflow.train=True"])
    dlio(argv, cwd)
    metric = json.loads((out / "summary.json").read_text())["metric"]
    return {"au": float(metric["train_au_mean_percentage"]),
            "mbps": float(metric["train_io_mean_MB_per_second"]),
            "samples": float(metric["train_throughput_mean_samples_per_second"])}


def fed(model: str, acc: str, data: Path, cwd: Path, wrap: Wrap,
        hint: int) -> tuple[int, dict[int, dict[str, float]]]:
    """DLIO's answer: the most accelerators that keep the AU threshold (trying 1, 2, …
    up to two past the estimate ``hint``), and what each try measured."""
    threshold = 100 * MODELS[model].au
    tried: dict[int, dict[str, float]] = {}
    passed = 0
    for n in range(1, min(MAX_N, hint + 2) + 1):
        tried[n] = train(model, acc, data, cwd, wrap, n)
        if tried[n]["au"] < threshold:
            break
        passed = n
    return passed, tried


def profile(model: str, where: Path, wrap: Wrap,
            db: Path) -> tuple[dict[str, dict[str, float]], float]:
    """storbench's estimates on the same volume (metric -> estimate) and the run's time."""
    env = {**os.environ, "STORBENCH_DB": str(db)}
    start = time.monotonic()
    proc = subprocess.run(wrap([*STORBENCH, "run", str(where), "--suite", model]),
                          capture_output=True, text=True, env=env)
    took = time.monotonic() - start
    if proc.returncode not in (0, 3):
        raise RuntimeError(proc.stderr[-800:])
    shown = json.loads(subprocess.run([*STORBENCH, "show", "last", "--json"], text=True,
                                      capture_output=True, check=True, env=env).stdout)
    return {e["metric"]: e for e in shown["data"]["app"]["estimates"]}, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="unet3d,resnet50,cosmoflow")
    ap.add_argument("--shapes", default="cap50,cap150,cap400")
    ap.add_argument("--accelerators", default="h100,a100")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--no-dlio", action="store_true",
                    help="the profile's estimates alone (one H100's AU too), without DLIO")
    args = ap.parse_args()
    # a SIGTERM unwinds the volumes (unmounted, loop devices and cgroups gone) as Ctrl-C does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not (DLIO / "bin/dlio_benchmark").exists():
        raise SystemExit(f"no DLIO at {DLIO}: run scripts/install-dlio (or set STORBENCH_DLIO)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sb-train-db-") as tmp:
        db, cwd = Path(tmp) / "results.db", Path(tmp)
        for name in args.shapes.split(","):
            for model in args.models.split(","):
                with shape(name) as (where, wrap):
                    est, took = profile(model, where, wrap, db)
                    if args.no_dlio:
                        print(f"{name:<7} {model:<9} "
                              + ", ".join(f"{k} {e['value']:,.1f}" for k, e in est.items())
                              + f"; profile {took:.0f} s", flush=True)
                        continue
                    data = generate(model, where, cwd)
                    for acc in args.accelerators.split(","):
                        key = "accelerators" if acc == "h100" else f"accelerators_{acc}"
                        e = est[key]
                        n, tried = fed(model, acc, data, cwd, wrap, int(e["value"]))
                        one = tried[1]
                        seen = ", ".join(f"{k}: {v['au']:.1f}%" for k, v in tried.items())
                        au = est["au"]["value"] if acc == "h100" else None
                        rows.append((name, model, acc, n, e, one, au, est["mbps"], took))
                        print(f"{name:<7} {model:<9} {acc} DLIO {n} (AU at 1: {one['au']:5.1f}%,"
                              f" {one['mbps']:7,.0f} MB/s)  estimate {e['value']:.0f}"
                              f" ({e['low']:.0f}–{e['high']:.0f})"
                              + (f" (AU at 1: {au:.1f}%)" if au is not None else "")
                              + f", read_many"
                              f" {est['mbps']['value']:7,.0f} MB/s, profile {took:.0f} s;"
                              f" tried {seen}",
                              flush=True)
    if args.markdown:
        print("\n| shape | model | accelerator | DLIO: accelerators at AU ≥ threshold |"
              " estimate (range) | DLIO: AU of 1, its MB/s | profile: AU of 1, MB/s read,"
              " its time |")
        print("|---|---|---|---:|---:|---:|---:|")
        for name, model, acc, n, e, one, au, mbps, took in rows:
            print(f"| {name} | {model} | {acc.upper()} | {n} | {e['value']:.0f}"
                  f" ({e['low']:.0f}–{e['high']:.0f}) | {one['au']:.1f}%, {one['mbps']:,.0f}"
                  f" | {'' if au is None else f'{au:.1f}%, '}{mbps['value']:,.0f}, {took:.0f} s |")


if __name__ == "__main__":
    main()
