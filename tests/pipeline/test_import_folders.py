"""storbench import DIR: a folder of fio results as bench-fio (fio-plot) writes it, real
fio output with its averaged per-second logs, becomes labelled runs with timelines."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from storbench.result.fio_logs import read_series
from tests.conftest import FIO, needs_fio, run_cli

pytestmark = needs_fio

# bench-fio's job: the logs under OUTPUT/MODE-iodepth-Q-numjobs-N, the JSON as
# OUTPUT/MODE-Q-N.json (bench_fio/benchlib/runfio.py)
JOB = """[iotest]
rw={mode}
bs=4k
ioengine=libaio
iodepth={qd}
numjobs={jobs}
direct=1
size=16m
directory={data}
time_based
runtime={runtime}
{grouping}
write_bw_log={out}/{mode}-iodepth-{qd}-numjobs-{jobs}
write_lat_log={out}/{mode}-iodepth-{qd}-numjobs-{jobs}
write_iops_log={out}/{mode}-iodepth-{qd}-numjobs-{jobs}
log_avg_msec={avg}
"""


def bench_fio(top: Path, data: Path, mode: str, qd: int, jobs: int, *, runtime: int = 3,
              avg: int = 1000, grouping: bool = True, fmt: str = "json") -> Path:
    out = top / "target" / mode / "4k"
    out.mkdir(parents=True, exist_ok=True)
    job = out / f"{mode}-{qd}-{jobs}.fio"
    job.write_text(JOB.format(mode=mode, qd=qd, jobs=jobs, data=data, out=out, avg=avg,
                              runtime=runtime, grouping="group_reporting" if grouping else ""))
    result = out / f"{mode}-{qd}-{jobs}.json"
    subprocess.run([FIO, f"--output-format={fmt}", f"--output={result}", str(job)],
                   check=True, capture_output=True)
    job.unlink()  # bench-fio keeps no job file beside its results
    return result


def show(store_path, ref):
    return json.loads(run_cli("show", ref, "--json", db=store_path).stdout)


def test_a_bench_fio_folder_becomes_labelled_runs_with_timelines(tmp_path, tmpfs, store_path):
    top = tmp_path / "results"
    made = [bench_fio(top, tmpfs, mode, qd, 2) for mode in ("randread", "randwrite")
            for qd in (1, 4)]
    (top / "notes.txt").write_text("what we ran, and why\n")
    (top / "target" / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    proc = run_cli("import", str(top), "--label-from", "filename", db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "Skipped 2 file(s)" in proc.stderr and "notes.txt" in proc.stderr
    listed = json.loads(run_cli("list", "--json", db=store_path).stdout)
    assert sorted(r["label"] for r in listed) == sorted(p.stem for p in made)
    for path in made:
        run = show(store_path, next(str(r["id"]) for r in listed if r["label"] == path.stem))
        (test,) = run["tests"]
        direction = "read" if "read" in path.stem else "write"
        series = test["series"][direction]
        assert 2 <= len(series["iops"]) <= 4 and series["t_s"][:2] == [1.0, 2.0]
        # the logs' per-second IOPS (two jobs summed) tell the JSON's story: on average
        # (a median moved with this machine's load, 760,831 against 1,018,665 in a CI run,
        # while the mean and fio's figure are both the I/Os over the same seconds; the
        # mean too by 27% beside the other test lane: 671,590 against 917,684)
        figure = test[direction]["iops"]
        assert statistics.fmean(series["iops"]) == pytest.approx(figure, rel=0.35)
        assert all(v is not None and v > 0 for v in series["clat_mean_ns"])
    shown = run_cli("show", listed[0]["label"] and str(listed[0]["id"]), "--timeline",
                    db=store_path).stdout
    assert "IOPS" in shown


def test_logs_averaged_over_half_seconds_are_one_sample_a_second(tmp_path, tmpfs):
    """log_avg_msec=500: two samples a second per job, averaged (never summed as if they
    were two jobs); fio's timestamps drift past the interval."""
    path = bench_fio(tmp_path, tmpfs, "randread", 2, 2, runtime=4, avg=500)
    out = path.parent
    lines = (out / "randread-iodepth-2-numjobs-2_iops.1.log").read_text().splitlines()
    assert len(lines) >= 7  # fio logged twice a second
    series = read_series(out, "randread-iodepth-2-numjobs-2", 500)["read"]
    assert series.t_s[:4] == [1.0, 2.0, 3.0, 4.0]
    doc = json.loads(path.read_text())
    iops = doc["jobs"][0]["read"]["iops"]
    assert statistics.fmean(series.iops) == pytest.approx(iops, rel=0.25)


def test_plain_json_of_several_jobs_says_its_percentiles_are_absent(tmp_path, tmpfs,
                                                                    store_path):
    plain = bench_fio(tmp_path, tmpfs, "randread", 1, 2, runtime=1, grouping=False)
    proc = run_cli("import", str(plain), "--label-from", "jobname", db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = show(store_path, "last")
    assert run["label"] == "iotest"
    absent = run["environment"]["absent"]
    assert any("plain JSON has no histogram bins" in a and "json+" in a for a in absent), absent
    text = run_cli("show", "last", db=store_path).stdout
    assert "plain JSON has no histogram bins" in text
    # json+ of the same jobs: the percentiles are merged from the bins, nothing absent
    plus = bench_fio(tmp_path / "plus", tmpfs, "randread", 1, 2, runtime=1, grouping=False,
                     fmt="json+")
    assert run_cli("import", str(plus), "--label-from", "dirname", db=store_path
                   ).returncode == 0
    run = show(store_path, "last")
    assert run["label"] == "4k" and run["environment"]["absent"] == []
    assert run["tests"][0]["read"]["clat"]["percentiles_ns"]


def test_a_folder_without_fio_output_imports_nothing_and_says_so(tmp_path, store_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.md").write_text("# nothing here\n")
    proc = run_cli("import", str(tmp_path / "empty"), db=store_path)
    assert proc.returncode == 2 and "no fio output found in" in proc.stderr
    assert "Traceback" not in proc.stderr
