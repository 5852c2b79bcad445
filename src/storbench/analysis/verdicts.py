"""Pass/fail verdicts a suite defines (etcd: fdatasync p99 below 10 ms)."""

from __future__ import annotations

from dataclasses import dataclass

from storbench.analysis.metrics import metric, value
from storbench.store import Run
from storbench.workload.suites import SUITES


@dataclass(frozen=True)
class Verdict:
    test: str
    metric: str
    measured: float | None  # base unit (ns for latency); None: not measured
    limit: float
    rule: str

    @property
    def passed(self) -> bool:
        return self.measured is not None and self.measured <= self.limit


def evaluate(run: Run) -> list[Verdict]:
    suite = SUITES.get(run.suite)
    if suite is None:
        return []
    threshold_ms = run.settings.get("threshold_ms")
    verdicts = []
    for spec in suite.verdicts:
        limit, rule = spec.limit, spec.rule
        if threshold_ms is not None:
            limit = float(threshold_ms) * 1_000_000
            rule = f"threshold set with --threshold {threshold_ms:g} ms"
        results = [t.result for t in run.tests if t.result.name == spec.test]
        measured = value(results[0], metric(spec.metric)) if results else None
        verdicts.append(Verdict(spec.test, spec.metric, measured, limit, rule))
    return verdicts
