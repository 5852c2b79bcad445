"""Figures that look right and are not (issue #12 items 2 and 3), provoked for real:
a rate the volume cannot keep, a cache answering for a small working set, reads the
device below never saw; and silence on a clean throttled volume."""

from __future__ import annotations

import json

import pytest

from tests.conftest import needs_fio, needs_timing, run_cli, run_cli_wrapped

pytestmark = [needs_fio, needs_timing]  # known truths on capped volumes: alone


def last(db):
    return json.loads(run_cli("show", "last", "--json", db=db).stdout)


def kinds(run, test=None):
    return {w["kind"] for w in run["warnings"] if test is None or w["test"] == test}


def test_a_rate_the_volume_cannot_keep_is_said_everywhere(tmp_path, store_path):
    from tests.testbed import Throttled, missing_for_throttled

    if (reason := missing_for_throttled()) is not None:
        pytest.skip(reason)
    # ~40 synced writes/s at most under a 100-IOPS cap (each write and its journal flush)
    with Throttled(read_iops=100, write_iops=100) as capped:
        proc = run_cli_wrapped(capped.wrap, "run", str(capped.mnt), "--suite", "etcd",
                               "--size", "512k", "--rate", "150", db=store_path)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    run = last(store_path)
    (w,) = [w for w in run["warnings"] if w["kind"] == "rate-not-reached"]
    assert w["test"] == "etcd_rated" and w["details"]["requested"] == 150
    achieved = w["details"]["achieved"]
    assert achieved < 0.95 * 150
    assert f"achieved {achieved:,.1f} of 150 write IOPS requested" in proc.stdout
    assert "saturated" in w["message"]
    assert "(of 150 asked)" in proc.stdout  # in the table
    verdict = next(v for v in run["verdicts"] if "etcd_rated" in v["assertion"])
    assert "not at the requested rate" in verdict["note"]  # in the verdict line
    assert "not at the requested rate: achieved" in proc.stdout
    assert "rate-not-reached" not in kinds(run, "etcd")  # the closed loop asked no rate

    # fio's rate is per job: two jobs asking 100 reads/s each ask 200 of a 100-IOPS cap
    # (before, the 100 both achieved was held against one job's 100: "kept")
    job = tmp_path / "two.fio"
    job.write_text("[two]\nrw=randread\nbs=4k\nsize=4m\ndirect=1\nioengine=psync\n"
                   "numjobs=2\nrate_iops=100\ntime_based\nruntime=3\n")
    with Throttled(read_iops=100, write_iops=100) as capped:
        proc = run_cli_wrapped(capped.wrap, "run", str(capped.mnt), "--job", str(job),
                               db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (w,) = [w for w in last(store_path)["warnings"] if w["kind"] == "rate-not-reached"]
    assert w["details"]["requested"] == 200 and w["details"]["achieved"] < 0.95 * 200
    assert "of 200 read IOPS requested (100 a job × 2)" in " ".join(proc.stdout.split())


def kept_pace(job, tmpfs, store_path, tries: int = 3):
    """``job`` run on tmpfs until this machine's CPU kept fio's pace (no rate-not-reached:
    fio on tmpfs is CPU-bound, and a CI machine beside a Kubernetes node reached 186,746 of
    the 221,403 IOPS fio's pace offers, rightly said not kept); skipped, saying so, if it
    never did in ``tries``."""
    for _ in range(tries):
        proc = run_cli("run", str(tmpfs), "--job", str(job), db=store_path)
        assert proc.returncode == 0, proc.stderr
        run = last(store_path)
        if "rate-not-reached" not in kinds(run):
            return proc, run
    pytest.skip(f"this machine is too busy to keep fio's pace on tmpfs ({tries} runs):"
                f" {[w['message'] for w in run['warnings'] if w['kind'] == 'rate-not-reached']}")


def test_a_rate_fio_ran_faster_than_asked_is_said(tmpfs, tmp_path, store_path):
    """fio times Poisson gaps in whole microseconds: rate_iops=170000 makes 5-µs gaps
    cut to whole µs, 221,403 IOPS; tmpfs keeps up, so the figures are of that rate,
    and said to be. The same rate paced evenly (linear) is kept, and not warned of."""
    job = tmp_path / "fast.fio"
    # psync: libaio on tmpfs peaks near 200,000 IOPS on this 2-core machine (below fio's
    # pace), psync at ~335,000
    body = ("[fast]\nrw=randread\nbs=4k\nsize=64m\ndirect=1\nioengine=psync\n"
            "rate_iops=170000\ntime_based\nruntime=2\n")
    job.write_text(body + "rate_process=poisson\n")
    proc, run = kept_pace(job, tmpfs, store_path)
    (w,) = [w for w in run["warnings"] if w["kind"] == "rate-exceeded"]
    assert w["details"]["achieved"] > 1.2 * 170_000, w  # fio's pace, not the storage
    text = " ".join(proc.stdout.split())
    assert "fio issued I/O faster than asked (fio times Poisson gaps in whole" in text
    assert "for 170,000 IOPS a job it offers 221,403" in text
    assert "of 170,000 asked)" in text  # in the table's cell too
    job.write_text(body + "rate_process=linear\n")
    proc, run = kept_pace(job, tmpfs, store_path)
    assert not kinds(run) & {"rate-exceeded", "rate-not-reached"}, run["warnings"]
    assert run["tests"][0]["read"]["iops"] == pytest.approx(170_000, rel=0.03)


def test_a_small_working_set_on_a_cached_volume_is_flagged(cached_loop_dir, tmp_path,
                                                           store_path):
    job = tmp_path / "seq.fio"
    job.write_text("[seqread]\nrw=read\nbs=1m\nsize=64m\ndirect=1\nioengine=libaio\n"
                   "iodepth=16\ntime_based\nruntime=3\n")
    proc = run_cli("run", str(cached_loop_dir), "--job", str(job), db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = last(store_path)
    (w,) = [w for w in run["warnings"] if w["kind"] == "small-working-set"]
    assert w["details"]["passes"] >= 3
    assert w["details"]["needed_bytes"] == pytest.approx(25 * w["details"]["bw_bytes_per_s"])
    assert "a cache of 64.0 MiB" in proc.stdout and "--size" in w["message"]


def test_buffered_reads_that_never_reach_the_device(disk_dir, tmp_path, store_path):
    job = tmp_path / "buffered.fio"
    # invalidate=0: fio otherwise drops the file's cache at every pass over it
    job.write_text("[cached]\nrw=randread\nbs=4k\nsize=16m\ntime_based\nruntime=3\n"
                   "invalidate=0\n")
    proc = run_cli("run", str(disk_dir), "--job", str(job), db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = last(store_path)
    (w,) = [w for w in run["warnings"] if w["kind"] == "device-not-reached"]
    assert w["details"]["device_ios"] < 0.1 * w["details"]["fio_ios"]
    assert "never reached it" in proc.stdout


def test_a_clean_throttled_volume_is_silent(tmp_path, store_path):
    """A gp3-like volume on the disk. Not the conftest's RAM-backed one: under the cap's
    budget its reads are answered from RAM in ~20 µs, at the cache-in-front limit (both
    local CI runs of 2026-11-26 failed here; the second's: dbench's read_latency, qd4, p30
    19.1 µs), and rightly so, RAM is a cache; a gp3 is not. The disk here answers in
    ~100 µs (p30 116 µs at qd4); its stalls cost throughput, which this test does not
    hold, and raise none of these warnings."""
    from tests.testbed import Throttled, missing_for_throttled

    if (reason := missing_for_throttled()) is not None:
        pytest.skip(reason)
    with Throttled() as throttled:
        _silent(throttled, store_path)


def _silent(throttled, store_path) -> None:
    # dbench's 9 tests: random and sequential, reads and writes, qd4 to qd64, and the
    # read latency test that was answered from RAM. (The default suite ran here too, 27 s
    # of a 22-minute timing tier: its random and sequential shapes are among these; its
    # O_SYNC write test is not, and a sync write is no cache's answer.)
    for suite, size in (("dbench", "512m"),):
        proc = run_cli_wrapped(throttled.wrap, "run", str(throttled.mnt), "--suite", suite,
                               "--size", size, "--runtime", "3", db=store_path)
        assert proc.returncode == 0, proc.stderr
        run = last(store_path)
        found = kinds(run) & {"small-working-set", "device-not-reached", "cache-in-front",
                              "rate-not-reached"}
        assert found == set(), "\n".join(f"{w['message']} {w['details']}"
                                          for w in run["warnings"] if w["kind"] in found)
