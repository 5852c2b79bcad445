"""The application profiles' estimates judged again, with no fio and no application, from
profile runs that real fio stored on the test-bed's storage shapes beside what the real
applications did on the same shapes that day (tests/data/apps, made by `bench/apps.py
--keep`): each estimate within 30% of the real figure, from the judge as it is now (where
the constants' machine is another, tmpfs or a busy one, the real figure within the
estimate's range), on the test-bed and on a second machine (series apps-SHAPE-xeon-APP);
those outside 30% are named in OUTSIDE, as docs/apps.md gives them."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pytest

from storbench.analysis.apps import (
    BUSY_S,
    CPU_S,
    JUDGES,
    PER_PASS,
    Answer,
    Figure,
    median_of,
)
from storbench.store import Store
from storbench.store.series import series_last
from storbench.workload.apps import MYSQL

DATA = Path(__file__).resolve().parents[1] / "data" / "apps"
_KEPT = json.loads((DATA / "real.json").read_text())
REAL: dict[str, dict[str, list[float]]] = _KEPT["series"]
MADE: dict[str, dict[str, int | str]] = _KEPT["made"]  # each series' date, seconds, busy loops


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    db = tmp_path_factory.mktemp("apps") / "runs.db"
    db.write_bytes(gzip.decompress((DATA / "runs.db.gz").read_bytes()))
    return Store(db)


def judged(store: Store, series: str) -> Answer:
    """The profile run of ``series`` (apps-SHAPE-APP) judged again."""
    run_id = series_last(store, series)
    assert run_id is not None, f"no run of {series} in tests/data/apps"
    answer = JUDGES[series.rsplit("-", 1)[1]](store.get_run(run_id).results_by_test())
    assert answer is not None
    return answer


def estimates(store: Store, series: str) -> dict[str, Figure]:
    return {f.metric: f for f in judged(store, series).figures}


@pytest.mark.parametrize("series, metric", [(s, m) for s, figures in REAL.items()
                                            for m in figures])
def test_each_estimate_is_within_30_percent_of_the_real_application(store: Store, series: str,
                                                                   metric: str) -> None:
    real = statistics.median(REAL[series][metric])
    e = estimates(store, series)[_estimated_as(series, metric)]
    assert e.low <= e.value <= e.high
    # on tmpfs the application's own time decides, and its CPU times are constants of the
    # day they were measured (docs/apps.md: that day the machine did 1,338 pgbench TPS and
    # 20,833 and 126,050 SETs/s on tmpfs; on the day of this data 1,023, 11,429, 85,667);
    # beside a busy neighbour (bench/apps.py --busy 1) the machine is another one: a
    # client's processes wake at once, and many clients have a core less. There the real
    # figure is to be within the estimate's range (what it says of machines other than the
    # test-bed's, idle), where one is given
    other = series.startswith("apps-tmpfs-") or bool(MADE[series]["busy"])
    said = (f"{series} {metric}: estimate {e.value:,.0f} ({e.low:,.0f}-{e.high:,.0f}) against"
            f" {real:,.0f} real ({e.value / real:.2f}x; {e.decided_by})")
    if (series, metric) in OUTSIDE:  # outside 30%, and docs/apps.md says so and why: as said
        low, high = OUTSIDE[series, metric]
        assert low <= e.value / real <= high, f"{said}: no longer as docs/apps.md says"
        return
    ranged = other and e.low < e.high and e.low <= real <= e.high
    assert 0.7 <= e.value / real <= 1.3 or ranged, said


# estimates outside 30% of the real application that docs/apps.md gives and explains:
# (series, metric) -> the bounds of its ratio as measured, e.g. (0.5, 0.7). None on the
# test-bed since 2026-12-05 (MariaDB on the cap whose image is on the disk, judged by its
# lone commit, was: its thread meets its commits at its own pace, quicker there:
# redo_paced). On a second machine (series apps-SHAPE-xeon-APP, 2026-12-05: another CPU,
# where the applications' own time per transaction was 0.22-0.88 of CPU_S, their client
# and server more often on one CPU than on the EPYC: docs/apps.md), two of 25 (31 with
# Redis on three more shapes, 2026-12-06, all within 30%; a third,
# Redis' one client on tmpfs at 0.25x, a SET's round trip 12 µs there, mostly on one CPU,
# is within the range since its top is the one-CPU case, ONE_CPU_S; a fourth, Redis' 50
# clients on the 3000-IOPS cap at 0.68x, is within 30% since 2026-12-06: the loop's CPU
# is taken within the cap's pace, "The loop within the cap"):
OUTSIDE: dict[tuple[str, str], tuple[float, float]] = {
    # 16 clients on tmpfs: its 2 cores did 9,213 TPS, the test-bed's 5,830 (BUSY_S)
    ("apps-tmpfs-xeon-postgresql", "tps_16"): (0.6, 0.7),
    # one client on the disk-backed cap: its own time (539 µs against CPU_S's 745) is more
    # than the commit's; with it, 1 / (L + 539 µs) would be 0.83x
    ("apps-diskcap3000-xeon-postgresql", "tps"): (0.6, 0.7),
}


def _estimated_as(series: str, metric: str) -> str:
    """The estimate a real figure is judged by: MariaDB's on a new database (its redo log
    preallocated, as mariadb-install-db leaves it) by the new database's estimate."""
    if series.endswith("-mysql"):
        log = MADE[series]["log"]  # how its real runs had the redo log: said, never guessed
        assert log in ("fresh", "written"), (series, log)
        return f"{metric}_new" if log == "fresh" else metric
    return metric


