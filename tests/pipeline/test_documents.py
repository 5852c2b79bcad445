"""Real documents hold several fio runs (issue #12 item 1): a blog post comparing
three systems, a wiki page of contributors' etcd results, fio 2.1 and 3.x text mixed.
Written here in the shapes such pages have (headings, prose, command lines, line
numbers, HTML entities); every figure is checked to be its own system's, never a sum.
"""

from __future__ import annotations

import json

import pytest

from storbench.pipeline.importer import parse_source
from tests.conftest import run_cli


def fio3_randrw(name: str, r_iops: int, w_iops: int, r_clat_us: int, pid: int) -> str:
    rb, wb = r_iops * 4, w_iops * 4  # KiB/s at 4k
    return f"""{name}: (g=0): rw=randrw, bs=(R) 4096B-4096B, (W) 4096B-4096B, (T) 4096B-4096B, ioengine=libaio, iodepth=64
fio-3.33
Starting 1 process

{name}: (groupid=0, jobs=1): err= 0: pid={pid}: Mon Nov 23 10:00:00 2026
  read: IOPS={r_iops}, BW={rb}KiB/s ({rb * 1024 // 1000}kB/s)({rb * 60 // 1024}MiB/60001msec)
    slat (usec): min=2, max=310, avg= 9.10, stdev= 4.22
    clat (usec): min=120, max=98000, avg={r_clat_us}.50, stdev=310.12
     lat (usec): min=125, max=98010, avg={r_clat_us + 9}.60, stdev=310.20
    clat percentiles (usec):
     |  1.00th=[  130],  5.00th=[  140], 10.00th=[  150], 20.00th=[  170],
     | 30.00th=[  190], 40.00th=[  210], 50.00th=[ {r_clat_us}], 60.00th=[ {r_clat_us + 10}],
     | 70.00th=[ {r_clat_us + 20}], 80.00th=[ {r_clat_us + 30}], 90.00th=[ {r_clat_us + 40}],
     | 95.00th=[ {r_clat_us + 50}], 99.00th=[ {r_clat_us + 900}], 99.50th=[ {r_clat_us + 1000}],
     | 99.90th=[ 9000], 99.95th=[12000], 99.99th=[98000]
   bw (  KiB/s): min= 100, max=99999, per=100.00%, avg={rb}.00, stdev=10.00, samples=120
   iops        : min=   25, max=99999, avg={r_iops}.00, stdev= 2.00, samples=120
  write: IOPS={w_iops}, BW={wb}KiB/s ({wb * 1024 // 1000}kB/s)({wb * 60 // 1024}MiB/60001msec); 0 zone resets
    slat (usec): min=2, max=300, avg= 9.00, stdev= 4.00
    clat (usec): min=130, max=99000, avg=900.00, stdev=300.00
     lat (usec): min=135, max=99010, avg=909.00, stdev=300.10
    clat percentiles (usec):
     |  1.00th=[  140],  5.00th=[  150], 10.00th=[  160], 20.00th=[  180],
     | 30.00th=[  200], 40.00th=[  220], 50.00th=[  800], 60.00th=[  810],
     | 70.00th=[  820], 80.00th=[  830], 90.00th=[  840], 95.00th=[  850],
     | 99.00th=[ 1800], 99.50th=[ 1900], 99.90th=[ 9000], 99.95th=[12000],
     | 99.99th=[99000]
  lat (usec)   : 250=10.00%, 500=40.00%, 750=30.00%, 1000=19.99%
  cpu          : usr=0.50%, sys=2.00%, ctx=100000, majf=0, minf=10
  IO depths    : 1=0.1%, 2=0.1%, 4=0.1%, 8=0.1%, 16=0.1%, 32=0.1%, >=64=99.9%
     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.1%, >=64=0.0%
     issued rwts: total={r_iops * 60},{w_iops * 60},0,0 short=0,0,0,0 dropped=0,0,0,0
     latency   : target=0, window=0, percentile=100.00%, depth=64

Run status group 0 (all jobs):
   READ: bw={rb}KiB/s, io={rb * 60 // 1024}MiB, run=60001-60001msec
  WRITE: bw={wb}KiB/s, io={wb * 60 // 1024}MiB, run=60001-60001msec
"""


