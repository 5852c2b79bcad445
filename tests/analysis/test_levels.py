"""Levels in a series, on series whose truth is known by construction (the test-bed
runs with caps changed mid-run are in test_truth.py)."""

from __future__ import annotations

import random

import pytest

from storbench.analysis.levels import find


def series(*parts: tuple[int, float], noise: float = 0.03, seed: int = 7) -> list[float]:
    rnd = random.Random(seed)
    return [level * (1 + rnd.gauss(0, noise)) for n, level in parts for _ in range(n)]


def times(n: int) -> list[float]:
    return [float(i + 1) for i in range(n)]


def test_a_drop_and_its_plateau():
    v = series((27, 6000), (13, 1500))
    s = find(times(len(v)), v)
    assert s is not None and s.kind == "drop" and s.start_s == 27
    assert s.before == pytest.approx(6000, rel=0.05) and s.low == pytest.approx(1500, rel=0.05)


def test_a_dip_that_comes_back():
    v = series((10, 3000), (8, 600), (12, 3000))
    s = find(times(len(v)), v)
    assert s is not None and s.kind == "dip" and (s.start_s, s.end_s) == (10, 18)
    assert s.length_s == 8


@pytest.mark.parametrize("v", [
    series((40, 3000), noise=0.10),  # noise around one level
    [1000.0 if i % 2 else 4000.0 for i in range(12)],  # alternating: variation, no level
    [3000.0] * 10 + [500.0] + [3000.0] * 10,  # one odd second
])
def test_no_level_change(v):
    assert find(times(len(v)), v) is None


def test_long_series_stay_fast_and_right():
    v = series((600, 3000), (300, 1000))
    s = find(times(len(v)), v)
    assert s is not None and s.kind == "drop" and s.start_s == pytest.approx(600, abs=6)