def test_a_lone_commit_slower_than_commits_back_to_back_is_not_a_slow_flush(store: Store) -> None:
    """Sixteen PostgreSQL clients: on a volume whose image is on the disk a lone commit
    is slow (the disk idle) while commits back to back are quick and the cap holds them,
    as on a cap in RAM; behind 3 ms of network latency every flush is slow, and more
    transactions share each one."""
    def why(shape: str) -> str:
        return estimates(store, f"apps-{shape}-postgresql")["tps_16"].decided_by

    assert "(capped flushes)" in why("diskcap3000") and "(capped flushes)" in why("cap300")
    assert "(slow flushes)" in why("latency3ms")


def test_fifty_redis_clients_are_two_halves_taking_turns(store: Store) -> None:
    """Each pass of Redis's event loop holds half of redis-benchmark's 50 clients; the
    rate follows the pass's flush, from 3 ms of network latency to RAM."""
    for shape in ("latency3ms", "cap300", "tmpfs"):
        e = estimates(store, f"apps-{shape}-redis")["ops_50"]
        assert "~25 SETs each (half of the 50 clients)" in e.decided_by


def test_fifty_redis_clients_meet_a_cap_s_pace_with_the_loop_s_cpu_within_it(
        store: Store) -> None:
    """A volume capped in IOPS spaces a pass's flushes (an append + fdatasync of 1,600
    bytes on the 3000-IOPS cap: fdatasync p50 ~100 µs, its mean and the pass 459 µs, 3,000
    over the pages it writes), and the loop's CPU between them is time the cap waits
    anyway: added to the pace, the 50 clients' estimate was 0.68x of the real Redis there
    (0.74x on the test-bed). Where a pass's own time (its flush as passes come back to
    back, their p50, then the loop's CPU) is longer than the pace, it decides: with the
    image on the disk, capped or not, and behind a network."""
    def figures(series: str) -> tuple[float, float, Figure]:
        results = store.get_run(series_last(store, series) or 0).results_by_test()
        pace = median_of(results, "aof_always_50", "write.iops")
        own = [median_of(results, "aof_always_50", k) for k in ("write.clat_p50",
                                                                 "sync.lat_p50")]
        assert pace and None not in own
        e = estimates(store, series)["ops_50"]
        assert "a pass takes the longer of that and its own flush" in e.decided_by
        return pace, sum(a for a in own if a is not None) / 1e9, e

    loop = PER_PASS * BUSY_S["redis"]
    for series in ("apps-cap3000-xeon-redis", "apps-cap1500-xeon-redis", "apps-cap300-redis",
                   "apps-cap3000-redis"):
        pace, flush, e = figures(series)
        assert 1 / pace > flush + loop and e.value == pytest.approx(PER_PASS * pace), series
    for series in ("apps-diskcap3000-xeon-redis", "apps-diskcap100000-xeon-redis",
                   "apps-latency3ms-redis"):
        pace, flush, e = figures(series)
        assert 1 / pace < flush + loop, series
        assert e.value == pytest.approx(PER_PASS / (flush + loop)), series


