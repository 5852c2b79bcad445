"""A StorageClass's lifecycle and failover views (`storbench k8s lifecycle`, `k8s
failover`): per phase its p50, p90 and maximum over the volumes, in the unit that suits
them (what was not measured says why), the volumes' timelines, and the pause of a pod
moved with its volume."""

from __future__ import annotations

from typing import Any

from storbench.analysis.blocks import (
    Block,
    Span,
    Table,
    Timeline,
    Titled,
    Units,
    ident_cells,
    ident_heads,
)
from storbench.analysis.lifecycle import (
    FAILOVER_FIGURES,
    MAY_NOT,
    PHASES,
    RATES,
    READ_EVERY_S,
    STATS,
    first_write_unsynced,
    phase_caveat,
    phase_label,
)
from storbench.analysis.views.base import Answer, View
from storbench.result.facts import TargetFacts
from storbench.result.record import Run
from storbench.result.sections import FAILOVER, LIFECYCLE, FailoverSection, LifecycleSection

SEGMENTS = (("bind", "pvc_created", "bound"), ("running", "pod_created", "running"),
            ("first_write", "running", "first_write_done"),
            ("delete", "pvc_deleted", "pv_gone"))
TIMELINE_LEGEND = {"bind": "PVC created → Bound", "running": "pod created → Running",
                   "first_write": "Running → first write done (exec and fio)",
                   "delete": "PVC deleted → PV gone"}


def seconds(u: Units, value: float | None, phase: str = "") -> str:
    """Seconds in the unit that suits them: 40.0 µs, 112 ms, 2.88 s; a ``phase`` seen over
    within one read of the API (READ_EVERY_S) is "< 100 ms", not "0.00 ns"."""
    if value is None:
        return "n/a"
    every = READ_EVERY_S.get(phase)
    if every is not None and value < every:
        return f"< {u.latency(every * 1e9)}"
    return u.latency(value * 1e9)


def _class(run: Run) -> str:
    return run.target.split("/")[-1]


class LifecycleView(View):
    section = LIFECYCLE
    title = "Kubernetes volume lifecycle"
    json_key = "lifecycle"
    tabulates_tests = False

    def answers(self, value: LifecycleSection) -> dict[str, Answer]:
        """lifecycle.PHASE.STAT in seconds (the restored read's MiB/s is shown, not
        gated: lifecycle figures are times)."""
        missing = value.get("not_measured") or {}
        out = {}
        for phase in PHASES:
            why_not = missing.get(MAY_NOT.get(phase, ""))
            for stat in STATS:
                measured = (value["summary"].get(phase) or {}).get(stat)  # older runs: fewer
                note = why_not or f"no volume reached {phase}"
                if phase == "first_write" and first_write_unsynced(value):
                    measured, note = None, ("the run timed its first write without its"
                                            " sync (an earlier storbench): not a durable write")
                out[f"{phase}.{stat}"] = Answer(measured, "seconds",
                                                "" if measured is not None else note)
        return out

    def shown(self, run: Run, value: LifecycleSection, u: Units) -> list[Block]:
        return [Titled(phases_table(value, u), f"Lifecycle of {_class(run)}"
                                               f" ({value['binding_mode']})"),
                timeline(value)]

    def compared(self, found: list[tuple[Run, LifecycleSection]], u: Units) -> Table:
        """A row per run, seconds throughout."""
        heads = ident_heads([r for r, _ in found])
        rows = []
        for r, life in found:
            def stat(phase: str, which: str, life: LifecycleSection = life) -> str:
                if not life["summary"]:
                    return ""
                said = seconds(u, (life["summary"].get(phase) or {}).get(which), phase)
                return said + phase_caveat(phase, life)

            rows.append([*ident_cells(r, heads), _class(r), life.get("binding_mode", ""),
                         stat("bind", "p50"), stat("bind", "p90"), stat("running", "p50"),
                         stat("running", "p90"), stat("first_write", "p50"),
                         stat("delete", "p90")])
        return Table([*heads, "class", "binding", "bind p50", "bind p90", "running p50",
                      "running p90", "first write p50", "delete p90"], rows,
                     [False] * (len(heads) + 2) + [True] * 6)


