"""`storbench record` and `run --replay`: a real application's I/O captured with strace or
bpftrace (eBPF) and replayed by fio's iolog replay on another directory.

The application is fio itself, the "exactly known" one: its own JSON says how many
reads, writes and syncs it issued, so the recording and the replay are checked against
numbers that come from neither."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from storbench.errors import ConfigError
from storbench.execute import bpfcapture
from storbench.workload.bpfevents import CUT, from_bpf
from storbench.workload.guard import check_iolog
from storbench.workload.syscalls import from_strace
from storbench.workload.trace import Trace
from tests.cli.test_cli import assert_one_line_error
from tests.conftest import FIO, STORBENCH, needs, needs_fio, needs_timing, run_cli

needs_strace = needs("tracer", unavailable=None if shutil.which("strace") else
                     "strace is not installed (scripts/install-testbed)")
needs_bpftrace = needs("tracer", "root", unavailable=None if bpfcapture.usable() else
                       "bpftrace is not installed (scripts/install-testbed) or not root")
TRACERS = [pytest.param("strace", marks=needs_strace),
           pytest.param("bpftrace", marks=needs_bpftrace)]


def _app(*where: str) -> list[str]:
    """fio as the application: random reads and writes with an fsync every 4 writes."""
    return [str(FIO), "--name=app", *where, "--size=512k", "--rw=randrw", "--bs=4k",
            "--ioengine=psync", "--fsync=4", "--output-format=json"]


def _fio_counts(stdout: str) -> tuple[int, int, int]:
    """The application's own count of what it did (fio's JSON, which it printed)."""
    text = stdout[stdout.index("{"):stdout.rindex("}") + 1]
    jobs = json.loads(text)["jobs"]
    return (sum(j["read"]["total_ios"] for j in jobs), sum(j["write"]["total_ios"] for j in jobs),
            sum(j["sync"]["total_ios"] for j in jobs))


@pytest.fixture
def recorded(tmpfs: Path, tmp_path: Path, request: pytest.FixtureRequest):
    """fio (two threads, each on its own file) recorded on a tmpfs (by strace unless the
    test says a tracer); its own counts."""
    tracer = getattr(request, "param", "strace")
    app = tmpfs / "app"
    app.mkdir()
    db = tmp_path / "results.db"
    for n in range(2):  # laid out beforehand: the recording is the random I/O alone
        (app / f"data.{n}").write_bytes(b"\0" * (512 << 10))
    proc = run_cli("record", "app", "--dir", str(app), "--tracer", tracer, "--",
                   *_app("--numjobs=2", "--thread", "--filename_format=data.$jobnum",
                         f"--directory={app}"), db=db)
    assert proc.returncode == 0, proc.stderr
    return db, proc.stdout, tmpfs


@needs_fio
@pytest.mark.parametrize("recorded", TRACERS, indirect=True)
def test_a_recording_holds_what_the_application_did(recorded, tmp_path, request):
    db, stdout, _ = recorded
    tracer = request.node.callspec.params["recorded"]
    [recorded_json] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    c = recorded_json["counts"]
    assert (c["reads"], c["writes"], c["syncs"]) == _fio_counts(stdout), c
    assert c["reads"] > 20 and c["files"] == 2
    assert sorted(recorded_json["files"].values()) == ["data.0", "data.1"]  # relative
    assert recorded_json["skipped"]["outside the directory"] > 0  # fio's own /proc reads
    assert recorded_json["name"] == "app" and recorded_json["stored_bytes"] > 0
    assert "Recorded workload 'app'" in stdout and f"under {tracer}" in stdout
    assert recorded_json["method"] == f"file level ({tracer})"
    assert recorded_json["tool"].startswith(f"{tracer} ")
    assert recorded_json["direct"] == 0  # fio buffered: not one read or write O_DIRECT
    again = run_cli("record", "app", "--dir", str(tmp_path), "--", "true", db=db)
    assert_one_line_error(again, again.returncode, "stored already: pass --replace")
    gone = run_cli("workloads", "--delete", "app", db=db)
    assert gone.returncode == 0 and json.loads(run_cli("workloads", "--json", db=db).stdout) == []


@needs_fio
@needs_strace  # a bpftrace recording's replays: the pgbench test's, the capped timed one's
@pytest.mark.parametrize("fast", [False, True], ids=["timed", "fast"])
def test_the_replay_issues_what_was_recorded(recorded, tmp_path, fast):
    db, stdout, tmpfs = recorded
    reads, writes, syncs = _fio_counts(stdout)
    candidate = tmpfs / "candidate"
    candidate.mkdir()
    proc = run_cli("run", str(candidate), "--replay", "app", *(["--replay-fast"] if fast else []),
                   db=db)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(run_cli("show", "last", "--json", db=db).stdout)
    replay = shown["data"]["replay"]
    assert replay["issued"] == {"reads": reads, "writes": writes, "syncs": syncs}, replay
    assert replay["timed"] is (not fast)
    # as fast as possible is another workload: its own series, not the timed replays'
    assert shown["series"].startswith("replay-fast:app@" if fast else "replay:app@"), shown
    assert (replay["lag_s"] is None) is fast  # a timed replay says how far it lagged
    assert replay["prefilled"]  # the files it reads were written first
    [result] = shown["tests"]
    assert result["read"]["total_ios"] == reads and result["name"] == "app"
    assert "direct=" not in shown["job_files"][0]  # buffered, as the application was
    assert list(candidate.iterdir()) == []  # the scratch directory is gone
    text = run_cli("show", "last", db=db).stdout
    assert f"{reads:,} reads / {writes:,} writes / {syncs:,} syncs issued of" in text, text


@needs_fio
@needs_strace
def test_a_timed_replay_waits_after_the_first_i_o_too(tmpfs, tmp_path):
    """One write, 0.4 s of nothing, two writes: the replay takes the 0.4 s. fio 3.33
    reads a time of 0 as "no I/O yet" and waited for none of what followed an I/O at 0
    (the replay "took 0.002 s (on the recorded timeline)"): a replay's times start at 1
    µs."""
    d = tmpfs / "app"
    d.mkdir()
    db = tmp_path / "r.db"
    dd = "dd if=/dev/zero of=f bs=4k conv=notrunc status=none"
    proc = run_cli("record", "gap", "--dir", str(d), "--tracer", "strace", "--", "sh", "-c",
                   f'cd "$0" && {dd} count=1 && sleep 0.4 && {dd} count=2 seek=1', str(d),
                   db=db)
    assert proc.returncode == 0, proc.stderr
    ran = run_cli("run", str(tmpfs / "app"), "--replay", "gap", db=db)
    assert ran.returncode == 0, ran.stderr
    replay = json.loads(run_cli("show", "last", "--json", db=db).stdout)["data"]["replay"]
    assert replay["issued"]["writes"] == 3 and replay["recorded_s"] >= 0.4, replay
    assert replay["replay_s"] >= replay["recorded_s"] - 0.02, replay
    # too short, said with what a replay can do about it (it refuses --runtime and
    # --until-steady, which the warning advised)
    [short] = [w for w in json.loads(run_cli("show", "last", "--json", db=db).stdout)
               ["warnings"] if w["kind"] == "too-short"]
    assert "record a longer stretch of the application (storbench record gap" \
        in short["message"] and "--runtime" not in short["message"], short


@needs_strace
def test_an_application_that_writes_much_to_its_stderr_is_recorded(tmpfs, tmp_path):
    """The recorded command's stderr is strace's: 1 MiB of it (an application's log)
    stopped the command for good once the pipe was full, nobody reading it until the
    command ended. It is read as it comes; the recording ends with the command."""
    d = tmpfs / "app"
    d.mkdir()
    proc = run_cli("record", "noisy", "--dir", str(d), "--tracer", "strace", "--", "sh", "-c",
                   'cd "$0" && head -c 1048576 /dev/zero | tr "\\0" x >&2'
                   " && dd if=/dev/zero of=f bs=4k count=2 status=none", str(d),
                   db=tmp_path / "r.db", timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "xxxx" not in proc.stderr  # the application's words are not storbench's


def test_a_replay_that_ran_ahead_of_its_timeline_is_said_so():
    """A timed replay shorter than its recording did not wait as recorded: said, never
    "on the recorded timeline" (fio's clock counts milliseconds: within that it is on it);
    the iolog a replay gets starts at 1 µs, the stored one at 0."""
    from storbench.analysis.views.replay import lag as replay_lag

    timed = {"recorded_s": 0.422, "lag_s": -0.42}
    assert replay_lag(timed) == -0.42
    assert replay_lag({**timed, "lag_s": -0.001}) == 0.0
    assert replay_lag({**timed, "lag_s": 0.05}) == 0.05
    assert replay_lag({**timed, "lag_s": None}) is None
    t = from_bpf(["pwrite64 7 7 5 6 4096 3 0", "openat 7 7 1 2 3 -100 66 /d/a"], "/d")
    assert t.iolog().splitlines()[1].startswith("0 f0001 add")
    assert t.iolog({"f0001": "/s/a"}).splitlines()[1:4] == [
        "1 /s/a add", "1 /s/a open", "1 /s/a write 0 4096"]


def _tamper(db: Path, iolog: str | None = None, files: dict[str, str] | None = None) -> None:
    with sqlite3.connect(db) as c:
        if iolog is not None:
            c.execute("UPDATE workloads SET trace = ?", (zlib.compress(iolog.encode()),))
        if files is not None:
            facts = json.loads(c.execute("SELECT facts FROM workloads").fetchone()[0])
            c.execute("UPDATE workloads SET facts = ?", (json.dumps({**facts, "files": files}),))


@needs_fio
@needs_strace
@pytest.mark.parametrize("how", ["absolute", "dotdot", "files-map"])
def test_a_tampered_workload_cannot_reach_outside(recorded, tmp_path, how):
    """A stored trace edited to name a file of its own choosing: refused before fio
    starts, and the file is untouched."""
    db, _, tmpfs = recorded
    victim = tmp_path / "victim"
    victim.write_text("precious")
    evil = {"absolute": str(victim), "dotdot": "../../victim"}.get(how)
    if evil is not None:
        _tamper(db, iolog=f"fio version 3 iolog\n0 {evil} add\n0 {evil} open\n"
                          f"1 {evil} write 0 4096\n")
    else:
        _tamper(db, files={"f0001": "../victim", "f0002": "data.1"})
    candidate = tmpfs / "candidate"
    candidate.mkdir()
    proc = run_cli("run", str(candidate), "--replay", "app", db=db)
    assert proc.returncode != 0
    assert_one_line_error(proc, proc.returncode, "refused")
    assert victim.read_text() == "precious"


def test_the_gate_judges_the_names_an_iolog_holds():
    inside = "fio version 3 iolog\n0 /s/x/f0001 add\n0 /s/x/f0001 open\n1 /s/x/f0001 read 0 4\n"
    check_iolog(inside, ["/s/x"], "t")
    for bad in ("/etc/passwd", "f0001", "/s/x/../y"):
        with pytest.raises(ConfigError):
            check_iolog(inside.replace("/s/x/f0001", bad), ["/s/x"], "t")
    check_iolog("fio version 2 iolog\n/s/x/a add\n/s/x/a read 0 1\n", ["/s/x"], "t")
    with pytest.raises(ConfigError):
        check_iolog("fio version 2 iolog\n/dev/sda add\n", ["/s/x"], "t")


def test_calls_are_in_the_order_they_began_not_the_order_strace_wrote_them():
    """Two threads: a read that began first but ended last (unfinished, then resumed
    after the other thread's write) comes first, at 0; no time before the first I/O (a
    negative time made the stored trace unreadable: one CI run of the replay test)."""
    lines = [
        '7 1.000100 pread64(3</d/a>, <unfinished ...>',
        '8 1.000200 pwrite64(4</d/b>, ""..., 512, 0) = 512 <0.000010>',
        '7 1.000300 <... pread64 resumed>""..., 4096, 0) = 4096 <0.000200>',
    ]
    t = from_strace(lines, "/d")
    assert [(o.at_us, o.action, t.files[o.file]) for o in t.ops] == [
        (0, "read", "a"), (100, "write", "b")]
    again = Trace.from_iolog(t.iolog(), t.files, t.skipped, t.depth)
    assert again.ops == t.ops and t.depth == 2
    # what a trace stored before the sort held: a negative time, refused with the way out
    stored = t.iolog().replace("\n0 f0001 read", "\n-100 f0001 read")
    with pytest.raises(ConfigError, match=r"negative time.*record the workload again"):
        Trace.from_iolog(stored, t.files, t.skipped, t.depth)


def test_strace_lines_become_the_trace():
    """strace's forms: a call split by another thread (unfinished/resumed), read() at
    the position lseek left, O_APPEND writes at the end, files elsewhere left out."""
    lines = [
        '7 1.000000 openat(AT_FDCWD</d>, "a", O_RDWR|O_CREAT, 0600) = 3</d/a> <0.000010>',
        '7 1.000100 pwrite64(3</d/a>, ""..., 8192, 0) = 8192 <0.000010>',
        '7 1.000200 lseek(3</d/a>, 4096, SEEK_SET) = 4096 <0.000001>',
        '7 1.000300 read(3</d/a>, <unfinished ...>',
        '8 1.000310 pread64(4</etc/hosts>, ""..., 10, 0) = 10 <0.000001>',
        '7 1.000400 <... read resumed>""..., 4096) = 4096 <0.000100>',
        '7 1.000500 openat(AT_FDCWD</d>, "log", O_WRONLY|O_CREAT|O_APPEND, 0600) = 5</d/log>'
        ' <0.000010>',
        '7 1.000600 write(5</d/log>, ""..., 100) = 100 <0.000010>',
        '7 1.000700 write(5</d/log>, ""..., 100) = 100 <0.000010>',
        '7 1.000800 fdatasync(5</d/log>) = 0 <0.000500>',
        '7 1.000900 read(3</d/a>, ""..., 4096) = 0 <0.000001>',  # end of file: no I/O
        '7 1.001000 mmap(NULL, 8192, PROT_READ, MAP_SHARED, 3</d/a>, 0) = 0x7f00 <0.000001>',
        '7 1.001100 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 6</lib/x.so>, 0) = 0x7f10'
        ' <0.000001>',
        '7 1.001200 copy_file_range(3</d/a>, NULL, 9</e/b>, NULL, 4096, 0) = 4096 <0.000001>',
    ]
    t = from_strace(lines, "/d")
    assert t.files == {"f0001": "a", "f0002": "log"}
    assert [(o.action, o.file, o.offset, o.length) for o in t.ops] == [
        ("write", "f0001", 0, 8192), ("read", "f0001", 4096, 4096),
        ("write", "f0002", 0, 100), ("write", "f0002", 100, 100), ("datasync", "f0002", 0, 0)]
    assert t.ops[1].at_us == 200  # when the call began, from the first I/O
    assert t.skipped == {"outside the directory": 1, "copy_file_range": 1,
                         "mmap of a file (its reads and writes through memory are not seen)": 1}
    assert t.read_extents() == {}  # it reads only what it wrote
    again = Trace.from_iolog(t.iolog(), t.files, t.skipped, t.depth)
    assert again.ops == t.ops


def test_bpftrace_events_become_the_trace():
    """bpftrace's events (execute/bpfcapture.lines): paths resolved against the working
    directory (also after chdir) and a dirfd, a forked process's copy of the descriptors
    and their positions, dup, lseek, O_APPEND, a descriptor (int) the raw tracepoint gave
    as unsigned, a cut path, the file a process had open before tracing; the same trace
    whatever order the events come out in (their times say)."""
    at_fdcwd = str((1 << 32) - 100)
    events = [
        "C 7 /d",
        "I 7 9 4096 0 /d/old",  # open before tracing, at 4096
        "openat 7 7 1000000000 1000100000 3 " + at_fdcwd + " 66 a",  # O_RDWR|O_CREAT, relative
        "pwrite64 7 7 1000100000 1000200000 8192 3 0",
        "lseek 7 7 1000200000 1000210000 4096 3 0",
        "F 7 7 8 1000250000",  # a new process: copies fd 3 at 4096
        "read 8 8 1000300000 1000500000 4096 3 -1",  # the child: at 4096
        "read 7 7 1000400000 1000450000 4096 3 -1",  # the parent's own copy: at 4096 too
        "openat 7 7 1000500000 1000510000 4 " + at_fdcwd + " 0 sub",
        "openat 7 7 1000520000 1000530000 5 4 1089 log",  # O_APPEND, relative to fd 4 (/d/sub)
        "write 7 7 1000600000 1000610000 100 5 -1",
        "dup 7 7 1000620000 1000630000 6 5 0",
        "write 7 7 1000700000 1000710000 100 6 -1",  # appending through the copy: at 100
        "fdatasync 7 7 1000800000 1001300000 0 5 0",
        "read 7 7 1000900000 1000910000 100 9 -1",  # the old file: at 4096
        "chdir 7 7 1001000000 1001010000 0 0 0 /etc",
        "openat 7 7 1001100000 1001110000 10 " + at_fdcwd + " 0 hosts",  # /etc/hosts: outside
        "read 7 7 1001200000 1001210000 10 10 -1",
        "openat 7 7 1001300000 1001310000 11 -100 0 /d/" + "x" * 200,  # cut by bpftrace
        "write 7 7 1001400000 1001410000 10 11 -1",
        "read 7 7 1001500000 1001510000 -9 3 -1",  # failed: not I/O
        "mmap 7 7 1001600000 1001610000 140000 3 0",
    ]
    t = from_bpf(events, "/d")
    assert t.files == {"f0001": "a", "f0002": "sub/log", "f0003": "old"}
    assert [(o.action, t.files[o.file], o.offset, o.length) for o in t.ops] == [
        ("write", "a", 0, 8192), ("read", "a", 4096, 4096), ("read", "a", 4096, 4096),
        ("write", "sub/log", 0, 100), ("write", "sub/log", 100, 100),
        ("datasync", "sub/log", 0, 0), ("read", "old", 4096, 100)]
    assert t.ops[1].at_us == 200 and t.depth == 2  # the two reads of "a" overlap
    assert t.skipped == {"outside the directory": 1, CUT: 1,
                         "mmap of a file (its reads and writes through memory are not seen)": 1}
    # bpftrace prints each CPU's events in turn: what happened first may come out last
    assert from_bpf(list(reversed(events)), "/d") == t


def test_o_direct_is_followed_per_descriptor_by_both_parsers():
    """Which reads and writes went through an O_DIRECT descriptor: open's flags, fcntl
    F_SETFL turning it on and off, dup (and fcntl F_DUPFD) copying it, a fork's copy
    (bpftrace), close forgetting it; strace's words and bpftrace's numbers alike."""
    strace = [
        '7 1.000000 openat(AT_FDCWD</d>, "a", O_RDWR|O_CREAT|O_DIRECT, 0600) = 3</d/a>'
        ' <0.000010>',
        '7 1.000100 pwrite64(3</d/a>, ""..., 4096, 0) = 4096 <0.000010>',  # direct
        '7 1.000200 fcntl(3</d/a>, F_SETFL, O_RDWR) = 0 <0.000001>',
        '7 1.000300 pread64(3</d/a>, ""..., 4096, 0) = 4096 <0.000010>',  # buffered
        '7 1.000400 fcntl(3</d/a>, F_SETFL, O_RDWR|O_DIRECT) = 0 <0.000001>',
        '7 1.000500 fcntl(3</d/a>, F_DUPFD_CLOEXEC, 0) = 4</d/a> <0.000001>',
        '7 1.000600 pread64(4</d/a>, ""..., 4096, 0) = 4096 <0.000010>',  # direct (copy)
        '7 1.000700 close(3</d/a>) = 0 <0.000001>',
        '7 1.000800 openat(AT_FDCWD</d>, "a", O_RDONLY) = 3</d/a> <0.000010>',
        '7 1.000900 pread64(3</d/a>, ""..., 4096, 0) = 4096 <0.000010>',  # buffered: reopened
        '7 1.001000 fsync(4</d/a>) = 0 <0.000100>',  # a sync is not a read or write
    ]
    t = from_strace(strace, "/d")
    assert (t.direct, t.io_mode()) == (2, "mixed")
    # --pid: what /proc said the process had open before strace attached (fdinfo)
    before = from_strace([f"I 7 9 8192 {os.O_RDONLY | os.O_DIRECT} /d/old",
                          '7 1.000000 read(9</d/old>, ""..., 4096) = 4096 <0.000010>'], "/d")
    assert [(o.offset, o.length) for o in before.ops] == [(8192, 4096)]
    assert before.io_mode() == "direct"
    at, o_direct = str((1 << 32) - 100), os.O_DIRECT
    bpf = [
        "C 7 /d",
        f"openat 7 7 1000000000 1000100000 3 {at} {2 | 0o100 | o_direct} a",
        "pwrite64 7 7 1000100000 1000200000 4096 3 0",  # direct
        "F 7 7 8 1000250000",  # the child's copy of fd 3: direct too
        "pread64 8 8 1000300000 1000310000 4096 3 0",  # direct
        "fcntl 7 7 1000400000 1000410000 0 3 4 2",  # F_SETFL O_RDWR: buffered from here
        "pread64 7 7 1000500000 1000510000 4096 3 0",  # buffered
        f"fcntl 8 8 1000600000 1000610000 0 3 4 {o_direct}",  # the child's own: still on
        "dup 8 8 1000700000 1000710000 5 3 0",
        "pwrite64 8 8 1000800000 1000810000 4096 5 4096",  # direct (copy)
        "close 8 8 1000900000 1000910000 0 3 0",
        "pread64 8 8 1001000000 1001010000 4096 5 0",  # direct: the copy stays open
    ]
    t = from_bpf(bpf, "/d")
    assert len(t.ops) == 5 and (t.direct, t.io_mode()) == (4, "mixed")
    assert from_bpf([e for e in bpf if "pread64 7" not in e], "/d").io_mode() == "direct"
    plain = from_bpf([e.replace(f" {2 | 0o100 | o_direct} a", " 66 a") for e in bpf
                      if not e.startswith("fcntl 8")], "/d")
    assert (plain.direct, plain.io_mode()) == (0, "buffered")
    # stored and read back; a trace stored before storbench looked: not known
    again = Trace.stored(t.iolog(), t.facts())
    assert again.direct == 4
    assert Trace.stored(t.iolog(), {**t.facts(), "direct": None}).io_mode() is None
    older = dict(t.facts())
    del older["direct"]
    assert Trace.stored(t.iolog(), older).direct is None


def test_a_replay_issues_its_i_o_as_the_application_did():
    """All of it O_DIRECT: fio replays with direct=1; none: buffered, unsaid; some, or not
    known: buffered, and the replay says so."""
    from storbench.pipeline.kinds.replay import ReplaySpec

    t = from_bpf([f"openat 7 7 1 2 3 -100 {os.O_DIRECT} /d/a",
                  "pwrite64 7 7 3 4 4096 3 0", "pread64 7 7 5 6 4096 3 0"], "/d")
    assert t.io_mode() == "direct"
    spec = ReplaySpec("w", "file level (bpftrace)", t)
    assert ("direct", "1") in spec.engine() and spec.buffering() is None
    job = spec.plan_tests(Path("/s")).tests[0].jobfile.render()
    assert "\ndirect=1\n" in job, job
    for direct, said in ((0, None), (1, "1 of the 2 recorded reads and writes were O_DIRECT"),
                         (None, "recorded before storbench noted O_DIRECT")):
        t.direct = direct
        spec = ReplaySpec("w", "file level (strace)", t)
        assert ("direct", "1") not in spec.engine()
        got = spec.buffering()
        assert (got is None) if said is None else (said in (got or "")), (direct, got)
    # a block-level trace: below the page cache, whoever sent it; its target says how
    t.direct = None
    assert ReplaySpec("w", "block level (blk)", t).buffering() is None


@needs_fio
@pytest.mark.parametrize("tracer", TRACERS)
def test_an_o_direct_application_is_recorded_and_replayed_direct(tmpfs, tmp_path, tracer):
    """fio with direct=1 as the application, by each tracer: every read and write of the
    recording is O_DIRECT (fio's own counts), `record` says so, and the replay's job asks
    direct=1; the buffered application's recording (the `recorded` fixture's) holds none."""
    db = tmp_path / "r.db"
    proc, w = _record_fio(db, tmpfs, "dio", ("--tracer", tracer), ("--direct=1",))
    reads, writes, _ = _fio_counts(proc.stdout)
    assert w["direct"] == reads + writes == w["counts"]["reads"] + w["counts"]["writes"], w
    assert "; all of them O_DIRECT;" in proc.stdout, proc.stdout
    assert " s, O_DIRECT, from " in run_cli("workloads", db=db).stdout
    candidate = tmpfs / "candidate"
    candidate.mkdir()
    ran = run_cli("run", str(candidate), "--replay", "dio", "--replay-fast", db=db)
    assert ran.returncode == 0, ran.stderr
    shown = json.loads(run_cli("show", "last", "--json", db=db).stdout)
    assert "\ndirect=1\n" in shown["job_files"][0], shown["job_files"]
    assert shown["data"]["replay"]["engine"].endswith("direct 1")
    assert not any("O_DIRECT" in n for n in shown["data"]["replay"]["notes"])


@needs_fio
@needs_bpftrace
def test_bpftrace_keeps_a_path_with_a_line_break_one_file(tmp_path):
    """An application's file named with a line break and what looks like an event after
    it: one file, its own writes; no event made of its name (each of bpftrace's lines
    starts with a token of the run's)."""
    d = tmp_path / "d"
    d.mkdir()
    name = "x\\nS 1 1 1 2 4096 1 3 0 0 0 0\\nwrite 1 1 1 2 4096 3 0"
    db = tmp_path / "r.db"
    proc = run_cli("record", "nl", "--dir", str(d), "--tracer", "bpftrace", "--", "sh", "-c",
                   f'cd "$0"; f="$(printf "{name}")"; for i in 1 2 3; do echo hi >> "$f"; done',
                   str(d), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "bpftrace attached: tracing from now on\n" in proc.stderr  # (the command then)
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    assert list(w["files"].values()) == [p.name for p in d.iterdir()]
    assert "\n" in next(iter(w["files"].values()))
    assert (w["counts"]["writes"], w["counts"]["reads"], w["counts"]["files"]) == (3, 0, 1)


def test_bpftrace_output_after_the_last_event_is_not_part_of_it():
    """bpftrace prints every map left when it ends, after the last event, where a line
    without the run's token is read as the last path's line break: the program leaves
    none (its END clears every map it uses). What it prints then (blank lines) and a
    path's line break are read as bpftrace means them."""
    n = bpfcapture.NUMBERS["x86_64"]
    program = bpfcapture.program("tok", [7], 1, n)
    end = next(line for line in program.splitlines() if line.startswith("END"))
    assert set(re.findall(r"@\w+", program)) == set(re.findall(r"clear\((@\w+)\)", end))
    raw = [
        f"tok S 7 7 100 200 3 {n['openat']} 4294967196 0 66 0 0 a\n", "b\n",  # "a\nb"
        f"tok S 7 7 300 400 0 {n['fsync']} 3 0 0 0 0\n", "\n", "\n",
    ]
    assert list(bpfcapture.lines(raw, "tok", n)) == [
        "openat 7 7 100 200 3 4294967196 66 a\nb", "fsync 7 7 300 400 0 3 0"]


@needs_bpftrace
def test_bpftrace_keeps_the_last_call_of_an_application(tmp_path):
    """An application whose last call is its fsync (os._exit: no close after it): the
    sync is in the trace, however bpftrace ends."""
    import sys

    d = tmp_path / "d"
    d.mkdir()
    db = tmp_path / "r.db"
    code = ("import os; fd = os.open('x', os.O_WRONLY | os.O_CREAT, 0o600);"
            " os.write(fd, b'x' * 4096); os.fsync(fd); os._exit(0)")
    proc = run_cli("record", "last", "--dir", str(d), "--tracer", "bpftrace", "--", "sh",
                   "-c", f'cd "$0" && exec {sys.executable} -c "{code}"', str(d), db=db)
    assert proc.returncode == 0, proc.stderr
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    assert (w["counts"]["writes"], w["counts"]["syncs"]) == (1, 1), w["counts"]


@needs_fio
@needs_bpftrace
def test_bpftrace_follows_a_running_process_and_what_it_had_open(tmpfs, tmp_path):
    """fio followed with --pid for 2 s: its file was opened before the recording (its
    descriptor and position come from /proc); every call it made is in the trace (its
    read and write calls from /proc/PID/io over the same span, ±10%). A PID listed with
    it that ended before the recording began (as a database's short-lived backend does
    between pgrep and record: CI failed so) is said and left out; only ended ones, an
    error."""
    import subprocess
    import time

    from storbench.execute.capture import io_calls

    ended = subprocess.Popen(["true"])
    ended.wait()
    gone = run_cli("record", "none", "--dir", str(tmpfs), "--pid", str(ended.pid),
                   "--duration", "1", db=tmp_path / "none.db")
    assert_one_line_error(gone, 2, f"--pid {ended.pid}: no such process")

    data = tmpfs / "data"
    data.write_bytes(b"\0" * (1 << 20))
    app = subprocess.Popen([*_app(f"--filename={data}", "--fsync=0"), "--thread",
                            "--time_based", "--runtime=40", "--rate_iops=2000"],
                           stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        db = tmp_path / "r.db"
        before = io_calls([app.pid])
        proc = run_cli("record", "live", "--dir", str(tmpfs), "--tracer", "bpftrace",
                       "--pid", str(app.pid), "--pid", str(ended.pid), "--duration", "2",
                       db=db, timeout=60)
        after = io_calls([app.pid])
        assert proc.returncode == 0, proc.stderr
        assert f"PID {ended.pid} ended before the recording began: not followed" \
            in proc.stderr
        # said once attached (seconds, more on a busy machine): a workload started before
        # that is not followed
        said = proc.stderr.splitlines()
        ready = said.index("bpftrace attached: tracing from now on (a process the followed"
                           " ones start from now on is followed; one started before is not)")
        assert ready > next(i for i, ln in enumerate(said) if ln.startswith("Recording"))
        assert app.poll() is None  # followed, then left running
    finally:
        app.kill()
        app.wait()
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    assert w["files"] == {"f0001": "data"} and w["method"] == "file level (bpftrace)"
    got = w["counts"]["reads"] + w["counts"]["writes"]
    assert before is not None and after is not None
    # /proc counted over a little more than the recording (bpftrace's attaching): ≤
    assert 2 * 2000 * 0.8 < got <= (after - before), (got, after - before)


@needs_fio
@pytest.mark.parametrize("tracer", TRACERS)
def test_a_followed_process_s_o_direct_file_opened_before_is_known(tracer, tmpfs, tmp_path):
    """fio with direct=1 followed with --pid: its file was opened before the tracer
    attached, with O_DIRECT, which /proc says (fdinfo's flags): every read and write of
    the recording is O_DIRECT, with strace as with bpftrace."""
    data = tmpfs / "data"
    data.write_bytes(b"\0" * (1 << 20))
    app = subprocess.Popen([*_app(f"--filename={data}", "--fsync=0", "--direct=1"), "--thread",
                            "--time_based", "--runtime=40", "--rate_iops=500"],
                           stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        db = tmp_path / "r.db"
        proc = run_cli("record", "live", "--dir", str(tmpfs), "--tracer", tracer,
                       "--pid", str(app.pid), "--duration", "2", db=db, timeout=60)
        assert proc.returncode == 0, proc.stderr
    finally:
        app.kill()
        app.wait()
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    data_ops = w["counts"]["reads"] + w["counts"]["writes"]
    assert data_ops > 500 and w["direct"] == data_ops, w
    assert "; all of them O_DIRECT;" in proc.stdout


@pytest.mark.parametrize("tracer", TRACERS)
def test_a_followed_process_that_ends_leaves_what_it_started_followed(tracer, tmpfs,
                                                                        tmp_path):
    """--pid of a shell that puts a job in the background and exits: the recording goes
    on until the job ends too, and holds its writes (as strace -f does; bpftrace's
    recording ended with the shell, the job's writes missing, before this was mended)."""
    gate = tmp_path / "go"
    os.mkfifo(gate)
    temp = tmp_path / "tmp"  # the recording's raw trace is made here: seen to be ready
    temp.mkdir()
    script = ('read x < "$0"; (sleep 1.5; dd if=/dev/zero of="$1/late" bs=4k count=8'
              ' conv=fsync status=none; sleep 0.5) & exit 0')
    shell = subprocess.Popen(["sh", "-c", script, str(gate), str(tmpfs)])
    db = tmp_path / "r.db"
    rec = subprocess.Popen([*STORBENCH, "record", "bg", "--dir", str(tmpfs), "--tracer",
                            tracer, "--pid", str(shell.pid)],
                           env={**os.environ, "STORBENCH_DB": str(db), "TMPDIR": str(temp)},
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _attached(tracer, shell.pid, temp):
            assert rec.poll() is None and time.monotonic() < deadline, rec.communicate()
            time.sleep(0.05)
        gate.write_text("go\n")
        shell.wait(timeout=10)  # it ended (reaped), its job not yet
        _, err = rec.communicate(timeout=60)
    finally:
        for p in (rec, shell):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert rec.returncode == 0, err
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    assert w["files"] == {"f0001": "late"}, w
    assert (w["counts"]["writes"], w["counts"]["syncs"]) == (8, 1), w["counts"]
    assert w["wall_s"] >= 1.5, w  # it waited for the job


def _attached(tracer: str, pid: int, temp: Path) -> bool:
    """strace: the process is ptraced; bpftrace: its program printed its first line."""
    if tracer == "strace":
        status = Path(f"/proc/{pid}/status").read_text()
        return re.search(r"^TracerPid:\s*[1-9]", status, re.M) is not None
    return any(re.search(r"^\S+ B$", p.read_text(), re.M)
               for p in temp.glob("*/bpf.txt"))


@needs_fio
@needs_strace
def test_a_replay_names_its_files_as_fio_s_io_log_can(recorded, tmp_path):
    """fio reads an I/O log line's file name with sscanf("%256s"): a TARGET with a
    space in its path (or longer) cannot be named there. Said in those words (it was the
    gate's "'/mnt/a' is not inside /mnt/a b/...": safe, but not why), nothing left."""
    db, _, tmpfs = recorded
    stored = run_cli("list", "--json", db=db).stdout
    spaced = tmpfs / "a b"
    spaced.mkdir()
    proc = run_cli("run", str(spaced), "--replay", "app", db=db)
    assert proc.returncode == 2, proc.stderr
    assert "which reads a name of at most 256 characters and no space" in proc.stderr
    assert list(spaced.iterdir()) == []
    deep = tmpfs / ("d" * 120) / ("e" * 120)
    deep.mkdir(parents=True)
    proc = run_cli("run", str(deep), "--replay", "app", db=db)
    assert proc.returncode == 2 and "at most 256 characters" in proc.stderr, proc.stderr
    assert list(deep.iterdir()) == []
    # refused before the run began: no failed run stored (one was, before this was known)
    assert "Run #" not in proc.stdout and run_cli("list", "--json", db=db).stdout == stored


def _processes(first: str, *words: str) -> list[int]:
    """PIDs of the processes that run ``first`` (its base name) with every one of
    ``words`` in their command line."""
    from tests.testbed import processes

    def match(argv: list[bytes]) -> bool:
        text = b" ".join(argv).decode(errors="replace")
        return os.path.basename(argv[0].decode(errors="replace")) == first and \
            all(w in text for w in words)

    return processes(match)


@needs_bpftrace
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_recording_ended_by_a_signal_leaves_no_bpftrace(tmp_path, how):
    """storbench ended while bpftrace follows a command: SIGTERM ends bpftrace and the
    command, removes the raw trace and stores nothing; SIGKILL (no cleanup possible)
    still ends bpftrace (its program exits when storbench's process does), and the next
    recording removes the raw trace the killed one left."""
    import signal
    import subprocess
    import time

    from tests.conftest import STORBENCH

    d = tmp_path / "d"
    d.mkdir()
    db = tmp_path / "r.db"
    marker = f"{6000 + len(how)}.{os.getpid()}"  # a sleep of this test's own
    proc = subprocess.Popen([*STORBENCH, "record", "s", "--dir", str(d), "--tracer",
                             "bpftrace", "--", "sleep", marker],
                            env={**os.environ, "STORBENCH_DB": str(db)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not _processes("sleep", marker) and time.monotonic() < deadline:
        time.sleep(0.05)  # the command runs once bpftrace follows it
    assert _processes("sleep", marker), "the command never started"
    tracers = [p for p in _processes("bpftrace", "storbench-record-")
               if f"PPid:\t{proc.pid}\n" in Path(f"/proc/{p}/status").read_text()]
    assert tracers
    program = next(a for a in Path(f"/proc/{tracers[0]}/cmdline").read_bytes().decode()
                   .split("\0") if a.endswith("p.bt"))
    raw = Path(program).parent  # the recording's 0700 directory
    proc.send_signal(getattr(signal, how))
    proc.wait(timeout=30)  # not communicate: the command left running holds its pipes
    assert proc.returncode != 0
    deadline = time.monotonic() + 15
    while any(Path(f"/proc/{t}").exists() for t in tracers) and time.monotonic() < deadline:
        time.sleep(0.1)
    running = [t for t in tracers if Path(f"/proc/{t}").exists()]
    left = _processes("sleep", marker)
    for pid in [*running, *left]:  # this test's own, whatever it asserts next
        os.kill(pid, signal.SIGKILL)
    assert not running, "bpftrace left running"
    if how == "SIGKILL":  # storbench could not remove it: the next recording does
        assert raw.exists()
        run_cli("record", "next", "--dir", str(d), "--tracer", "strace", "--", "true", db=db)
        assert not raw.exists(), "a killed recording's directory was left"
    if how == "SIGTERM":
        assert not left, "the command left running"
        assert not raw.exists()  # what bpftrace wrote went with the recording
        assert json.loads(run_cli("workloads", "--json", db=db).stdout) == []


@needs_strace
def test_record_says_what_is_wrong(tmp_path):
    db = tmp_path / "r.db"
    d = tmp_path / "d"
    d.mkdir()
    cases = [
        (["record", "../x", "--dir", str(d), "--", "true"], "workload name"),
        (["record", "w", "--dir", str(d)], "give the command"),
        (["record", "w", "--dir", str(d), "--", "false"], "exited with status 1"),
        (["record", "w", "--dir", str(d), "--", "true"], "did no read, write or sync"),
        (["record", "w", "--dir", str(d), "--max-size", "lots", "--", "true"], "--max-size"),
        (["run", str(d), "--replay", "nosuch"], "no recorded workload 'nosuch'"),
        (["record", "w", "--dir", str(d), "--tracer", "strace", "--pid", "999999",
          "--duration", "1"], "--pid 999999: no such process"),
        (["record", "w", "--device", "/dev/null", "--tracer", "strace", "--duration", "1"],
         "--tracer is for file level"),
        (["record", "w", "--dir", str(d), "--pid", "1", "--measure-cost"],
         "--measure-cost with --pid needs --duration"),
        (["record", "w", "--dir", str(d), "--pid", "999999", "--duration", "1",
          "--measure-cost"], "--pid 999999: no such process"),
        (["run", str(d), "--replay-fast"], "--replay-fast applies to --replay"),
    ]
    for args, said in cases:
        proc = run_cli(*args, db=db)
        assert proc.returncode != 0, args
        assert_one_line_error(proc, proc.returncode)
        assert said in proc.stderr, (args, proc.stderr)
    assert json.loads(run_cli("workloads", "--json", db=db).stdout) == []


@needs_strace
def test_a_process_strace_cannot_follow_is_said_in_straces_words(tmp_path):
    """A running process that another tracer holds (ptrace refuses a second): the
    recording fails with strace's own message and stores nothing."""
    d = tmp_path / "d"
    d.mkdir()
    app = subprocess.Popen(["sleep", "60"])
    holder = subprocess.Popen(["strace", "-p", str(app.pid), "-o", os.devnull],
                              stderr=subprocess.DEVNULL)  # its "attached" lines
    try:
        deadline = time.monotonic() + 10  # until the first strace holds it
        while f"TracerPid:\t{holder.pid}" not in Path(f"/proc/{app.pid}/status").read_text():
            assert time.monotonic() < deadline, "the first strace never attached"
            time.sleep(0.05)
        proc = run_cli("record", "w", "--dir", str(d), "--tracer", "strace", "--pid",
                       str(app.pid), "--duration", "1", db=tmp_path / "r.db")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"strace could not follow PID {app.pid}" in proc.stderr, proc.stderr
        assert "Operation not permitted" in proc.stderr, proc.stderr
        assert json.loads(run_cli("workloads", "--json", db=tmp_path / "r.db").stdout) == []
    finally:
        holder.terminate()
        holder.wait()
        app.kill()
        app.wait()


def _skip_if_outrun(proc) -> None:
    """fio on tmpfs, unthrottled, can outrun bpftrace: the recording then fails saying so,
    and stores nothing (as it must); what the test would check was not recorded. Seen on
    a 2-core machine (544, 931, 13,708 and 37,343 events lost in four runs; it kept up on
    the machines before)."""
    if proc.returncode == 1 and "storbench: error: bpftrace lost" in proc.stderr:
        pytest.skip(f"bpftrace could not keep up with fio here: {proc.stderr.strip()[-200:]}")


def _record_fio(db, tmpfs: Path, name: str, flags: tuple[str, ...] = (),
                fio: tuple[str, ...] = ()):
    """fio as the application on a laid-out file in ``tmpfs``, recorded as ``name`` with
    ``flags``: storbench's output and the stored workload."""
    data = tmpfs / "data"
    data.write_bytes(b"\0" * (1 << 20))
    proc = run_cli("record", name, "--dir", str(tmpfs), *flags, "--",
                   *_app(f"--filename={data}", *fio), db=db, timeout=60)
    _skip_if_outrun(proc)
    assert proc.returncode == 0, proc.stderr
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    return proc, w


@needs_fio
@pytest.mark.parametrize("tracer", TRACERS)
def test_max_size_stops_the_recording_and_keeps_what_came_before(tmpfs, tmp_path, tracer):
    # fio's own start-up is ~110 KB of strace output before its first I/O; then ~360 KB a
    # second: 400k stops it about a second in, of its 30 (bpftrace's lines are shorter: a
    # fast machine made 10,685 reads before 400k, in 0.4 s; its 30 s would be millions)
    proc, w = _record_fio(tmp_path / "r.db", tmpfs, "long",
                          ("--max-size", "400k", "--tracer", tracer),
                          ("--time_based", "--runtime=30"))
    assert "Stopped early by --max-size" in proc.stdout, proc.stdout
    assert w["stopped"] and 0 < w["counts"]["reads"] < 50_000 and w["wall_s"] < 20


@needs_fio
@pytest.mark.parametrize("tracer", TRACERS)
def test_measure_cost_times_the_command_untraced_too(tmpfs, tmp_path, tracer):
    proc, w = _record_fio(tmp_path / "r.db", tmpfs, "costly", ("--measure-cost", "--tracer",
                                                               tracer))
    assert "without: tracing cost" in proc.stdout, proc.stdout
    assert 0 < w["untraced_s"] and 0 < w["wall_s"]
    assert proc.stdout.count('"fio version"') == 2  # the application ran twice


@needs_fio
@pytest.mark.parametrize("tracer", TRACERS)
def test_measure_cost_of_a_followed_process_counts_its_calls_before_and_traced(tmpfs,
                                                                             tmp_path,
                                                                             tracer):
    """fio as a steady application (one process, its job a thread) followed with --pid:
    its read and write calls per second untraced (5 s) and traced (3 s), from /proc; the
    traced rate agrees with what the tracer itself recorded."""
    import subprocess
    import time

    data = tmpfs / "data"
    data.write_bytes(b"\0" * (1 << 20))
    app = subprocess.Popen([*_app(f"--filename={data}"), "--thread", "--time_based",
                            "--runtime=40"], stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)  # past fio's start-up, in its steady loop
        db = tmp_path / "r.db"
        proc = run_cli("record", "steady", "--dir", str(tmpfs), "--pid", str(app.pid),
                       "--duration", "3", "--measure-cost", "--tracer", tracer, db=db,
                       timeout=60)
        _skip_if_outrun(proc)
        assert proc.returncode == 0, proc.stderr
        assert app.poll() is None  # followed, then left running
    finally:
        app.kill()
        app.wait()
    assert "read and write calls/s in the 5 s before tracing" in proc.stdout, proc.stdout
    assert "× lower traced" in proc.stdout
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    untraced, traced = w["untraced_calls_per_s"], w["traced_calls_per_s"]
    assert untraced > traced > 0 and untraced > 1000, (untraced, traced)
    recorded = (w["counts"]["reads"] + w["counts"]["writes"]) / w["wall_s"]
    assert abs(recorded - traced) < 0.25 * traced, (recorded, traced)


@needs_fio
@needs_strace
def test_postgresql_keeps_workloads_too(postgres_db, tmp_path, tmpfs):
    _, w = _record_fio(postgres_db, tmpfs, "pgapp")
    assert w["name"] == "pgapp" and w["counts"]["reads"] > 0
    candidate = tmpfs / "candidate"
    candidate.mkdir()
    ran = run_cli("run", str(candidate), "--replay", "pgapp", "--replay-fast",
                  db=postgres_db)  # type: ignore[arg-type]
    assert ran.returncode == 0, ran.stderr
    assert "issued of" in ran.stdout
    # and back to SQLite with `db copy`, then replayed from there
    copied = run_cli("db", "copy", postgres_db, str(tmp_path / "back.db"),  # type: ignore[arg-type]
                     db=tmp_path / "unused.db")
    assert copied.returncode == 0 and "Copied 1 recorded workload" in copied.stdout, copied
    [back] = json.loads(run_cli("workloads", "--json", db=tmp_path / "back.db").stdout)
    assert back["counts"] == w["counts"] and back["files"] == w["files"]


@needs_timing
@needs_strace
@needs_fio
def test_pgbench_recorded_and_replayed_orders_volumes_as_pgbench_does(tmp_path):
    """A real application: PostgreSQL serving pgbench for 20 s (30 transactions a second,
    pgbench's -R: a database with clients, not a saturating loop), recorded at file
    level on a tmpfs by following the server's processes (--pid each, and the backend
    pgbench's connection starts; bpftrace where it can, else strace); its replay as fast
    as possible on volumes capped at 300 and 3000 IOPS gives their commits' (syncs')
    latency in the order real pgbench's own throughput has on the same two caps (the
    replay on the recorded timeline on a capped volume: the test after this one)."""
    import sys

    from tests.conftest import IS_ROOT, run_cli_wrapped

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from bench import apps as harness

    from tests.testbed import Throttled, missing_for_throttled

    reason = (None if IS_ROOT else "needs root") or missing_for_throttled() or (
        None if (harness.PG_BIN / "pgbench").exists() else "pgbench not installed")
    if reason:
        pytest.skip(reason)
    db = tmp_path / "results.db"
    with harness.shape("tmpfs") as (ram, _):  # a tmpfs the postgres user can reach
        where = ram / "pg"
        where.mkdir()
        harness.traversable(where)
        _record_pgbench(harness, where, db)
    [w] = json.loads(run_cli("workloads", "--json", db=db).stdout)
    c = w["counts"]
    assert c["syncs"] >= 300 and c["writes"] >= 300, c  # a WAL flush per commit, at least
    assert any(name.startswith("pg_wal/") for name in w["files"].values()), w["files"]
    assert all(not name.startswith("/") for name in w["files"].values())
    commit, real = {}, {}
    for cap in (300, 3000):
        with Throttled(cap, cap, backing_dir="/dev/shm") as t:
            ran = run_cli_wrapped(t.wrap, "run", str(t.mnt), "--replay", "pgbench",
                                  "--replay-fast", "--label", f"cap{cap}", db=db)
            assert ran.returncode == 0, ran.stderr
            shown = json.loads(run_cli("show", "last", "--json", db=db).stdout)
            assert shown["data"]["replay"]["issued"]["syncs"] == c["syncs"]
            commit[cap] = shown["tests"][0]["sync"]["lat"]["mean_ns"]
        with Throttled(cap, cap, backing_dir="/dev/shm") as t:
            (t.mnt / "real").mkdir()
            harness.traversable(t.mnt / "real")
            real[cap] = harness.REAL["postgresql"](t.mnt / "real", t.wrap, 3, many=False)["tps"]
    # fewer IOPS: slower commits in the replay, and fewer transactions for real pgbench
    assert commit[300] > commit[3000] and real[300] < real[3000], (commit, real)
    # side by side as any runs, with what each replay issued of what was recorded
    table = run_cli("compare", "cap300", "cap3000", db=db, env={"COLUMNS": "250"}).stdout
    assert "Replays of recorded workloads" in table and "as fast as possible" in table, table
    report = tmp_path / "r.html"
    made = run_cli("report", "cap300", "cap3000", "-o", str(report), db=db)
    assert made.returncode == 0, made.stderr
    assert f"{c['syncs']:,} syncs issued of" in report.read_text()


@needs_fio
@needs_bpftrace
@needs_timing
def test_a_timed_replay_on_a_capped_volume_issues_it_all_and_says_its_lag(tmp_path, tmpfs):
    """fio as the application at 400 IOPS (a 1.5 s timeline) on tmpfs, replayed on its
    recorded timeline on a volume capped at 100 IOPS each way: everything recorded is
    issued, and
    the replay says how far it fell behind the timeline (the volume could not keep up)."""
    from tests.conftest import IS_ROOT, run_cli_wrapped
    from tests.testbed import Throttled, missing_for_throttled

    reason = (None if IS_ROOT else "needs root") or missing_for_throttled()
    if reason:
        pytest.skip(reason)
    db = tmp_path / "r.db"
    _, w = _record_fio(db, tmpfs, "paced", fio=("--rate_iops=400", "--time_based",
                                                  "--runtime=1.5"))
    c = w["counts"]
    with Throttled(100, 100, backing_dir="/dev/shm") as t:
        ran = run_cli_wrapped(t.wrap, "run", str(t.mnt), "--replay", "paced", db=db)
        assert ran.returncode == 0, ran.stderr
    replay = json.loads(run_cli("show", "last", "--json", db=db).stdout)["data"]["replay"]
    assert replay["timed"] and replay["issued"] == {k: c[k] for k in ("reads", "writes",
                                                                      "syncs")}
    # ~400 reads and ~400 writes, each way capped at 100 a second: seconds behind (3.1 here)
    assert replay["lag_s"] > 0.5, replay
    assert "s behind the recorded timeline" in ran.stdout, ran.stdout


def _record_pgbench(harness, where: Path, db: Path) -> None:
    """PostgreSQL on ``where``, pgbench's tables made, then 20 s of pgbench recorded by
    following every server process (600 transactions, as 30 s at 20 a second were)."""
    import os
    import subprocess
    import time

    from tests.conftest import STORBENCH

    data, sock = where / "pgdata", where / "pgsock"
    sock.mkdir()
    shutil.chown(where, "postgres")
    shutil.chown(sock, "postgres")
    pg = ["runuser", "-u", "postgres", "--"]
    conn = ["-h", str(sock), "-p", "5498", "-U", "postgres"]
    harness.run([*pg, str(harness.PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-N"])
    harness.run([*pg, str(harness.PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l",
                 str(where / "pg.log"), "-o", f"-k {sock} -c listen_addresses= -p 5498",
                 "start"])
    try:
        harness.run([*pg, str(harness.PG_BIN / "pgbench"), *conn, "-i", "-s", "1", "-q",
                     "postgres"])
        main = int((data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(main)], capture_output=True,
                                  text=True).stdout.split()
        recording = subprocess.Popen(
            [*STORBENCH, "record", "pgbench", "--dir", str(data), "--duration", "23",
             *[a for p in [main, *map(int, children)] for a in ("--pid", str(p))]],
            env={**os.environ, "STORBENCH_DB": str(db)}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        # pgbench's backend is followed only if it starts once the tracer is attached
        # (bpftrace took over 2 s on a busy machine: the recording held 1 write, 1 sync)
        said: list[str] = []
        while not any(ln.startswith("bpftrace attached") for ln in said):
            assert recording.poll() is None, recording.communicate()
            if any("(strace)" in ln for ln in said):  # it says nothing more: ptraced
                while not _attached("strace", main, where):
                    assert recording.poll() is None, recording.communicate()
                    time.sleep(0.05)
                break
            said.append(recording.stderr.readline())
        harness.run([*pg, str(harness.PG_BIN / "pgbench"), *conn, "-c", "1", "-T", "20",
                     "-R", "30", "postgres"])
        _, err = recording.communicate(timeout=120)
        assert recording.returncode == 0, "".join(said) + err
    finally:
        subprocess.run([*pg, str(harness.PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)


def test_bpftrace_buffers_stay_bounded_on_many_cpus():
    """4 MiB a CPU, 64 MiB in all at most (a 128-CPU host must not lock 512 MiB); a
    power of two, which the kernel requires. (And the string length bpftrace is given is
    the one the parser judges cut paths by: two layers, one number.)"""
    from storbench.workload import bpfevents

    assert bpfcapture.STRLEN == bpfevents.BPF_STRLEN
    for cpus in (1, 2, 3, 16, 24, 128, 1024):
        pages = bpfcapture.ring_pages(cpus)
        assert pages & (pages - 1) == 0 and 64 <= pages <= 1024
        assert pages * 4096 * cpus <= 64 << 20 or pages == 64


def test_a_loss_in_the_middle_of_bpftrace_s_output_is_found(tmp_path):
    """bpftrace writes "Lost N events" where the loss happened, its events going on after
    it: the loss is found anywhere in the output (the last 4 KiB alone were read: a
    recording here stored a trace short of 40% of its calls as whole), across the pieces
    the output is read in, and every loss is counted."""
    out = tmp_path / "out"
    event = "tok S 101 100 5 6 4096 0 3 4 5 6 7\n"
    out.write_text(event * 1000 + "Lost 931 events\n" + event * 1000 + "Lost 12 events\n"
                   + event * 10)
    assert bpfcapture.lost_in(out) == 943
    assert bpfcapture.lost_in(out, chunk=97) == 943  # a line cut between two pieces
    out.write_text(event * 100)
    assert bpfcapture.lost_in(out, chunk=97) == 0
