"""The time-series exports (OpenMetrics, InfluxDB line protocol, NDJSON) read back by
the real tools: promtool and a Prometheus over the blocks it backfilled, InfluxDB 1.x."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from storbench.analysis.compare import compare
from storbench.analysis.summary import summarize
from storbench.render.formats import FORMATS
from storbench.render.openmetrics import text
from storbench.render.samples import end_seconds
from storbench.result.record import Warning
from tests import services
from tests.store.test_sqlite import add_run

TRICKY = 'gp3 "fast", {x}=1\nsecond line \\ end'


@pytest.fixture
def runs(store, fio_json_text):
    a = add_run(store, fio_json_text, label=TRICKY)
    b = add_run(store, fio_json_text, label="io2")
    said = Warning("rate-not-reached", "mix", "mix: achieved 90 of 150 write IOPS", {})
    return [store.get_run(a), replace(store.get_run(b), warnings=[said, said])]


def exported(runs, fmt: str) -> str:
    return FORMATS[fmt](compare(runs, None))


def test_every_figure_is_a_sample_in_base_units(runs):
    om = exported(runs, "openmetrics")
    assert om.endswith("# EOF\n")
    assert "# UNIT storbench_latency_seconds seconds" in om
    rows = {(r.test, r.direction): r for r in summarize(runs[1])}
    assert rows  # the fio run has read, write and sync rows
    for (test, direction), row in rows.items():
        lines = [line for line in om.splitlines() if 'label="io2"' in line
                 and f'test="{test}"' in line and f'direction="{direction}"' in line]
        if row.iops is not None:
            iops = next(line for line in lines if line.startswith("storbench_iops{"))
            value, stamp = iops.rsplit(" ", 2)[1:]
            assert float(value) == pytest.approx(row.iops) and int(stamp) == end_seconds(
                runs[1])
        p99 = next(line for line in lines if 'quantile="0.99"' in line)
        assert float(p99.rsplit(" ", 2)[1]) == pytest.approx(row.p99_ns / 1e9)
    # NDJSON: the same figures, one record each
    records = [json.loads(line) for line in exported(runs, "ndjson").splitlines()]
    sync = [r for r in records if r["label"] == "io2" and r.get("direction") == "sync"
            and r["metric"] == "latency_p99"]
    assert len(sync) == 1 and sync[0]["unit"] == "s"
    assert sync[0]["value"] == pytest.approx(rows["mix", "sync"].p99_ns / 1e9)
    assert not [r for r in records if r["value"] is None or r["value"] != r["value"]]
    assert {r["label"] for r in records} == {TRICKY, "io2"}
    # a warning goes with the figures it is about: once per run, test and kind
    (w,) = [line for line in om.splitlines() if line.startswith("storbench_warning{")]
    assert 'label="io2"' in w and 'test="mix"' in w and 'kind="rate-not-reached"' in w
    assert w.rsplit(" ", 2)[1] == "1.0"
    (r,) = [r for r in records if r["metric"] == "warning"]
    assert r["kind"] == "rate-not-reached" and r["label"] == "io2" and r["value"] == 1


def test_a_figure_not_measured_is_no_sample(runs):
    """The runs have no trim: no trim sample, never a zero."""
    for fmt in ("openmetrics", "influx", "ndjson"):
        assert "trim" not in exported(runs, fmt), fmt


@services.needs(("promtool", services.PROMTOOL), ("prometheus", services.PROMETHEUS))
def test_promtool_accepts_both_and_a_backfill_reads_back_the_label(runs, tmp_path):
    pushed = text(runs, openmetrics=False)
    lint = subprocess.run([services.PROMTOOL, "check", "metrics"], input=pushed,
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    om = tmp_path / "runs.om"
    om.write_text(exported(runs, "openmetrics"))
    data = tmp_path / "tsdb"
    made = subprocess.run([services.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics",
                           str(om), str(data)], capture_output=True, text=True)
    assert made.returncode == 0, made.stdout + made.stderr
    with services.prometheus([], data) as prom:
        found = prom.wait_for('storbench_iops{direction="read"}', timeout=30)
    # the query is at "now": the runs ended seconds ago, within the 5-minute lookback
    assert {s["metric"]["label"] for s in found} == {TRICKY, "io2"}
    tricky = next(s for s in found if s["metric"]["label"] == TRICKY)
    assert float(tricky["value"][1]) == pytest.approx(
        next(r.iops for r in summarize(runs[0]) if r.direction == "read"))


@services.needs(("influxd", services.INFLUXD))
def test_influxdb_stores_the_lines_with_their_tags_and_times(runs):
    body = exported(runs, "influx")
    with services.influxdb() as influx:
        influx.call("/query", {"q": "CREATE DATABASE sb"}, data=b"")
        influx.call("/write", {"db": "sb", "precision": "ns"}, data=body.encode())
        rows = influx.query("sb", "SELECT * FROM storbench")
        info = influx.query("sb", "SELECT * FROM storbench_run")
    assert len(rows) == len(body.splitlines()) - len(runs)
    assert {r["label"] for r in rows} == {TRICKY.replace("\n", " "), "io2"}
    read = next(r for r in rows if r["label"] == "io2" and r["direction"] == "read")
    expected = next(r for r in summarize(runs[1]) if r.direction == "read")
    assert read["iops"] == pytest.approx(expected.iops)
    assert read["latency_p99_seconds"] == pytest.approx(expected.p99_ns / 1e9)
    assert read["time"] == end_seconds(runs[1]) * 10**9
    assert {r["status"] for r in info} == {"completed"}


def test_the_grafana_dashboard_uses_only_exported_metrics():
    from storbench.render.samples import FAMILIES, PREFIX

    path = Path(__file__).parents[2] / "contrib" / "grafana" / "storbench.json"
    dashboard = json.loads(path.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
              for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert len(exprs) >= 4
    import re

    used = {m for e in exprs for m in re.findall(r"\bstorbench_[a-z_]+", e)}
    assert used and used <= {PREFIX + f for f in FAMILIES}, used - {PREFIX + f for f in FAMILIES}
    assert PREFIX + "warning" in used  # a figure not to trust is shown so beside the others
