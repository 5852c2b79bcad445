import subprocess

import pytest

from storbench.errors import ConfigError
from storbench.workload.suites import SUITES, get_suite
from tests.conftest import FIO, needs_fio


def opts(suite, test):
    s = get_suite(suite)
    i = [t.name for t in s.tests].index(test)
    return dict(s.jobfiles()[i][1].effective())[test]


def test_all_suites_present():
    assert set(SUITES) >= {"quick", "dbench", "etcd", "sync-iops", "randrw75", "app-mixed"}


def test_no_suite_uses_gtod_reduce():
    for s in SUITES.values():
        for _, jf in s.jobfiles():
            assert "gtod_reduce" not in jf.render()


def test_quick_is_under_a_minute_of_io():
    total = 0.0
    for _, jf in get_suite("quick").jobfiles():
        for _, o in jf.effective():
            total += float(o["runtime"]) + float(o.get("ramp_time", 0))
    assert total <= 60


def test_etcd_matches_study_3():
    o = opts("etcd", "etcd")
    assert (o["rw"], o["ioengine"], o["fdatasync"], o["bs"], o["size"]) == (
        "write", "sync", "1", "2300", "22m")
    profiles = get_suite("etcd").profiles
    assert profiles["upstream"].assertions == ("etcd.fdatasync.p99 < 10ms",)
    assert profiles["openshift"].assertions == ("etcd.fdatasync.p99 < 20ms",)


def test_etcd_rate_adds_open_loop_copy():
    pairs = get_suite("etcd").jobfiles(rate_iops=150)
    assert [t.name for t, _ in pairs] == ["etcd", "etcd_rated"]
    rated = dict(pairs[1][1].effective())["etcd_rated"]
    # evenly spaced: fio 3.33 pacing these fdatasync'd sync writes by Poisson issued one
    assert rated["rate_iops"] == "150" and rated["rate_process"] == "linear"
    assert rated["fdatasync"] == "1" and rated["bs"] == "2300"


def test_dbench_matches_study_5():
    s = get_suite("dbench")
    assert len(s.tests) == 9
    o = opts("dbench", "read_iops")
    assert (o["bs"], o["iodepth"], o["ramp_time"], o["runtime"], o["size"]) == (
        "4k", "64", "2", "15", "2g")
    seq = opts("dbench", "write_seq")
    assert seq["numjobs"] == "4" and seq["bs"] == "1m" and seq["iodepth"] == "16"
    # 4 jobs share the 2 GiB file, offset_increment apart
    assert seq["size"] == "512m" and seq["offset_increment"] == "512m"
    mix = opts("dbench", "rw_mix")
    assert mix["rwmixread"] == "75" and mix["iodepth"] == "64"
    assert opts("dbench", "read_latency")["iodepth"] == "4"


def test_size_and_runtime_override():
    s = get_suite("dbench")
    jfs = s.jobfiles(size="64m", runtime=1)
    seq = dict(jfs[7][1].effective())["write_seq"]
    assert seq["size"] == "16m" and seq["offset_increment"] == "16m" and seq["runtime"] == "1"
    assert dict(jfs[0][1].effective())["read_iops"]["size"] == "64m"
    assert dict(jfs[0][1].effective())["read_iops"]["ramp_time"] == "2"  # the suite's
    ramped = s.jobfiles(ramp=0)
    assert {dict(jf.effective())[t.name]["ramp_time"] for t, jf in ramped} == {"0"}


def test_other_studies():
    o = opts("sync-iops", "sync_randwrite")
    assert (o["rw"], o["bs"], o["direct"], o["fsync"], o["numjobs"], o["runtime"]) == (
        "randwrite", "4k", "1", "1", "1", "30")
    assert "time_based" in o  # "--runtime=30s": the study ran for 30 s
    o = opts("randrw75", "randrw75")
    assert (o["rw"], o["rwmixread"], o["iodepth"], o["direct"]) == ("randrw", "75", "64", "1")
    o = opts("app-mixed", "app_mixed")
    assert (o["rwmixread"], o["numjobs"], o["iodepth"], o["direct"], o["runtime"]) == (
        "60", "4", "16", "0", "900")
    assert o["filename"] and o["size"] == "10g"  # one shared 10 GiB file, not 4 of them


# Each study's job as context.md quotes it; every option must be in the suite as written
# (gtod_reduce is left out on purpose: it turns off latency).
STUDY_JOBS = {
    ("app-mixed", "app_mixed"): "rw=randrw rwmixread=60 bs=4K direct=0 numjobs=4 time_based"
                                " runtime=900 size=10G ioengine=libaio iodepth=16",
    ("randrw75", "randrw75"): "randrepeat=1 ioengine=libaio direct=1 bs=4k iodepth=64 size=1G"
                              " readwrite=randrw rwmixread=75",
    ("etcd", "etcd"): "rw=write ioengine=sync fdatasync=1 size=22m bs=2300",
    ("sync-iops", "sync_randwrite"): "rw=randwrite bs=4K direct=1 numjobs=1 fsync=1 runtime=30s"
                                     " size=1g time_based",
}


