"""Renderers on runs stored from real fio output."""

import csv
import io
import json
import re
import subprocess
from typing import Any

import pytest
from rich.console import Console

from storbench.analysis.compare import compare
from storbench.render import terminal, units
from storbench.render.formats import FORMATS
from storbench.render.table import comparison_table
from tests.conftest import FIO, needs_fio
from tests.store.test_sqlite import add_run


@pytest.fixture
def two_runs(store, fio_json_text):
    a = add_run(store, fio_json_text, label="[red]gp3[/red] <b>", tags={"k": "[bold]v"})
    b = add_run(store, fio_json_text, label="io2")
    return [store.get_run(a), store.get_run(b)]


def render_console(fn, *args):
    console = Console(width=250, record=True, force_terminal=False)
    fn(console, *args)
    return console.export_text()


def test_units_one_per_column():
    assert units.choose("latency", [1_600_000, 2_000_000, 3_000_000]).name == "ms"
    # a column's figures in one unit: a smaller one than the median's where a figure
    # would be under 0.005 of it ("3.13 µs │ 0.0060" under [ms], issue #63), while the
    # largest stays under 100,000 in it
    assert units.choose("latency", [1_500, 2_000_000, 3_000_000]).name == "µs"
    assert units.choose("latency", [300, 2_000_000, 300_000_000]).name == "ms"
    assert units.choose("bw", [400 * 1024, 7.9 * 2**30, 5.4 * 2**30]).name == "MiB/s"
    assert units.choose("latency", [900, 20_000]).name == "µs"
    assert units.choose("bw", [3 * 2**30]).name == "GiB/s"
    assert units.choose("bw", [None]).name == "MiB/s"
    assert units.latency(4_200_000) == "4.20 ms"
    assert units.latency(None) == "n/a"
    assert units.Unit("x", 1).fmt(None) == ""


def test_nothing_shows_as_zero_that_is_not():
    """A figure far below its column's unit is shown in its own, never "0.00"; nor a
    ratio ("0.0022×", not "0.00×")."""
    from storbench.analysis.stats import times

    ms = units.choose("latency", [4_200_000, 18_000_000, 322_000_000_000])
    assert ms.name == "ms" and ms.fmt(322) == "322 ns" and ms.fmt(4_200_000) == "4.20"
    gib = units.choose("bw", [3 * 2**30, 4 * 2**30])
    assert gib.fmt(2048) == "2.00 KiB/s"
    # two significant digits below a tenth of the column's unit: a buffered writer's
    # 11.5 µs and 14.7 µs beside a reader's 27.9 ms were both "0.01" (ms)
    assert [ms.fmt(ns) for ns in (11_500, 14_700, 60_000, 95_000, 99_900, 130_000, 0)] == [
        "0.011", "0.015", "0.060", "0.095", "0.10", "0.13", "0.00"]
    assert units.SHARE.fmt(0.001) == "0.0010"
    assert [times(x) for x in (0.0022, 0.014, 1.5, 13043.5, 0.0)] == [
        "0.0022", "0.01", "1.50", "13,044", "0.00"]
    # never scientific, and an uncertainty at the value's precision (study redone: a
    # ratio printed as "6.5e-05 ×", another as "0.75 ± 0.00082 ×")
    from storbench.analysis.stats import times_pm

    assert [times(x) for x in (6.5e-05, 0.00999, -0.0031)] == ["0.000065", "0.01", "-0.0031"]
    assert times_pm(0.75, 0.00082) == "0.75 ± <0.01"
    assert times_pm(0.75, 0.031) == "0.75 ± 0.03"

    assert times_pm(6.5e-05, 1.2e-05) == "0.000065 ± 0.000012"
    assert times_pm(1523.4, 48.7) == "1,523 ± 49" and times_pm(1.0, None) == "1.00"


