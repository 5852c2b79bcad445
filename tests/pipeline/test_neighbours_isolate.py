"""`storbench neighbours --isolate` (#60): the aggressors in a blkio cgroup of their own
that holds them to a limit, on a shape whose cause is known: ext4 on a loop device in RAM
with no cap, where 1M writes at queue depth 32 fill the device's queue and the victim's
4k reads wait behind them (13-28 ms at p99 here, against ~0.2 ms alone); held to 20 MiB/s
they leave the queue almost empty. And what is refused before anything is made: no block
device beneath, a storbench already in a cgroup that limits the device (cgroup v1 would
let the aggressors escape it), limits that are not io.max's, a cgroup in a user's job
file."""

from __future__ import annotations

from pathlib import Path

import pytest

from storbench.errors import ConfigError
from storbench.pipeline.kinds.neighbours import NeighboursKind, NeighboursSpec
from storbench.workload.guard import check_final
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.limits import Limits
from tests.cli.test_cli import show_json
from tests.conftest import needs, needs_fio, run_cli, run_cli_wrapped

pytestmark = needs("alone")  # a timing test here measures p99 beside neighbours: alone

BLKIO = Path("/sys/fs/cgroup/blkio")


def _left_cgroups() -> set[str]:
    return {p.name for p in BLKIO.rglob("storbench-aggressors-*")} if BLKIO.exists() else set()


@pytest.fixture
def ram_volume():
    """ext4 on a loop device whose image is in RAM, with no cap: the loop device's own
    queue is what the victim and the aggressors share (tests/testbed.Throttled, unwrapped:
    nothing runs in its cgroup)."""
    from tests.testbed import Throttled, missing_for_throttled

    if (reason := missing_for_throttled()) is not None:
        pytest.skip(reason)
    with Throttled(backing_dir="/dev/shm", size="1G") as vol:
        yield vol


@needs("fio", "root", "timing")  # p99s a busy machine moves: alone
def test_aggressors_held_in_their_cgroup_give_the_victim_its_p99_back(ram_volume, store_path,
                                                                      tmp_path):
    before = _left_cgroups()
    # A p99 of ~600 reads is the 6th slowest: on this 2-core machine one busy moment (the
    # test-bed's Kubernetes cleaning up after its tests) puts it over 5 ms in any step,
    # held or not (alone 16 ms, held 20 ms while Kubernetes started here; a CI run's held
    # step once). Such a run is measured again, twice at most: the aggressors not held,
    # the victim waits behind their queue (p50 7-10 ms) and every attempt misses.
    missed = []
    for _attempt in range(3):
        proc = run_cli("neighbours", str(ram_volume.mnt), "--victim", "randread",
                       "--max-aggressors", "2", "--step-time", "3", "--size", "64m",
                       "--isolate", "wbps=20M weight=10", "--limit", "p99<=5ms",
                       "--assert", "neighbours.randread.held.p99 < 5ms", db=store_path)
        record = show_json(store_path)["data"]["neighbours"]
        steps = record["steps"]
        if proc.returncode != 3:
            break
        assert "1 check(s) failed: neighbours.randread.held.p99 < 5ms" in proc.stderr
        missed.append([s["victims"]["randread"]["p99_ns"] for s in steps])
    assert proc.returncode == 0, (missed, proc.stderr[-3000:])
    # each count measured, and again held, right after it; the limit missed beside the
    # first aggressor stops the run after that count's held step
    assert [(s["aggressors"], s["isolated"]) for s in steps] == [(0, False), (1, False),
                                                                 (1, True)]
    _, free, held = (s["victims"]["randread"] for s in steps)
    # alone 0.2-0.9 ms at p99 here (2 ms in a CI run beside Kubernetes), beside the writer
    # 11-16 ms, held 0.4-2 ms: growth is over 10 on a quiet machine, 8 on that one
    assert free["p99_ns"] > 5e6 and free["growth_p99"] > 4, free
    assert held["p99_ns"] < free["p99_ns"] / 3 and held["p99_ns"] < 5e6, (held, free)
    # the cgroup held them to what was asked, and only them: the victim kept its rate
    assert steps[1]["aggressor_bw_bytes_per_s"] > 200 * 2**20
    assert steps[2]["aggressor_bw_bytes_per_s"] == pytest.approx(20 * 2**20, rel=0.15)
    assert held["rate_kept"]
    iso = record["isolation"]
    assert iso["limits"] == "wbps=20M weight=10" and iso["cgroup"] == "cgroup v1 blkio"
    assert iso["device"].startswith(f"{ram_volume.dev} (")
    # a loop device is scheduled by none: the weight is said to be ignored
    assert iso["scheduler"] == "none" and "weight is ignored" in iso["ignored"]
    assert "with them held" in record["said"] and "weight is ignored" in record["said"]
    assert record["said"].endswith("p99<=5ms missed beside 1; with them held, p99<=5ms held"
                                   " at every step")
    assert "PASS neighbours.randread.held.p99 < 5ms" in proc.stdout
    shown = run_cli("show", "last", db=store_path).stdout
    assert "1 held" in shown and "held to writes at 20.0 MiB/s" in shown
    assert "p99 held" in run_cli("compare", "last", db=store_path, env={"COLUMNS": "250"}).stdout
    report = run_cli("report", "last", "-o", str(tmp_path / "r.html"), db=store_path)
    assert report.returncode == 0 and "randread p99 held" in (tmp_path / "r.html").read_text()
    # the aggressors' job carries storbench's cgroup, the victim's none; and it is gone
    jobs = show_json(store_path)["job_files"]
    held_job = next(j for j in jobs if "[aggressors-1-isolated]" in j)
    assert "cgroup=" in held_job.split("[aggressors-1-isolated]")[1]
    assert "cgroup=" not in held_job.split("[aggressors-1-isolated]")[0]
    assert _left_cgroups() == before


