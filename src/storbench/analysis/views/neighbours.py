"""Noisy neighbours' view (`storbench neighbours`): the victim's latency alone and beside
each number of aggressors, how much it grew, whether its rate held, and theirs."""

from __future__ import annotations

from typing import Any, ClassVar

from storbench.analysis.blocks import Block, Table, Text, Titled, Units, ident_cells, ident_heads
from storbench.analysis.chart import Chart, Line, slug
from storbench.analysis.curve import waited_column, waited_of, waited_words
from storbench.analysis.neighbours import split
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
    tabulates_tests = False  # its tests are steps (victims and aggressors side by side)
    chart_sections: ClassVar[dict[str, str]] = {"neighbours": "Noisy neighbours"}

    def answers(self, value: NeighboursSection) -> dict[str, Answer]:
        """Per victim its p99 alone and beside the most aggressors, and its growth there
        (×); with --limit, the most aggressors beside which every victim met it."""
        plain, held = split(value["steps"])
        first, last = plain[0], plain[-1]
        out = {}
        for v, about in value["victims"].items():
            out[f"{v}.alone.p99"] = Answer(first["victims"][v]["p99_ns"], "latency",
                                           f"{about['words']} alone")
            out[f"{v}.most.p99"] = Answer(last["victims"][v]["p99_ns"], "latency",
                                          f"beside {last['aggressors']} aggressors")
            out[f"{v}.most.growth"] = Answer(last["victims"][v]["growth_p99"], "count",
                                             f"p99 beside {last['aggressors']} over alone",
                                             unit="×")
            if held:
                out[f"{v}.held.p99"] = Answer(held[-1]["victims"][v]["p99_ns"], "latency",
                                              f"beside {held[-1]['aggressors']} aggressors"
                                              " held (--isolate)")
                out[f"{v}.held.growth"] = Answer(held[-1]["victims"][v]["growth_p99"],
                                                 "count", f"p99 beside {held[-1]['aggressors']}"
                                                 " held over alone", unit="×")
        if value["limit"] is not None:
            kept = [s["aggressors"] for s in plain
                    if not any(r.get("missed") for r in s["victims"].values())]
            out["held"] = Answer(float(max(kept)) if kept else None, "count",
                                 f"the most aggressors beside which {value['limit']} held"
                                 if kept else f"{value['limit']} missed even alone")
        return out

    def _table(self, value: NeighboursSection, u: Units) -> Table:
        every = [r for s in value["steps"] for r in s["victims"].values()]
        lat = u.choose("latency", [r["p99_ns"] for r in every])
        bw = u.choose("bw", [s["aggressor_bw_bytes_per_s"] for s in value["steps"]])
        rows = []
        for s in value["steps"]:
            for i, (v, r) in enumerate(s["victims"].items()):
                theirs = s["aggressors"] and i == 0
                rows.append([
                    (f"{s['aggressors']} held" if s.get("isolated") else str(s["aggressors"]))
                    if i == 0 else "", v, lat.fmt(r["p50_ns"]),
                    _times(r["growth_p50"]), lat.fmt(r["p99_ns"]), _times(r["growth_p99"]),
                    f"{u.IOPS.fmt(r['achieved_iops'])} of {u.IOPS.fmt(r['requested_iops'])}"
                    + ("" if r["rate_kept"] else " (not kept)"),
                    u.IOPS.fmt(s["aggressor_iops"]) if theirs else "",
                    bw.fmt(s["aggressor_bw_bytes_per_s"]) if theirs else ""])
        return Table(["aggressors", "victim", f"p50 [{lat.name}]", "×", f"p99 [{lat.name}]",
                      "×", "victim IOPS", "their IOPS", f"their BW [{bw.name}]"],
                     rows, [True, False] + [True] * 7)

    def shown(self, run: Run, value: NeighboursSection, u: Units) -> list[Block]:
        victims = " and ".join(f"{a['words']} at {a['rate_iops']:,.0f} IOPS"
                               for a in value["victims"].values())
        synced = [f"{v}: {words}" for v, r in value["steps"][0]["victims"].items()
                  if (words := waited_words(waited_of(r)))]
        iso, places = value.get("isolation"), value.get("places")
        return [Titled(self._table(value, u), f"{victims} beside {value['aggressor']}"
                       + (f" ({'; '.join(synced)})" if synced else "")
                       + (f"; 'held': in a cgroup of their own ({iso['cgroup']}) on"
                          f" {iso['device']}, held to {iso['words']}" if iso else "")
                       + (f"; the victims on {places['victims']}, the aggressors on"
                          f" {', '.join(places['aggressors'])}" if places else "")),
                Text(value["said"], "bold")]

    def compared(self, found: list[tuple[Run, NeighboursSection]], u: Units) -> Table:
        heads = ident_heads([r for r, _ in found])
        lat = u.choose("latency", [r["p99_ns"] for _, v in found for s in v["steps"]
                                   for r in s["victims"].values()])
        rows: list[list[str]] = []
        any_held = any(split(v["steps"])[1] for _, v in found)
        # what each row's latency is of (its victim's), where the rows' are not one kind
        of = waited_column([waited_of(v["steps"][0]["victims"][name])
                            for _, v in found for name in v["victims"]])
        words = iter(of or [])  # a row's each, in the rows' order (the loops below)
        for run, v in found:
            plain, held = split(v["steps"])
            first, last = plain[0], plain[-1]
            for name, about in v["victims"].items():
                rows.append([*ident_cells(run, heads), about["words"],
                             *([next(words)] if of else []), v["aggressor"],
                             lat.fmt(first["victims"][name]["p99_ns"]),
                             str(last["aggressors"]), lat.fmt(last["victims"][name]["p99_ns"]),
                             _times(last["victims"][name]["growth_p99"])]
                            + ([lat.fmt(held[-1]["victims"][name]["p99_ns"]) if held else ""]
                               if any_held else []))
        return Table([*heads, "victim", *(["latency of"] if of else []), "aggressor",
                      f"p99 alone [{lat.name}]", "aggressors", f"p99 beside [{lat.name}]", "grew"]
                     + ([f"p99 held [{lat.name}]"] if any_held else []), rows,
                     [False] * (len(heads) + 2 + bool(of)) + [True] * (5 if any_held else 4))

    def said(self, run: Run, value: NeighboursSection) -> list[str]:
        return [value["said"]]

    def charts(self, runs: list[Run]) -> list[Chart]:
        """Each victim's p99 by the number of aggressors."""
        out = []
        for run in runs:
            v: Any = NEIGHBOURS.of(run)
            if not v:
                continue
            plain, held = split(v["steps"])
            lines = [Line(f"{name} p99{suffix}", [float(s["aggressors"]) for s in steps],
                          [float(s["victims"][name]["p99_ns"] or 0) for s in steps])
                     for steps, suffix in ((plain, ""), (held, " held")) if steps
                     for name in v["victims"]]
            out.append(Chart(slug("neighbours", run.name), f"{run.name}: p99 beside"
                             f" {v['aggressor']}", "line", "latency", x_label="aggressors",
                             lines=lines, section="neighbours"))
        return out
