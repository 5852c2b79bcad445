"""Price sheets and `compare --cost`: the arithmetic, the sheets, and the whole path
from a pasted fio text to a cost per 1,000 IOPS (issue #4's "done when")."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from storbench.analysis.cost import (
    CostSheet,
    builtin_sheets,
    load_sheets,
    monthly_cost,
    parse_capacity,
    resolve_sheets,
)
from storbench.errors import ConfigError
from tests.cli.test_cli import assert_one_line_error
from tests.conftest import STORBENCH, needs_fio, run_cli
from tests.result.test_fio_text import FIO2_TEXT, _blog_post


def test_builtin_sheets_are_dated_with_a_source():
    sheets = {s.name: s for s in builtin_sheets()}
    assert set(sheets) == {"ebs-gp3", "ebs-gp2", "ebs-io2", "efs", "s3-standard"}
    s3 = sheets["s3-standard"]
    assert (s3.per_gb_month, s3.per_1000_put, s3.per_1000_get) == (0.023, 0.005, 0.0004)
    assert sheets["ebs-gp2"].per_gb_month == 0.10
    assert all(s.date and s.source for s in sheets.values())
    gp3 = sheets["ebs-gp3"]
    assert (gp3.per_gb_month, gp3.included_iops, gp3.included_mbps) == (0.08, 3000, 125)
    assert sheets["efs"].per_mbps_month == 6.0 and sheets["ebs-io2"].per_iops_month == 0.065


def test_monthly_cost():
    gp3 = resolve_sheets("ebs-gp3")[0]
    # 500 GB, 16,000 IOPS, 1,000 MB/s: 0.08*500 + 0.005*13,000 + 0.04*875
    assert monthly_cost(gp3, 500e9, 16000, 1000) == pytest.approx(40 + 65 + 35)
    assert monthly_cost(gp3, 500e9, 2000, 100) == pytest.approx(40)  # within what is included


def test_capacity():
    assert parse_capacity("500GiB") == 500 * 2**30 == parse_capacity("500Gi")
    assert parse_capacity("1TB") == 1e12
    with pytest.raises(ConfigError, match="with a unit"):
        parse_capacity("500")


@pytest.mark.parametrize("text, needle", [
    ("- name: x\n  per_gb_month: 0.1\n", "missing date, source"),
    ("- {name: x, per_gb_month: -1, date: d, source: s}\n", "must be a number >= 0"),
    # YAML's .nan and .inf are floats: a price of nan priced every run at $nan
    ("- {name: x, per_gb_month: .nan, date: d, source: s}\n", "must be a number >= 0, not nan"),
    ("- {name: x, per_gb_month: .inf, date: d, source: s}\n", "must be a number >= 0, not inf"),
    ("- {name: x, per_gb_month: 1, date: d, source: s, per_gb: 2}\n", "unknown field(s) per_gb"),
    # one line (a CLI error is one): what is wrong and where, not PyYAML's four
    ("[1, 2\n", "not YAML: expected ',' or ']', but got '<stream end>' at line 2, column 1"),
    ("a: b: c\n", "not YAML: mapping values are not allowed here at line 1, column 5"),
])
def test_bad_sheets(text, needle):
    with pytest.raises(ConfigError, match=r"mine\.yaml") as e:
        load_sheets(text, "mine.yaml")
    assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_user_sheet_file(tmp_path):
    f = tmp_path / "prices.yaml"
    f.write_text("name: onprem\nper_gb_month: 0.02\ndate: 2026-11\nsource: our invoice\n")
    assert resolve_sheets(str(f)) == [CostSheet("onprem", 0.02, "2026-11", "our invoice")]
    with pytest.raises(ConfigError, match="neither a price sheet"):
        resolve_sheets("gp9")


@needs_fio
def test_pasted_blog_text_beside_own_run_reference_and_price(tmpfs, store_path):
    """A fio 2.x text copied from a blog post, imported from stdin, compared with a
    measured run and the published figures, with the cost per 1,000 IOPS."""
    proc = subprocess.run([*STORBENCH, "import", "-", "--as", "randrw75", "--label", "efs-2016"],
                          input=_blog_post(FIO2_TEXT), capture_output=True, text=True,
                          env={**os.environ, "STORBENCH_DB": str(store_path)})
    assert proc.returncode == 0, proc.stderr
    mine = run_cli("run", str(tmpfs), "--suite", "randrw75", "--size", "16m",
                   "--runtime", "1", "--ramp", "0",
                   "--label", "ram", db=store_path)
    assert mine.returncode == 0, mine.stderr
    args = ("compare", "efs-2016", "ram", "--reference", "efs", "--cost", "efs",
            "--cost", "ram=ebs-gp3", "--cost", "efs-2016=efs", "--capacity", "100GiB")
    text = run_cli(*args, db=store_path)
    assert text.returncode == 0, text.stderr
    assert "efs (published)" in text.stdout and "$ / 1k IOPS" in text.stdout
    doc = json.loads(run_cli(*args, "--json", db=store_path).stdout)
    rows = {c["label"]: c for c in doc["cost"]}
    gb = 100 * 2**30 / 1e9
    imported = rows["efs-2016"]
    # a 75/25 mix serves reads and writes: both count
    assert imported["sheet"]["name"] == "efs" and imported["best_iops"] == 796 + 267
    assert imported["best_iops_column"] == "randrw75 read + write IOPS"
    # no bandwidth column, but the test moved data: its bandwidth is priced too
    bw = imported["best_bw_bytes_per_s"]
    assert bw == pytest.approx((796 + 267) * 4096, rel=0.02)
    assert imported["usd_per_month"] == pytest.approx(0.30 * gb + 6.0 * bw / 1e6)
    assert imported["per_1000_iops"] == pytest.approx(imported["usd_per_month"] / 1.063)
    published = rows["efs (published)"]
    assert published["best_iops"] == 796 + 267  # study 2's published figures
    assert published["best_bw_bytes_per_s"] is None  # the study gave none: none priced
    assert published["usd_per_month"] == pytest.approx(0.30 * gb)
    ram = rows["ram"]
    assert ram["provisioned_iops"] == 16000  # achieved far more: gp3's maximum is priced
    # and said so, with what was achieved
    assert f"ebs-gp3 provisions at most 16,000 IOPS: priced at that, not the" \
           f" {ram['best_iops']:,.0f} IOPS achieved" in ram["limits"], ram
    assert imported["limits"] == [] and published["limits"] == []
    assert "provisions at most 16,000 IOPS" in " ".join(text.stdout.split())
    # more than the sheet can provision, asked for: refused, never priced as less
    above = run_cli(*args, "--provisioned-iops", "ram=20000", db=store_path)
    assert_one_line_error(above, 2, "--provisioned-iops 20,000 for ram: ebs-gp3"
                          " provisions at most 16,000 IOPS a volume")
    assert run_cli(*args, "--provisioned-iops", "ram=16000", db=store_path).returncode == 0
    # and its bandwidth (read + write), up to gp3's maximum of 1000 MB/s
    mbps = min(1000.0, ram["best_bw_bytes_per_s"] / 1e6)
    assert ram["provisioned_mbps"] == pytest.approx(mbps)
    assert ram["usd_per_month"] == pytest.approx(
        0.08 * gb + 0.005 * 13000 + 0.04 * max(0.0, mbps - 125))
    # a 1-s test on tmpfs is flagged (too short): its price says it came from that figure
    assert any("too short" in c for c in ram["caveats"]), ram
    assert published["caveats"] == []
    assert "priced from a flagged figure: too short" in " ".join(text.stdout.split())
    # a sheet that does not price IOPS (gp2): the flagged IOPS beside the price, and the
    # $ per 1k IOPS divided by it, still carry the flag (study 1's page-cache gp2 row)
    gp2 = [*args[:5], "--cost", "ram=ebs-gp2", *args[-2:]]
    unpriced_flag = {c["label"]: c for c in json.loads(
        run_cli(*gp2, "--json", db=store_path).stdout)["cost"]}["ram"]
    assert unpriced_flag["caveats"] == [] and unpriced_flag["sheet"]["name"] == "ebs-gp2"
    assert any("too short" in c for c in unpriced_flag["best_iops_caveats"]), unpriced_flag
    shown = run_cli(*gp2, db=store_path, env={"COLUMNS": "400"}).stdout
    row = next(ln for ln in shown.splitlines() if "ebs-gp2 (" in ln)
    assert "flagged figures:" in row and "too short" in row, shown
    assert f"{unpriced_flag['best_iops']:,.0f} ⚠" in row, row
    assert f"{unpriced_flag['per_1000_iops']:,.2f} ⚠" in row, row

    # a size per row (study 1: 30 GB of EBS beside 10 GB of EFS): one table
    sized = json.loads(run_cli(*args[:-2], "--capacity", "30GB", "--capacity",
                               "efs-2016=10GB", "--json", db=store_path).stdout)
    rows = {c["label"]: c for c in sized["cost"]}
    assert rows["efs-2016"]["capacity_bytes"] == 10e9 and rows["ram"]["capacity_bytes"] == 30e9
    assert rows["efs-2016"]["usd_per_month"] == pytest.approx(0.30 * 10 + 6.0 * bw / 1e6)
    table = run_cli(*args[:-2], "--capacity", "30GB", "--capacity", "efs-2016=10GB",
                    db=store_path, env={"COLUMNS": "400"}).stdout
    assert "Cost per month\n" in table or "Cost per month " in table, table
    assert "9.3 GiB (10 GB)" in table and "27.9 GiB (30 GB)" in table, table

    # a file of several sheets prices the rows named like one, and no other row
    sheets = store_path.parent / "sheets.yaml"
    sheets.write_text("- {name: ram, per_gb_month: 0.1, date: 2026-11, source: ours}\n"
                      "- {name: glusterfs, per_gb_month: 0.05, date: 2026-11, source: ours}\n")
    some = run_cli("compare", "efs-2016", "ram", "--reference", "efs", "--cost", str(sheets),
                   "--capacity", "10GB", "--json", db=store_path)
    assert some.returncode == 0, some.stderr
    assert [c["label"] for c in json.loads(some.stdout)["cost"]] == ["ram"]
    said = " ".join(run_cli("compare", "efs-2016", "ram", "--reference", "efs", "--cost",
                            str(sheets), "--capacity", "10GB", db=store_path,
                            env={"COLUMNS": "400"}).stdout.split())
    assert "Not priced (no sheet given to them; --cost NAME=SHEET): efs-2016, efs (published)" \
        in said, said
    # one sheet named by no row prices the runs measured or imported, not a study's row
    one = json.loads(run_cli("compare", "efs-2016", "ram", "--reference", "efs", "--cost",
                             "ebs-gp3", "--capacity", "10GB", "--json", db=store_path).stdout)
    assert sorted(c["label"] for c in one["cost"]) == ["efs-2016", "ram"]


def test_cost_needs_capacity(store_path):
    proc = run_cli("compare", "1", "--cost", "efs", db=store_path)
    assert proc.returncode == 2 and "--cost needs --capacity" in proc.stderr


def test_no_price_sheet_names_a_path_of_the_development_tree():
    """A sheet's source is for the user who reads it: a study, a price list, a date;
    never a file of the tree storbench was developed in."""
    from storbench.analysis.cost import builtin_sheets

    for sheet in builtin_sheets():
        assert "../" not in sheet.source and "shared/" not in sheet.source, sheet