def test_terminal_summary_keeps_units_and_labels_literal(two_runs):
    text = render_console(terminal.print_run, two_runs[0])
    assert "[red]gp3[/red] <b>" in text  # markup in a label is shown, not interpreted
    header = next(line for line in text.splitlines() if "IOPS" in line)
    for col in ("clat mean", "p50", "p99", "p99.9", "BW"):
        assert re.search(re.escape(col) + r" \[(ns|µs|ms|s|[KMG]iB/s)\]", text), col
    assert "mix" in text and "sync" in text
    del header


def test_comparison_ratio_and_direction(two_runs):
    comp = compare(two_runs, baseline=0)
    assert all(c.ratio.value == pytest.approx(1.0) for c in comp.cells[1] if c.value)
    assert comp.cells[0][0].ratio.value == pytest.approx(1.0)
    t = comparison_table(comp)
    assert "(1.00×)" in t.rows[1][3] and "×" not in t.rows[0][3]
    assert [c.metric.key for c in comp.columns][:2] == ["read.iops", "read.bw"]


def test_an_unlabelled_run_is_known_by_where_it_ran(store, fio_json_text):
    """Two unlabelled runs compared were two blank labels: the target is shown beside
    them (in every table that names runs), and no column is added when all are named."""
    from storbench.render.layouts import tables

    runs = [store.get_run(add_run(store, fio_json_text, label=None, target="/mnt/gp3")),
            store.get_run(add_run(store, fio_json_text, label="io2", target="/mnt/io2"))]
    comp = compare(runs)
    t = comparison_table(comp)
    assert t.headers[:4] == ["run", "label", "target", "suite"]
    assert [row[:4] for row in t.rows] == [[f"#{runs[0].id}", "", "/mnt/gp3", "quick"],
                                           [f"#{runs[1].id}", "io2", "/mnt/io2", "quick"]]
    for layout in ("per-metric", "read-write"):
        for _, table in tables(comp, layout):
            assert table.headers[:3] == ["run", "label", "target"], layout
            assert table.rows[0][2] == "/mnt/gp3" and len(table.align_right) == len(
                table.headers)
    (_, rows), = tables(comp, "rows")
    assert [row[0] for row in rows.rows] == [f"#{runs[0].id} /mnt/gp3", "io2"]
    narrow = Console(width=60, record=True, force_terminal=False)
    terminal.print_comparison(narrow, comp)  # too wide: a block per run, named in full
    assert f"#{runs[0].id} /mnt/gp3 quick\n" in narrow.export_text()
    named = compare([runs[1], store.get_run(add_run(store, fio_json_text, label="gp3"))])
    assert comparison_table(named).headers[:3] == ["run", "label", "suite"]


def test_markdown_escapes_pipes(two_runs, store, fio_json_text):
    run = store.get_run(add_run(store, fio_json_text, label="a|b"))
    md = FORMATS["md"](compare([run]))
    assert "a\\|b" in md
    lines = md.strip().splitlines()
    assert len({line.count(" | ") for line in lines[2:]}) == 1


@needs_fio
def test_csv_not_measured_is_empty(two_runs, store, tmp_path):
    out = subprocess.run(
        [FIO, "--name=mix", f"--directory={tmp_path}", "--rw=write", "--bs=4k", "--size=1m",
         "--output-format=json+"], capture_output=True, text=True, check=True).stdout
    write_only = store.get_run(add_run(store, out, label="writes"))
    comp = compare([two_runs[0], write_only])
    rows = list(csv.reader(io.StringIO(FORMATS["csv"](comp))))
    header = rows[0]
    read_iops = header.index("mix read IOPS")
    assert float(rows[1][read_iops]) > 0
    assert rows[2][read_iops] == ""  # not measured: empty, never 0
    assert float(rows[2][header.index("mix write IOPS")]) > 0


def test_json_is_full_model(two_runs):
    doc = json.loads(FORMATS["json"](compare(two_runs)))
    assert doc["schema"] == "storbench.export/1"
    assert doc["runs"][0]["label"] == "[red]gp3[/red] <b>"
    t = doc["runs"][0]["tests"][0]
    assert t["read"]["clat"]["bins"] and t["sync"]["lat"]["percentiles_ns"]


