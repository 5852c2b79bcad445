"""analysis/edivisive.py gives Apache Otava's answers: the same change points, means
and p-values as otava.analysis.compute_change_points on series of every shape (noise, a
drop, many steps, small integers with ties, a constant, heavy tails; shorter than a
window, a window, a little more, many windows), and scipy's t-test p-values."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from otava.analysis import compute_change_points as otava_change_points
from scipy.stats import ttest_ind_from_stats

from storbench.analysis import changepoints, edivisive, ttest


def series(kind: str, n: int, rng: random.Random) -> list[float]:
    if kind == "noise":
        return [1000 * rng.gauss(1, 0.01) for _ in range(n)]
    if kind == "drop":
        return [1000 * (0.7 if i >= 0.7 * n else 1) * rng.gauss(1, 0.01) for i in range(n)]
    if kind == "steps":
        return [1000 * (1 + 0.1 * (i * 7 // n)) * rng.gauss(1, 0.03) for i in range(n)]
    if kind == "ints":
        return [float(rng.randint(95, 105)) for _ in range(n)]
    if kind == "constant":
        return [5.0] * n
    return [rng.lognormvariate(0, 1) for _ in range(n)]  # heavy tails


def found(points: list) -> list[tuple[int, float, float]]:
    return [(int(c.index), round(float(c.stats.mean_1), 9), round(float(c.stats.mean_2), 9))
            for c in points]


@pytest.mark.parametrize("kind", ["noise", "drop", "steps", "ints", "constant", "wild"])
def test_the_change_points_are_otavas(kind):
    rng = random.Random(kind)
    for n in (2, 3, 49, 50, 51, 77, 400, 1500):
        values = series(kind, n, rng)
        for max_pvalue, min_magnitude in ((0.001, 0.05), (0.001, 0.0), (0.05, 0.0)):
            theirs, _ = otava_change_points(list(values), window_len=edivisive.WINDOW,
                                            max_pvalue=max_pvalue,
                                            min_magnitude=min_magnitude)
            ours = edivisive.compute_change_points(values, max_pvalue, min_magnitude)
            what = (kind, n, max_pvalue, min_magnitude)
            assert found(ours) == found(theirs), what
            for a, b in zip(ours, theirs, strict=True):
                assert math.isclose(a.stats.pvalue, b.stats.pvalue, rel_tol=1e-9,
                                    abs_tol=1e-300), what


def test_a_long_series_is_otavas_too():
    """Long enough that windows are screened many at once (AHEAD a call), with changes
    that move the windows off the ones screened ahead."""
    rng = random.Random(3)
    values = [1000 * (1.0, 0.9, 1.2, 1.0)[i * 4 // 20_000] * rng.gauss(1, 0.02)
              for i in range(20_000)]
    theirs, _ = otava_change_points(list(values), window_len=edivisive.WINDOW,
                                    max_pvalue=0.001, min_magnitude=0.05)
    ours = edivisive.compute_change_points(values, 0.001, 0.05)
    assert found(ours) == found(theirs)
    assert {5000, 10000, 15000} <= {int(c.index) for c in ours}


def test_find_changes_finds_the_drop_and_drops_an_outlier():
    rng = random.Random(7)
    values = [1000 * (0.7 if i >= 700 else 1) * rng.gauss(1, 0.01) for i in range(1000)]
    values[300] = 2000.0  # one odd run: an outlier, not a change (MIN_RUNS)
    (change,) = changepoints.find_changes(values, list(range(1, 1001)), True)
    assert change.run == 701 and change.worse and -0.31 < change.relative < -0.29


def test_p_values_are_scipys():
    rng = np.random.default_rng(1)
    n1, n2 = rng.integers(1, 80, 500), rng.integers(1, 80, 500)
    m1, m2 = rng.normal(0, 1, 500), rng.normal(0, 1, 500)
    s1, s2 = rng.uniform(0, 2, 500), rng.uniform(0, 2, 500)
    s1[:20] = 0.0  # no spread on one side
    m2[20:30] = m1[20:30] * 50  # far apart: p near 0
    s1[30:35], s2[30:35], m2[30:35] = 0.0, 0.0, m1[30:35]  # no spread, no difference: nan
    theirs = ttest_ind_from_stats(m1, s1, n1, m2, s2, n2).pvalue
    for i in range(500):
        ours = ttest.pvalue(float(m1[i]), float(s1[i]), int(n1[i]), float(m2[i]),
                                float(s2[i]), int(n2[i]))
        assert (math.isnan(ours) and math.isnan(theirs[i])) or math.isclose(
            ours, theirs[i], rel_tol=1e-9, abs_tol=1e-300), (i, ours, theirs[i])


def test_the_screens_critical_t_gives_its_p():
    """Just below the |t| whose p is the limit: a split there is screened as significant."""
    for df in (1, 3, 48, 200):
        for p in (0.01, 0.05):
            t = ttest.critical_t(df, p)
            # sides of df + 1 points (std 1) and of 1: pooled variance 1
            mean = t * math.sqrt(1 / (df + 1) + 1)
            theirs = float(ttest_ind_from_stats(mean, 1.0, df + 1, 0.0, 1.0, 1).pvalue)
            assert p < theirs < p * (1 + 1e-6), (df, p, theirs)
    assert ttest.critical_t(0, 0.01) == math.inf


@pytest.mark.parametrize("kind", ["noise", "drop", "steps", "ints", "constant", "wild"])
def test_a_windows_change_points_are_otavas_detectors(kind):
    """edivisive.detect against Otava's own ChangePointDetector with its
    PairDistanceCalculator, window by window: the same change points, each with the same
    Q-hat bit for bit (so ties among small integers are broken alike), and the same
    means and standard deviations as numpy's."""
    from otava.change_point_divisive.calculator import PairDistanceCalculator
    from otava.change_point_divisive.detector import ChangePointDetector

    rng = random.Random(f"window-{kind}")
    for n in (2, 3, 10, 49, 50):
        for max_pvalue in (0.01, 0.05, 0.5):
            window = np.asarray(series(kind, n, rng), dtype=float)
            tester = edivisive.Tester(max_pvalue)
            theirs = ChangePointDetector(tester, PairDistanceCalculator).get_change_points(
                window)
            ours = edivisive.detect(window, tester)
            what = (kind, n, max_pvalue)
            assert [(c.index, c.qhat) for c in ours] == [
                (c.index, c.qhat) for c in theirs], what
            assert [c.stats for c in ours] == [c.stats for c in theirs], what


