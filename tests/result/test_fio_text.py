"""fio's normal and terse text output, read back and checked against fio's own json+.

The fixtures are made here by real fio 3.33, one run printing all three forms
(--output-format=normal,terse,json+); every imported field is compared with the
JSON within the text's rounding. fio 2.x text is written by hand in its format.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storbench.errors import ConfigError
from storbench.pipeline.importer import parse_source
from storbench.result import model
from tests.conftest import FIO, needs_fio, run_cli
from tests.result.test_fio_json import over_the_longest

JOBS = {
    # fsync/fdatasync block, psync, two directions
    "sync": "[mix]\nrw=randrw\nbs=4k\nsize=4m\nfdatasync=8\nruntime=1\n",
    # several job sections, numjobs with group_reporting, slat from libaio
    "multi": ("[global]\nsize=8m\nioengine=libaio\ndirect=1\n[rr]\nrw=randread\nbs=4k\n"
              "iodepth=8\nnumjobs=2\ngroup_reporting\ntime_based\nruntime=1\n"
              "[sw]\nrw=write\nbs=64k\niodepth=4\nstonewall\n"),
}


def split_forms(out: str) -> dict[str, str]:
    """fio's output with normal, terse and json+ at once -> each form alone."""
    start = out.index("{\n")
    end = out.rindex("\n}") + 2
    terse = [ln for ln in out.splitlines() if ln.startswith("3;fio-")]
    before = "\n".join(ln for ln in out[:start].splitlines() if not ln.startswith("3;fio-"))
    return {"normal": before + "\n" + out[end:], "terse": "\n".join(terse) + "\n",
            "json": out[start:end]}


@pytest.fixture(scope="module", params=sorted(JOBS))
def forms(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          fio: str) -> dict[str, str]:
    d = tmp_path_factory.mktemp("text")
    job = d / "job.fio"
    job.write_text(f"[global]\ndirectory={d}\n" + JOBS[request.param])
    out = subprocess.run([fio, "--output-format=normal,terse,json+", str(job)],
                         capture_output=True, text=True, check=True).stdout
    return split_forms(out)


def results(name: str, text: str) -> list[model.TestResult]:
    return parse_source(name, text).results


def close(a: float, b: float, *, rel: float = 0.0, unit: float = 0.0) -> bool:
    return abs(a - b) <= max(rel * abs(b), unit) + 1e-9


def unit_of(text: str, test: str, direction: str, kind: str) -> float:
    """The unit (ns) fio printed a latency block of one test in.

    A block's percentiles have a unit of their own ("clat percentiles (usec)" under
    "clat (nsec)" when the minimum is small and the tail long): pass "clat percentiles".
    """
    block = text[re.search(rf"^{test}: \(groupid", text, re.M).start():]
    if direction == "sync":
        block = block[block.index("fsync/fdatasync"):]
    else:
        block = block[re.search(rf"\b{direction}: IOPS", block).start():]
    m = re.search(rf"\b{kind} \((nsec|usec|msec)\)", block)
    return {"nsec": 1.0, "usec": 1e3, "msec": 1e6}[m.group(1)]


