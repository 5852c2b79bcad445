"""A curve's step judged at the percentile its objective names, whichever it is: from
real fio output (tests/data/fio/randread.json, json+ with its histogram bins)."""

from __future__ import annotations

from pathlib import Path

from storbench.analysis.curve import Objective, answers, step_record
from storbench.result.fio_json import parse_fio_json
from storbench.result.merge import percentiles_from_bins

RECORDED = Path(__file__).parent.parent / "data" / "fio" / "randread.json"


def test_an_objective_at_any_percentile_is_judged_on_that_percentile():
    """A step kept p50/p90/p99/p99.9 only: `--slo "p95<=10ms"` on tmpfs, every p90 there
    64 µs or less, answered "p95<=10ms: never met, the floor at the lowest load is
    unknown". Each objective's percentile is now kept too, from the bins where fio gave
    none (p97.5 is not in fio's list)."""
    _, results = parse_fio_json(RECORDED.read_text())
    (clat,) = [d.clat for r in results for _, d in r.directions() if d.clat and d.total_ios]
    iops = sum(d.iops for r in results for _, d in r.directions())
    objectives = [Objective.parse(t) for t in ("p95<=1s", "p97.5<=1s", "p99<=1ns")]
    step = step_record("rate-1", iops, results, 32, 1, objectives=objectives)
    kept = step["percentiles_ns"]
    assert set(kept) == {"50", "90", "95", "97.5", "99", "99.9"}
    assert kept["95"] == clat.percentile(95.0)  # fio's own, and the bins' the same
    assert kept["97.5"] == percentiles_from_bins(clat.bins, [97.5])[97.5]
    assert kept["95"] <= kept["97.5"] <= kept["99"]
    found = {a["objective"]: a for a in answers([step], objectives)}
    assert found["p95<=1s"]["iops"] == iops and not found["p95<=1s"]["never_met"]
    assert found["p97.5<=1s"]["iops"] == iops
    missed = found["p99<=1ns"]
    assert missed["never_met"] and missed["floor_ns"] == kept["99"]
    # without objectives, the four of every step
    assert set(step_record("rate-1", iops, results, 32, 1)["percentiles_ns"]) == {
        "50", "90", "99", "99.9"}
