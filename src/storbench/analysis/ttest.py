"""Student's two-sample t-test with pooled variances, in Python's floats: its two-sided
p as scipy's ttest_ind_from_stats(..., equal_var=True) gives it (without importing
scipy: 0.3-0.5 s), and the |t| at which p is a given limit (analysis/edivisive.py's
screen of windows)."""

from __future__ import annotations

import math


def pvalue(mean_1: float, std_1: float, n_1: int, mean_2: float, std_2: float,
           n_2: int) -> float:
    """Two-sided p of Student's t-test with pooled variances, as scipy's
    ttest_ind_from_stats(..., equal_var=True) gives it: P(|T| >= |t|) = I_x(df/2, 1/2)
    with x = df / (df + t^2), the regularized incomplete beta function from its continued
    fraction (Numerical Recipes 6.4), in Python's floats (numpy's calls on one value
    cost more than the sums)."""
    df = n_1 + n_2 - 2.0
    if df <= 0:
        return math.nan
    t = t_of(mean_1, std_1, n_1, mean_2, std_2, n_2)
    if t is None:
        return math.nan if mean_1 == mean_2 else 0.0
    tt = t * t
    if math.isinf(tt):
        return 0.0
    a, b, x, y = df / 2, 0.5, df / (df + tt), tt / (df + tt)
    if x == 0:
        return 0.0
    if y == 0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log(y))
    if x < (a + 1) / (a + b + 2):
        return front * _fraction_of(a, b, x) / a
    return 1.0 - front * _fraction_of(b, a, y) / b


def t_of(mean_1: float, std_1: float, n_1: int, mean_2: float, std_2: float,
         n_2: int) -> float | None:
    """pvalue's t (n_1 + n_2 > 2); None where the pooled variance is nought."""
    v1 = 0.0 if n_1 == 1 else std_1 * std_1
    v2 = 0.0 if n_2 == 1 else std_2 * std_2
    df = n_1 + n_2 - 2.0
    svar = ((n_1 - 1) * v1 + (n_2 - 1) * v2) / df
    scale = math.sqrt(svar * (1.0 / n_1 + 1.0 / n_2))
    return None if scale == 0 else (mean_1 - mean_2) / scale


def _fraction_of(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), by Lentz's method, to 1e-15."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (tiny if abs(d) < tiny else d)
    h = d
    for m in range(1, 300):  # (each term's two steps written out: a p ~15% sooner)
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (tiny if -tiny < d < tiny else d)
        c = 1.0 + aa / c
        c = tiny if -tiny < c < tiny else c
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (tiny if -tiny < d < tiny else d)
        c = 1.0 + aa / c
        c = tiny if -tiny < c < tiny else c
        step = d * c
        h *= step
        if -eps < step - 1.0 < eps:
            break
    return h


_CRITICAL: dict[tuple[int, float], float] = {}


def critical_t(df: int, p: float) -> float:
    """The |t| at which the two-sided p of Student's t with df degrees of freedom is p
    (a little below it: p falls as |t| rises); inf when df < 1 (no test)."""
    if df < 1:
        return math.inf
    if (df, p) not in _CRITICAL:
        # sides of df + 1 points (std 1) and of 1 point: pooled variance 1, so a mean of
        # m gives t = m / scale
        scale = math.sqrt(1.0 / (df + 1) + 1.0)
        # Newton's method from t = 0 on p(t) - p, p's two-sided tail: convex and falling
        # for t > 0, so each step stays below the root and comes nearer (~8 steps where
        # a bisection took 100 p's, 0.7 ms a df: 33 windows' widths in `history` over 50
        # series), to where the step is lost in t's last bits
        half = (df + 1) / 2
        density = 2 * math.exp(math.lgamma(half) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
        t = 0.0
        for _ in range(200):
            step = ((pvalue(t * scale, 1.0, df + 1, 0.0, 1.0, 1) - p)
                    / (density * (1 + t * t / df) ** -half))
            t += step
            if step <= t * 1e-13:
                break
        _CRITICAL[(df, p)] = t * (1 - 1e-9)
    return _CRITICAL[(df, p)]
