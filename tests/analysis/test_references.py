"""Published reference figures beside measured runs, marked as published."""

from __future__ import annotations

import json

import pytest

from storbench.analysis.references import BUILTIN
from tests.conftest import needs_fio, run_cli


def test_reference_list_has_every_study_with_provenance(store_path):
    proc = run_cli("reference", "list", "--json", db=store_path)
    assert proc.returncode == 0, proc.stderr
    refs = json.loads(proc.stdout)
    assert {r["suite"] for r in refs} == {"dbench", "etcd", "sync-iops", "randrw75",
                                          "app-mixed"}
    gp3 = next(r for r in refs if r["name"] == "ebs-gp3")
    assert gp3["figures"]["read_iops"]["read.iops"] == 16400
    assert gp3["figures"]["read_latency"]["read.lat_mean"] == 478_000  # 478 µs in ns
    assert gp3["study"].startswith("5:") and gp3["source"]
    vsan = next(r for r in refs if r["name"] == "vsan")
    assert vsan["figures"]["etcd"]["sync.lat_p99"] == 18_000_000
    assert "ebs-gp3" in run_cli("reference", "list", db=store_path).stdout


@needs_fio
@pytest.mark.integration
def test_compare_with_references(tmpfs, store_path, tmp_path):
    proc = run_cli("run", str(tmpfs), "--suite", "etcd", "--size", "1m", "-l", "mine",
                   db=store_path)
    assert proc.returncode == 0, proc.stderr
    md = run_cli("export", "last", "--reference", "nvme-vdo,hdd-5400", db=store_path).stdout
    lines = md.strip().splitlines()
    assert lines[2].startswith("| #1 | mine | etcd |")
    assert lines[3].startswith("| published | nvme-vdo (published) | etcd | 664 |")
    assert "| 4.20 |" in lines[3] and "| 34.0 |" in lines[4]  # fdatasync p99 in ms
    doc = json.loads(run_cli("compare", "last", "--reference", "vsan", "--json",
                             db=store_path).stdout)
    assert [r["origin"] for r in doc["runs"]] == ["measured", "published"]
    # never stored, never mixed with measured runs
    assert [r["origin"] for r in json.loads(run_cli("list", "--json", db=store_path).stdout)
            ] == ["measured"]
    bad = run_cli("compare", "last", "--reference", "ebs-gp3", db=store_path)
    assert bad.returncode == 2 and "for etcd: hdd-5400, nvme-vdo, sata-ssd, vsan" in bad.stderr

    own = tmp_path / "refs.json"
    own.write_text(json.dumps([{"name": "lab-ceph", "target": "Ceph RBD in our lab",
                                "suite": "etcd", "study": "our 2026 test", "source": "wiki",
                                "year": 2026,
                                "figures": {"etcd": {"sync.lat_p99": 7_500_000}}}]))
    md = run_cli("export", "last", "--reference-file", str(own), db=store_path).stdout
    assert "lab-ceph (published)" in md and "| 7.50 |" in md
    broken = tmp_path / "broken.json"
    broken.write_text('[{"name": "x"}]')
    proc = run_cli("compare", "last", "--reference-file", str(broken), db=store_path)
    assert proc.returncode == 2 and "not a reference set" in proc.stderr


def test_builtin_names_are_unique_per_suite():
    keys = [(r.suite, r.name) for r in BUILTIN]
    assert len(keys) == len(set(keys))
