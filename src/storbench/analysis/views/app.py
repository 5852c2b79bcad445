"""An application profile's view (`run --suite postgresql`, mysql, redis, etcd, kafka,
prometheus): its estimates in the application's units, each with its range and the
figure it follows from, the verdict, and what storbench flagged on those figures."""

from __future__ import annotations

import re
from typing import Any

from storbench.analysis.apps import KINDS
from storbench.analysis.blocks import Block, Table, Text, Titled, Units, ident_cells, ident_heads
from storbench.analysis.views.base import Answer, View
from storbench.result.record import Run
from storbench.result.sections import APP, AppSection

ESTIMATED = "estimated from "  # how an estimate's note begins (a check says "estimated")
WHOLE = ("accelerators",)  # counted in whole ones: '2 (1–2) accelerators', never '2.0'


def estimate_text(e: dict[str, Any], u: Units) -> str:
    """'1,150 (1,000–1,400) transactions/s', or '2.10 ms' for a figure measured as is."""
    n = u.plain if e["unit"] not in WHOLE else (lambda v: f"{v:,.0f}")
    if e["unit"] == "ms" and e["low"] == e["high"] and 0 < abs(e["value"]) < 0.005:
        return u.latency(e["value"] * 1e6)  # '422 ns', never '0.00 ms' (tmpfs)
    span = f" ({n(e['low'])}–{n(e['high'])})" if e["low"] != e["high"] else ""
    return f"{n(e['value'])}{span}{'' if e['unit'] == '%' else ' '}{e['unit']}"


def caveats(run: Run, app: AppSection, said: str | None = None) -> list[str]:
    """What storbench flagged on the tests an application's answer (or the estimate
    whose ``decided_by`` is ``said``) was taken from ('etcd: fsync on tmpfs: a no-op'):
    the answer is only as true as they are."""
    from storbench.analysis.briefs import brief

    if said is None:
        said = " ".join(e["decided_by"] for e in app["estimates"])
    return list(dict.fromkeys(
        f"{w.test}: {brief(w)}" for w in run.warnings
        if w.test and re.search(rf"(?<![\w-]){re.escape(w.test)}(?![\w-])", said)))


class AppView(View):
    section = APP
    title = "Applications"
    json_key = "apps"
    only_answers = False  # etcd.* may also be a figure of the etcd suite's test etcd

    def prefix(self, value: AppSection) -> str:
        return value["profile"]

    def answers(self, value: AppSection) -> dict[str, Answer]:
        out = {}
        for e in value["estimates"]:
            kind, base = KINDS[e["unit"]]
            out[e["metric"]] = Answer(float(e["value"]) * base, kind,
                                      # a figure measured as is, or estimated from them
                                      ("" if e.get("measured") else ESTIMATED)
                                      + e["decided_by"], e["label"], e["unit"])
        return out

    def shown(self, run: Run, value: AppSection, u: Units) -> list[Block]:
        rows = [[e["label"], estimate_text(e, u), e["decided_by"]] for e in value["estimates"]]
        out: list[Block] = [
            Titled(Table(["estimate", "value (range)", "from"], rows, [False, True, False]),
                   f"{value['application']}: what this storage gives it"
                   + ("" if value["validated"] else " (not validated)")),
            Text(value["verdict"], "bold")]
        flagged = caveats(run, value)
        if flagged:
            out.append(Text(f"⚠ from figures storbench flagged: {'; '.join(flagged)}"))
        return out + [Text(note) for note in value["notes"]]

    def compared(self, found: list[tuple[Run, AppSection]], u: Units) -> Table:
        """A row per run, a column per estimate; one taken from a flagged test marked ⚠,
        the flags in a caveats column."""
        labels = list(dict.fromkeys(f"{a['profile']}: {e['label']}" for _, a in found
                                    for e in a["estimates"]))
        rows, flagged = [], False
        heads = ident_heads([run for run, _ in found])
        for run, a in found:
            mine = {f"{a['profile']}: {e['label']}": e for e in a["estimates"]}
            cells = [estimate_text(mine[k], u) + (" ⚠" if caveats(run, a, mine[k]["decided_by"])
                                                  else "") if k in mine else "" for k in labels]
            said = caveats(run, a)
            flagged = flagged or bool(said)
            rows.append([*ident_cells(run, heads), a["application"], *cells, "; ".join(said)])
        if not flagged:
            rows = [row[:-1] for row in rows]
        return Table([*heads, "application", *labels, *(["caveats"] if flagged else [])],
                     rows, [False] * (len(heads) + 1) + [True] * len(labels)
                     + ([False] if flagged else []))

    def said(self, run: Run, value: AppSection) -> list[str]:
        return [value["verdict"]]