def test_nothing_shows_in_a_unit_it_dwarfs():
    """A figure far above its column's unit is shown in its own: a 2.9 s listing in a
    column of microseconds is "2.93 s", not "2,930,577"."""
    us = units.choose("latency", [120_000, 90_000, 2_930_577_000])
    assert us.name == "µs" and us.fmt(2_930_577_000) == "2.93 s" and us.fmt(120_000) == "120"
    assert us.fmt(99_999_000) == "99,999"  # five digits stay in the column's unit
    mib = units.choose("bw", [100 * 2**20, 120 * 2**20])
    assert mib.fmt(3000 * 2**30) == "3,000 GiB/s" and units.IOPS.fmt(3e6) == "3,000,000"


def test_a_linear_timeline_is_in_its_table_s_unit():
    """A bandwidth timeline with one spike: its axis in MiB/s, as the table's column
    (by the median), not GiB/s (by the spike); a logarithmic one by its largest."""
    from storbench.analysis.charts import Chart, Line

    ys = [100 * 2**20, 120 * 2**20, 110 * 2**20, 3 * 2**30]
    line = Chart("t", "bw over time", "line", "bw", x_label="time [s]",
                 lines=[Line("a", [1.0, 2.0, 3.0, 4.0], list(ys))])
    assert units.for_display(line).y_label == "MiB/s"
    assert units.choose("bw", ys).name == "MiB/s"  # the table column's unit
    from dataclasses import replace

    assert units.for_display(replace(line, log_y=True)).y_label == "GiB/s"


def test_a_table_turned_keeps_every_cell():
    from storbench.render.table import Table, transposed

    t = Table(["run", "label", "a IOPS", "b IOPS"], [["#1", "x", "1", "2"], ["#2", "", "3", "4"]],
              [False, False, True, True])
    turned = transposed(t)
    assert turned.headers == ["", "#1 x", "#2"]
    assert turned.rows == [["a IOPS", "1", "3"], ["b IOPS", "2", "4"]]
    assert turned.align_right == [False, True, True]


def test_a_lifecycle_phase_seen_over_within_one_read_is_below_the_read_interval():
    """bind is read every 0.1 s: a volume bound by the first read after its node was chosen
    took less than 100 ms, not "0.00 ns" (the test-bed's CSI class showed that); fio's
    first write keeps its own figure, delete is read every 0.5 s."""
    from storbench.analysis.lifecycle import summary
    from storbench.analysis.views.lifecycle import LifecycleView, phases_table
    from storbench.render import units

    def lifecycle_table(life: Any) -> Any:
        return phases_table(life, units)

    volumes = [{"bind": 0.0, "running": 4.2, "first_write": 2.6e-5, "delete": 0.2,
                "verified": []},
               {"bind": 0.0, "running": 4.0, "first_write": 0.0, "delete": 0.6,
                "verified": []}]
    life: Any = {"volumes": volumes, "summary": summary(volumes),
                 "binding_mode": "WaitForFirstConsumer", "not_measured": {},
                 "first_write_sync": "O_SYNC"}
    table = lifecycle_table(life)
    rows = {r[0].split(" (")[0]: r[1:4] for r in table.rows}
    assert rows["node chosen for the pod → Bound"] == ["< 100 ms"] * 3
    assert rows["pod created → Running"] == ["4.10 s", "4.18 s", "4.20 s"]
    assert rows["first durable 4 KiB write"][2] == "26.0 µs"
    # a run stored before its first write was made durable says what it timed instead
    del life["first_write_sync"]
    (row,) = [r for r in lifecycle_table(life).rows if "4 KiB write" in r[0]]
    assert row[0].startswith("first 4 KiB write, not durable") and row[3] == "26.0 µs"
    # and `compare`, which shows no row label, says it in the cell; a durable one is plain
    from storbench.result.record import Run

    def run(n: int, section: Any) -> Run:
        return Run(n, f"u{n}", "", None, "ok", "", None, "", "k8s://local-hostpath", None,
                   {"target": {"binding_mode": "WaitForFirstConsumer"}}, {}, "", None,
                   data={"lifecycle": section})

    runs = [run(1, life), run(2, {**life, "first_write_sync": "O_SYNC"})]
    compared = LifecycleView().compared([(r, r.data["lifecycle"]) for r in runs], units)
    old, new = compared.rows
    first = compared.headers.index("first write p50")
    assert old[first] == "13.0 µs (not durable)" and new[first] == "13.0 µs"
    bind = compared.headers.index("bind p50")
    assert old[bind] == new[bind] == "< 100 ms"  # no caveat
    assert rows["PVC deleted → PV gone"][0] == "< 500 ms"
    assert rows["PVC deleted → PV gone"][2] == "600 ms"
    assert not any("0.00 ns" in c for r in table.rows for c in r)
    # the intervals the table states are those the code reads at
    from storbench.analysis.lifecycle import READ_EVERY_S
    from storbench.execute import kubecleanup
    from storbench.target.kubernetes import lifecycle

    assert READ_EVERY_S == {**dict.fromkeys(("bind", "running", "reattach", "snapshot",
                                             "restore", "clone"), lifecycle.POLL_S),
                            "expand": lifecycle.EXPAND_POLL_S,
                            "delete": kubecleanup.READ_EVERY_S}


