"""The studies storbench was made from (../shared/context.md), redone end to end on the
test-bed's targets, shortened, each checked on the table it ends with."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import needs_fio, needs_timing, run_cli, run_cli_wrapped

pytestmark = needs_fio


def said(text: str) -> str:
    """Output as one line, however the terminal wrapped it."""
    return " ".join(text.split())


@needs_timing  # the network file system's latency, measured
def test_study_1_metadata_stall_and_warnings_in_the_comparison(sshfs_server, store_path):
    """EBS vs EFS for Kubernetes: the `ls` that took 11.3 s under load is in the
    comparison, beside the figures, with the page-cache caveat the author missed."""
    mnt = sshfs_server.mount(proxied=True)
    proc = run_cli("run", str(mnt), "--suite", "app-mixed", "--size", "16m", "--runtime", "5",
                   "-l", "efs-like", db=store_path)
    assert proc.returncode == 0, proc.stderr
    out = run_cli("compare", "efs-like", "-R", "ebs-gp2,efs-gp", db=store_path)
    assert out.returncode == 0, out.stderr
    text = said(out.stdout)
    assert "ebs-gp2 (published)" in text and "efs-gp (published)" in text
    assert re.search(r"efs-like │ app-mixed │ [^│]*app_mixed: page cache", text), text
    assert "Metadata latency, idle and under load" in text
    doc = json.loads(run_cli("compare", "efs-like", "--json", db=store_path).stdout)
    probe = doc["comparison"]["metadata_probe"][0]
    # the typical listing, slower under load (a p99 of the few idle samples is the one
    # slowest: 14.6 ms idle against 12.4 ms loaded once on CI's busier machine)
    assert probe["listdir"]["load"]["p50_ns"] > probe["listdir"]["idle"]["p50_ns"], probe
    md = run_cli("export", "efs-like", "-R", "ebs-gp2", db=store_path).stdout
    assert "page cache" in md and "| listdir |" in md
    # the author's price question: EFS Max I/O with 4 MB/s provisioned, gp2 by the GB
    doc = json.loads(run_cli(
        "compare", "efs-like", "-R", "ebs-gp2,efs-maxio", "--cost", "efs-maxio=efs",
        "--cost", "ebs-gp2=ebs-gp2", "--capacity", "30GB", "--provisioned-mbps", "efs-maxio=4",
        "--json", db=store_path).stdout)
    cost = {c["label"]: c for c in doc["cost"]}
    assert cost["efs-maxio (published)"]["provisioned_mbps"] == 4
    assert cost["efs-maxio (published)"]["usd_per_month"] == pytest.approx(0.30 * 30 + 6 * 4)
    assert cost["ebs-gp2 (published)"]["usd_per_month"] == pytest.approx(0.10 * 30)
    bad = run_cli("compare", "efs-like", "--cost", "efs", "--capacity", "30GB",
                  "--provisioned-mbps", "nobody=4", db=store_path)
    assert bad.returncode == 2 and "no compared run is called 'nobody'" in bad.stderr


@needs_timing  # a capped volume of its own
def test_study_3_wiki_rows_one_per_platform(tmpfs, store_path):
    """The etcd wiki page: one row per platform with IOPS, fdatasync p99 and verdict."""
    from tests.testbed import Throttled, missing_for_throttled

    if (reason := missing_for_throttled()) is not None:
        pytest.skip(reason)
    proc = run_cli("run", str(tmpfs), "--suite", "etcd", "--size", "2m", "-l", "ram",
                   db=store_path)
    assert proc.returncode == 0, proc.stderr
    with Throttled(read_iops=100, write_iops=100) as vol:
        proc = run_cli_wrapped(vol.wrap, "run", str(vol.mnt), "--suite", "etcd", "--size", "1m",
                               "-l", "slow-disk", db=store_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # the profile's FAIL
    wiki = run_cli("export", "ram", "slow-disk", "-R", "nvme-vdo,vsan", "--format", "wiki",
                   "--layout", "rows", "--columns", "etcd.write.iops,etcd.sync.lat_p99",
                   db=store_path).stdout
    lines = wiki.strip().splitlines()
    # one unit for the column, chosen by its figures: ms, or µs where tmpfs' fsync p99
    # (a no-op) is a few µs and would read 0.00x beside the others (CI's machine)
    head = re.match(r"\| platform \| etcd write IOPS \| etcd sync p99 \[(ms|µs)\] \| verdict \|",
                    lines[0])
    assert head is not None, lines[0]
    vsan, vdo = ("18.0", "4.2") if head[1] == "ms" else ("18,000", "4,200")
    rows = {ln.split("|")[1].strip(): ln for ln in lines[2:]}
    assert list(rows) == ["ram", "slow-disk", "nvme-vdo (published)", "vsan (published)"]
    assert "PASS etcd.fdatasync.p99 &lt; 10ms (fsync on tmpfs is a no-op)" in rows["ram"]
    assert "FAIL etcd.fdatasync.p99 &lt; 10ms (closed loop)" in rows["slow-disk"]
    assert f"| 182 | {vsan} | FAIL etcd.fdatasync.p99 &lt; 10ms |" in rows["vsan (published)"]
    assert f"| 664 | {vdo} | PASS" in rows["nvme-vdo (published)"]


def test_study_5_read_write_pairs(tmpfs, store_path):
    """AWS CSI drivers: DBench's figures as the write-up's tables, Read beside Write."""
    proc = run_cli("run", str(tmpfs), "--suite", "dbench", "--size", "16m",
                   "--runtime", "1", "--ramp", "0",
                   "-l", "local", db=store_path)
    assert proc.returncode == 0, proc.stderr
    md = run_cli("export", "local", "-R", "ebs-gp3,efs", "--format", "wiki", "--layout",
                 "read-write", db=store_path).stdout
    sections = {s.split("\n", 1)[0].strip(): s for s in md.split("### ")[1:]}
    for title in ("read_iops / write_iops: IOPS", "rw_mix: IOPS",
                  "read_latency / write_latency: lat mean [µs]"):
        assert title in sections, list(sections)
    iops = sections["read_iops / write_iops: IOPS"]
    assert "| run | label | Read | Write |" in iops
    assert "| published | ebs-gp3 (published) | 16,400 | 16,700 |" in iops
    assert "| published | efs (published) | 10,300 | 5,220 |" in iops
    assert re.search(r"\| #1 \| local \| [\d,]+ ⚠? ?\| [\d,]+", iops), iops
    # a figure only the measured run has (clat p99) is a table of its own rows only
    p99 = sections["read_latency / write_latency: clat p99 [µs]"]
    assert "published" not in p99


GLUSTER = """\
- name: gluster-2node
  title: self-managed GlusterFS, 2 instances and their volumes
  date: 2026-11
  source: test sheet
  per_gb_month: 0.16
  fixed_month: 140.16
