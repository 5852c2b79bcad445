"""A series' rows as each figure's points (analysis/history.points_of) and as the values
sent to be searched ahead (history.values_of): the quick path taken when every row of a
test has a number (stats.floats: a set of the values' classes and their sum) gives what
a test of each value gives, and a row that is not a number (None, NaN, text, a bool, a
result that failed) sends them down that test."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from storbench.analysis import history as hist
from storbench.analysis.stats import floats


@pytest.mark.parametrize(("values", "expected"), [
    ([1.5, 2.0, 3.25], [1.5, 2.0, 3.25]),
    ([1, 2.5, 3], [1.0, 2.5, 3.0]),  # integers as floats
    ([], []),
    ([1.0, math.nan], None),
    ([1.0, None], None),
    ([1.0, "2"], None),
    ([1.0, True], None),  # a bool is not a figure
    ([math.inf, -math.inf], None),  # their sum is NaN: tested one by one
    ([1.0, 10**400], None),  # no float holds it
])
def test_floats_are_the_values_when_each_is_a_number(values: list[Any], expected: Any):
    got = floats(values)
    assert got == expected
    if got is not None:
        assert all(v.__class__ is float for v in got)


def _plain(rows: list[tuple[Any, ...]], at: int, test: str) -> tuple[list[int], list[float]]:
    """points_of's rule written plainly: per run (first seen first), the median of the
    numbers (not NaN, not bool) of the test's rows that did not fail."""
    by_run: dict[int, list[float]] = {}
    for r in rows:
        v = r[at]
        if r[2] == test and not r[hist.FIRST] and type(v) in (int, float) and v == v:
            by_run.setdefault(r[0], []).append(float(v))
    return list(by_run), [statistics.median(vs) for vs in by_run.values()]


@pytest.mark.parametrize("odd", [None, math.nan, "12", True, "fail", "repeat", "none"])
def test_points_are_the_plain_rule_s_whatever_a_row_holds(odd: Any):
    metrics = hist.candidates(None)
    figs = [hist.Figure("a", m) for m in metrics if m.key in ("read.iops", "read.bw")]
    figs.append(hist.Figure("b", next(m for m in metrics if m.key == "read.iops")))
    width = hist.FIRST + 1 + len(metrics)
    at = {m.key: hist.FIRST + 1 + i for i, m in enumerate(metrics)}
    rand = random.Random(7)
    rows: list[tuple[Any, ...]] = []
    for run in range(300):
        for test in ("a", "b"):
            row: list[Any] = [None] * width
            row[:hist.FIRST + 1] = [run, f"t{run:05d}", test, 0]
            row[at["read.iops"]] = rand.uniform(900, 1100)
            row[at["read.bw"]] = rand.randrange(10**6, 2 * 10**6)  # integers, as SQLite's
            rows.append(tuple(row))
    if odd == "fail":  # a result that failed: its figures are not the run's
        rows[40] = (*rows[40][:hist.FIRST], 1, *rows[40][hist.FIRST + 1:])
    elif odd == "repeat":  # a run measured twice: the median of its two
        rows.insert(60, (*rows[60][:at["read.iops"]], 5.0, *rows[60][at["read.iops"] + 1:]))
    elif odd != "none":
        rows[40] = (*rows[40][:at["read.iops"]], odd, *rows[40][at["read.iops"] + 1:])
    found = hist.points_of(rows, metrics, figs)
    for fig in figs:
        assert isinstance(fig.metric, hist.Metric)
        runs, values = _plain(rows, at[fig.metric.key], fig.test)
        assert (found[fig].runs, found[fig].values) == (runs, values), (odd, fig.name)
        assert all(v.__class__ is float for v in found[fig].values)
        if len(set(runs)) == len(runs) and odd != "repeat":
            # the values searched ahead, a part at a time (one cut inside a run): the same
            sent = hist.values_of(metrics, fig)
            assert [v for part in (rows[:100], rows[100:301], rows[301:])
                    for v in sent(hist.by_test(part, {"a", "b"})[fig.test])] == values
    whole = {"repeat", "none"}  # (row 40: run 20 of test a)
    iops = found[figs[0]]
    assert len(iops.values) == (300 if odd in whole else 299)


@pytest.mark.parametrize("where", [None, 1, 3, 598])
def test_runs_of_two_tests_give_each_test_s_rows_wherever_they_are(where: int | None):
    """Runs of tests a and b, a first: each test's rows are every second row, unless a
    row of a stands where b's should (its run then measured a twice: the median)."""
    metrics = hist.candidates(None)
    iops = next(m for m in metrics if m.key == "read.iops")
    at = hist.FIRST + 1 + metrics.index(iops)
    rows: list[tuple[Any, ...]] = []
    for run in range(300):
        for test in ("a", "b"):
            row: list[Any] = [None] * (hist.FIRST + 1 + len(metrics))
            row[:hist.FIRST + 1] = [run, f"t{run:05d}", test, None]
            row[at] = float(run * 2 + (test == "b"))
            rows.append(tuple(row))
    if where is not None:
        # a row of a in b's place; at 598, a test of neither (a's rows are still regular)
        rows[where] = (*rows[where][:2], "x" if where == 598 else "a", *rows[where][3:])
    for test in ("a", "b"):
        fig = hist.Figure(test, iops)
        found = hist.points_of(rows, metrics, [fig])[fig]
        assert (found.runs, found.values) == _plain(rows, at, test), (where, test)
