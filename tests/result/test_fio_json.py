"""The parser against JSON that real fio produces here, for several job shapes."""

import json
import math
import re
import subprocess

import pytest

from storbench.errors import FioError
from storbench.result.fio_json import job_entries, load_fio_json, parse_fio_json
from storbench.result.merge import FIO_PERCENTILES, percentiles_from_bins
from storbench.workload.jobfile import parse_jobfile
from tests.conftest import FIO, needs_fio
from tests.workload.test_jobfile import REPORTED

pytestmark = needs_fio

SHAPES = {
    "randread1": "--rw=randread --bs=4k --numjobs=1",
    "write4": "--rw=write --bs=64k --numjobs=4",
    "randrw4": "--rw=randrw --rwmixread=70 --bs=4k --numjobs=4 --iodepth=4 --ioengine=libaio",
    "fsync1": "--rw=randwrite --bs=4k --fsync=1 --numjobs=1",
    "fdatasync4": "--rw=write --bs=2300 --fdatasync=1 --numjobs=4",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """{(shape, format): fio's output text}, from real fio runs on the temp file system."""
    d = tmp_path_factory.mktemp("fio")
    out = {}
    for shape, args in SHAPES.items():
        for fmt in ("json", "json+"):
            cmd = [FIO, f"--name={shape}", f"--directory={d}", "--size=4m", "--runtime=1",
                   f"--output-format={fmt}", *args.split()]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            out[shape, fmt] = proc.stdout
    return out


def fio_jobs(text):
    return load_fio_json(text)["jobs"]


def independent_percentile(jobs, direction, kind, p):
    """Percentile of the union of the jobs' samples, by expanding the bins into a list."""
    samples = []
    for j in jobs:
        if not j[direction][kind]["N"]:
            continue  # a clone that did none of this direction: fio gives min 0 and no bins
        for value, count in j[direction][kind]["bins"].items():
            samples += [int(value)] * count
    samples.sort()
    rank = math.ceil(p / 100 * len(samples))
    return float(samples[max(rank, 1) - 1])


def over_the_longest(jobs, direction, key, runtime_ms=None):
    """The clones' rates summed, each of a clone that ended early (under 98% of the
    longest runtime, or of the job's ``runtime_ms`` where one overran it: on a busy
    machine a clone's runtime of 1 s may be 1.05 s, and the others ran theirs in full)
    over the longest one's window."""
    longest = max(j[direction]["runtime"] for j in jobs)
    whole = 0.98 * min(longest, runtime_ms or longest)
    return sum(j[direction][key] * (j[direction]["runtime"] / longest
                                    if j[direction]["runtime"] < whole else 1)
               for j in jobs)


def test_a_groups_cpu_is_its_jobs_cpu_as_when_reported_one_by_one(tmp_path):
    """The same 4 jobs, reported as a group and one by one: fio's usr_cpu and sys_cpu of a
    group are one job's share (their CPU time over their 4 times summed), of the jobs one
    by one each its own. Both are the 4 jobs' CPU, in percent of one core ('fio's CPU was
    the limit' was a quarter of it for a group)."""
    for grouped in (0, 1):
        cmd = [FIO, f"--directory={tmp_path}", "--output-format=json", "--name=cpu",
               "--rw=randread", "--bs=4k", "--size=8m", "--numjobs=4", "--time_based",
               "--runtime=1", f"--group_reporting={grouped}"]
        text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        entries = load_fio_json(text)["jobs"]
        assert len(entries) == (1 if grouped else 4)
        (r,) = parse_fio_json(text)[1]
        assert r.jobs == 4
        # (one run's CPU against another's varies by 2x and more on a busy machine: each
        # is judged against its own fio figures)
        weight = 4 if grouped else 1
        assert r.usr_cpu_percent == pytest.approx(weight * sum(j["usr_cpu"] for j in entries))
        assert r.sys_cpu_percent == pytest.approx(weight * sum(j["sys_cpu"] for j in entries))


def test_each_hosts_group_is_its_jobs(tmp_path, fio_servers):
    """Two fio servers (fio's client/server), 4 jobs each: reported one by one, 8 entries;
    as a group on each host (group_reporting, as --until-steady on --hosts makes them), an
    entry a host. Both are 8 jobs, and a group's CPU its 4 jobs': the groups were said to
    be 2 jobs (the hosts), with a quarter of their CPU."""
    servers = fio_servers(2)
    for grouped in (0, 1):
        job = tmp_path / f"cpu{grouped}.fio"
        job.write_text(f"[cpu]\ndirectory={tmp_path}\nrw=randread\nbs=4k\nsize=8m\n"
                       f"numjobs=4\ntime_based\nruntime=1\ngroup_reporting={grouped}\n")
        clients = [a for h in servers.hosts.split(",")
                   for a in (f"--client={h.replace(':', ',')}", str(job))]
        text = subprocess.run([FIO, "--output-format=json", *clients], capture_output=True,
                              text=True, check=True).stdout
        entries = [j for j in load_fio_json(text)["client_stats"]
                   if j["jobname"] != "All clients"]
        assert len(entries) == (2 if grouped else 8)
        (r,) = parse_fio_json(text)[1]
        assert r.jobs == 8
        weight = 4 if grouped else 1  # (each run against its own fio figures, as above)
        assert r.usr_cpu_percent == pytest.approx(weight * sum(j["usr_cpu"] for j in entries))


@pytest.mark.parametrize("text, entries", REPORTED)
def test_a_job_files_entries_hold_the_jobs_fio_says_they_hold(text, entries, tmp_path):
    """Each job file of tests/workload/test_jobfile.py run by real fio: the jobs it says
    each entry of its report holds ("jobs=N", in its normal output beside the JSON) are
    JobFile.reported's, and a result's jobs and CPU are counted from them: `[a]
    numjobs=2 [b] numjobs=2` under group_reporting was 2 jobs with half their CPU."""
    job = tmp_path / "groups.fio"
    job.write_text(f"[global]\ndirectory={tmp_path}\nsize=1m\nrw=read\nbs=64k\n{text}")
    out = subprocess.run([FIO, "--output-format=json,normal", str(job)], capture_output=True,
                         text=True, check=True).stdout
    said = [int(n) for n in re.findall(r"\(groupid=\d+, jobs=(\d+)\)", out)]
    doc = out[:out.index("\n}") + 2]  # (the JSON first, then the normal output)
    layout = parse_jobfile(job.read_text()).reported()
    assert said == entries == [n for _, n in layout]
    # (fio's JSON holds an entry more, empty, for a stats=0 job that is not grouped)
    fios = job_entries(load_fio_json(doc))
    assert [j["jobname"] for j in fios] == [name for name, _ in layout]
    found = parse_fio_json(doc, {"": layout})[1]
    assert sum(r.jobs for r in found) == sum(entries)
    fio_cpu = {}  # each entry's own (one job's share) times its jobs, by name
    for j, n in zip(fios, entries, strict=True):
        fio_cpu[j["jobname"]] = fio_cpu.get(j["jobname"], 0.0) + n * j["usr_cpu"]
    assert {r.name: r.usr_cpu_percent for r in found} == pytest.approx(fio_cpu)


def test_clones_that_end_early_count_over_the_longest_one_s_time(tmp_path):
    """Two clones read at 16 MiB/s each, one 4 MiB, the other 32 MiB: the first ends after
    a quarter second, the second after two. Together they read 36 MiB in 2 s: 18 MiB/s,
    as fio's own group line says, not the 32 MiB/s their rates add up to."""
    cmd = [FIO, f"--directory={tmp_path}", "--output-format=json+", "--group_reporting=0",
           "--rw=read", "--bs=64k", "--rate=16m", "--name=pair", "--size=4m",
           "--name=pair", "--size=32m"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    (r,) = parse_fio_json(text)[1]
    assert r.jobs == 2
    assert r.read.bw_bytes_per_s == pytest.approx(36 * 2**20 / 2, rel=0.05)
    assert r.read.iops == pytest.approx(36 * 16 / 2, rel=0.05)
    group = load_fio_json(text)["jobs"]
    assert sum(j["read"]["bw_bytes"] for j in group) == pytest.approx(32 * 2**20, rel=0.05)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_one_result_per_job_name_with_sums(outputs, shape):
    text = outputs[shape, "json+"]
    version, results = parse_fio_json(text)
    assert version.startswith("fio-3")
    assert [r.name for r in results] == [shape]
    r = results[0]
    jobs = fio_jobs(text)
    assert r.jobs == len(jobs) == int(SHAPES[shape].split("--numjobs=")[1].split()[0])
    for name in ("read", "write"):
        fio_ios = sum(j[name]["total_ios"] for j in jobs)
        d = r.direction(name)
        if fio_ios == 0:
            assert d is None
            continue
        assert d.total_ios == fio_ios
        # the outputs' runtime=1: a clone's runtime past it is an overrun, not the window
        assert d.iops == pytest.approx(over_the_longest(jobs, name, "iops", 1000))
        assert d.bw_bytes_per_s == pytest.approx(over_the_longest(jobs, name, "bw_bytes", 1000))
        assert d.io_bytes == sum(j[name]["io_bytes"] for j in jobs)
        assert d.clat.samples == sum(j[name]["clat_ns"]["N"] for j in jobs)
        # a clone that did none of this direction (on a busy machine, 1 s of randrw4 may
        # read 8 blocks in all) has fio's min 0: it is no latency and counts for nothing
        did = [j for j in jobs if j[name]["clat_ns"]["N"]]
        assert d.clat.min_ns == min(j[name]["clat_ns"]["min"] for j in did)
        assert d.clat.max_ns == max(j[name]["clat_ns"]["max"] for j in did)
        weighted = sum(j[name]["clat_ns"]["mean"] * j[name]["clat_ns"]["N"] for j in did)
        assert d.clat.mean_ns == pytest.approx(weighted / d.clat.samples)


def test_a_clone_that_did_none_of_a_direction_counts_for_nothing_in_it(tmp_path):
    """Two jobs of one name, one only reading and one only writing (as a clone of randrw
    that got no read in its second does): each direction is the other job's alone, its
    minimum not fio's 0 of the job that did none, its percentiles that job's own."""
    cmd = [FIO, f"--directory={tmp_path}", "--output-format=json+", "--size=1m",
           "--bs=4k", "--name=both", "--rw=randread", "--name=both", "--rw=randwrite"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    (r,) = parse_fio_json(text)[1]
    reader, writer = fio_jobs(text)
    assert writer["read"]["clat_ns"]["min"] == 0 and "bins" not in writer["read"]["clat_ns"]
    for name, job in (("read", reader), ("write", writer)):
        d = r.direction(name)
        own = job[name]["clat_ns"]
        assert d.total_ios == job[name]["total_ios"] == 256
        assert d.clat.samples == own["N"]
        assert d.clat.min_ns == own["min"] > 0
        assert d.clat.max_ns == own["max"]
        assert d.clat.percentiles_ns == {float(k): float(v) for k, v in own["percentile"].items()}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_merged_percentiles_match_independent_merge(outputs, shape):
    text = outputs[shape, "json+"]
    jobs = fio_jobs(text)
    r = parse_fio_json(text)[1][0]
    checked = 0
    for name, d in r.directions():
        for p in (50.0, 90.0, 95.0, 99.0, 99.9, 99.99):
            assert d.clat.percentile(p) == independent_percentile(jobs, name, "clat_ns", p)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("shape", ["randread1", "fsync1"])
def test_single_job_percentiles_equal_fios_own(outputs, shape):
    text = outputs[shape, "json+"]
    job = fio_jobs(text)[0]
    r = parse_fio_json(text)[1][0]
    for name, d in r.directions():
        fio = {float(k): float(v) for k, v in job[name]["clat_ns"]["percentile"].items()}
        assert d.clat.percentiles_ns == fio
        bins = {int(k): v for k, v in job[name]["clat_ns"]["bins"].items()}
        assert percentiles_from_bins(bins, FIO_PERCENTILES) == fio


@pytest.mark.parametrize("shape", ["fsync1", "fdatasync4"])
def test_sync_latency(outputs, shape):
    text = outputs[shape, "json+"]
    jobs = fio_jobs(text)
    r = parse_fio_json(text)[1][0]
    assert r.sync is not None
    assert r.sync.calls == sum(j["sync"]["lat_ns"]["N"] for j in jobs) > 0
    for p in (50.0, 99.0, 99.9):
        samples = []
        for j in jobs:
            for v, c in j["sync"]["lat_ns"]["bins"].items():
                samples += [int(v)] * c
        samples.sort()
        assert r.sync.lat.percentile(p) == samples[math.ceil(p / 100 * len(samples)) - 1]


def test_plain_json_single_job_keeps_fio_percentiles(outputs):
    text = outputs["randread1", "json"]
    job = fio_jobs(text)[0]
    d = parse_fio_json(text)[1][0].read
    assert d.clat.bins == {}
    assert d.clat.percentile(99.0) == float(job["read"]["clat_ns"]["percentile"]["99.000000"])


def test_plain_json_many_jobs_never_averages_percentiles(outputs):
    d = parse_fio_json(outputs["write4", "json"])[1][0].write
    assert d.clat.percentiles_ns == {}  # absent: cannot be merged without bins
    assert d.clat.samples > 0


def test_other_fields(outputs):
    r = parse_fio_json(outputs["randrw4", "json+"])[1][0]
    assert r.error == 0
    assert r.usr_cpu_percent >= 0 and r.sys_cpu_percent > 0
    assert sum(r.iodepth_percent.values()) == pytest.approx(100, abs=1)
    assert r.options["rw"] == "randrw"
    assert r.read.runtime_ms > 0 and r.read.slat is not None


def test_round_trip_through_dict(outputs):
    r = parse_fio_json(outputs["fdatasync4", "json+"])[1][0]
    from storbench.result.model import TestResult

    again = TestResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again == r


def test_text_before_json_is_skipped(outputs):
    text = "fio: some warning {not json}\n" + outputs["randread1", "json+"]
    assert parse_fio_json(text)[1][0].name == "randread1"


@pytest.mark.parametrize("text", ["", "fio: error only\n", '{"a": 1}'])
def test_no_json_is_an_error(text):
    with pytest.raises(FioError, match="no JSON"):
        parse_fio_json(text)


def test_a_bare_nan_of_fios_is_read_not_refused():
    """fio 3.33 writes a steady-state slope over one sample as ``-nan`` (recorded real
    output, tests/data/fio/steady-nan.json): the run's results were refused as 'no JSON
    result'. The number reads as NaN; a quoted "-nan%" stays text."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "data" / "fio" / "steady-nan.json"
            ).read_text()
    assert '"slope" : -nan' in text
    doc = load_fio_json(text)
    [job] = doc["jobs"]
    assert math.isnan(job["steadystate"]["slope"])
    assert job["steadystate"]["criterion"] == "-nan%"
    [result] = parse_fio_json(text)[1]
    assert result.name == "steady" and result.read is not None and result.read.iops > 0
    assert result.steady_state is not None and result.steady_state.window_s == 1


def test_a_string_holding_nan_in_good_json_is_left_as_it_is(outputs):
    text = outputs["randread1", "json+"].replace('"jobname" : "randread1"',
                                                  '"jobname" : "rate: nan"', 1)
    assert '"rate: nan"' in text
    assert load_fio_json(text)["jobs"][0]["jobname"] == "rate: nan"


def test_time_based_clones_that_overran_are_summed_as_they_are():
    """Four hosts each ran a time-based test for its 1 s; on a busy machine one took
    1,050 ms to stop. None ended early: their rates are summed as they are (a CI run's
    aggregate was 3.4% under the hosts' sum, the overrun taken for the others' early
    end). A size-bound clone within a longer runtime= still counts over the longest."""
    from storbench.result.fio_json import aggregate

    def job(runtime_ms: int, iops: float) -> dict:
        return {"jobname": "randread", "job options": {"runtime": "1", "time_based": "1"},
                "read": {"iops": iops, "bw_bytes": iops * 4096, "runtime": runtime_ms,
                         "total_ios": int(iops * runtime_ms / 1000),
                         "io_bytes": int(iops * runtime_ms / 1000) * 4096}}

    jobs = [job(1000, 100.0), job(1001, 110.0), job(1050, 120.0), job(1002, 130.0)]
    assert aggregate("randread", jobs).read.iops == pytest.approx(460.0)
    assert aggregate("randread", jobs, {"runtime": "1000ms"}).read.iops == pytest.approx(460.0)
    for j in jobs:  # size-bound within runtime=10: the 1,000 ms ones ended early
        j["job options"] = {"runtime": "10"}
    assert aggregate("randread", jobs).read.iops == pytest.approx(
        (100 * 1000 + 110 * 1001 + 1002 * 130) / 1050 + 120)