"""


def test_study_2_prices_a_fixed_fee_option_beside_efs(tmpfs, tmp_path: Path, store_path):
    proc = run_cli("run", str(tmpfs), "--suite", "randrw75", "--size", "16m",
                   "--runtime", "1", "--ramp", "0",
                   "-l", "nfs-like", db=store_path)
    assert proc.returncode == 0, proc.stderr
    sheet = tmp_path / "gluster.yaml"
    sheet.write_text(GLUSTER)
    args = ("nfs-like", "-R", "efs,glusterfs-r2", "--cost", "efs=efs", "--cost", str(sheet),
            "--cost", "glusterfs-r2=gluster-2node", "--cost", "nfs-like=ebs-gp2",
            "--capacity", "1TB")
    doc = json.loads(run_cli("compare", *args, "--json", db=store_path).stdout)
    rows = {c["label"]: c for c in doc["cost"]}
    gluster = rows["glusterfs-r2 (published)"]
    assert gluster["sheet"]["name"] == "gluster-2node"
    assert gluster["usd_per_month"] == pytest.approx(140.16 + 0.16 * 1000)
    assert gluster["best_iops"] == 482 + 161
    assert rows["efs (published)"]["usd_per_month"] == pytest.approx(0.30 * 1000)
    assert rows["nfs-like"]["usd_per_month"] == pytest.approx(0.10 * 1000)
    text = said(run_cli("compare", *args, db=store_path).stdout)
    assert "fixed 140.16/month" in text
    report = tmp_path / "r.html"
    proc = run_cli("report", *args, "-o", str(report), db=store_path)
    assert proc.returncode == 0, proc.stderr
    html = report.read_text()
    assert "Cost per month at" in html and "gluster-2node" in html and "$ / 1k IOPS" in html
