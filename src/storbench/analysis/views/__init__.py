"""``VIEWS``: the one registry of what each kind of run's section shows, compares,
charts and answers (analysis/views/base.py, the contract). Renderers, the JSON
exports and the assertions loop over it; none names a kind.

Adding a kind: its measurement in pipeline/kinds/ (what it runs and records), its view
in a file here (what is said of what it recorded), and one line below
(docs/design.md, "Adding a kind").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storbench.analysis.views.app import AppView
from storbench.analysis.views.base import Answer, KindView, found_in, json_block
from storbench.analysis.views.curve import CurveView
from storbench.analysis.views.explain import ExplainView
from storbench.analysis.views.lifecycle import FailoverView, LifecycleView
from storbench.analysis.views.neighbours import NeighboursView
from storbench.analysis.views.replay import ReplayView
from storbench.analysis.views.rounds import RoundsView
from storbench.result.record import Run

# section key -> its view, in the order they are shown
VIEWS: dict[str, KindView] = {v.section.key: v for v in (
    CurveView(), RoundsView(), LifecycleView(), FailoverView(), AppView(), ReplayView(),
    NeighboursView(), ExplainView())}


def answers_of(data: Mapping[str, Any]) -> dict[tuple[str, str], Answer]:
    """Every kind's measured answers in a run's data (its sections by key), by prefix and
    name (("postgresql", "tps")); those not measured left out. `compare` and a series'
    history read them so."""
    return {(v.prefix(value), name): a for key, v in VIEWS.items() if (value := data.get(key))
            for name, a in v.answers(value).items() if a.value is not None}


def tabulated(runs: list[Run]) -> bool:
    """Whether the runs' tests are figures to compare one by one: not when every run
    holds a section whose tests are not (a curve's steps, a lifecycle's volumes)."""
    return not runs or not all(any(not v.tabulates_tests and v.section.of(r)
                                   for v in VIEWS.values()) for r in runs)


def tabulates(run: Run) -> bool:
    """Whether this run's tests are figures to tabulate (`show`)."""
    return all(v.tabulates_tests for v in VIEWS.values() if v.section.of(run))


__all__ = ["VIEWS", "Answer", "KindView", "answers_of", "found_in", "json_block", "tabulated",
           "tabulates"]