def phases_table(life: LifecycleSection, u: Units) -> Table:
    """A row per phase measured (a run stored before a phase existed has no row for it),
    then a row per thing the driver cannot do, saying why, and the data check."""
    summary = life["summary"]
    missing = life.get("not_measured") or {}
    rows = []
    order = [p for p in PHASES if p != "delete"] + [*RATES, "delete"]
    for phase in order:
        row = summary.get(phase)
        if row is None or MAY_NOT.get(phase) in missing:
            continue
        if phase in RATES:
            what = RATES[phase]
            cells = ["n/a" if row[s] is None else f"{row[s]:,.1f} MiB/s" for s in STATS]
        else:
            what = phase_label(phase, life)
            cells = [seconds(u, row[s], phase) for s in STATS]
        why = next((v.get("delete_note") for v in life["volumes"]
                    if phase == "delete" and v.get("delete_note")), "")
        rows.append([what, *cells,
                     f"{row['n']} of {row['of']}" + (f" ({why})" if why else "")])
    for phase, why in missing.items():
        rows.append([phase, "", "", "", why])
    checked = [v["verified"] for v in life["volumes"] if "verified" in v]
    if checked:
        copies = sorted({c for v in checked for c in v})
        rows.append(["data checked (md5 of 16 MiB written before)", "", "", "",
                     f"{sum(1 for v in checked if v)} of {len(life['volumes'])} volumes"
                     f" intact: {', '.join(copies) or 'none'}"])
    return Table(["phase", *STATS, "volumes"], rows, [False, True, True, True, False])


def timeline(life: LifecycleSection) -> Timeline:
    """A row per volume: PVC created → bound, pod created → running, the first write,
    PVC deleted → PV gone, seconds from the volume's start."""
    rows = []
    for v in life.get("volumes", []):
        t = v.get("timeline")
        if not t:
            continue
        rows.append((v["volume"].rsplit("-", 1)[-1],  # v0, v1, ...
                     [Span(phase, t[start], t[stop]) for phase, start, stop in SEGMENTS
                      if start in t and stop in t]))
    return Timeline(rows, TIMELINE_LEGEND)


class FailoverView(View):
    section = FAILOVER
    title = "Failover"
    json_key = "failover"
    tabulates_tests = False

    def answers(self, value: FailoverSection) -> dict[str, Answer]:
        """failover.pause and its parts, in seconds."""
        parts = value.get("parts") or {}
        return {figure: Answer(value.get("pause_s") if figure == "pause"
                               else parts.get(f"{figure}_s"), "seconds")
                for figure in FAILOVER_FIGURES}

    def shown(self, run: Run, value: FailoverSection, u: Units) -> list[Block]:
        mode = TargetFacts.of(run.environment).access_mode
        return [Titled(failover_table(value), f"Failover on {_class(run)}"
                                              + (f" ({mode})" if mode else ""))]

    def compared(self, found: list[tuple[Run, FailoverSection]], u: Units) -> Table:
        heads = ident_heads([r for r, _ in found])
        rows = [[*ident_cells(r, heads), _class(r), seconds(u, fo["pause_s"]),
                 "0" if fo["intact"] else "YES"] for r, fo in found]
        return Table([*heads, "class", "failover pause", "writes lost"], rows,
                     [False] * (len(heads) + 1) + [True, False])


def failover_table(found: FailoverSection) -> Table:
    """The pause and its parts, and whether the acknowledged writes came back."""
    parts: dict[str, Any] = found["parts"]
    rows = [["pause: last acknowledged write → first write after",
             f"{found['pause_s']:.2f} s"],
            ["  last write → old pod gone (its containers stopped)",
             f"{parts['last_write_to_old_gone_s']:.2f} s"],
            ["  old pod gone → new pod running (schedule, attach, mount)",
             f"{parts['old_gone_to_new_running_s']:.2f} s"],
            ["  new pod running → first write", f"{parts['new_running_to_first_write_s']:.2f} s"],
            [f"pod {'evicted' if found.get('ended_by') == 'eviction' else 'deleted'} → old"
             " pod gone", f"{found['delete_to_old_gone_s']:.2f} s"],
            ["acknowledged writes before the pause", f"{found['acknowledged_writes']:,}"],
            ["read back intact", "all (0 acknowledged writes lost)" if found["intact"]
             else f"NO: {found['verify_message']}"]]
    return Table(["", f"(±{found['status_interval_s']:g} s)"], rows, [False, True])
