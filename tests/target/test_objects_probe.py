"""An S3 bucket's requests beside the load (#59): a HEAD and a GET of a probe object and
a LIST of the run's prefix every 0.5 s, idle and while fio PUTs and GETs, against real S3
servers (tests/objects.py); what a request that fails does (counted with its reason,
never timed), caused for real by deleting the probe's object under it."""

from __future__ import annotations

import time

from storbench.execute.probe import PROBE_OBJECT, ObjectProbe
from storbench.execute.s3 import resolve
from storbench.render.terminal import probe_table
from tests.cli.test_cli import show_json
from tests.conftest import run_cli, until
from tests.target.test_objects import _bucket, _cli

LOAD = """\
[global]
bs=64k
size=1m
numjobs=2
[put]
rw=write
filename=obj
[get]
stonewall
rw=randread
filename=obj
time_based
runtime=4
"""


def test_requests_beside_the_load_are_timed_idle_and_under_it(s3, tmp_path):
    bucket = _bucket(s3, f"sbt-probe-{s3.name}")
    job = tmp_path / "load.fio"
    job.write_text(LOAD)
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://{bucket}", "--job", str(job), db=db)  # on by default
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = show_json(db)
    probe = shown["data"]["metadata_probe"]
    assert list(probe) == ["head", "list", "first_byte"]
    for op, by_phase in probe.items():
        # 3 s idle and 4 s of GETs, a round every 0.5 s
        assert by_phase["idle"]["n"] >= 4 and by_phase["load"]["n"] >= 5, (op, by_phase)
        for phase in by_phase.values():
            assert 0 < phase["p50_ns"] <= phase["p99_ns"] <= phase["max_ns"] < 30e9
            assert "failed" not in phase
    # each sample placed in the run (the timeline the report draws)
    timeline = shown["data"]["metadata_probe_timeline"]
    assert {op for op, _, _ in timeline} == {"head", "list", "first_byte"}
    assert "Request latency beside the load (HEAD, LIST of up to 1,000 keys" in proc.stdout
    assert "GET's first byte" in proc.stdout
    compared = run_cli("compare", "last", db=db, env={"COLUMNS": "250"})
    assert "Request latency, idle and under load" in compared.stdout, compared.stdout
    # the probe's object went with the run's others
    assert s3.keys(bucket) == []


def test_no_probe_metadata_turns_the_requests_off(s3, tmp_path):
    bucket = _bucket(s3, f"sbt-noprobe-{s3.name}")
    job = tmp_path / "put.fio"
    job.write_text("[put]\nrw=write\nbs=64k\nsize=256k\nfilename=obj\n")
    db = tmp_path / "r.db"
    proc = _cli(s3, f"s3://{bucket}", "--job", str(job), "--no-probe-metadata", db=db)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = show_json(db)
    assert "metadata_probe" not in shown["data"]
    assert not [p for p in shown["data"]["phases"] if "probe" in p["name"]]
    assert "Request latency" not in proc.stdout


def _count(events: list[tuple[str, float, object]], op: str, since: float = 0.0) -> int:
    """How many of a probe's samples (or failures) are of ``op``, begun at ``since`` or
    later."""
    return sum(1 for o, t, _ in list(events) if o == op and t >= since)


def test_a_request_that_fails_is_counted_with_its_reason_not_timed(s3):
    bucket = _bucket(s3, f"sbt-probefail-{s3.name}")
    endpoint = resolve(s3.url, None, s3.env())
    probe = ObjectProbe(endpoint, bucket, "storbench-u/", interval_s=0.2)
    probe.start("idle")
    idle_at = time.monotonic()  # (the first requests may begin before the phase does)
    assert until(lambda: all(_count(probe.samples, op, idle_at) >= 3
                             for op in ("head", "list", "first_byte")), 30), probe.samples
    assert f"storbench-u/{PROBE_OBJECT}" in s3.keys(bucket)
    probe.start("gone")
    s3.client().delete_object(Bucket=bucket, Key=f"storbench-u/{PROBE_OBJECT}")
    gone_at = time.monotonic()
    # (a second at 0.2 s a round was not always enough beside the other lanes: 2 failed)
    assert until(lambda: all(_count(probe.failed, op, gone_at) >= 3
                             for op in ("head", "first_byte"))
                 and _count(probe.samples, "list", gone_at) >= 3, 30), probe.failed
    probe.close()
    summary = probe.summary()
    for op in ("head", "list", "first_byte"):
        assert summary[op]["idle"]["n"] >= 3 and "failed" not in summary[op]["idle"]
    # without its object, HEAD and GET fail: counted, not timed; LIST goes on
    for op in ("head", "first_byte"):
        gone = summary[op]["gone"]
        assert gone["failed"] >= 3 and "HTTP 404" in gone["failed_why"], gone
        assert gone["n"] <= 1  # (one may have been on its way as the object went)
    assert summary["list"]["gone"]["n"] >= 3 and "failed" not in summary["list"]["gone"]
    rows = {row[0]: row for row in probe_table(summary).rows}
    assert "failed: " in rows["HEAD"][-1] and "gone" in rows["HEAD"][-1]
    assert "failed" not in rows["LIST"][-1]
