"""Noisy neighbours' view (`storbench neighbours`): the victim's latency alone and beside
each number of aggressors, how much it grew, whether its rate held, and theirs."""

from __future__ import annotations

from typing import Any, ClassVar

from storbench.analysis.blocks import Block, Table, Text, Titled, Units, ident_cells, ident_heads
from storbench.analysis.chart import Chart, Line, slug
from storbench.analysis.stats import times
from storbench.analysis.views.base import Answer, View
from storbench.result.record import Run
from storbench.result.sections import NEIGHBOURS, NeighboursSection


def _times(x: float | None) -> str:
    return "" if x is None else f"{times(x)}×"


class NeighboursView(View):
    section = NEIGHBOURS
    title = "Noisy neighbours"
    json_key = "neighbours"
    tabulates_tests = False  # its tests are steps (victim and aggressors side by side)
    chart_sections: ClassVar[dict[str, str]] = {"neighbours": "Noisy neighbours"}

    def answers(self, run: Run, value: NeighboursSection) -> dict[str, Answer]:
        """The victim's p99 alone and at the most aggressors, its growth there (×), and
        the most aggressors at which the objective held (--limit)."""
        first, last = value["steps"][0], value["steps"][-1]
        out = {
            "alone.p99": Answer(first["p99_ns"], "latency", "the victim alone"),
            "most.p99": Answer(last["p99_ns"], "latency",
                               f"beside {last['aggressors']} aggressors"),
            "most.growth": Answer(last["growth_p99"], "count",
                                  f"p99 beside {last['aggressors']} over alone",
                                  unit="×"),
        }
        if value["limit"] is not None:
            held = [s["aggressors"] for s in value["steps"] if not s.get("missed")]
            out["held"] = Answer(float(max(held)) if held else None, "count",
                                 f"the most aggressors beside which {value['limit']} held"
                                 if held else f"{value['limit']} missed even alone")
        return out

    def _table(self, value: NeighboursSection, u: Units) -> Table:
        lat = u.choose("latency", [s["p99_ns"] for s in value["steps"]])
        bw = u.choose("bw", [s["aggressor_bw_bytes_per_s"] for s in value["steps"]])
        rows = [[str(s["aggressors"]), lat.fmt(s["p50_ns"]), _times(s["growth_p50"]),
                 lat.fmt(s["p99_ns"]), _times(s["growth_p99"]),
                 f"{u.IOPS.fmt(s['achieved_iops'])} of {u.IOPS.fmt(s['requested_iops'])}"
                 + ("" if s["rate_kept"] else " (not kept)"),
                 u.IOPS.fmt(s["aggressor_iops"]) if s["aggressors"] else "",
                 bw.fmt(s["aggressor_bw_bytes_per_s"]) if s["aggressors"] else ""]
                for s in value["steps"]]
        return Table(["aggressors", f"p50 [{lat.name}]", "×", f"p99 [{lat.name}]", "×",
                      "victim IOPS", "their IOPS", f"their BW [{bw.name}]"],
                     rows, [True] * 8)

    def shown(self, run: Run, value: NeighboursSection, u: Units) -> list[Block]:
        return [Titled(self._table(value, u),
                       f"{value['victim']} at {value['rate_iops']:,.0f} IOPS beside"
                       f" {value['aggressor']}"),
                Text(value["said"], "bold")]

    def compared(self, found: list[tuple[Run, NeighboursSection]], u: Units) -> Table:
        heads = ident_heads([r for r, _ in found])
        lat = u.choose("latency", [s["p99_ns"] for _, v in found for s in v["steps"]])
        rows = []
        for run, v in found:
            first, last = v["steps"][0], v["steps"][-1]
            rows.append([*ident_cells(run, heads), v["victim"], v["aggressor"],
                         lat.fmt(first["p99_ns"]), str(last["aggressors"]),
                         lat.fmt(last["p99_ns"]), _times(last["growth_p99"])])
        return Table([*heads, "victim", "aggressor", f"p99 alone [{lat.name}]", "aggressors",
                      f"p99 beside [{lat.name}]", "grew"], rows,
                     [False] * (len(heads) + 2) + [True] * 4)

    def said(self, run: Run, value: NeighboursSection) -> list[str]:
        return [value["said"]]

    def charts(self, runs: list[Run]) -> list[Chart]:
        """The victim's p50 and p99 by the number of aggressors."""
        out = []
        for run in runs:
            v: Any = NEIGHBOURS.of(run)
            if not v:
                continue
            xs = [float(s["aggressors"]) for s in v["steps"]]
            out.append(Chart(slug("neighbours", run.name), f"{run.name}: {v['victim']} beside"
                             f" {v['aggressor']}", "line", "latency", x_label="aggressors",
                             lines=[Line(p, xs, [float(s[f"{p}_ns"] or 0) for s in v["steps"]])
                                    for p in ("p50", "p99")],
                             section="neighbours"))
        return out
