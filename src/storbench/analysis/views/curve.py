"""An IOPS-latency curve's view (`storbench curve`): its steps, its answers (the most
IOPS at each objective, the maximum, the knee), curves side by side, and the chart of
latency against the achieved rate."""

from __future__ import annotations

from typing import ClassVar

from storbench.analysis.blocks import Block, Table, Text, Titled, Units, ident_cells, ident_heads
from storbench.analysis.chart import Chart, Line, slug
from storbench.analysis.curve import (
    describe,
    knee_why,
    off_rate,
    waited_column,
    waited_of,
    waited_words,
)
from storbench.analysis.views.base import Answer, View
from storbench.result.record import Run
from storbench.result.sections import CURVE, CurveSection

PERCENTILES = ("50", "90", "99", "99.9")


class CurveView(View):
    section = CURVE
    title = "IOPS-latency curves"
    json_key = "curves"
    tabulates_tests = False  # its steps are no tests to compare figure by figure
    default_figure: ClassVar[str | None] = "iops"  # curve.max: curve.max.iops
    chart_sections: ClassVar[dict[str, str]] = {"curve": "IOPS-latency curves"}

    def answers(self, value: CurveSection) -> dict[str, Answer]:
        found = {f"{a['key']}.iops": Answer(a["iops"], "iops", "never met" if a["iops"] is None
                                            else f"at {a['objective']}, step {a['step']}")
                 for a in value.get("answers", [])}
        for key, iops in (("max", value.get("max_iops")), ("knee", value.get("knee_iops"))):
            found[f"{key}.iops"] = Answer(iops, "iops", "" if iops is not None else "never met")
        return found

    def shown(self, run: Run, value: CurveSection, u: Units) -> list[Block]:
        words = waited_words(waited_of(value))
        of = f" (latency: {words})" if words else ""
        out: list[Block] = [Titled(steps_table(value, u),
                                   f"IOPS-latency curve of {value['workload']}{of}")]
        if value.get("max_iops") is not None:
            out.append(Text(f"closed loop: at most {u.figure('iops', value['max_iops'])}"
                            f" ({value['max_at']})"))
        out += [Text(describe(answer, u.latency)) for answer in value["answers"]]
        floor = value.get("floor_ns") or {}
        if floor:
            out.append(Text(f"latency floor at the lowest rate: p50 {u.latency(floor.get('50'))},"
                            f" p99 {u.latency(floor.get('99'))}"))
        if value.get("knee_iops") is not None:
            out.append(Text(f"knee: {u.figure('iops', value['knee_iops'])}"
                            f" ({knee_why(value)})"))
        if value.get("cpu_bound"):
            waited = value.get("cpu_waited_percent") or 0.0
            busy = (f", and for {waited:.0f}% of the step tasks here waited for a CPU (or"
                    " the hypervisor took it)" if waited >= 1 else "")
            out.append(Text(f"warning (cpu_bound): fio used {value['max_cpu_percent']:.0f}% of"
                            f" a core{busy}: the CPU, not the storage, may be what limits this"
                            " curve", "warning"))
        return out

    def compared(self, found: list[tuple[Run, CurveSection]], u: Units) -> Table:
        """Curves side by side: a row per run, its maximum, knee, floor and answers."""
        objectives = list(dict.fromkeys(a["objective"] for _, c in found for a in c["answers"]))
        unit = u.choose("latency", [f.get("99") for _, c in found if (f := c.get("floor_ns"))])
        heads = ident_heads([r for r, _ in found])
        of = waited_column([waited_of(c) for _, c in found])
        headers = [*heads, "workload", *(["latency of"] if of else []), "max IOPS",
                   "knee IOPS", f"p99 floor [{unit.name}]", *(f"IOPS at {o}" for o in objectives)]
        rows = []
        for i, (run, c) in enumerate(found):
            answered = {a["objective"]: a for a in c["answers"]}
            cells = []
            for o in objectives:
                a = answered.get(o)
                cells.append("" if a is None else "never met" if a["never_met"]
                             else u.IOPS.fmt(a["iops"]))
            rows.append([*ident_cells(run, heads), c["workload"], *([of[i]] if of else []),
                         u.IOPS.fmt(c["max_iops"]), u.IOPS.fmt(c.get("knee_iops")),
                         unit.fmt((c.get("floor_ns") or {}).get("99")), *cells])
        return Table(headers, rows, [False] * (len(heads) + 1 + bool(of))
                     + [True] * (3 + len(objectives)))

    def charts(self, runs: list[Run]) -> list[Chart]:
        """Per workload, latency (log) against the achieved rate, a line per percentile
        and run, steps not at their rate hollow, the objectives as horizontal lines."""
        by_workload: dict[str, list[Line]] = {}
        rules: dict[str, dict[float, str]] = {}
        waited: dict[str, set[str]] = {}  # what each workload's latency is of, by run
        for run in runs:
            c = CURVE.of(run)
            if not c:
                continue
            steps = c.get("steps", [])
            waited.setdefault(c["workload"], set()).add(waited_of(c))
            for p in ("50", "99", "99.9"):
                by_workload.setdefault(c["workload"], []).append(Line(
                    f"{run.name} p{p}", [float(s["achieved_iops"]) for s in steps],
                    [s["percentiles_ns"].get(p) for s in steps],
                    [off_rate(s) for s in steps]))
            for a in c.get("answers", []):
                rules.setdefault(c["workload"], {})[float(a["limit_ns"])] = a["objective"]

        def of(w: str) -> str:  # "" when its runs' latency is each I/O's, or not one kind
            (kind, *others) = sorted(waited[w])
            words = "" if others else waited_words(kind)
            return f" ({words})" if words else ""

        return [Chart(slug("curve", w), f"{w}: latency{of(w)} against the achieved rate", "line",
                      "latency", x_label="achieved IOPS", lines=lines, log_y=True,
                      rules=sorted(rules.get(w, {}).items()), section="curve")
                for w, lines in by_workload.items()]


def steps_table(curve: CurveSection, u: Units) -> Table:
    """A curve's steps: closed loop first, then each fixed rate, its percentiles and
    whether fio kept the rate."""
    steps = [*curve["closed_loop"], *curve["steps"]]
    unit = u.choose("latency", [v for s in steps for v in s["percentiles_ns"].values()])
    headers = ["step", "requested IOPS", "achieved IOPS",
               *(f"p{p} [{unit.name}]" for p in PERCENTILES), "kept the rate"]
    rows = []
    for s in steps:
        requested = s["requested_iops"]
        kept = ("" if requested is None else "no: saturated" if s["saturated"] else
                "no: ran faster" if s.get("exceeded") else "yes")
        if "first" in s:  # measured again: the first fell behind, a faster step did not
            kept += f" (again; {s['first']['test']}: {u.IOPS.fmt(s['first']['achieved_iops'])})"
        rows.append([s["test"], "closed loop" if requested is None else u.IOPS.fmt(requested),
                     u.IOPS.fmt(s["achieved_iops"]),
                     *(unit.fmt(s["percentiles_ns"].get(p)) for p in PERCENTILES), kept])
    return Table(headers, rows, [False, True, True, *([True] * len(PERCENTILES)), False])