@pytest.mark.parametrize("scale, word", [(0.996, None), (1.004, None), (0.9, "worse"),
                                         (1.1, "better")])
def test_a_ratio_shown_as_1_00_claims_no_direction(store, fio_json_text, scale, word):
    """Two single runs (no repeats, no series: nothing to judge noise by): a ratio shown
    as "1.00" says no direction ("1.00 × … (worse)" read as a contradiction); one
    shown otherwise does."""
    from storbench.analysis.compare import sentences

    doc = json.loads(fio_json_text)
    for job in doc["jobs"]:
        job["read"]["iops"] *= scale
    a = store.get_run(add_run(store, fio_json_text, label="before"))
    b = store.get_run(add_run(store, json.dumps(doc), label="after"))
    [said] = [s for s in sentences(compare([a, b], baseline=0)) if "read IOPS" in s]
    assert re.search(r"after: \d\.\d\d × the mix read IOPS of before( \((\w+)\))?", said)
    found = re.search(r"of before \((\w+)\)", said)
    assert (found.group(1) if found else None) == word, said


def test_a_run_that_did_not_complete_says_so_beside_its_figures(store, fio_json_text):
    """A run that failed before its first figure was a row of blank cells in `compare`,
    with nothing to say it failed: its caveats begin with how it ended, in fio's words."""
    ok = store.get_run(add_run(store, fio_json_text, label="ok"))
    run_id = store.begin_run(uid="ufailed", suite="quick", target="/mnt/x", environment={},
                             settings={}, storbench_version="0", fio_version="fio-3.33",
                             label="broken")
    store.finish_run(run_id, "failed", error="fio exited with status 1: fio: size too small,"
                     " must not be less than minimum block size: 1024 < 4096\nmore")
    comp = compare([ok, store.get_run(run_id)])
    assert comp.caveats[1] == ["run failed: fio exited with status 1: fio: size too small,"
                               " must not be less than minimum block size: 1024 < 4096"]
    for form in ("csv", "md", "wiki", "html-table"):  # every table of it says so
        assert "run failed: fio exited with status 1" in FORMATS[form](comp), form
    said = render_console(terminal.print_comparison, compare([ok, store.get_run(run_id)], 1))
    assert ("Ratios (×) are to the baseline, run #2 broken (it has no figures: the run failed,"
            " so there are no ratios);") in " ".join(said.split())
    table = comparison_table(comp)
    assert table.headers[3] == "caveats" and table.rows[0][3] == ""
    assert table.rows[1][3] == ("run failed: fio exited with status 1: fio: size too small,"
                                " must not be less than minimum block size: 1024 < 4096")
    assert set(table.rows[1][4:]) == {""}  # no figure made up
