"""What a kind of run shows, as plain data every renderer draws its own way: tables
(headers and text cells), lines of text, and timelines. A kind's view
(analysis/views/) says what it shows in these; render/ draws them on a terminal, in
HTML and in Markdown, and never asks which kind made them.

Figures inside a block are already text: a view formats them with the ``Units`` it is
given (render/units.py, the only code that scales), so a column keeps one unit, named
in its header.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]
    align_right: list[bool]


@dataclass(frozen=True)
class Titled:
    """A table with its title ("IOPS-latency curve of randread")."""

    table: Table
    title: str


@dataclass(frozen=True)
class Text:
    """A line of text; ``style``: how much it matters (a verdict is "bold", a caveat a
    "warning"), not a colour."""

    text: str
    style: Literal["", "bold", "warning"] = ""


@dataclass(frozen=True)
class Span:
    """One phase of a timeline row, seconds from the row's start."""

    phase: str
    start_s: float
    stop_s: float


@dataclass(frozen=True)
class Timeline:
    """Rows of phases on one time axis (a volume's: created, bound, running, ...); drawn
    where pictures can be (the report), left out on a terminal."""

    rows: list[tuple[str, list[Span]]]
    legend: dict[str, str] = field(default_factory=dict)  # phase -> what it spans


Block = Titled | Text | Timeline


class Scale(Protocol):
    """A column's unit (render/units.Unit)."""

    @property
    def name(self) -> str: ...

    def fmt(self, v: float | None) -> str: ...


class Units(Protocol):
    """How a view writes its figures: render/units.py, given by the renderer."""

    @property
    def IOPS(self) -> Scale: ...

    def choose(self, kind: Any, values: Iterable[float | None]) -> Scale: ...

    def figure(self, kind: Any, v: float | None) -> str: ...

    def latency(self, ns: float | None) -> str: ...

    def plain(self, v: float | None) -> str: ...


def ident_heads(runs: list[Any]) -> list[str]:
    """The columns that name a row's run: its number and label, and its target when a
    run has no label (unlabelled runs of two targets are told apart by where they ran)."""
    return ["run", "label", *(["target"] if any(not r.label for r in runs) else [])]


def ident_cells(run: Any, heads: list[str]) -> list[str]:
    """The run's cells under ``ident_heads``."""
    cells = ["published" if run.origin == "published" else f"#{run.id}", run.label or ""]
    return [*cells, run.target] if "target" in heads else cells