def test_means_and_deviations_are_numpys_bit_for_bit():
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 7, 8, 9, 50, 129, 1000):
        for scale in (1e-3, 1.0, 24_000.0):
            x = rng.normal(scale, scale / 10, n)
            mean, std = edivisive._mean_std(x)
            assert mean == float(np.mean(x))
            assert std == (float(np.std(x)) if n >= 2 else 0.0)


@pytest.mark.parametrize("kind", ["noise", "drop", "steps", "ints", "constant", "wild"])
def test_a_series_given_in_parts_is_split_as_a_whole(kind):
    """edivisive.Splitter (a series searched as it is read: analysis/ahead.py) gives
    split's answer whatever the parts: one value at a time, parts shorter than a window,
    parts across the screen's batches, the series whole. Bit for bit: the same indices,
    Q-hats and statistics."""
    rng = random.Random(f"parts-{kind}")
    for n in (1, 49, 50, 51, 130, 3000):
        values = series(kind, n, rng)
        whole = edivisive.split(edivisive.as_array(values), 0.01)
        for sizes in ([1], [7, 50, 3], [49], [400], [rng.randint(1, 900) for _ in range(9)]):
            splitter, at, i = edivisive.Splitter(0.01), 0, 0
            while at < n:
                size = sizes[i % len(sizes)]
                splitter.feed(values[at:at + size])
                at, i = at + size, i + 1
            parts = splitter.end()
            what = (kind, n, sizes)
            assert [(c.index, c.qhat, c.stats) for c in parts] == [
                (c.index, c.qhat, c.stats) for c in whole], what
    # and with an answer at all in the longest (not a test of nothing)
    if kind in ("drop", "steps"):
        assert whole