@needs("fio", "root")
def test_isolation_is_refused_where_a_cgroup_would_hold_nothing_or_escape_a_cap(
        ram_volume, tmp_path, store_path):
    # in a cgroup that caps the device: v1 would not hold the aggressors' child to it
    proc = run_cli_wrapped(ram_volume.wrap, "neighbours", str(ram_volume.mnt), "--isolate",
                           "wbps=20M", db=store_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"which limits {ram_volume.dev}" in proc.stderr
    assert "Run storbench outside that cgroup" in proc.stderr
    # the same where the cgroup that limits it is the hierarchy's root (where storbench
    # runs here): a rule for this test's own device only, taken back after
    rule = BLKIO / "blkio.throttle.write_bps_device"
    rule.write_text(f"{ram_volume.majmin} {64 << 20}")
    try:
        proc = run_cli("neighbours", str(ram_volume.mnt), "--isolate", "wbps=20M",
                       db=store_path)
    finally:
        rule.write_text(f"{ram_volume.majmin} 0")
    assert proc.returncode == 2 and f"which limits {ram_volume.dev}" in proc.stderr, \
        proc.stderr[-2000:]
    # RAM: no device queue to limit
    shm = Path("/dev/shm")
    proc = run_cli("neighbours", str(shm), "--isolate", "wbps=20M", db=store_path)
    assert proc.returncode == 2 and "is on no block device" in proc.stderr, proc.stderr
    assert run_cli("list", db=store_path).stdout.count("neighbours") == 0  # nothing ran
    assert _left_cgroups() == set()


@needs_fio
def test_on_ram_the_run_says_there_is_no_device_queue_to_share(tmpfs, store_path):
    proc = run_cli("neighbours", str(tmpfs), "--victim", "randread", "--max-aggressors", "1",
                   "--step-time", "1", "--size", "16m", db=store_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = show_json(store_path)
    kinds = [w["kind"] for w in run["warnings"]]
    assert "no-device-queue" in kinds
    # 1 s steps ramp for 0.5 s: with a 1 s ramp fio 3.33 ended most of them inside it at
    # the victim's 200 IOPS, its reads the ramp's and none timed (the run now fails so)
    assert all("ramp_time=500ms" in text for text in run["job_files"]), run["job_files"]
    victims = [v for s in run["data"]["neighbours"]["steps"] for v in s["victims"].values()]
    assert len(victims) == 2 and all(v["p99_ns"] for v in victims), victims
    assert "RAM has no device queue to share" in run_cli("show", "last", db=store_path).stdout


# -- fast: the limits, the plan, the gate --------------------------------------------------

@pytest.mark.parametrize("text, says", [
    ("", "at least one limit"),
    ("wbps", "not KEY=VALUE"),
    ("max=1", "not KEY=VALUE"),
    ("wbps=fast", "positive size"),
    ("riops=1.5", "positive whole number"),
    ("riops=0", "positive whole number"),
    ("weight=5000", "1 to 1000"),
    ("wbps=1M wbps=2M", "given twice"),
    # what reaches the kernel is 'MAJ:MIN VALUE' storbench writes: no text of the user's
    ("wbps=20M\n7:0 0", "not KEY=VALUE"),
    ("wbps=20M/../../tasks", "positive size"),
])
def test_limits_that_are_not_io_max_s_are_refused(text, says):
    with pytest.raises(ConfigError, match=says):
        Limits.parse(text)


def test_limits_are_read_as_io_max_names_them():
    limits = Limits.parse("wbps=20M, riops=500 weight=10")
    assert limits.values == (("wbps", 20 * 2**20), ("riops", 500), ("weight", 10))
    assert limits.words() == "writes at 20.0 MiB/s, 500 read IOPS, weight 10 (of 100 for the" \
                             " victims)"


def test_each_count_is_measured_again_held_and_only_the_aggressors_join_the_cgroup(tmp_path):
    spec = NeighboursSpec(victims=("randread",), max_aggressors=2, isolate="wbps=1M")
    assert spec.schedule() == [(0, False), (1, False), (1, True), (2, False), (2, True)]
    plan = spec.plan_tests(tmp_path)
    assert [t.name for t in plan.tests] == ["step-0", "step-1", "step-1-isolated", "step-2",
                                            "step-2-isolated"]
    held = plan.tests[2].jobfile
    options = dict(held.effective())
    assert options["randread-1-isolated"].get("cgroup") is None
    cgroup = options["aggressors-1-isolated"]["cgroup"]
    assert cgroup.rsplit("/", 1)[-1].startswith("storbench-aggressors-")
    assert options["aggressors-1-isolated"]["cgroup_nodelete"] == "1"
    assert plan.tests[1].jobfile.render().count("cgroup") == 0
    # the last gate lets storbench's own cgroup through, in the plan's text as fio gets it
    check_final(parse_jobfile(held.render(), "t"), [str(tmp_path)], allow_exec=False,
                source="t")
    assert NeighboursSpec().schedule() == [(0, False), (1, False), (2, False), (4, False)]


@pytest.mark.parametrize("value", ["../../tasks", "/sys/fs/cgroup/blkio", "mine",
                                   "storbench-aggressors-0123abcd/../x",
                                   "a/../storbench-aggressors-0123abcd",
                                   "storbench-aggressors-0123abc"])
def test_no_other_cgroup_passes_the_last_gate(tmp_path, value):
    text = f"[a]\nrw=write\nfilename={tmp_path}/f\ncgroup={value}\n"
    with pytest.raises(ConfigError, match="not storbench's own cgroup"):
        check_final(parse_jobfile(text, "t"), [str(tmp_path)], allow_exec=False, source="t")
    with pytest.raises(ConfigError, match="not storbench's own cgroup_nodelete"):
        check_final(parse_jobfile(f"[a]\nfilename={tmp_path}/f\ncgroup_nodelete=0\n", "t"),
                    [str(tmp_path)], allow_exec=False, source="t")


def test_a_users_job_file_may_name_no_cgroup_not_even_storbenchs(tmp_path):
    jobfile = parse_jobfile("[a]\nrw=write\ncgroup=storbench-aggressors-0123abcd\n", "my.fio")
    with pytest.raises(ConfigError, match="creates cgroups"):
        jobfile.prepared(tmp_path)


def test_isolation_is_refused_for_a_storage_whose_fio_runs_elsewhere():
    class Elsewhere:  # a target with no path on this machine (hosts, pods, a bucket)
        name = "hosts a,b"

    kind = NeighboursKind(NeighboursSpec(isolate="wbps=1M"))
    with pytest.raises(ConfigError, match="applies to a directory or a device on this"):
        kind.check_target(Elsewhere())  # type: ignore[arg-type]



def test_the_sentence_says_each_victim_held_and_the_objective_both_ways():
    from storbench.analysis.neighbours import said

    def step(n, p99, growth, isolated=False, missed=False):
        return {"aggressors": n, "isolated": isolated, "victims": {"randread": {
            "p99_ns": p99, "growth_p99": growth, "rate_kept": True, "achieved_iops": 200.0,
            "requested_iops": 200.0, "missed": missed}}}

    steps = [step(0, 2e5, 1.0), step(1, 1.3e7, 65.0, missed=True),
             step(1, 2.5e5, 1.25, isolated=True)]
    text = said(steps, {"randread": "your 4k random reads' p99"}, "p99<=5ms",
                {"words": "writes at 20.0 MiB/s", "ignored": None})
    assert text == ("your 4k random reads' p99 went from 200 µs alone to 13.0 ms beside 1"
                    " aggressor (65.00×), and 250 µs beside 1 aggressor (1.25×) with them held"
                    " (held: writes at 20.0 MiB/s, in a cgroup of their own); p99<=5ms missed"
                    " beside 1; with them held, p99<=5ms held at every step")
