"""The kinds of run, one file each; ``KINDS`` is the one registry the loop chooses from.

Adding a kind: a file here with a class that keeps the Measurement contract
(pipeline/measure.py) and names the section its typed record is kept under, one line
below; its view (what is said of the record: analysis/views/, one line in VIEWS); and a
command that asks for it (docs/design.md shows one whole).
"""

from __future__ import annotations

from collections.abc import Callable

from storbench.pipeline.kinds.app import AppKind
from storbench.pipeline.kinds.curve import CurveKind
from storbench.pipeline.kinds.failover import FailoverKind
from storbench.pipeline.kinds.lifecycle import LifecycleKind
from storbench.pipeline.kinds.neighbours import NeighboursKind
from storbench.pipeline.kinds.replay import ReplayKind
from storbench.pipeline.kinds.rounds import RoundsKind
from storbench.pipeline.kinds.suite import Suite
from storbench.pipeline.measure import Measurement
from storbench.pipeline.spec import RunSpec

# name -> what makes that kind from a run's spec (None: not asked for); the first that
# answers is the run's kind, so the plain suite comes last
KINDS: dict[str, Callable[[RunSpec], Measurement | None]] = {
    CurveKind.kind: CurveKind.from_spec,
    NeighboursKind.kind: NeighboursKind.from_spec,
    LifecycleKind.kind: LifecycleKind.from_spec,
    FailoverKind.kind: FailoverKind.from_spec,
    ReplayKind.kind: ReplayKind.from_spec,
    RoundsKind.kind: RoundsKind.from_spec,
    AppKind.kind: AppKind.from_spec,
    Suite.kind: Suite.from_spec,
}


def choose(spec: RunSpec) -> Measurement:
    """The kind of run ``spec`` asks for (a new object: it keeps the run's state)."""
    for make in KINDS.values():
        found = make(spec)
        if found is not None:
            found.check()
            return found
    raise AssertionError("the suite kind answers every spec")