@needs_fio
def test_normal_text_matches_json(forms: dict[str, str]) -> None:
    text, want = results("t", forms["normal"]), results("j", forms["json"])
    assert [r.name for r in text] == [r.name for r in want]
    for got, exp in zip(text, want, strict=True):
        assert got.jobs == exp.jobs and got.error == exp.error
        # (the text's 2 decimals a job's share: a group's CPU is its jobs' times it; fio's
        # JSON leaves a bare group_reporting out of the job's options, so by its jobs)
        rounded = 0.006 * exp.jobs
        assert got.usr_cpu_percent == pytest.approx(exp.usr_cpu_percent, abs=rounded)
        assert got.context_switches == exp.context_switches
        for level, pct in exp.iodepth_percent.items():
            assert got.iodepth_percent[level] == pytest.approx(pct, abs=0.051)
        for key in ("rw", "bs", "ioengine", "iodepth"):  # from the header line
            assert key in got.options
        assert got.options["rw"] == exp.options["rw"]
        for name, d in exp.directions():
            g = got.direction(name)
            assert g is not None
            assert close(g.iops, d.iops, rel=0.005, unit=0.5)  # IOPS=8551 / 19.6k
            assert close(g.bw_bytes_per_s, d.bw_bytes_per_s, rel=0.005)  # 3 digits
            assert close(g.io_bytes, d.io_bytes, rel=0.005)
            assert g.runtime_ms == d.runtime_ms and g.total_ios == d.total_ios
            assert g.short_ios == d.short_ios
            for kind in ("clat", "lat"):
                gl, el = getattr(g, kind), getattr(d, kind)
                unit = unit_of(forms["normal"], exp.name, name, kind)
                assert close(gl.mean_ns, el.mean_ns, unit=0.006 * unit)
                assert close(gl.min_ns, el.min_ns, rel=0.001, unit=unit)
                assert close(gl.max_ns, el.max_ns, rel=0.001, unit=unit)
                assert gl.bins == {}  # text has no histogram: absent, not invented
            if exp.jobs == 1 or "group_reporting" in exp.options:
                unit = unit_of(forms["normal"], exp.name, name, "clat percentiles")
                assert set(g.clat.percentiles_ns) == set(d.clat.percentiles_ns)
                for p, v in d.clat.percentiles_ns.items():
                    assert close(g.clat.percentiles_ns[p], v, rel=0.001, unit=unit)
        if exp.sync is not None:
            unit = unit_of(forms["normal"], exp.name, "sync", "sync")
            assert got.sync is not None
            assert close(got.sync.lat.mean_ns, exp.sync.lat.mean_ns, unit=0.006 * unit)
            unit = unit_of(forms["normal"], exp.name, "sync", "sync percentiles")
            for p, v in exp.sync.lat.percentiles_ns.items():
                assert close(got.sync.lat.percentiles_ns[p], v, rel=0.001, unit=unit)


@needs_fio
def test_terse_matches_json(forms: dict[str, str]) -> None:
    terse, want = results("t", forms["terse"]), results("j", forms["json"])
    assert [r.name for r in terse] == [r.name for r in want]
    for got, exp in zip(terse, want, strict=True):
        assert got.context_switches == exp.context_switches
        for name, d in exp.directions():
            g = got.direction(name)
            assert g is not None
            assert close(g.iops, d.iops, unit=1.0)  # whole IOPS
            assert close(g.bw_bytes_per_s, d.bw_bytes_per_s, unit=1024)  # whole KiB/s
            assert close(g.io_bytes, d.io_bytes, unit=1024)
            assert g.runtime_ms == d.runtime_ms
            assert close(g.clat.mean_ns, d.clat.mean_ns, unit=1.0)  # µs with 6 decimals
            assert close(g.clat.max_ns, d.clat.max_ns, unit=1000)
            if exp.jobs == 1 or "group_reporting" in exp.options:
                for p, v in d.clat.percentiles_ns.items():
                    assert close(g.clat.percentiles_ns[p], v, unit=1000)


