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


def failover_table(found: dict[str, Any]) -> Table:
    """The pause and its parts, and whether the acknowledged writes came back."""
    parts = found["parts"]
    rows = [["pause: last acknowledged write → first write after",
             f"{found['pause_s']:.2f} s"],
            ["  last write → old pod gone (its containers stopped)",
             f"{parts['last_write_to_old_gone_s']:.2f} s"],
            ["  old pod gone → new pod running (schedule, attach, mount)",
             f"{parts['old_gone_to_new_running_s']:.2f} s"],
            ["  new pod running → first write", f"{parts['new_running_to_first_write_s']:.2f} s"],
            ["pod deleted → old pod gone", f"{found['delete_to_old_gone_s']:.2f} s"],
            ["acknowledged writes before the pause", f"{found['acknowledged_writes']:,}"],
            ["read back intact", "all (0 acknowledged writes lost)" if found["intact"]
             else f"NO: {found['verify_message']}"]]
    return Table(["", f"(±{found['status_interval_s']:g} s)"], rows, [False, True])
