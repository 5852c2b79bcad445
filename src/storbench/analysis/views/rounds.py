"""Preconditioning rounds' view (`run --precondition`): per test, each round's figure,
the round steady state was reached in, and which rounds the run's figures are."""

from __future__ import annotations

from storbench.analysis.blocks import Block, Table, Text, Units, ident_cells, ident_heads
from storbench.analysis.chart import Chart, Line, slug
from storbench.analysis.views.base import Answer, View
from storbench.result.record import Run
from storbench.result.sections import ROUNDS, RoundsEntry


def _reached(r: RoundsEntry) -> str:
    return (f"steady state reached in round {r['reached_round']}" if r.get("reached_round")
            else f"steady state NOT reached in {len(r['values'])} rounds")


def _figure(r: RoundsEntry) -> str:
    return "bandwidth [B/s]" if r.get("kind") == "bw" else "IOPS"


class RoundsView(View):
    section = ROUNDS
    title = "Steady state in rounds"
    json_key = "rounds"
    only_answers = False  # rounds.X may also be a test's figure, of a test named rounds

    def prefix(self, value: dict[str, RoundsEntry]) -> str:
        return "rounds"

    def answers(self, value: dict[str, RoundsEntry]) -> dict[str, Answer]:
        """Per test, the round it became steady in (rounds.randwrite.reached <= 3)."""
        out = {}
        for test, r in value.items():
            reached = r.get("reached_round")
            out[f"{test}.reached"] = Answer(
                None if reached is None else float(reached), "count",
                "" if reached else f"not steady in {len(r['values'])} rounds")
        return out

    def shown(self, run: Run, value: dict[str, RoundsEntry], u: Units) -> list[Block]:
        out: list[Block] = []
        for test, r in value.items():
            figures = " ".join(f"{v:,.0f}" for v in r["values"])
            out.append(Text(f"{test}: {_reached(r)} ({r['criterion']}); each round's"
                            f" {_figure(r)}: {figures}; the figures above are those of rounds"
                            f" {r['window'][0] + 1}–{r['window'][-1] + 1}"))
        return out

    def compared(self, found: list[tuple[Run, dict[str, RoundsEntry]]], u: Units) -> Table:
        heads = ident_heads([r for r, _ in found])
        rows = [[*ident_cells(run, heads), test, _figure(r), r["criterion"],
                 str(r["reached_round"]) if r.get("reached_round") else "not reached",
                 " ".join(f"{v:,.0f}" for v in r["values"])]
                for run, rounds in found for test, r in rounds.items()]
        return Table([*heads, "test", "figure", "criterion", "steady in round",
                      "each round"], rows, [False] * (len(heads) + 3) + [True, True])

    def charts(self, runs: list[Run]) -> list[Chart]:
        """Each test's figure per round."""
        out = []
        for run in runs:
            for test, r in (ROUNDS.of(run) or {}).items():
                reached = (f", steady in round {r['reached_round']}" if r.get("reached_round")
                           else ", not steady")
                out.append(Chart(slug("rounds", run.name, test),
                                 f"{run.name}: {test} per round{reached}", "line",
                                 "bw" if r.get("kind") == "bw" else "iops", x_label="round",
                                 lines=[Line(test, [float(i + 1) for i in range(
                                     len(r["values"]))], [float(v) for v in r["values"]])]))
        return out