FIO2_TEXT = """\
test: (g=0): rw=randrw, bs=4K-4K/4K-4K/4K-4K, ioengine=libaio, iodepth=64
fio-2.1.5
Starting 1 process

test: (groupid=0, jobs=1): err= 0: pid=4760: Thu Jul 17 11:13:56 2014
  read : io=784996KB, bw=3185.4KB/s, iops=796, runt=246443msec
    slat (usec): min=3, max=3040, avg=11.54, stdev=14.93
    clat (msec): min=1, max=2190, avg=59.76, stdev=75.91
     lat (msec): min=1, max=2190, avg=59.77, stdev=75.91
    clat percentiles (msec):
     |  1.00th=[    4],  5.00th=[    6], 10.00th=[    7], 20.00th=[    9],
     | 30.00th=[   11], 40.00th=[   13], 50.00th=[   36], 60.00th=[   48],
     | 70.00th=[   61], 80.00th=[   85], 90.00th=[  149], 95.00th=[  219],
     | 99.00th=[  351], 99.50th=[  420], 99.90th=[  611], 99.95th=[  701],
     | 99.99th=[ 1106]
    bw (KB  /s): min=  816, max= 7336, per=100.00%, avg=3187.40, stdev=412.49
  write: io=263580KB, bw=1069.6KB/s, iops=267, runt=246443msec
    slat (usec): min=3, max=2910, avg=12.38, stdev=14.72
    clat (msec): min=1, max=1881, avg=60.12, stdev=74.81
     lat (msec): min=1, max=1881, avg=60.13, stdev=74.81
    clat percentiles (msec):
     |  1.00th=[    4],  5.00th=[    6], 10.00th=[    7], 20.00th=[    9],
     | 30.00th=[   11], 40.00th=[   14], 50.00th=[   37], 60.00th=[   49],
     | 70.00th=[   62], 80.00th=[   86], 90.00th=[  151], 95.00th=[  219],
     | 99.00th=[  347], 99.50th=[  416], 99.90th=[  603], 99.95th=[  676],
     | 99.99th=[ 1045]
    bw (KB  /s): min=  264, max= 2472, per=100.00%, avg=1070.07, stdev=141.92
    lat (msec) : 2=0.07%, 4=3.95%, 10=37.32%, 20=32.19%, 50=23.97%
    lat (msec) : 100=2.35%, 250=0.15%
  cpu          : usr=0.90%, sys=3.21%, ctx=262146, majf=0, minf=7
  IO depths    : 1=0.1%, 2=0.1%, 4=0.1%, 8=0.1%, 16=0.1%, 32=0.1%, >=64=100.0%
     submit    : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.0%, >=64=0.0%
     complete  : 0=0.0%, 4=100.0%, 8=0.0%, 16=0.0%, 32=0.0%, 64=0.1%, >=64=0.0%
     issued    : total=r=196249/w=65895/d=0, short=r=0/w=0/d=0
     latency   : target=0, window=0, percentile=100.00%, depth=64

Run status group 0 (all jobs):
   READ: io=784996KB, aggrb=3185KB/s, minb=3185KB/s, maxb=3185KB/s, mint=246443msec, \
maxt=246443msec
  WRITE: io=263580KB, aggrb=1069KB/s, minb=1069KB/s, maxb=1069KB/s, mint=246443msec, \
maxt=246443msec
"""

FIO2_SEQ = """\
seq: (groupid=0, jobs=4): err= 0: pid=100: Mon Jan  5 10:00:00 2015
  write: io=4096.0MB, bw=131072KB/s, iops=32, runt= 32000msec
    clat (usec): min=20515, max=61230, avg=31250.12, stdev=2103.55
     lat (usec): min=20520, max=61236, avg=31255.80, stdev=2103.61
    clat percentiles (usec):
     |  1.00th=[27008],  5.00th=[28288], 50.00th=[31104], 99.00th=[37120]
  cpu          : usr=0.12%, sys=1.05%, ctx=4100, majf=0, minf=28
  IO depths    : 1=100.0%, 2=0.0%, 4=0.0%, 8=0.0%, 16=0.0%, 32=0.0%, >=64=0.0%
     issued    : total=r=0/w=1024/d=0, short=r=0/w=0/d=0
"""


