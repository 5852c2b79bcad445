"""storbench import: fio JSON from elsewhere becomes stored runs, or nothing at all."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.conftest import FIO, STORBENCH, needs_fio, run_cli

pytestmark = needs_fio

# fio 2.x's JSON, written by hand to its format (latency in microseconds, no *_ns keys,
# bandwidth in KiB/s): fio 2.x is not packaged any more.
FIO2_JSON = """{
  "fio version" : "fio-2.1.5",
  "jobs" : [
    {
      "jobname" : "test", "groupid" : 0, "error" : 0,
      "read" : {"io_bytes" : 784996, "bw" : 3185, "iops" : 796, "runtime" : 246443,
        "slat" : {"min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0},
        "clat" : {"min" : 268, "max" : 2190012, "mean" : 59762.5, "stddev" : 75911.4,
          "percentile" : {"50.000000" : 35072, "99.000000" : 350208}},
        "lat" : {"min" : 269, "max" : 2190013, "mean" : 59763.1, "stddev" : 75911.4}},
      "write" : {"io_bytes" : 263580, "bw" : 1069, "iops" : 267, "runtime" : 246443,
        "slat" : {"min" : 0, "max" : 0, "mean" : 0.0, "stddev" : 0.0},
        "clat" : {"min" : 421, "max" : 1881420, "mean" : 60124.9, "stddev" : 74811.2,
          "percentile" : {"50.000000" : 36096, "99.000000" : 346112}},
        "lat" : {"min" : 422, "max" : 1881421, "mean" : 60125.5, "stddev" : 74811.2}},
      "usr_cpu" : 0.9, "sys_cpu" : 3.2, "ctx" : 262146
    }
  ]
}
"""


def fio_json(tmp_path, *args, fmt="json+"):
    proc = subprocess.run([FIO, "--name=imp", f"--directory={tmp_path}", "--size=2m",
                           "--bs=4k", f"--output-format={fmt}", *args],
                          capture_output=True, text=True, check=True)
    return proc.stdout


def last(db):
    return json.loads(run_cli("show", "last", "--json", db=db).stdout)


def test_import_json_plus_file_and_compare_with_a_measured_run(tmp_path, tmpfs, store_path):
    path = tmp_path / "old.json"
    path.write_text(fio_json(tmp_path, "--rw=randrw", "--numjobs=2"))
    proc = run_cli("import", str(path), "--label", "old", "--tag", "from=ticket", db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert "Imported run #1" in proc.stderr
    run = last(store_path)
    assert run["origin"] == "imported" and run["label"] == "old" and run["tags"] == {
        "from": "ticket"}
    assert run["tests"][0]["jobs"] == 2 and run["tests"][0]["read"]["clat"]["bins"]
    raw = json.loads(run_cli("show", "last", "--json", "--raw", db=store_path).stdout)
    assert raw["fio_output"][0] == path.read_text()  # verbatim
    measured = run_cli("run", str(tmpfs), "--size", "8m",
                       "--runtime", "1", "--ramp", "0", db=store_path)
    assert measured.returncode == 0, measured.stderr
    md = run_cli("export", "1", "2", db=store_path).stdout
    assert re.search(r"\| #1 \| old \| [^|]+ \| imported \|", md) and "imp read IOPS" in md
    assert f"| #2 |  | {tmpfs.resolve()} | quick |" in md  # unlabelled: known by its target


def test_import_from_stdin_with_a_terminal_log_around_it(tmp_path, store_path):
    text = ("root@db1:~# fio --name=imp --rw=write --output-format=json\n"
            + fio_json(tmp_path, "--rw=write", fmt="json") + "root@db1:~# \n")
    proc = subprocess.run([*STORBENCH, "import", "-"], input=text, capture_output=True,
                          text=True, env={**__import__("os").environ,
                                          "STORBENCH_DB": str(store_path)})
    assert proc.returncode == 0, proc.stderr
    run = last(store_path)
    assert run["target"] == "<stdin>" and run["tests"][0]["write"]["iops"] > 0


def test_import_fio2_json(tmp_path, store_path):
    path = tmp_path / "efs-2016.json"
    path.write_text(FIO2_JSON)
    assert run_cli("import", str(path), db=store_path).returncode == 0
    t = last(store_path)["tests"][0]
    assert t["read"]["iops"] == 796 and t["write"]["iops"] == 267
    assert t["read"]["bw_bytes_per_s"] == 3185 * 1024  # fio 2.x: KiB/s
    assert t["read"]["io_bytes"] == 784996 * 1024  # fio 2.x's "io_bytes" held KiB
    assert t["read"]["clat"]["percentiles_ns"]["99.0"] == 350208 * 1000  # µs -> ns
    assert t["read"]["clat"]["mean_ns"] == pytest.approx(59762.5 * 1000)


def test_import_client_server_output(fio_servers, tmp_path, store_path):
    servers = fio_servers(2)
    job = tmp_path / "cs.fio"
    job.write_text(f"[cs]\nrw=randread\nbs=4k\nsize=2m\ndirectory={tmp_path}\n")
    args = []
    for a in servers.addresses:
        args += [f"--client={a},{servers.port}", str(job)]
    out = subprocess.run([FIO, "--output-format=json+", *args], capture_output=True,
                         text=True, check=True).stdout
    path = tmp_path / "cs.json"
    path.write_text(out)
    assert run_cli("import", str(path), db=store_path).returncode == 0
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert run["tests"][0]["name"] == "cs"
    assert run["tests"][0]["read"]["iops"] > 0
    proc = run_cli("show", "last", db=store_path)
    assert "cs: per host" in proc.stdout


@pytest.mark.parametrize("text, needle, code", [
    ("read : io=784996KB, bw=3185.4KB/s, iops=796, runt=246443msec\n", "no fio output found",
     2),
    ("3;fio-3.33;imp;0;0;4096;\n", ":1: terse line with 7 fields", 2),
    ("prose\nimp: (groupid=0, jobs=1): err= 0: pid=1: Sun Nov 22 2026\n",
     ":2: job 'imp' has no", 2),
    ("imp: (groupid=0, jobs=1): err= 0: pid=1\n  read: IOPS=9x, BW=1MiB/s (1MB/s)(1MiB/1msec)\n",
     ":2: cannot read this read line", 2),
    ('{\n  "fio version" : "fio-3.33",\n  "jobs" : [\n    {\n', "cut short", 2),
    ('{"fio version": "fio-3.33", "jobs": []}', "holds no job", 2),
])
def test_bad_input_is_one_clear_error_and_stores_nothing(text, needle, code, tmp_path,
                                                         store_path):
    good = tmp_path / "good.json"
    good.write_text(fio_json(tmp_path, "--rw=read"))
    bad = tmp_path / "bad.txt"
    bad.write_text(text)
    proc = run_cli("import", str(good), str(bad), db=store_path)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stderr and str(bad) in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads(run_cli("list", "--json", db=store_path).stdout) == []


def test_fios_mixed_report_is_refused_in_its_words_and_both_is_read(tmp_path, store_path):
    """fio's output with unified_rw_reporting=1 holds one "mixed" direction, not reads and
    writes: refused, saying so (it said "this is not fio's output as fio writes it");
    with =both fio writes reads and writes too, and they are imported."""
    mixed = tmp_path / "mixed.json"
    mixed.write_text(fio_json(tmp_path, "--rw=randrw", "--unified_rw_reporting=1"))
    proc = run_cli("import", str(mixed), db=store_path)
    assert proc.returncode == 2, proc.stderr
    assert "reported its reads and writes as one (unified_rw_reporting=1)" in proc.stderr
    assert "not fio's output" not in proc.stderr
    assert json.loads(run_cli("list", "--json", db=store_path).stdout) == []
    both = tmp_path / "both.json"
    both.write_text(fio_json(tmp_path, "--rw=randrw", "--unified_rw_reporting=both"))
    proc = run_cli("import", str(both), db=store_path)
    assert proc.returncode == 0, proc.stderr
    (test,) = last(store_path)["tests"]
    assert test["read"]["iops"] > 0 and test["write"]["iops"] > 0


def test_fios_normal_report_with_mixed_reads_each_directions_own_figures(tmp_path,
                                                                        store_path):
    """fio's normal output with unified_rw_reporting=both: reads, writes, then both as
    one ("mixed"): each direction's figures are its own (the writes' p99 was mixed's),
    as fio's JSON of the same run gives them; with =1, only "mixed": refused, saying so."""
    out = fio_json(tmp_path, "--rw=randrw", "--unified_rw_reporting=both", "--size=8m",
                   fmt="json,normal")
    # (fio's start lines, its JSON, then the normal output's report)
    start, cut = out.index("{\n"), out.index("\n}\n") + 2
    doc, text = json.loads(out[start:cut])["jobs"][0], out[:start] + out[cut:]
    (tmp_path / "both.txt").write_text(text)
    proc = run_cli("import", str(tmp_path / "both.txt"), db=store_path)
    assert proc.returncode == 0, proc.stderr
    (test,) = last(store_path)["tests"]
    # the normal output gives each percentile in its block's unit, rounded up
    units = [{"nsec": 1, "usec": 1000, "msec": 10**6}[u]
             for u in re.findall(r"clat percentiles \((\w+)\)", text)]
    for d, unit in zip(("read", "write"), units[:2], strict=True):
        fios = {float(p): v for p, v in doc[d]["clat_ns"]["percentile"].items()}
        mine = {float(p): v for p, v in test[d]["clat"]["percentiles_ns"].items()}
        assert mine.keys() == fios.keys()
        assert all(0 <= mine[p] - fios[p] < unit for p in fios), (d, unit, mine, fios)
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(fio_json(tmp_path, "--rw=randrw", "--unified_rw_reporting=1",
                              fmt="normal"))
    proc = run_cli("import", str(mixed), db=store_path)
    assert proc.returncode == 2 and "reads and writes as one (mixed" in proc.stderr, proc.stderr


@pytest.mark.parametrize("fmt", ["json", "normal"])
def test_a_failed_fio_run_is_imported_failed_in_fio_s_words(fmt, small_tmpfs, tmp_path,
                                                           store_path):
    """fio that ran out of room (a 32 MiB file on a 16 MiB tmpfs): the import is failed
    with fio's error number, its meaning and fio's own lines, as a measured run says it
    (it said only "fio reported errors in: fill")."""
    out = tmp_path / f"full.{fmt}"
    with out.open("w") as f:  # as a user keeps it: fio's messages in the same file
        fio = subprocess.run([FIO, "--name=fill", f"--directory={small_tmpfs}", "--size=32m",
                              "--rw=write", "--bs=64k", f"--output-format={fmt}"],
                             stdout=f, stderr=subprocess.STDOUT)
    assert fio.returncode != 0
    proc = run_cli("import", str(out), db=store_path)
    assert proc.returncode == 0, proc.stderr
    said = "fio job 'fill' failed with error 28 (No space left on device): fio: io_u error"
    assert f"failed: {said}" in proc.stderr
    run = last(store_path)
    assert run["status"] == "failed" and run["error"].startswith(said), run["error"]
    assert "error=No space left on device" in run["error"]
    assert said in run_cli("show", "last", db=store_path).stdout


@pytest.mark.parametrize("fmt, sig", [("json+", "INT"), ("normal", "TERM"), ("terse", "INT")])
def test_a_fio_run_stopped_by_a_signal_is_imported_as_interrupted(fmt, sig, tmp_path,
                                                                  store_path):
    """fio stopped by Ctrl-C or a timeout's SIGTERM still writes what it measured, as
    if whole, with "fio: terminating on signal N" above it: that run was imported as
    completed. It is interrupted, in fio's words, its figures kept (of the time it ran)."""
    import signal
    import time

    out = tmp_path / f"stopped.{fmt}"
    fio = subprocess.Popen([FIO, "--name=cut", f"--directory={tmp_path}", "--size=4m",
                            "--rw=randread", "--time_based", "--runtime=60",
                            f"--output-format={fmt}", f"--output={out}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)  # laid out, reading
    fio.send_signal(getattr(signal, f"SIG{sig}"))
    assert fio.wait(timeout=30) != 0
    number = getattr(signal, f"SIG{sig}").value
    assert f"fio: terminating on signal {number}" in out.read_text()
    proc = run_cli("import", str(out), db=store_path)
    assert proc.returncode == 0, proc.stderr
    said = f"interrupted: fio: terminating on signal {number}: fio was stopped before its jobs"
    assert said in proc.stderr
    run = last(store_path)
    assert run["status"] == "interrupted", run
    assert run["error"].startswith(f"fio: terminating on signal {number}")
    assert run["tests"][0]["read"]["iops"] > 0  # what it measured, kept
    shown = run_cli("show", "last", db=store_path).stdout
    assert "status=interrupted" in shown and f"terminating on signal {number}" in shown
    # and the same output without the signal's line: a completed run, as fio said
    whole = tmp_path / f"whole.{fmt}"
    whole.write_text(out.read_text().replace(f"fio: terminating on signal {number}", ""))
    assert run_cli("import", str(whole), db=store_path).returncode == 0
    assert last(store_path)["status"] == "completed"
    # in one series, the interrupted run is left out of its history, and said to be
    moved = run_cli("series", "cut", str(run["id"]), "last", db=store_path)
    assert moved.returncode == 0, moved.stderr
    assert ("2 run(s) now in series 'cut' (1 did not complete: `storbench history`"
            " leaves them out)") in moved.stderr
    hist = run_cli("history", "cut", db=store_path)
    assert hist.returncode == 0, hist.stderr
    assert (f"Left out: 1 run(s) of series 'cut' that did not complete (#{run['id']}"
            " interrupted): a history follows completed runs only.") in hist.stderr
    assert run_cli("history", "cut", "--json", db=store_path).stdout.startswith("[")


@pytest.mark.parametrize("fmt", ["json+", "normal"])
def test_an_imported_run_is_warned_of_what_its_output_shows(fmt, tmpfs, store_path):
    """An imported run was stored with no warnings at all: a 1-s run, a rate fio did not
    keep, shown as if sound. Those fio's output alone supports are now said; a run of
    the same job measured long enough, at a rate kept, is not warned of them."""
    def imported(*args):
        out = subprocess.run([FIO, "--name=imp", f"--directory={tmpfs}", "--size=4m",
                              "--bs=4k", "--rw=randread", "--time_based", *args,
                              f"--output-format={fmt}"],
                             capture_output=True, text=True, check=True).stdout
        path = tmpfs / f"out-{len(args)}.txt"
        path.write_text(out)
        proc = run_cli("import", str(path), db=store_path)
        assert proc.returncode == 0, proc.stderr
        return {w["kind"]: w["message"] for w in last(store_path)["warnings"]}

    # psync on tmpfs does well under a million IOPS here: 5,000,000 a job is not kept
    found = imported("--runtime=1", "--rate_iops=5000000", "--rate_process=linear")
    assert "moved its data in 1" in found["too-short"]
    if fmt == "json+":  # the text's header line names no rate
        assert "of 5,000,000 read IOPS requested" in found["rate-not-reached"]
        shown = run_cli("show", "last", db=store_path).stdout
        assert "(of 5,000,000 asked)" in shown and "warning (rate-not-reached)" in shown
        calm = imported("--runtime=6", "--rate_iops=200", "--rate_process=linear")
        assert not {"too-short", "rate-not-reached", "rate-exceeded"} & set(calm), calm
