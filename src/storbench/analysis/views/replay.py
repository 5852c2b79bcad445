"""A replay's view (`storbench replay`): what it issued of what was recorded, how it kept
the recorded timeline, and what it cannot hold."""

from __future__ import annotations

from typing import Any

from storbench.analysis.blocks import Block, Table, Text, Units, ident_cells, ident_heads
from storbench.analysis.views.base import Answer, View
from storbench.result.record import Run
from storbench.result.sections import REPLAY, ReplaySection
from storbench.workload.sizes import format_bytes_iec

REPLAYED = ("reads", "writes", "syncs")


def counts(done: dict[str, int], named: bool = False) -> str:
    """'600 / 600 / 148', or with ``named`` '600 reads / 600 writes / 148 syncs'."""
    return " / ".join(f"{done.get(k, 0):,}" + (f" {k}" if named else "") for k in REPLAYED)


def lag(replay: Any) -> float | None:
    """How far a timed replay fell behind its recorded timeline (s), negative when it ran
    ahead of it beyond fio's millisecond clock (it did not wait as recorded); None for a
    replay as fast as possible."""
    behind = replay["lag_s"]
    if behind is None:
        return None
    return behind if behind > 0 or -behind > 0.002 + 0.01 * replay["recorded_s"] else 0.0


def lines(replay: ReplaySection) -> list[str]:
    """What a replay issued of what was recorded, how it kept time, what it cannot hold."""
    out = [f"replay of {replay['workload']} ({replay['method']}, {replay['engine']}):"
           f" {counts(replay['issued'], named=True)} issued of"
           f" {counts(replay['recorded'])} recorded"
           + (f" × {replay.get('workers', 1)} hosts" if replay.get("workers", 1) > 1 else "")]
    if replay["timed"]:
        behind = lag(replay) or 0.0
        out.append(f"timed: the recorded {replay['recorded_s']:.3f} s took"
                   f" {replay['replay_s']:.3f} s ("
                   + (f"{behind:.3f} s behind the recorded timeline" if behind > 0
                      else f"{-behind:.3f} s ahead of the recorded timeline: fio did not wait"
                      " as recorded" if behind < 0 else "on the recorded timeline") + ")")
    else:
        out.append(f"as fast as possible: {replay['replay_s']:.3f} s for what took"
                   f" {replay['recorded_s']:.3f} s when recorded")
    if replay["prefilled"]:
        out.append(f"written before the replay (what it reads): {len(replay['prefilled'])}"
                   f" file(s), {format_bytes_iec(sum(replay['prefilled'].values()))}")
    return out + list(replay["notes"])


class ReplayView(View):
    section = REPLAY
    title = "Replays of recorded workloads"
    json_key = "replays"
    only_answers = False  # replay.X may also be a figure of a test named replay

    def answers(self, value: ReplaySection) -> dict[str, Answer]:
        """How long the replay's I/O took, and how far a timed one fell behind."""
        found = {"took": Answer(float(value["replay_s"]), "seconds"),
                 "recorded": Answer(float(value["recorded_s"]), "seconds")}
        if value["timed"]:
            found["behind"] = Answer(lag(value), "seconds")
        return found

    def shown(self, run: Run, value: ReplaySection, u: Units) -> list[Block]:
        return [Text(line) for line in lines(value)]

    def compared(self, found: list[tuple[Run, ReplaySection]], u: Units) -> Table:
        heads = ident_heads([run for run, _ in found])
        rows = []
        for run, r in found:
            behind = lag(r)
            rows.append([*ident_cells(run, heads), r["workload"],
                         "timed" if r["timed"] else "as fast as possible", counts(r["issued"]),
                         counts(r["recorded"]), f"{r['replay_s']:.3f}", f"{r['recorded_s']:.3f}",
                         "" if behind is None else f"{behind:.3f}"])
        return Table([*heads, "workload", "replay", "issued r / w / sync",
                      "recorded r / w / sync", "took [s]", "recorded [s]", "behind [s]"], rows,
                     [False] * (len(heads) + 2) + [True] * 5)

    def said(self, run: Run, value: ReplaySection) -> list[str]:
        return lines(value)
