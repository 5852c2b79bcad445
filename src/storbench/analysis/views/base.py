"""The contract of a kind's view: everything storbench says about a kind of run's
section (result/sections.py), registered once (analysis/views/__init__.py).

A view says, from the stored section alone:

- ``answers``: its named figures (``curve.max.iops``, ``postgresql.tps``,
  ``lifecycle.bind.p90``), each in the base unit of its kind: what ``--assert`` and
  ``check`` judge, what ``compare --json`` and the exports carry;
- ``shown``: what ``show`` prints of it and the report's section for the run (blocks:
  analysis/blocks.py);
- ``compared``: its table when runs are side by side (``compare``, the report,
  Markdown export), with ``said`` beneath it in the report;
- ``charts``: its charts in the report and ``--png``;
- whether its runs' tests are figures to tabulate one by one (a curve's steps are not).

Renderers and commands loop over the registry; none names a kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from storbench.analysis.blocks import Block, Table, Units
from storbench.result.record import Run
from storbench.result.sections import Section

if TYPE_CHECKING:
    from storbench.analysis.chart import Chart


@dataclass(frozen=True)
class Answer:
    """One of a kind's named figures, in the base unit of its ``kind``: "iops" and the
    applications' "tps" and "ops" (a count a second), "latency" (ns), "seconds", "bw"
    (bytes/s). ``value`` None: not measured, ``note`` says why; else what it comes from."""

    value: float | None
    kind: str
    note: str = ""
    label: str = ""  # what it is, in words ("commit latency p99"), where the name is terse
    unit: str = ""  # the unit it is shown in ("ms"), where its kind does not say it


class KindView(Protocol):
    section: ClassVar[Section[Any]]
    title: ClassVar[str]  # its compare table's and report section's heading
    json_key: ClassVar[str]  # its block in `compare --json` and JSON exports
    tabulates_tests: ClassVar[bool]  # its runs' tests are figures to compare one by one
    only_answers: ClassVar[bool]  # an assertion under its prefix names one of its answers
    default_figure: ClassVar[str | None]  # what an answer's name may leave out (curve.max)
    chart_sections: ClassVar[dict[str, str]]  # its charts' sections -> the report's heading

    def prefix(self, value: Any) -> str:
        """What its answers' names begin with: "curve", an application's profile."""
        ...

    def answers(self, value: Any) -> dict[str, Answer]:
        """Its named figures: name (without the prefix) -> Answer."""
        ...

    def shown(self, run: Run, value: Any, u: Units) -> list[Block]:
        """What `show` prints of the section, and the report shows for its run."""
        ...

    def compared(self, found: list[tuple[Run, Any]], u: Units) -> Table:
        """Runs holding the section side by side, a row each."""
        ...

    def said(self, run: Run, value: Any) -> list[str]:
        """Sentences under the compared table in the report (an application's verdict)."""
        ...

    def charts(self, runs: list[Run]) -> list[Chart]:
        """Its charts of these runs (those holding the section)."""
        ...


class View:
    """The defaults of a view: a section whose runs' tests are tabulated, whose answers
    (none) are all an assertion under its key may name, with nothing said beneath its
    table and no charts. A view inherits them and writes what it does differently."""

    tabulates_tests: ClassVar[bool] = True
    only_answers: ClassVar[bool] = True
    default_figure: ClassVar[str | None] = None
    chart_sections: ClassVar[dict[str, str]] = {}
    section: ClassVar[Section[Any]]
    title: ClassVar[str]
    json_key: ClassVar[str]

    def prefix(self, value: Any) -> str:
        return self.section.key

    def answers(self, value: Any) -> dict[str, Answer]:
        return {}

    def said(self, run: Run, value: Any) -> list[str]:
        return []

    def charts(self, runs: list[Run]) -> list[Chart]:
        return []


def found_in(view: KindView, runs: list[Run]) -> list[tuple[Run, Any]]:
    """The runs that hold the view's section, with it."""
    return [(r, value) for r in runs if (value := view.section.of(r))]


def json_block(view: KindView, run: Run, value: Any) -> dict[str, Any]:
    """A run's section as `compare --json` and the JSON export give it: the run named,
    the section as stored, and what `--assert` may name of it (``checkable``: full name
    -> value in base units, kind, note)."""
    prefix = view.prefix(value)
    return {"id": run.id, "label": run.label, "target": run.target, **value,
            "checkable": {f"{prefix}.{name}": {"value": a.value, "kind": a.kind,
                                             "note": a.note}
                        for name, a in view.answers(value).items()}}
