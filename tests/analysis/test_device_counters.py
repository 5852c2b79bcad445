"""fio's counts of the device's I/O beside its own (analysis/caches.device_not_reached),
on recorded real fio output (tests/data/fio/randwrite-2jobs.json: 36,492 direct writes in
2 s, the disk below counting 44,554), its counts changed where said."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from storbench.analysis.caches import DISK_SAMPLE_MS, device_not_reached
from storbench.result import model
from storbench.result.fio_json import parse_fio_json

DATA = Path(__file__).resolve().parents[1] / "data" / "fio" / "randwrite-2jobs.json"


def recorded() -> model.TestResult:
    return parse_fio_json(DATA.read_text())[1][0]


def test_the_device_s_counts_as_recorded_say_nothing_of_a_cache() -> None:
    assert device_not_reached(recorded(), direct=True) is None


def test_a_device_that_wrote_a_tenth_of_what_fio_wrote_is_said() -> None:
    r = recorded()
    r = replace(r, devices=[replace(r.devices[0], write_ios=r.write.total_ios // 10,
                                    write_merges=0)])
    found = device_not_reached(r, direct=True)
    assert found is not None and "90% of what fio was told is written never reached it" \
        in found.message


def test_a_test_shorter_than_two_of_fio_s_readings_is_not_judged_by_them() -> None:
    """fio reads the device's counters every 250 ms: a test of 207 ms saw them read once,
    mid-way (227 of its 1,024 writes: a full run of 2026-12-06), which said "78% … never
    reached it"; a count that stops short of the test's end says nothing of a cache."""
    r = recorded()
    assert r.write is not None
    short = replace(r, write=replace(r.write, total_ios=1024, runtime_ms=207),
                    devices=[replace(r.devices[0], write_ios=227, write_merges=0)])
    assert device_not_reached(short, direct=True) is None
    # as long as two readings: judged
    sampled = replace(short, write=replace(short.write, runtime_ms=2 * DISK_SAMPLE_MS))
    assert device_not_reached(sampled, direct=True) is not None
