"""A cgroup's count of the I/Os its cap let through, and of their bytes
(execute/capcount.py): read from its files, and the rate of a window of readings. The
files here are stand-ins written in the kernel's two formats (a real blkio cgroup's is
read in tests/pipeline/test_explain.py, whose runs on the test-bed's cap store the
rate)."""

from __future__ import annotations

import time
from pathlib import Path

from storbench.execute.capcount import Counted, Sampler, Served, served

V1 = """7:3 Read 5
7:3 Write 9
7:3 Sync 9
7:3 Async 5
7:3 Discard 0
7:3 Total 14
7:0 Read 120
7:0 Write 3400
7:0 Sync 3400
7:0 Async 120
7:0 Discard 0
7:0 Total 3520
Total 3534
"""
V1_BYTES = """7:3 Read 20480
7:3 Write 36864
7:3 Total 57344
7:0 Read 491520
7:0 Write 13926400
7:0 Total 14417920
Total 14475264
"""
V2 = """8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0
7:0 rbytes=491520 wbytes=13926400 rios=120 wios=3400 dbytes=0 dios=0
"""


def test_both_formats_are_read_for_the_device_named(tmp_path: Path) -> None:
    """The I/Os and their bytes: v2's from io.stat, v1's from io_serviced and the
    io_service_bytes beside it (without which the bytes are not known)."""
    v1, v2 = tmp_path / "blkio.throttle.io_serviced", tmp_path / "io.stat"
    v1.write_text(V1)
    v2.write_text(V2)
    assert served(str(v2), "7:0") == (120, 3400, 491520, 13926400)
    assert served(str(v1), "7:0") == (120, 3400, None, None)  # no io_service_bytes
    (tmp_path / "blkio.throttle.io_service_bytes").write_text(V1_BYTES)
    assert served(str(v1), "7:0") == (120, 3400, 491520, 13926400) == served(str(v2), "7:0")
    assert served(str(v1), "7:3") == (5, 9, 20480, 36864)
    assert served(str(v1), "8:16") is None and served(str(v2), "8:16") is None
    assert served(str(tmp_path / "gone"), "7:0") is None


def test_the_rate_is_of_the_readings_within_the_window() -> None:
    s, k = 10**9, 4096
    counted = Counted([(0, Served(0, 0, 0, 0)), (1 * s, Served(0, 100, 0, 100 * k)),
                       (2 * s, Served(10, 3100, 10 * k, 3100 * k)),
                       (3 * s, Served(20, 6100, 20 * k, 6100 * k)),
                       (4 * s, Served(20, 9000, 20 * k, 9000 * k))])
    # the layout's writes left out
    assert counted.rate(2 * s, 3 * s) == (10.0, 3000.0, 10.0 * k, 3000.0 * k)
    assert counted.rate(int(1.5 * s), int(3.5 * s)) == (10.0, 3000.0, 10.0 * k, 3000.0 * k)
    assert counted.rate(int(2.5 * s), int(3.5 * s)) is None  # one reading within
    assert Counted([(0, Served(0, 0)), (s // 4, Served(0, 750))]).rate(0, s) is None  # 0.25 s
    # bytes not kept at one end: not told
    assert Counted([(0, Served(0, 0)), (s, Served(5, 9, 20480, 36864))]).rate(0, s) == (
        5.0, 9.0, None, None)


def test_a_sampler_reads_every_slice_until_it_ends(tmp_path: Path) -> None:
    counter = tmp_path / "io.stat"
    counter.write_text("7:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n")
    with Sampler((str(counter), "7:0"), 0.05) as sampler:
        time.sleep(0.3)
        counter.write_text("7:0 rbytes=0 wbytes=0 rios=4 wios=30 dbytes=0 dios=0\n")
        time.sleep(0.3)
    readings = sampler.counted.readings
    assert len(readings) >= 6 and readings[-1][1] == (4, 30, 0, 0) \
        and readings[0][1] == (0, 0, 0, 0)
    assert [r[0] for r in readings] == sorted(r[0] for r in readings)
