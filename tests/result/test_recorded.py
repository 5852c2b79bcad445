"""The parser against fio output recorded from real fio (tests/data/fio, made by
scripts/record-fio-json): shapes of its JSON that need no fio to be read again."""

from __future__ import annotations

from pathlib import Path

import pytest

from storbench.analysis.explain import fio_figures
from storbench.result.fio_json import _criterion, _ran_ms, load_fio_json, parse_fio_json

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"


def test_a_groups_steady_state_stopped_after_its_jobs_time_not_their_sum():
    """4 jobs judged as one group (group_reporting: --until-steady's jobs of numjobs > 1;
    recorded real output, tests/data/fio/steady-grouped.json): fio's job_runtime is the
    4 jobs' times summed. The test stopped after the longest job's time, its read
    runtime; it was said to have stopped 4 times later (dbench's sequential tests:
    "attained after 13.1 s" for 3.3 s)."""
    text = (DATA / "steady-grouped.json").read_text()
    [job] = load_fio_json(text)["jobs"]
    ran_ms = job["read"]["runtime"]
    assert job["job_runtime"] > 3.5 * ran_ms and job["steadystate"]["attained"] == 1
    [result] = parse_fio_json(text)[1]
    assert result.jobs == 4 and result.steady_state is not None
    assert result.steady_state.attained and result.steady_state.criterion == "bw_slope:2%"
    assert result.steady_state.stopped_after_s == ran_ms / 1000
    # its CPU: fio's usr_cpu of a group is one job's share (CPU time over the jobs' times
    # summed); the 4 jobs' CPU is 4 times that, as 4 entries of their own add up to
    assert result.usr_cpu_percent == pytest.approx(4 * job["usr_cpu"])
    assert result.sys_cpu_percent == pytest.approx(4 * job["sys_cpu"])
    # and "why" judges fio's CPU per job (a core's share each): one job's, fio's own
    assert fio_figures(result)["cpu_percent"] == round(job["usr_cpu"] + job["sys_cpu"], 1)


def test_a_jobs_time_without_a_direction_that_ran_is_its_own_job_runtime():
    """A job entry no direction of which ran (none has a runtime): its job_runtime, divided
    among a group's jobs (fio sums it over them)."""
    job = {"job_runtime": 8000, "read": {"runtime": 0}, "write": {"runtime": 0}}
    assert _ran_ms(job, 1) == 8000 and _ran_ms(job, 4) == 2000
    assert _ran_ms({**job, "write": {"runtime": 1990}}, 4) == 1990


@pytest.mark.parametrize(("fio", "said"), [
    ("bw_slope:2.000000%", "bw_slope:2%"), ("iops_slope:0.500000%", "iops_slope:0.5%"),
    ("iops:20.000000", "iops:20"), ("lat_slope:0.125000%", "lat_slope:0.125%"),
    ("something else", "something else")])
def test_a_steady_state_criterion_is_said_as_written(fio, said):
    assert _criterion(fio) == said
