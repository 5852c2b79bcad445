"""AI-training profiles (`run --suite unet3d|resnet50|cosmoflow`): the suites run for
real, their answers stored, shown and gated on; on a volume whose reads are capped the
answer follows the cap; and DLIO itself, MLPerf Storage's benchmark, agrees on one
shape (bench/training.py does all shapes and models by hand)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from storbench.pipeline.kinds.app import ANSWERS
from storbench.workload.training import MODELS
from tests.conftest import IS_ROOT, needs_alone, needs_fio, run_cli, run_cli_wrapped
from tests.testbed import TOOLS

ROOT = Path(__file__).resolve().parent.parent.parent
DLIO = Path(os.environ.get("STORBENCH_DLIO") or TOOLS / "dlio/venv")


def shown(db: Path) -> dict:
    return json.loads(run_cli("show", "last", "--json", db=db).stdout)


def test_what_an_accelerator_needs_is_mlperf_s_own_figure():
    """Each H100 running unet3d takes a batch of 7 samples of 146.6 MB every 0.323 s: ≈ 3.2
    GB/s busy all the time (issue #61's table), 90% of it at MLPerf's threshold; cosmoflow's
    threshold is 70%."""
    unet3d = MODELS["unet3d"]
    assert unet3d.need("h100") / unet3d.au == pytest.approx(3.18e9, rel=0.01)
    assert unet3d.need("a100") == pytest.approx(0.9 * 7 * 146600628 / 0.636)
    assert MODELS["cosmoflow"].au == 0.70 and MODELS["resnet50"].au == 0.90
    # the file sizes' range has the samples' mean and deviation (uniform: half-width √3 σ)
    lo, hi = (int(x[:-1]) * 1024 for x in unet3d.filesize().split("-"))
    assert (lo + hi) / 2 == pytest.approx(146600628, rel=0.001)
    assert (hi - lo) / 12 ** 0.5 == pytest.approx(68341808, rel=0.001)
    assert MODELS["resnet50"].filesize() == f"{round(1251 * 114660.07 / 4096) * 4}k"


@needs_fio
@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_training_profile_answers_in_accelerators(model, tmpfs, store_path):
    # each file 16 MiB (cosmoflow's 1 MiB: it reads 96 a thread) in the 512 MiB tmpfs
    size = "1m" if model == "cosmoflow" else "16m"
    proc = run_cli("run", str(tmpfs), "--suite", model, "--runtime", "2", "--size", size,
                   db=store_path)
    assert proc.returncode in (0, 3), proc.stderr
    answer = shown(store_path)["data"]["app"]
    assert answer["profile"] == model and answer["validated"]  # against DLIO: docs/training.md
    assert answer["verdict"] in proc.stdout
    estimates = {e["metric"]: e for e in answer["estimates"]}
    assert set(estimates) == {"accelerators", "accelerators_a100", "au", "mbps", "samples",
                              "checkpoint_write", "checkpoint_read"}
    # what `storbench suites MODEL` lists for --assert and history is what the judge gives
    assert [(e["metric"], e["label"], e["unit"]) for e in answer["estimates"]] == list(
        ANSWERS[model])
    for e in estimates.values():
        assert e["low"] <= e["value"] <= e["high"] and e["unit"] and e["decided_by"], e
    # whole accelerators, from the 16 readers' throughput over what one needs
    m = MODELS[model]
    mbps = estimates["mbps"]["value"] * 1e6
    assert estimates["accelerators"]["value"] == int(mbps / m.need("h100") + 1e-9)
    assert estimates["accelerators_a100"]["value"] == int(mbps / m.need("a100") + 1e-9)
    assert estimates["samples"]["value"] == pytest.approx(mbps / m.sample_bytes)
    # whole accelerators: "4 (3–5) accelerators" or "4 accelerators", never "22.0"
    acc = estimates["accelerators"]
    span = f" ({acc['low']:,.0f}–{acc['high']:,.0f})" if acc["low"] != acc["high"] else ""
    assert f" {acc['value']:,.0f}{span} accelerators" in proc.stdout, proc.stdout
    assert list(tmpfs.iterdir()) == []
    # gated on by name, with a unit where the figure has one; a wrong unit is refused
    ok = run_cli("check", "last", "--assert", f"{model}.accelerators >= 0",
                 "--assert", f"{model}.checkpoint_write <= 60s", db=store_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"PASS {model}.accelerators >= 0: estimated " in ok.stdout
    too_many = run_cli("check", "last", "--assert", f"{model}.accelerators >= 100000",
                       db=store_path)
    assert too_many.returncode == 3 and "FAIL" in too_many.stdout
    wrong = run_cli("check", "last", "--assert", f"{model}.checkpoint_read <= 5MB",
                    db=store_path)
    assert wrong.returncode == 2
    assert "seconds per GB is in s/GB; use ns, us, µs, ms, s" in wrong.stderr, wrong.stderr


@needs_fio
@needs_alone
@pytest.mark.skipif(not IS_ROOT, reason="throttled volumes need root")
def test_on_a_volume_capped_at_60_mb_s_the_answer_follows_the_cap(store_path):
    """Reads capped at 60 MB/s (writes not): the profile reads ~60 MB/s, so one H100
    on cosmoflow (808 MB/s to be busy all the time) is busy ~7% of the time and no
    accelerator is fed; the checkpoint reads back at ~17 s/GB."""
    from tests.testbed import Throttled, missing_for_throttled

    if reason := missing_for_throttled():
        pytest.skip(reason)
    with Throttled(1_000_000, 1_000_000, read_bps=60 * 10**6, size="4G",
                   write_bps=2 * 2**30, backing_dir="/dev/shm") as t:
        proc = run_cli_wrapped(t.wrap, "run", str(t.mnt), "--suite", "cosmoflow",
                               "--runtime", "5", db=store_path)
        assert proc.returncode in (0, 3), proc.stderr
    e = {e["metric"]: e for e in shown(store_path)["data"]["app"]["estimates"]}
    assert 50 <= e["mbps"]["value"] <= 66, e["mbps"]
    assert e["accelerators"]["value"] == e["accelerators_a100"]["value"] == 0
    assert e["au"]["value"] == pytest.approx(100 * e["mbps"]["value"] / 808.1, rel=0.25)
    assert 15 <= e["checkpoint_read"]["value"] <= 20, e["checkpoint_read"]
    # writes are not capped, so their figure is the write test's own, not the read cap's:
    # seconds per GB from checkpoint_write's bandwidth (buffered writes and their fsync
    # through the loop device: 1.2 s/GB quiet, 7.0 on a busy machine and 13.8 on a CI
    # machine with Kubernetes beside, so no bound on the figure itself holds everywhere)
    tests = {t["name"]: t for t in shown(store_path)["tests"]}
    written = tests["checkpoint_write"]["write"]["bw_bytes_per_s"]
    assert e["checkpoint_write"]["value"] == pytest.approx(1e9 / written, rel=1e-6)
    read_back = tests["checkpoint_read"]["read"]["bw_bytes_per_s"]
    assert e["checkpoint_read"]["value"] == pytest.approx(1e9 / read_back, rel=1e-6)
    assert "one H100 would be busy" in shown(store_path)["data"]["app"]["verdict"]


@needs_fio
@needs_alone
@pytest.mark.skipif(not IS_ROOT, reason="throttled volumes need root")
def test_dlio_itself_agrees_on_a_volume_capped_at_100_mb_s(store_path, tmp_path):
    """MLPerf Storage's own benchmark (DLIO 2.0, scripts/install-dlio) on the same
    volume: cosmoflow with one simulated H100. DLIO's accelerator is busy the share of
    the time the profile says (within a quarter), and both say no H100 is fed."""
    from tests.testbed import Throttled, missing_for_throttled

    if reason := missing_for_throttled():
        pytest.skip(reason)
    if not (DLIO / "bin/dlio_benchmark").exists():
        missing = f"DLIO is not installed at {DLIO} (scripts/install-dlio)"
        if os.environ.get("STORBENCH_REQUIRE_SERVICES") == "1":  # install-testbed installs it
            pytest.fail(missing)
        pytest.skip(missing)
    sys.path.insert(0, str(ROOT))
    from bench import training as harness

    harness.DLIO = DLIO
    with Throttled(1_000_000, 1_000_000, read_bps=100 * 10**6, size="4G",
                   write_bps=2 * 2**30, backing_dir="/dev/shm") as t:
        proc = run_cli_wrapped(t.wrap, "run", str(t.mnt), "--suite", "cosmoflow",
                               "--runtime", "5", db=store_path)
        assert proc.returncode in (0, 3), proc.stderr
        data = harness.generate("cosmoflow", t.mnt, tmp_path, files=128)
        real = harness.train("cosmoflow", "h100", data, tmp_path, t.wrap, 1, files=128)
    e = {e["metric"]: e for e in shown(store_path)["data"]["app"]["estimates"]}
    assert real["au"] == pytest.approx(e["au"]["value"], rel=0.25), (real, e["au"])
    assert real["mbps"] == pytest.approx(e["mbps"]["value"], rel=0.25), (real, e["mbps"])
    fed = 1 if real["au"] >= 70 else 0
    assert fed == e["accelerators"]["value"] == 0
