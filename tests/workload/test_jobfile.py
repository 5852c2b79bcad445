from pathlib import Path

import pytest

from storbench.errors import ConfigError
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.sizes import fio_size, parse_size

JOB = """
; a comment
# another
[global]
ioengine=libaio
direct = 1
time_based

[randread]
rw=randread
bs=4k
size=64m
numjobs=2

[seq]
rw=write
filename=shared.data
size=32m
numjobs=4
offset_increment=32m
"""


def test_parse_keeps_sections_options_and_flags():
    jf = parse_jobfile(JOB)
    assert [s.name for s in jf.sections] == ["global", "randread", "seq"]
    assert jf.sections[0].options == (("ioengine", "libaio"), ("direct", "1"), ("time_based", None))
    assert [s.name for s in jf.jobs()] == ["randread", "seq"]


def test_render_round_trips():
    jf = parse_jobfile(JOB)
    assert parse_jobfile(jf.render()) == jf


def test_effective_options_merge_globals():
    eff = dict(parse_jobfile(JOB).effective())
    assert eff["randread"]["ioengine"] == "libaio"
    assert eff["randread"]["time_based"] == ""
    assert eff["seq"]["rw"] == "write"


def test_estimated_bytes_counts_jobs_and_shared_files():
    # randread: 2 jobs x 64 MiB own files; seq: one shared file up to 3*32m + 32m
    assert parse_jobfile(JOB).estimated_bytes() == 2 * 64 * 2**20 + 128 * 2**20


def test_estimated_bytes_unknown_without_size():
    assert parse_jobfile("[x]\nrw=read\n").estimated_bytes() is None


def test_prepared_points_at_directory_and_applies_overrides(tmp_path):
    jf = parse_jobfile(JOB + "\n[g2]\ndirectory=/etc\ngtod_reduce=1\nrw=read\n")
    p = jf.prepared(tmp_path, size="1m", runtime=2, ramp=0.5)
    assert p.sections[0].options == (("directory", str(tmp_path)),
                                     ("filename_format", "$jobname.$jobnum.$filenum"))
    text = p.render()
    assert "/etc" not in text and "gtod_reduce" not in text
    for _, opts in p.effective():
        assert opts["size"] == "1m" and opts["runtime"] == "2"
        assert opts["ramp_time"] == "500ms"  # fio drops a fraction of "0.5"
        assert opts["directory"] == str(tmp_path)


@pytest.mark.parametrize("value", ["/dev/sda", "../escape", "a:/etc/passwd"])
def test_prepared_refuses_paths_outside_scratch(value, tmp_path):
    jf = parse_jobfile(f"[x]\nrw=write\nfilename={value}\n")
    with pytest.raises(ConfigError, match="scratch directory"):
        jf.prepared(tmp_path)


def test_include_is_resolved(tmp_path: Path):
    (tmp_path / "common.fio").write_text("[global]\nbs=8k\n")
    jf = parse_jobfile("include common.fio\n[a]\nrw=read\n", base=tmp_path)
    assert dict(jf.effective())["a"]["bs"] == "8k"