def fio2_randrw(name: str, r_iops: int, w_iops: int) -> str:
    """fio 2.1.5's text, as study 2 ran it (gtod_reduce: no latencies)."""
    return f"""{name}: (g=0): rw=randrw, bs=4K-4K/4K-4K/4K-4K, ioengine=libaio, iodepth=64
fio-2.1.5
Starting 1 process
{name}: Laying out IO file(s) (1 file(s) / 1024MB)

{name}: (groupid=0, jobs=1): err= 0: pid=4760: Thu Jul 17 11:13:56 2014
  read : io={r_iops * 4 * 246}KB, bw={r_iops * 4}KB/s, iops={r_iops}, runt=246000msec
  write: io={w_iops * 4 * 246}KB, bw={w_iops * 4}KB/s, iops={w_iops}, runt=246000msec
  cpu          : usr=0.45%, sys=2.15%, ctx=140000, majf=0, minf=6
  IO depths    : 1=0.1%, 2=0.1%, 4=0.1%, 8=0.1%, 16=0.1%, 32=0.1%, >=64=100.0%
     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.1%, >=64=0.0%
     issued    : total=r={r_iops * 246}/w={w_iops * 246}/d=0, short=r=0/w=0/d=0

Run status group 0 (all jobs):
   READ: io={r_iops * 4 * 246}KB, aggrb={r_iops * 4}KB/s, minb={r_iops * 4}KB/s, maxb={r_iops * 4}KB/s, mint=246000msec, maxt=246000msec
  WRITE: io={w_iops * 4 * 246}KB, aggrb={w_iops * 4}KB/s, minb={w_iops * 4}KB/s, maxb={w_iops * 4}KB/s, mint=246000msec, maxt=246000msec
"""


def fio3_etcd(iops: int, p99_us: int, version: str = "3.7") -> str:
    return f"""mytest: (g=0): rw=write, bs=(R) 2300B-2300B, (W) 2300B-2300B, (T) 2300B-2300B, ioengine=sync, iodepth=1
fio-{version}
Starting 1 process
mytest: Laying out IO file (1 file / 22MiB)

mytest: (groupid=0, jobs=1): err= 0: pid=2299: Tue May 14 08:00:00 2019
  write: IOPS={iops}, BW={iops * 2300 // 1024}KiB/s ({iops * 2300 // 1000}kB/s)(21.0MiB/{10029 * 1000 // iops}msec)
    clat (usec): min=4, max=9000, avg=12.20, stdev=30.10
     lat (usec): min=4, max=9001, avg=12.60, stdev=30.20
    clat percentiles (usec):
     |  1.00th=[    5],  5.00th=[    6], 10.00th=[    6], 20.00th=[    7],
     | 30.00th=[    8], 40.00th=[    9], 50.00th=[   10], 60.00th=[   11],
     | 70.00th=[   12], 80.00th=[   14], 90.00th=[   18], 95.00th=[   22],
     | 99.00th=[   49], 99.50th=[   70], 99.90th=[  200], 99.95th=[  400],
     | 99.99th=[ 8000]
  fsync/fdatasync/sync_file_range:
    sync (usec): min=300, max={p99_us * 3}, avg={p99_us // 3}.40, stdev=500.30
    sync percentiles (usec):
     |  1.00th=[  400],  5.00th=[  450], 10.00th=[  500], 20.00th=[  600],
     | 30.00th=[  700], 40.00th=[  800], 50.00th=[  900], 60.00th=[ 1000],
     | 70.00th=[ 1100], 80.00th=[ 1200], 90.00th=[ 1400], 95.00th=[ 1600],
     | 99.00th=[ {p99_us}], 99.50th=[ {p99_us + 100}], 99.90th=[ {p99_us * 2}], 99.95th=[ {p99_us * 2}],
     | 99.99th=[ {p99_us * 3}]
  cpu          : usr=0.90%, sys=5.00%, ctx=20000, majf=0, minf=12
  IO depths    : 1=200.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     issued rwts: total=0,10029,0,0 short=10029,0,0,0 dropped=0,0,0,0
     latency   : target=0, window=0, percentile=100.00%, depth=1

Run status group 0 (all jobs):
  WRITE: bw={iops * 2300 // 1024}KiB/s, io=21.0MiB (22.0MB), run={10029 * 1000 // iops}-{10029 * 1000 // iops}msec

Disk stats (read/write):
  nvme0n1: ios=0/20000, merge=0/100, ticks=0/9000, in_queue=9000, util=80.00%
"""


