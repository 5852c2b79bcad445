"""Block level: an application's requests on one loop device, recorded with the kernel's
blk tracer (tracefs), replayed onto a second loop device through the device guard, and
into a file as a disk-image test. The "application" is fio, whose own report says
exactly what it sent (direct I/O of 4 KiB: one request each). Every device is a loop
device of the test's own."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from storbench.workload.trace import DISCARD, FUA, from_blk
from tests.conftest import STORBENCH, needs_fio, needs_root, run_cli
from tests.target.test_blockdev import Loop

# loop devices and tracefs; the kernel's blk tracer, one test at a time
pytestmark = [needs_root, needs_fio, pytest.mark.usefixtures("blk_tracer")]

APP = """[w]
filename={dev}
rw=randwrite
bs=4k
size=16m
io_size=2m
direct=1
fsync=32
ioengine=psync
[r]
stonewall
filename={dev}
rw=randread
bs=4k
size=16m
io_size=1m
direct=1
ioengine=libaio
iodepth=4
"""


@pytest.fixture
def tracefs(tmp_path):
    """tracefs mounted where the test sees it (a recording then uses this mount)."""
    where = tmp_path / "tracefs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tracefs", "nodev", str(where)], check=True)
    yield where
    subprocess.run(["umount", str(where)], check=True)


def tracer_state(dev: str, fs: Path) -> dict[str, str | int]:
    """What the recording must leave as it found it. The buffer's size in KiB per CPU
    as the kernel will allocate it, to the 1% the kernel rounds a size written to: on a
    machine that never traced, it reads "7 (expanded: 1408)" before (not allocated
    yet) and, once a recording allocated it and put 1408 back, "1410"."""
    name = Path(dev).name
    size = (fs / "buffer_size_kb").read_text().strip()
    found = re.search(r"expanded:\s*(\d+)", size) or re.match(r"(\d+)", size)
    assert found, size
    return {"enable": Path(f"/sys/block/{name}/trace/enable").read_text().strip(),
            "buffer_size_kb": int(found.group(1)),
            **{f: (fs / f).read_text().strip() for f in ("current_tracer", "tracing_on")}}


@pytest.fixture
def devices(tmp_path):
    made = []

    def make(name: str, size: int = 64 * 2**20) -> Loop:
        (tmp_path / name).mkdir()
        made.append(Loop(tmp_path / name, size))
        return made[-1]

    yield make
    for loop in made:
        loop.close()


def test_a_block_capture_replays_onto_a_second_device_through_the_guard(devices, tmp_path,
                                                                         store_path, tracefs):
    old, new = devices("old"), devices("new")
    job = tmp_path / "app.fio"
    job.write_text(APP.format(dev=old.dev))
    report = tmp_path / "app.json"
    before = tracer_state(old.dev, tracefs)
    rec = run_cli("record", "app", "--device", old.dev, "--", "fio", "--output-format=json",
                  f"--output={report}", str(job), db=store_path)
    assert rec.returncode == 0, rec.stderr
    after = tracer_state(old.dev, tracefs)  # the buffer size too (raised to record)
    assert {**after, "buffer_size_kb": 0} == {**before, "buffer_size_kb": 0}, (after, before)
    assert abs(int(after["buffer_size_kb"]) - int(before["buffer_size_kb"])) <= int(
        before["buffer_size_kb"]) / 100, (after, before)
    fio = {j["jobname"]: j for j in json.loads(report.read_text())["jobs"]}
    sent = {"reads": fio["r"]["read"]["total_ios"], "writes": fio["w"]["write"]["total_ios"],
            "syncs": fio["w"]["sync"]["total_ios"]}
    assert sent == {"reads": 256, "writes": 512, "syncs": sent["syncs"]} and sent["syncs"] >= 15
    listed = json.loads(run_cli("workloads", "--json", db=store_path).stdout)
    [w] = listed
    assert w["method"] == "block level (ftrace blk)" and w["level"] == "block"
    assert w["device"] == old.dev and w["tool"] == "ftrace blk tracer (tracefs)"
    assert {k: w["counts"][k] for k in sent} == sent  # every request the block layer got
    assert w["depth"] >= 2  # the reads went 4 at a time
    assert w["environment"]["target"]["loop_backing_file"] == str(old.image)

    # the recorded device only read from now on; the candidate guarded
    kept, blank = old.digest(), new.digest()
    refused = run_cli("run", new.dev, "--replay", "app", db=store_path)
    assert refused.returncode == 1, refused.stderr
    assert f"--destructive {new.dev}" in refused.stderr
    assert new.digest() == blank
    for fast in ((), ("--replay-fast",)):
        proc = run_cli("run", new.dev, "--replay", "app", *fast, "--destructive", new.dev,
                       db=store_path)
        assert proc.returncode == 0, proc.stderr
        run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
        section = run["data"]["replay"]
        assert section["issued"] == {k: sent[k] for k in ("reads", "writes", "syncs")}
        assert (section["lag_s"] is None) == bool(fast)
        assert all(f"replay_redirect={new.dev}" in j for j in run["job_files"])
        assert not any("disk-image" in n for n in section["notes"])
        kinds = {x["kind"] for x in run["warnings"]}
        assert "device-not-reached" not in kinds, run["warnings"]  # fio sampled nothing
    assert new.digest() != blank and old.digest() == kept

    # into a file: a disk-image test, said so; the file it reads written first
    scratch = tmp_path / "dir"
    scratch.mkdir()
    proc = run_cli("run", str(scratch), "--replay", "app", "--replay-fast", db=store_path)
    assert proc.returncode == 0, proc.stderr
    section = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)["data"]["replay"]
    assert section["issued"]["reads"] == sent["reads"]
    assert any("disk-image test" in n for n in section["notes"])
    assert list(scratch.iterdir()) == []


def test_a_device_the_trace_does_not_fit_is_refused_before_anything(devices, store_path):
    old, small = devices("old"), devices("small", 4 * 2**20)
    app = ["fio", "--name=w", f"--filename={old.dev}", "--rw=write", "--bs=64k",
           "--offset=32m", "--size=1m", "--direct=1", "--output=/dev/null"]
    rec = run_cli("record", "far", "--device", old.dev, "--measure-cost", "--", *app,
                  db=store_path)
    assert rec.returncode == 0, rec.stderr
    assert "s untraced: tracing cost" in rec.stdout, rec.stdout  # the command ran twice
    [w] = json.loads(run_cli("workloads", "--json", db=store_path).stdout)
    assert w["untraced_s"] > 0 and w["counts"]["writes"] == 16  # 1 MiB in 64 KiB
    blank = small.digest()
    proc = run_cli("run", small.dev, "--replay", "far", "--destructive", small.dev,
                   db=store_path)
    assert proc.returncode == 2
    assert "reaches 33.0 MiB into its device" in proc.stderr and "4.0 MiB" in proc.stderr
    assert small.digest() == blank
    assert run_cli("show", "last", db=store_path).returncode != 0  # nothing stored


def test_what_record_device_refuses(devices, tmp_path, store_path):
    old = devices("old")
    regular = tmp_path / "file"
    regular.write_text("x")
    (tmp_path / "part").mkdir()
    part = Loop(tmp_path / "part", 64 * 2**20, partitioned=True)
    try:
        cases = [
            (("--device", str(regular), "--duration", "1"), "is not a block device"),
            (("--device", "/nonexistent/dev", "--duration", "1"), "No such file"),
            (("--device", f"{part.dev}p1", "--duration", "1"), "is a partition"),
            (("--device", old.dev, "--pid", "1", "--duration", "1"), "--pid follows"),
            (("--device", old.dev), "or --duration SECONDS"),
            (("--device", old.dev, "--dir", str(tmp_path), "--duration", "1"), "one of them"),
            (("--device", old.dev, "--duration", "1", "--measure-cost"), "needs COMMAND"),
        ]
        for args, said in cases:
            proc = run_cli("record", "x", *args, db=store_path)
            assert proc.returncode == 2 and said in proc.stderr, (args, proc.stderr)
        # a device someone traces already (blktrace) is left to them
        switch = Path(f"/sys/block/{Path(old.dev).name}/trace/enable")
        switch.write_text("1\n")
        try:
            proc = run_cli("record", "x", "--device", old.dev, "--duration", "1",
                           db=store_path)
        finally:
            switch.write_text("0\n")
        assert proc.returncode == 2 and "is being traced already" in proc.stderr
        # nothing happened on the device for the whole recording: nothing stored
        proc = run_cli("record", "x", "--device", old.dev, "--duration", "0.5", db=store_path)
        assert proc.returncode == 2 and "no read, write or flush reached" in proc.stderr
        assert json.loads(run_cli("workloads", "--json", db=store_path).stdout) == []
    finally:
        part.close()


def test_the_trace_buffer_of_someone_else_is_left_to_them(devices, tracefs, store_path):
    """The blk tracer writes into the kernel's one top-level buffer: events someone
    enabled into it, or left unread in it, make the recording refuse, and are still
    there after (storbench used to clear the buffer as it started)."""
    old = devices("old")
    event = "sched:sched_process_exec"
    (tracefs / "set_event").write_text(event + "\n")
    try:
        proc = run_cli("record", "x", "--device", old.dev, "--duration", "1", db=store_path)
        assert proc.returncode == 2, proc.stderr
        assert "events are enabled into it" in proc.stderr and event in proc.stderr
        assert (tracefs / "set_event").read_text().split() == [event]
    finally:
        (tracefs / "set_event").write_text("\n")
        (tracefs / "trace").write_text("\n")
    assert (tracefs / "tracing_on").read_text().strip() == "1"
    (tracefs / "trace_marker").write_text("someone's marker\n")
    try:
        proc = run_cli("record", "x", "--device", old.dev, "--duration", "1", db=store_path)
        assert proc.returncode == 2, proc.stderr
        assert "holds 1 event nobody has read yet" in proc.stderr, proc.stderr
        assert "someone's marker" in (tracefs / "trace").read_text()
        assert (tracefs / "current_tracer").read_text().strip() == "nop"
    finally:
        (tracefs / "trace").write_text("\n")
    assert json.loads(run_cli("workloads", "--json", db=store_path).stdout) == []
    # the buffer read and cleared by its owner: the tracer is taken
    rec = run_cli("record", "y", "--device", old.dev, "--", "dd", f"if={old.dev}",
                  "of=/dev/null", "bs=4k", "count=4", "iflag=direct", db=store_path)
    assert rec.returncode == 0, rec.stderr


def test_a_recording_ended_by_sigterm_puts_the_tracer_back(devices, store_path):
    old = devices("old")
    switch = Path(f"/sys/block/{Path(old.dev).name}/trace/enable")
    proc = subprocess.Popen([*STORBENCH, "record", "x", "--device", old.dev, "--duration",
                             "60"], env={**os.environ, "STORBENCH_DB": str(store_path)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while switch.read_text().strip() != "1" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert switch.read_text().strip() == "1", "the recording never turned the tracer on"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode not in (0, None), stderr
    assert switch.read_text().strip() == "0"
    assert json.loads(run_cli("workloads", "--json", db=store_path).stdout) == []
    # the tracer is free again: the next recording takes it
    rec = run_cli("record", "y", "--device", old.dev, "--", "dd", f"if={old.dev}",
                  "of=/dev/null", "bs=4k", "count=8", "iflag=direct", db=store_path)
    assert rec.returncode == 0, rec.stderr
    [w] = json.loads(run_cli("workloads", "--json", db=store_path).stdout)
    assert w["name"] == "y" and w["counts"]["reads"] == 8
    # a trace that only reads replays on a device without --destructive, fio --readonly
    other = devices("other")
    blank = other.digest()
    proc = run_cli("run", other.dev, "--replay", "y", db=store_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert run["data"]["replay"]["issued"]["reads"] == 8
    assert "fio --readonly" in run["job_files"][0] and other.digest() == blank


# Lines the blk tracer wrote here (tracefs trace_pipe, kernel 6.18) for dd writing with
# O_DIRECT|O_DSYNC and reading, with a second device's line and a discard added: a
# recording of real output, to pin the reading of RWBS
RECORDED = """\
              dd-10694   [001] d..1. 13800.860910:   7,0    Q WFS 256 + 128 [dd]
              dd-10694   [001] d..1. 13800.860916:   7,0    G WFS 256 + 128 [dd]
              dd-10694   [001] d..1. 13800.860917:   7,0    D  WS 256 + 128 [dd]
     ksoftirqd/1-22      [001] d.s1. 13800.860955:   7,0    C  WS 256 + 128 [0]
    kworker/1:1H-44      [001] d..1. 13800.860957:   7,0    D  FN [kworker/1:1H]
     ksoftirqd/1-22      [001] d.s1. 13800.860972:   7,0    C  FN 0 [0]
     ksoftirqd/1-22      [001] d.s2. 13800.860973:   7,0    C  WS 256 [0]
              dd-10694   [001] d..1. 13800.860975:   7,0    Q FWS [dd]
              dd-10695   [001] d..1. 13800.862665:   7,0    Q  RS 80 + 8 [dd]
              dd-10695   [001] d..1. 13800.862666:   7,1    Q  RS 80 + 8 [dd]
              dd-10695   [001] d..1. 13800.862670:   7,0    D  RS 80 + 8 [dd]
              dd-10695   [001] d..1. 13800.862680:   7,0    Q  DS 96 + 8 [dd]
     ksoftirqd/1-22      [001] d.s1. 13800.862682:   7,0    C  RS 80 + 8 [0]
"""


def test_the_tracer_s_lines_become_the_requests_queued():
    t = from_blk(RECORDED.splitlines(True), "7,0", "loop0")
    assert [(o.at_us, o.action, o.offset, o.length) for o in t.ops] == [
        (0, "write", 256 * 512, 128 * 512),  # Q only: G, D, C are the same request
        (65, "sync", 0, 0),  # an empty flush (fsync's)
        (1755, "read", 80 * 512, 8 * 512),  # 7,1 is another device
    ]
    assert t.skipped == {FUA: 1, DISCARD: 1}
    assert t.files == {"f0001": "loop0"} and t.depth == 1
