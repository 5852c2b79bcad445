"""Did a run get worse than a baseline, beyond a threshold and beyond the noise?"""

from __future__ import annotations

from storbench.analysis.compare import compare
from storbench.result.record import Regression, Run


def regressions(current: Run, baseline: Run, max_regression: float) -> list[Regression]:
    """Every headline figure both runs have: how much worse ``current`` got.

    A figure fails when it got worse by more than ``max_regression`` (a fraction)
    and, when repeats give a confidence interval, by more than the noise too; or when
    the baseline's test of that name is another workload (another bs, iodepth, ...):
    the gate cannot judge the storage by it.
    """
    comp = compare([baseline, current], baseline=0)
    out = []
    for j, col in enumerate(comp.columns):
        base, cur = comp.cells[0][j].estimate, comp.cells[1][j]
        if base is None or cur.estimate is None or cur.ratio is None:
            continue
        r = cur.ratio
        worse = (1 - r.value) if col.metric.higher_is_better else (r.value - 1)
        failed = bool(cur.unlike) or (
            worse > max_regression and (r.ci95 is None or worse > r.ci95))
        out.append(Regression(col.title, col.metric.kind, baseline.id, baseline.name,
                              base.center, cur.estimate.center, worse, r.ci95,
                              max_regression, failed, cur.unlike))
    return out