def test_fio2_text() -> None:
    (t,) = results("fio2", FIO2_TEXT)
    assert t.name == "test" and t.jobs == 1
    assert t.options == {"rw": "randrw", "bs": "4K", "ioengine": "libaio", "iodepth": "64"}
    r, w = t.read, t.write
    assert r is not None and w is not None
    assert r.io_bytes == 784996 * 1024  # fio 2.x: KB is 1024 bytes
    assert r.bw_bytes_per_s == pytest.approx(3185.4 * 1024)
    assert r.iops == 796 and r.runtime_ms == 246443 and r.total_ios == 196249
    assert w.total_ios == 65895 and w.iops == 267
    assert r.clat is not None and r.slat is not None
    assert r.clat.mean_ns == pytest.approx(59.76e6) and r.clat.max_ns == 2190e6
    assert r.slat.mean_ns == pytest.approx(11540)
    assert r.clat.percentiles_ns[99.0] == 351e6 and r.clat.percentiles_ns[99.99] == 1106e6
    assert r.clat.samples == 196249  # the I/O count stands in for fio 2.x's missing N
    assert t.usr_cpu_percent == 0.9 and t.context_switches == 262146
    assert t.iodepth_percent[">=64"] == 100.0
    (s,) = results("seq", FIO2_SEQ)
    assert s.jobs == 4 and s.write is not None
    assert s.write.io_bytes == 4096 * 1024**2 and s.write.bw_bytes_per_s == 131072 * 1024
    assert s.write.clat is not None and s.write.clat.percentiles_ns[99.0] == 37120e3


FIO3_SUFFIXES = """\
rr: (groupid=0, jobs=1): err= 0: pid=1: Sun Nov 22 04:49:19 2026
  read: IOPS=19.6k, BW=76.5MiB/s (80.2MB/s)(4590MiB/60001msec)
    clat (nsec): min=1116, max=28046k, avg=50812.31, stdev=52187.51
     lat (nsec): min=1150, max=28046k, avg=50850.02, stdev=52187.90
    clat percentiles (usec):
     |  1.00th=[   39], 50.00th=[   47], 99.00th=[  110], 99.99th=[ 1004]
     issued rwts: total=1175040,0,0,0 short=0,0,0,0 dropped=0,0,0,0
"""


def test_fio3_suffixes() -> None:
    (t,) = results("suffixes", FIO3_SUFFIXES)
    assert t.read is not None and t.read.clat is not None
    assert t.read.iops == 19600  # k = 1000 for counts
    assert t.read.bw_bytes_per_s == pytest.approx(76.5 * 1024**2)
    assert t.read.io_bytes == 4590 * 1024**2 and t.read.runtime_ms == 60001
    assert t.read.clat.max_ns == 28046e3 and t.read.clat.percentiles_ns[99.99] == 1004e3


def _terminal_log(text: str) -> str:
    return ("user@host:~$ fio --name=test --rw=randrw --bs=4k --size=1g\n" + text
            + "user@host:~$ echo done\ndone\n")


def _blog_post(text: str) -> str:
    escaped = text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
    return ("<p>We ran fio on the new volume. Results below &mdash; not bad!</p>\n<pre>\n"
            + escaped + "</pre>\n<p>As you can see, the p99 is fine.</p>\n")


def _line_numbers(text: str) -> str:
    return "".join(f"{i:4d}  {ln}\n" for i, ln in enumerate(text.splitlines(), start=1))


def _rewrapped(text: str) -> str:
    """Whitespace collapsed and lines re-broken at 60 characters, as a mail client does."""
    words = " ".join(text.split()).split(" ")
    lines, cur = [], ""
    for w in words:
        if len(cur) + len(w) > 60:
            lines.append(cur)
            cur = ""
        cur = f"{cur} {w}" if cur else w
    return "\n".join([*lines, cur]) + "\n"


MANGLERS = {"terminal": _terminal_log, "blog": _blog_post, "numbered": _line_numbers,
            "rewrapped": _rewrapped}


