"""A lifecycle run's tables (`storbench k8s lifecycle`, `show`): per phase its p50,
p90 and maximum over the volumes, in the unit that suits them; what was not measured
says why."""

from __future__ import annotations

from typing import Any

from storbench.analysis.lifecycle import (
    MAY_NOT,
    PHASES,
    RATES,
    READ_EVERY_S,
    STATS,
    phase_caveat,
    phase_label,
)
from storbench.render import units
from storbench.render.table import Table
from storbench.result.sections import FAILOVER, LIFECYCLE, FailoverSection, LifecycleSection


def lifecycle_table(life: LifecycleSection) -> Table:
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
            what, cells = RATES[phase], [_mibs(row[s]) for s in STATS]
        else:
            what = phase_label(phase, life)
            cells = [_s(row[s], phase) for s in STATS]
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


def _mibs(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f} MiB/s"


def failover_table(found: FailoverSection) -> Table:
    """The pause and its parts, and whether the acknowledged writes came back."""
    parts = found["parts"]
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


def is_kube_life(run: Any) -> bool:
    return bool(LIFECYCLE.of(run) or FAILOVER.of(run))


def _s(value: float | None, phase: str = "") -> str:
    """Seconds in the unit that suits them: 40.0 µs, 112 ms, 2.88 s; a ``phase`` seen over
    within one read of the API (READ_EVERY_S) is "< 100 ms", not "0.00 ns"."""
    if value is None:
        return "n/a"
    every = READ_EVERY_S.get(phase)
    if every is not None and value < every:
        return f"< {units.latency(every * 1e9)}"
    return units.latency(value * 1e9)


def classes_table(runs: list[Any]) -> Table:
    """Lifecycle and failover runs side by side: a row per run, seconds throughout."""
    headers = ["run", "label", "class", "binding", "bind p50", "bind p90", "running p50",
               "running p90", "first write p50", "delete p90", "failover pause",
               "writes lost"]
    rows = []
    for r in runs:
        if not is_kube_life(r):
            continue
        life, fo = LIFECYCLE.of(r), FAILOVER.of(r)

        def stat(phase: str, which: str, life: LifecycleSection | None = life) -> str:
            if not life or not life["summary"]:
                return ""
            said = _s((life["summary"].get(phase) or {}).get(which), phase)
            return said + phase_caveat(phase, life)

        rows.append([f"#{r.id}", r.label or "", r.target.split("/")[-1],
                     (r.environment.get("target") or {}).get("binding_mode", ""),
                     stat("bind", "p50"), stat("bind", "p90"), stat("running", "p50"),
                     stat("running", "p90"), stat("first_write", "p50"), stat("delete", "p90"),
                     _s(fo["pause_s"]) if fo else "",
                     ("0" if fo["intact"] else "YES") if fo else ""])
    return Table(headers, rows, [False, False, False, False, *([True] * 7), False])


_COLOURS = {"bind": "#4e79a7", "running": "#f28e2b", "first_write": "#59a14f",
            "delete": "#9c755f"}
_SEGMENTS = (("bind", "pvc_created", "bound"), ("running", "pod_created", "running"),
             ("first_write", "running", "first_write_done"),
             ("delete", "pvc_deleted", "pv_gone"))
TIMELINE_LEGEND = {"bind": "PVC created → Bound", "running": "pod created → Running",
                   "first_write": "Running → first write done (exec and fio)",
                   "delete": "PVC deleted → PV gone"}


def timeline_svg(life: LifecycleSection) -> str:
    """A row per volume: PVC created → bound, pod created → running, the first write,
    PVC deleted → PV gone, on one time axis (seconds from the volume's start)."""
    from html import escape

    volumes = [v for v in life.get("volumes", []) if v.get("timeline")]
    if not volumes:
        return ""
    end = max(max(v["timeline"].values()) for v in volumes) or 1.0
    width, left, row = 640, 40, 18
    height = row * len(volumes) + 28
    scale = (width - left - 10) / end
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
             f' role="img" aria-label="volume timelines">']
    for i, v in enumerate(volumes):
        y = 10 + i * row
        t = v["timeline"]
        short = v["volume"].rsplit("-", 1)[-1]  # v0, v1, ...
        parts.append(f'<text x="0" y="{y + 11}" font-size="11">{escape(short)}</text>')
        for phase, start, stop in _SEGMENTS:
            if start in t and stop in t:
                x0, x1 = left + t[start] * scale, left + t[stop] * scale
                parts.append(
                    f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1):.1f}" height="12"'
                    f' fill="{_COLOURS[phase]}"><title>{escape(TIMELINE_LEGEND[phase])}:'
                    f' {t[stop] - t[start]:.2f} s</title></rect>')
    axis = 20 + row * len(volumes)
    parts.append(f'<text x="{left}" y="{axis}" font-size="11">0 s</text>'
                 f'<text x="{width - 10}" y="{axis}" font-size="11" text-anchor="end">'
                 f'{end:.1f} s</text>')
    parts.append("</svg>")
    legend = " · ".join(f'<span style="color:{_COLOURS[p]}">■</span> {escape(text)}'
                        for p, text in TIMELINE_LEGEND.items())
    return "".join(parts) + f'<div class="muted">{legend}</div>'