SYSTEMS = [("EFS", 796, 267, 700), ("GlusterFS (replica 2)", 482, 161, 1100),
           ("NFS 4.0", 10178, 3417, 90)]


def blog_post() -> str:
    """Study 2's shape: one job name ("test") for three systems, each under a heading,
    prose between them, the command line once at the top."""
    parts = ["# A benchmark of EFS, GlusterFS and NFS",
             "We ran the same fio command on each system:",
             "    $ fio --randrepeat=1 --ioengine=libaio --direct=1 --gtod_reduce=1"
             " --name=test --bs=4k --iodepth=64 --size=1G --readwrite=randrw --rwmixread=75",
             ""]
    for i, (system, r, w, clat) in enumerate(SYSTEMS):
        parts += [f"## {system}", "", "The results were as follows.", "",
                  fio3_randrw("test", r, w, clat, 100 + i),
                  "That is what it is." if i < 2 else "In short: NFS wins."]
    return "\n".join(parts) + "\n"


def test_three_systems_on_one_page_are_three_tests_never_a_sum():
    p = parse_source("blog.md", blog_post())
    assert [r.name for r in p.results] == [s for s, *_ in SYSTEMS]
    for r, (_, r_iops, w_iops, clat) in zip(p.results, SYSTEMS, strict=True):
        assert r.read is not None and r.write is not None
        assert r.read.iops == r_iops and r.write.iops == w_iops  # each its own
        assert r.read.clat is not None and r.read.clat.percentiles_ns[50.0] == clat * 1000
        assert r.jobs == 1
        assert r.options["rwmixread"] == "75" and r.options["iodepth"] == "64"
    assert [s["named_from"] for s in p.sources()] == ["heading"] * 3
    lines = [s["lines"] for s in p.sources()]
    assert all(a < b for a, b in lines) and all(
        lines[i][1] < lines[i + 1][0] for i in range(2))


def wiki_page() -> str:
    """Study 3's shape: contributors' etcd results, each under a wiki heading, inside
    <pre> with HTML entities, one of them with line numbers."""
    rows = [("consumer NVMe (VDO)", 664, 4228, "3.7"), ("consumer SATA SSD", 428, 4752, "3.1"),
            ("5.4k rpm HDD", 42, 34341, "3.1"), ("vSphere VSAN VM", 182, 18000, "3.12")]
    out = ["= etcd disk check results =", "",
           "Please add yours below: run the command and paste its output.", ""]
    for i, (who, iops, p99, version) in enumerate(rows):
        text = fio3_etcd(iops, p99, version)
        if i == 1:  # pasted with line numbers
            text = "".join(f"{n:3d}| {ln}\n" for n, ln in enumerate(text.splitlines(), 1))
        text = text.replace(">", "&gt;")
        out += [f"== {who} ==", "<pre>",
                "$ fio --rw=write --ioengine=sync --fdatasync=1 --directory=test-data"
                " --size=22m --bs=2300 --name=mytest", text, "</pre>", ""]
    return "\n".join(out)


def test_a_wiki_page_of_contributors_is_one_test_each_with_its_fdatasync_p99(tmp_path,
                                                                             store_path):
    page = tmp_path / "etcd-wiki.txt"
    page.write_text(wiki_page())
    p = parse_source(str(page), page.read_text())
    assert [r.name for r in p.results] == ["consumer NVMe (VDO)", "consumer SATA SSD",
                                           "5.4k rpm HDD", "vSphere VSAN VM"]
    for r, (iops, p99) in zip(p.results, [(664, 4228), (428, 4752), (42, 34341), (182, 18000)],
                              strict=True):
        assert r.write is not None and r.write.iops == iops
        assert r.sync is not None and r.sync.lat.percentiles_ns[99.0] == p99 * 1000
        assert r.options["fdatasync"] == "1" and r.options["bs"] in ("2300", "2300B")
    assert p.fio_version == "fio-3.7, fio-3.1, fio-3.12"
    # one run per contributor, each the etcd suite's test: the etcd verdict for each
    proc = run_cli("import", str(page), "--as", "etcd", db=store_path)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(run_cli("list", "--json", db=store_path).stdout)
    assert sorted(r["label"] for r in runs) == sorted(
        ["consumer NVMe (VDO)", "consumer SATA SSD", "5.4k rpm HDD", "vSphere VSAN VM"])
    hdd = json.loads(run_cli("show", "5.4k rpm HDD", "--json", db=store_path).stdout)
    (verdict,) = hdd["verdicts"]
    assert verdict["passed"] is False and verdict["measured"] == 34341 * 1000