# A terse line re-wrapped is no longer one line per job: that mangling is not asked of it.
CASES = [pytest.param(s, m, marks=needs_fio) if s == "fio3" else (s, m)  # fio3: run now
         for s in ("fio2", "fio3", "terse") for m in sorted(MANGLERS)
         if (s, m) != ("terse", "rewrapped")]


@pytest.mark.parametrize("source, mangle", CASES)
def test_embedded_and_mangled(source: str, mangle: str, tmp_path: Path) -> None:
    if source == "fio3":
        if FIO is None:
            pytest.skip("fio is not installed")
        job = tmp_path / "j.fio"
        job.write_text(f"[global]\ndirectory={tmp_path}\n" + JOBS["sync"])
        out = subprocess.run([FIO, "--output-format=normal,terse", str(job)],
                             capture_output=True, text=True, check=True).stdout
        text = "\n".join(ln for ln in out.splitlines() if not ln.startswith("3;fio-")) + "\n"
    elif source == "terse":
        text = TERSE_LINE
    else:
        text = FIO2_TEXT
    clean = results("clean", text)
    mangled = results("mangled", MANGLERS[mangle](text))
    if mangle == "terminal" and source == "fio2":
        # the log's command line ran this very job (--name=test): its options are recovered
        assert mangled[0].options == {**clean[0].options, "name": "test", "size": "1g",
                                      "rw": "randrw", "bs": clean[0].options["bs"]}
        mangled = [replace(m, options=c.options) for m, c in zip(mangled, clean, strict=True)]
    assert mangled == clean


TERSE_LINE = (
    "3;fio-3.33;mix;0;0;1984;34206;8551;58;0;0;0.000000;0.000000;56;261;77.895647;15.961888;"
    "1.000000%=58;5.000000%=61;10.000000%=63;20.000000%=68;30.000000%=70;40.000000%=72;"
    "50.000000%=75;60.000000%=80;70.000000%=82;80.000000%=84;90.000000%=87;95.000000%=98;"
    "99.000000%=134;99.500000%=173;99.900000%=261;99.950000%=261;99.990000%=261;0%=0;0%=0;"
    "0%=0;56;261;77.942486;15.981556;0;0;0.000000%;0.000000;0.000000;2112;36413;9103;58;0;0;"
    "0.000000;0.000000;1;34;2.857165;2.237658;1.000000%=1;5.000000%=1;10.000000%=1;"
    "20.000000%=1;30.000000%=2;40.000000%=2;50.000000%=2;60.000000%=2;70.000000%=2;"
    "80.000000%=3;90.000000%=3;95.000000%=4;99.000000%=11;99.500000%=21;99.900000%=34;"
    "99.950000%=34;99.990000%=34;0%=0;0%=0;0%=0;1;34;2.918998;2.266306;0;0;0.000000%;"
    "0.000000;0.000000;22.807018%;12.280702%;700;0;13;111.7%;0.0%;0.0%;0.0%;0.0%;0.0%;0.0%;"
    "10.35%;38.18%;2.44%;0.29%;0.29%;46.39%;1.95%;0.10%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;"
    "0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;0.00%;vda;0;0;0;0;0;0;0;0.00%\n")


def test_terse_fields() -> None:
    (t,) = results("terse", TERSE_LINE)
    assert t.read is not None and t.read.clat is not None
    assert t.read.io_bytes == 1984 * 1024 and t.read.bw_bytes_per_s == 34206 * 1024
    assert t.read.iops == 8551 and t.read.runtime_ms == 58
    assert t.read.clat.percentiles_ns[99.0] == 134e3 and t.read.slat is None
    assert t.usr_cpu_percent == pytest.approx(22.807018) and t.context_switches == 700
    assert t.iodepth_percent["1"] == 111.7


SEEDS = [FIO2_TEXT, FIO3_SUFFIXES, TERSE_LINE, _blog_post(FIO2_TEXT),
         '{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "read": {"io_bytes": 1}}]}']


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(SEEDS), cuts=st.lists(
    st.tuples(st.floats(0, 1), st.integers(0, 40), st.text(max_size=8)), max_size=4))