@pytest.mark.parametrize(("suite", "test"), sorted(STUDY_JOBS))
def test_suite_is_the_study_job_line_by_line(suite, test):
    from storbench.workload.sizes import parse_size

    o = opts(suite, test)
    for item in STUDY_JOBS[(suite, test)].split():
        key, _, want = item.partition("=")
        key = {"readwrite": "rw"}.get(key, key)
        assert key in o, (suite, key)
        if not want:
            continue
        got = o[key]
        if key in ("size", "bs"):
            assert parse_size(got) == parse_size(want), (key, got, want)
        elif key == "runtime":
            assert float(got) == float(want.rstrip("s")), (key, got, want)
        else:
            assert got == want, (key, got, want)


def test_provenance_says_where_each_option_comes_from():
    s = get_suite("app-mixed")
    prov = {k: origin for k, _, origin in s.provenance(s.tests[0])}
    assert prov["rwmixread"] == "study 1"
    assert prov["filename"].startswith("study 1 (its 4 jobs shared one 10 GiB file")
    quick = get_suite("quick")
    assert {o for _, _, o in quick.provenance(quick.tests[0])} == {"storbench default"}
    assert "gtod_reduce=1" in (get_suite("randrw75").dropped or {})


def test_unknown_suite_lists_choices():
    with pytest.raises(ConfigError, match="quick"):
        get_suite("nope")


@needs_fio
@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_suite_is_valid_fio(name, tmp_path):
    for _, jf in SUITES[name].jobfiles(rate_iops=100):
        path = tmp_path / "job.fio"
        path.write_text(jf.prepared(tmp_path).render())
        proc = subprocess.run([FIO, "--parse-only", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_a_mixed_test_shows_both_directions_tails():
    """randrw75 had read p99 but no write p99 (app-mixed had both): a built-in test that
    reads and writes and shows one direction's p99 shows both (dbench's mix shows IOPS
    only, as the study's table did)."""
    from storbench.workload.suites import SUITES

    for suite in SUITES.values():
        for t in suite.tests:
            rw = dict(t.options).get("rw", "")
            tails = {"read.clat_p99", "write.clat_p99"} & set(t.metrics)
            if rw in ("randrw", "rw", "readwrite") and tails:
                assert {"read.clat_p99", "write.clat_p99"} <= set(t.metrics), (suite.name, t)


def test_times_and_rates_are_written_as_fio_reads_them():
    """fio drops a fraction of a second ("2.5" and "2.5s" run 2 s) and reads "1e+06" as no
    time: --runtime 2.5 ran 2 s, --runtime 1e9 ran no I/O at all (a row of zeros, stored as
    completed), --rate 1000000 wrote 1 write/s, all labelled as asked."""
    from storbench.workload.sizes import fio_seconds

    assert [fio_seconds(s) for s in (30, 30.0, 2.5, 1e6, 1e9, 0.0004)] == [
        "30", "30", "2500ms", "1000000", "1000000000", "1ms"]
    etcd = get_suite("etcd").jobfiles(size=None, runtime=1e6, rate_iops=1e6)
    rated = dict(etcd[-1][1].effective())["etcd_rated"]
    assert rated["rate_iops"] == "1000000" and rated["runtime"] == "1000000", rated
    steady = get_suite("quick").jobfiles(size=None, runtime=None)[0][1].with_steady_state(
        "iops_slope:0.5%", 2.5, 1e6)
    assert {"ss_dur": "2500ms", "runtime": "1000000"}.items() <= dict(
        steady.effective())["randread"].items()


@needs_fio
def test_a_fractional_runtime_is_run_whole(tmpfs, store_path):
    """--runtime 2.5 on a suite: fio measures 2.5 s (it ran 2 s), and a whole --rate only."""
    import json

    from tests.conftest import run_cli

    proc = run_cli("run", str(tmpfs), "--suite", "sync-iops", "--runtime", "2.5", "--size",
                   "8m", db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_cli("show", "last", "--json", "--raw", db=store_path).stdout)
    assert "runtime=2500ms" in run["job_files"][0]
    assert 2400 <= run["tests"][0]["write"]["runtime_ms"] <= 2700, run["tests"][0]["write"]
    refused = run_cli("run", str(tmpfs), "--suite", "etcd", "--rate", "150.5", db=store_path)
    assert refused.returncode == 2 and "--rate must be a positive whole number" in refused.stderr


@needs_fio
def test_etcd_rated_keeps_a_fast_rate(tmpfs, store_path):
    """--rate 2000 on tmpfs: 2,000 fdatasync'd writes/s for 2 s. Paced by Poisson, fio 3.33
    issued 1 write (stored as 0 IOPS, "the storage could not keep up")."""
    import json

    from tests.conftest import run_cli

    proc = run_cli("run", str(tmpfs), "--suite", "etcd", "--rate", "2000", "--runtime", "2",
                   "--size", "8m", db=store_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads(run_cli("show", "last", "--json", "--raw", db=store_path).stdout)
    rated = next(t for t in run["tests"] if t["name"] == "etcd_rated")
    assert 3600 <= rated["write"]["total_ios"] <= 4400, rated["write"]
    assert rated["sync"]["lat"]["samples"] >= 3600
    assert "rate-not-reached" not in {w["kind"] for w in run["warnings"]}