def test_fio_2_and_3_mixed_in_one_page_and_show_lists_the_lines(tmp_path, store_path):
    page = tmp_path / "mixed.html"
    page.write_text("<h2>Old cluster (2014)</h2>\n<pre>\n" + fio2_randrw("test", 796, 267)
                    + "</pre>\n<h2>New cluster (2026)</h2>\n<pre>\n"
                    + fio3_randrw("test", 10178, 3417, 90, 7) + "</pre>\n")
    proc = run_cli("import", str(page), "--label", "clusters", db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    by_name = {t["name"]: t for t in run["tests"]}
    assert set(by_name) == {"Old cluster (2014)", "New cluster (2026)"}
    assert by_name["Old cluster (2014)"]["read"]["iops"] == 796
    assert by_name["New cluster (2026)"]["read"]["iops"] == 10178
    sources = run["data"]["import_sources"]
    assert [s["test"] for s in sources] == ["Old cluster (2014)", "New cluster (2026)"]
    assert sources[0]["lines"][0] == 3 and sources[1]["lines"][0] > sources[0]["lines"][1]
    shown = run_cli("show", "last", db=store_path).stdout
    assert "Old cluster (2014)" in shown and f"lines {sources[0]['lines'][0]}" in shown
    split = run_cli("import", str(page), "--split", "runs", db=store_path)
    assert split.returncode == 0, split.stderr
    assert "Imported run #2" in split.stderr and "Imported run #3" in split.stderr


def test_names_from_command_lines_and_numbers_when_nothing_else_says():
    doc = ("$ fio --name=disk-a --rw=randrw --bs=4k\n" + fio3_randrw("disk-a", 100, 30, 500, 1)
           + "$ fio --name=x --directory=/mnt/b --rw=randrw\n"
           + fio3_randrw("x", 200, 60, 500, 2)
           + fio3_randrw("x", 300, 90, 500, 3))
    p = parse_source("log", doc)
    assert [r.name for r in p.results] == ["disk-a", "x", "x#2"]
    assert [s["named_from"] for s in p.sources()] == ["--name", "--name", "job name"]
    assert [r.read.iops for r in p.results if r.read] == [100, 200, 300]


def test_what_cannot_be_read_is_left_out_and_said(tmp_path, store_path):
    broken = fio3_randrw("test", 50, 10, 500, 9).replace("read: IOPS=50,", "read: IOPS=??,")
    page = tmp_path / "p.md"
    page.write_text("## A\n" + fio3_randrw("test", 100, 30, 500, 1) + "\n## B\n" + broken)
    proc = run_cli("import", str(page), db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert [t["name"] for t in run["tests"]] == ["A"]
    (left,) = run["data"]["import_left_out"]
    assert "cannot read this read line" in left["why"]
    assert "left out" in run_cli("show", "last", db=store_path).stdout


@pytest.mark.parametrize("junk", ["", "no fio here at all"])
def test_a_document_with_no_fio_run_imports_nothing(junk, tmp_path, store_path):
    page = tmp_path / "p.txt"
    page.write_text(junk)
    proc = run_cli("import", str(page), db=store_path)
    assert proc.returncode == 2 and "nothing was imported" in proc.stderr


def test_runs_are_named_by_what_names_them_not_by_sentences_about_the_output():
    """Prose only, no heading: the line that names the system, not the sentence before
    the results that speaks of them ("... along with the job / output. The contents of
    that file are shown below.", "The results were as follows.")."""
    doc = "\n".join([
        "Our old NFS filer (2019)",
        "We ran the command and wrote the results to fio.out along with the job",
        "output. The contents of that file are shown below.",
        fio3_randrw("mytest", 100, 30, 500, 1),
        "Samsung 970 EVO in a desktop:",
        "The results were as follows.",
        fio3_randrw("mytest", 200, 60, 500, 2),
        "Here is the output from the second box:",
        fio3_randrw("mytest", 300, 90, 500, 3),
    ]) + "\n"
    p = parse_source("page", doc)
    assert [r.name for r in p.results] == ["Our old NFS filer (2019)",
                                           "Samsung 970 EVO in a desktop", "mytest"]
    assert [s["named_from"] for s in p.sources()] == ["prose", "prose", "job name"]