def test_mutated_input_raises_only_our_error(seed: str, cuts: list[tuple[float, int, str]]
                                             ) -> None:
    text = seed
    for where, length, insert in cuts:
        at = math.floor(where * len(text))
        text = text[:at] + insert + text[at + length:]
    try:
        parse_source("fuzz", text)
    except ConfigError as exc:
        assert str(exc).startswith("fuzz")


FOUR_FILES = ("[global]\nrw=randrw\nrwmixread=60\nbs=4k\nsize=2m\nioengine=psync\n"
              + "".join(f"[file{i}]\n" for i in range(1, 5)))


def _glued_numbers(text: str) -> str:
    """A code block copied from a page with its gutter: each line's number glued to it."""
    return "".join(f"{i}{ln}\n" for i, ln in enumerate(text.splitlines(), start=1))


@needs_fio
def test_a_pasted_page_with_glued_line_numbers_a_status_line_and_four_jobs(tmp_path: Path
                                                                           ) -> None:
    """The study's page: fio's status line in front, every line's number glued to it
    ("7file1: (groupid=0, ..."), four jobs of one run (file1 ... file4, one group):
    one test, named as the jobs are without their number, its IOPS the four jobs'
    (each over the longest one's time where it ended early, as fio's group line), each
    job's figures what fio's JSON says."""
    assert FIO is not None
    job = tmp_path / "four.fio"
    job.write_text(f"[global]\ndirectory={tmp_path}\n" + FOUR_FILES)
    out = subprocess.run([FIO, "--output-format=normal,json+", str(job)], capture_output=True,
                         text=True, check=True).stdout
    start, end = out.index("{\n"), out.rindex("\n}") + 2
    normal, doc = out[:start] + out[end:], json.loads(out[start:end])
    status = ("Jobs: 4 (f=4): [m(4)][100.0%][r=2252KiB/s,w=1500KiB/s][r=563,w=375 IOPS]"
              "[eta 00m:00s]")
    page = ("Our NFS box, four files at once:\n\n" + _glued_numbers(status + "\n" + normal)
            + "\n12 ms was the worst we saw.\n")
    assert re.search(r"^\d+file1: \(groupid=0, jobs=1\)", page, re.M), page
    (t,) = results("page", page)
    assert t.name == "file" and t.jobs == 4
    for d in ("read", "write"):
        # each job's rate, one that ended early over the longest one's time (fio's group
        # line; the jobs end apart on a loaded machine)
        want = over_the_longest(doc["jobs"], d, "iops")
        got = getattr(t, d).iops
        assert got == pytest.approx(want, rel=0.01, abs=2), (d, got, want)
    # the same text without the gutter and status line reads the same
    (clean,) = results("clean", normal)
    assert replace(clean, options=t.options) == t
    # one test: it can be stored as the study's suite
    pasted = tmp_path / "page.txt"
    pasted.write_text(page)
    proc = run_cli("import", str(pasted), "--as", "app-mixed", db=tmp_path / "r.db")
    assert proc.returncode == 0, proc.stderr


def test_glued_numbers_need_the_sequence() -> None:
    """Lines that merely start with digits are not a gutter."""
    from storbench.result.fio_text import clean_lines

    prose = ["4k reads at 1 ms", "128 jobs", "3 runs", "99th percentile"]
    assert clean_lines("\n".join(prose)) == prose
    assert clean_lines("9first\n10second\n\n12fourth\n13fifth\n14sixth") == [
        "first", "second", "", "fourth", "fifth", "sixth"]
    # three lines that begin with their own number among many: figures, not a gutter
    figures = ["x"] * 10 + ["11 KiB", "12 MiB", "13 GiB"] + ["y"] * 10
    assert clean_lines("\n".join(figures)) == figures