@pytest.mark.parametrize("text, message", [
    ("rw=read\n", "before any"),
    ("[global]\nbs=4k\n", "no job section"),
    ("[broken\nrw=read\n", "malformed"),
])
def test_parse_errors_name_the_line(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_jobfile(text, "my.fio")


@pytest.mark.parametrize("text, expected", [
    ("4096", 4096), ("4k", 4096), ("22m", 22 * 2**20), ("2g", 2 * 2**30), ("1GiB", 2**30),
    ("2G", 2 * 2**30), ("50%", None), ("abc", None),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


def test_fio_size_exact():
    assert fio_size(512 * 2**20) == "512m"
    assert fio_size(2**30) == "1g"
    assert fio_size(1000) == "1000"


def test_steady_state_judges_sequential_jobs_on_bandwidth_without_ramp():
    from storbench.workload.suites import get_suite

    by_name = {t.name: jf.with_steady_state("iops_slope:0.5%", 3, 60)
               for t, jf in get_suite("dbench").jobfiles()}
    seq = dict(by_name["read_seq"].effective())["read_seq"]
    assert seq["steadystate"] == "bw_slope:0.5%" and "group_reporting" in seq
    rand = dict(by_name["read_iops"].effective())["read_iops"]
    assert rand["steadystate"] == "iops_slope:0.5%"
    for jf in by_name.values():
        assert all("ramp_time" not in opts for opts in dict(jf.effective()).values())
        assert "ramp_time" not in jf.render()


@pytest.mark.parametrize("text, expected", [
    # side by side: the longest
    ("[global]\ntime_based\nruntime=10\n[a]\n[b]\nruntime=20\nramp_time=2\n", 22.0),
    # one group after the other (stonewall, wait_for_previous): summed. A time-based job
    # file of three stonewalled 35-s jobs was stopped as hung at 96 s ("no result from
    # fio"): its deadline counted one group
    ("[global]\ntime_based\nruntime=35\n[a]\n[b]\nstonewall\n[c]\nstonewall\n", 105.0),
    ("[global]\ntime_based\nruntime=5\nstonewall\n[a]\n[b]\n[c]\n", 15.0),
    ("[global]\ntime_based\nruntime=1m\n[a]\n[b]\nwait_for_previous\n[c]\n", 120.0),
    ("[global]\ntime_based\nruntime=10\n[a]\n[b]\nstartdelay=5\n[c]\nstonewall\n"
     "startdelay=1-3\n", 28.0),
    ("[a]\nruntime=10\n", None),  # not time based: its size says how long
])
def test_expected_seconds_follows_the_groups_fio_runs(text, expected):
    from storbench.target.base import MARGIN_S, default_deadline
    from storbench.workload.plan import PlannedTest, expected_seconds

    job = parse_jobfile(text)
    assert expected_seconds(job) == expected
    if expected is not None:
        deadline = default_deadline(PlannedTest("t", "", job, expected))
        assert deadline.seconds >= expected + MARGIN_S


@pytest.mark.parametrize("text, moved", [
    ("[a]\nsize=64m\n", 64 * 2**20),
    # a size-bound job that reads its file 10 times was given the time of one pass
    ("[a]\nsize=64m\nloops=10\nnumjobs=2\n", 64 * 2**20 * 10 * 2),
    ("[a]\nsize=64m\nio_size=1g\n", 2**30),
    ("[a]\nsize=64m\nrw=write\nverify=crc32c\n", 2 * 64 * 2**20),
    ("[a]\nsize=64m\nrw=write\nverify=crc32c\ndo_verify=0\n", 64 * 2**20),
    ("[a]\nfilesize=8m\nnrfiles=4\n", 32 * 2**20),
    ("[a]\nrw=read\n", None),
])
def test_a_size_bound_deadline_counts_what_fio_moves(text, moved):
    from storbench.target.base import (
        LAYOUT_BYTES_PER_S,
        MARGIN_S,
        SLOW_BYTES_PER_S,
        default_deadline,
    )
    from storbench.workload.plan import PlannedTest, moved_bytes

    job = parse_jobfile(text)
    assert moved_bytes(job) == moved
    if moved is not None:
        deadline = default_deadline(PlannedTest("t", "", job, None))
        on_disk = job.estimated_bytes() or 0
        assert deadline.seconds == pytest.approx(
            moved / SLOW_BYTES_PER_S + on_disk / LAYOUT_BYTES_PER_S + MARGIN_S)


# (job file, how many jobs each entry of fio's report holds: tests/result/test_fio_json.py
# runs each with real fio and reads its own count, "jobs=N", beside its JSON)
REPORTED = [
    ("[a]\nnumjobs=2\n[b]\nnumjobs=2\n", [1, 1, 1, 1]),
    # group_reporting joins the file's one group: one entry, "a", of 4 jobs
    ("[global]\ngroup_reporting\n[a]\nnumjobs=2\n[b]\nnumjobs=2\n", [4]),
    ("[global]\ngroup_reporting\n[a]\nnumjobs=2\n[b]\nnumjobs=2\nnew_group\n", [2, 2]),
    ("[global]\ngroup_reporting\n[a]\nnumjobs=2\n[b]\nnumjobs=0x3\nwait_for_previous\n",
     [2, 3]),
    # a group_reporting job joins the entry of the job before it in its group, grouped or
    # not; one with stats=0 is in no entry; a stonewall in [global]: a group a section
    ("[a]\nnumjobs=2\n[b]\ngroup_reporting=1\n[c]\nstats=0\n[d]\ngroup_reporting\n",
     [1, 3]),
    ("[global]\nstonewall\ngroup_reporting\n[a]\nnumjobs=3\n[b]\nnumjobs=2\n", [3, 2]),
    ("[global]\ngroup_reporting=0\n[a]\nnumjobs=2\n", [1, 1]),
    ("[a]\n[b]\nname=other\nnumjobs=2\n", [1, 1, 1]),  # (fio names b "other")
    # --until-steady's grouping of a job of numjobs > 1 (JobFile.with_steady_state)
    ("[a]\n[b]\nnumjobs=2\ngroup_reporting\n", [3]),
    ("[a]\n[b]\nnumjobs=2\ngroup_reporting\nnew_group\n[c]\n", [1, 2, 1]),
]


def counts(job):
    """How many jobs each entry of ``job``'s report holds (JobFile.reported)."""
    reported = job.reported()
    return None if reported is None else [n for _, n in reported]


@pytest.mark.parametrize("text, entries", REPORTED)
def test_reported_says_how_many_jobs_each_entry_of_fios_report_holds(text, entries):
    assert counts(parse_jobfile(text)) == entries


def test_reported_names_each_entry_for_its_first_job_as_fio_does():
    assert parse_jobfile("[global]\ngroup_reporting\n[a]\nnumjobs=2\n[b]\nnew_group\n"
                         "[c]\nname=other\n[d]\nname=mine\nnew_group\n").reported() == [
                             ("a", 2), ("b", 2), ("mine", 1)]


def test_until_steady_groups_a_jobs_clones_apart_from_the_jobs_beside_it():
    """--until-steady reports a job's clones as one group (so that fio judges them
    together), each job its own: `[a] [b] numjobs=2` was one entry, "a", of 3 jobs (b's
    writes as a's; b had none). A group the job file made is left as it is."""
    mine = parse_jobfile("[a]\n[b]\nnumjobs=2\n[c]\nnumjobs=3\n")
    assert counts(mine.with_steady_state("iops_slope:0.5%", 3, 60)) == [1, 2, 3]
    theirs = parse_jobfile("[global]\ngroup_reporting\n[a]\nnumjobs=2\n[b]\nnumjobs=2\n")
    assert counts(theirs.with_steady_state("iops_slope:0.5%", 3, 60)) == [4]


def test_reported_is_none_for_a_flag_it_cannot_read():
    assert parse_jobfile("[a]\ngroup_reporting=yes\n").reported() is None
