"""Runs side by side: one row per run, one column per (test, metric)."""

from __future__ import annotations

from dataclasses import dataclass

from storbench.analysis.metrics import Metric, default_metrics, metric, value
from storbench.store import Run
from storbench.workload.suites import SUITES


@dataclass(frozen=True)
class Column:
    test: str
    metric: Metric

    @property
    def title(self) -> str:
        return f"{self.test} {self.metric.label}"


@dataclass(frozen=True)
class Cell:
    value: float | None  # base units; None = not measured (or the test failed)
    ratio: float | None  # value / baseline's value
    failed: bool


@dataclass(frozen=True)
class Comparison:
    runs: list[Run]
    columns: list[Column]
    cells: list[list[Cell]]  # [run index][column index]
    baseline: int | None  # index into runs

    def better(self, column: int, run: int) -> bool | None:
        """Whether ``run`` did better than the baseline in ``column`` (None: no ratio)."""
        ratio = self.cells[run][column].ratio
        if ratio is None:
            return None
        m = self.columns[column].metric
        return ratio > 1 if m.higher_is_better else ratio < 1


def headline(run: Run) -> list[Column]:
    suite = SUITES.get(run.suite)
    specs = {t.name: t for t in suite.tests} if suite else {}
    cols = []
    for stored in run.tests:
        r = stored.result
        spec = specs.get(r.name)
        metrics = [metric(k) for k in spec.metrics] if spec else default_metrics(r)
        cols += [Column(r.name, m) for m in metrics]
    return cols


def compare(runs: list[Run], baseline: int | None = None) -> Comparison:
    """Build the comparison once; renderers never recompute a ratio."""
    columns: list[Column] = []
    for run in runs:
        for col in headline(run):
            if col not in columns:
                columns.append(col)
    base = runs[baseline] if baseline is not None else None
    cells = []
    for run in runs:
        by_name = {t.result.name: t.result for t in run.tests}
        row = []
        for col in columns:
            result = by_name.get(col.test)
            v = value(result, col.metric) if result is not None else None
            ratio = None
            if base is not None and v is not None:
                base_result = next((t.result for t in base.tests
                                    if t.result.name == col.test), None)
                b = value(base_result, col.metric) if base_result is not None else None
                ratio = v / b if b else None
            row.append(Cell(v, ratio, result is not None and result.error != 0))
        cells.append(row)
    return Comparison(runs, columns, cells, baseline)