def test_what_the_storage_alone_allows_is_said_only_where_it_does_not_decide(store: Store) -> None:
    """On tmpfs the application's own time decides: a note says what the storage alone
    would allow one client. On a 300-IOPS cap the cap decides, and the estimate is the
    cap's rate: no such note (it said the estimate adds the application's time there)."""
    def notes(series: str) -> list[str]:
        return [n for n in judged(store, series).notes
                if n.startswith("the storage alone would allow")]

    assert notes("apps-tmpfs-postgresql") and notes("apps-tmpfs-redis")
    assert not notes("apps-cap300-postgresql") and not notes("apps-cap300-redis")


def test_one_mariadb_thread_meets_its_commits_at_its_own_pace(store: Store) -> None:
    """One sysbench thread commits after its transaction's own time, not after 20 ms of
    quiet: the profile's redo_paced waits that long (CPU_S) between commits, and the
    estimates follow it. With the image on the disk a lone commit (redo_idle, the disk
    idle between) took about twice as long, and the estimate by it was 0.61-0.73x of the
    real MariaDB. A run stored before the profile had redo_paced is judged as it was
    then, by its lone commit."""
    job = next(j for t, j in MYSQL.jobfiles() if t.name == "redo_paced")
    assert dict(job.sections[-1].options)["thinktime"] == f"{CPU_S['mysql'] * 1e6:.0f}"
    for series in ("apps-diskcap3000-logwritten-mysql", "apps-diskcap3000-mysql"):
        assert estimates(store, series)["tps"].decided_by.startswith("redo_paced: a commit")
        results = store.get_run(_runs(store, series)[-1]).results_by_test()
        paced, alone = (sum(median_of(results, test, key) or 0 for key in
                            ("write.clat_p50", "sync.lat_p50")) for test in
                        ("redo_paced", "redo_idle"))
        assert 0 < paced < 0.75 * alone, (series, paced, alone)
        first = store.get_run(_runs(store, series)[0]).results_by_test()
        before = JUDGES["mysql"](first)
        assert "redo_paced" not in first and before is not None
        assert before.figures[0].decided_by.startswith("redo_idle: a commit")


def _runs(store: Store, series: str) -> list[int]:
    """The runs of a series, oldest first."""
    return [int(r[0]) for r in store.db.execute(
        "SELECT run_id FROM run_series WHERE name = ? ORDER BY run_id", (series,))]


def test_the_second_machines_runs_are_from_another_cpu(store: Store) -> None:
    """What docs/apps.md calls a second machine is one: each stored run keeps the CPU it
    ran on, and the runs of series apps-SHAPE-xeon-APP name another than the runs of the
    same shapes on 2026-12-04 beside them."""
    def cpu(series: str) -> str:
        return str(store.get_run(series_last(store, series) or 0,
                                 with_results=False).environment["cpu_model"])

    xeon = [s for s in REAL if "-xeon-" in s]
    assert len(xeon) == 18  # 5 shapes x 3 applications, and Redis on 3 more (2026-12-06)
    for series in xeon:
        assert MADE[series]["machine"] == "xeon" and MADE[series]["cpu"] == cpu(series)
        before = series.replace("-xeon", "")
        if before in MADE and MADE[before]["date"] == "2026-12-04":
            assert cpu(before) != cpu(series), series
