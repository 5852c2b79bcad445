"""A lifecycle run's tables (`storbench k8s lifecycle`, `show`): per phase its p50,
p90 and maximum over the volumes, in the unit that suits them; what was not measured
says why."""

from __future__ import annotations

from typing import Any

from storbench.analysis.lifecycle import PHASES, STATS
from storbench.render import units
from storbench.render.table import Table


def lifecycle_table(life: dict[str, Any]) -> Table:
    summary = life["summary"]
    values = [summary[p][s] for p in PHASES for s in STATS]
    unit = units.choose("latency", [v * 1e9 for v in values if v is not None])
    rows = []
    for phase, what in PHASES.items():
        row = summary[phase]
        figures = [unit.fmt(row[s] * 1e9 if row[s] is not None else None) or "n/a"
                   for s in STATS]
        why = next((v.get("delete_note") for v in life["volumes"]
                    if phase == "delete" and v.get("delete_note")), "")
        rows.append([what, *figures, f"{row['n']} of {row['of']}" + (f" ({why})" if why
                                                                     else "")])
    for phase, why in (life.get("not_measured") or {}).items():
        rows.append([phase, "", "", "", why])
    return Table(["phase", *(f"{s} [{unit.name}]" for s in STATS), "volumes"], rows,
                 [False, True, True, True, False])
