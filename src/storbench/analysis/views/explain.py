"""What `run --explain` found (analysis/explain.py): each test's latency by the kernel's
layers, and the limit that bound it, in one sentence."""

from __future__ import annotations

from typing import ClassVar

from storbench.analysis.blocks import Block, Table, Text, Titled, Units, ident_cells, ident_heads
from storbench.analysis.buckets import share
from storbench.analysis.chart import Chart, slug
from storbench.analysis.views.base import Answer, View
from storbench.analysis.warnings import Kind
from storbench.result.record import Run
from storbench.result.sections import EXPLAIN, ExplainEntry

# the layers in the order an I/O passes them, and how `show` names them
NAMES = {
    "fs": "file system & submission",
    "throttle": "cgroup throttle",
    "queue": "block queue",
    "device": "device",
    "journal": "journal commit (jbd2)",  # (xfs's: JOURNALS)
    "between": "between its own I/Os",
    "completion": "completion (wake-up)",
    "remote": "FUSE daemon's answers",
    "call_bio": "whole call, reached the device",
    "call_nobio": "whole call, no device I/O",
}


# the journal layer of a file system whose journal is not jbd2's (execute/beneath.JOURNALED)
JOURNALS = {"xfs": "log forced, its write (xfs)"}


def named(entry: ExplainEntry, name: str) -> str:
    """How `show` names layer ``name`` of this test's (its file system's journal)."""
    journal = JOURNALS.get(entry["place"].get("journal") or "") if name == "journal" else None
    return journal or NAMES[name]


def layer_rows(entry: ExplainEntry, u: Units) -> list[list[str]]:
    p99 = entry["fio"].get("p99_ns")
    rows = []
    for name in NAMES:
        label = named(entry, name)
        layer = entry["layers"].get(name)
        if not layer:
            continue
        part = share(layer.get("p99_ns"), p99)
        # beyond fio's p99: the layer's slowest, few I/Os lie in fio's last percent
        said = "" if part is None else f"{part:.0f}%" if part <= 100 else "> 100%"
        rows.append([label, f"{layer['n']:,}", u.latency(layer.get("p50_ns")),
                     u.latency(layer.get("p99_ns")), said])
    return rows


def _of(entry: ExplainEntry) -> str:
    """What of fio's the layers are set against: its syncs' latency (a test that waits
    longest in them), else its completion latency."""
    return "sync" if entry["fio"].get("direction") == "sync" else "clat"


def _whose(entry: ExplainEntry) -> str:
    """Whose layers a test that synced has: its syncs', or its other calls' (execute/
    layers.SYNC; an explanation stored before holds every call's)."""
    return {"syncs": " of its syncs", "others": " of its writes and reads"}.get(
        entry.get("calls") or "", "")


def bound(run: Run, test: str, entry: ExplainEntry) -> str:
    """The sentence, and what the run's figures add to it: a device's time that grew as
    its rate held flat at a cap (analysis/caps.py) is a cap beneath this machine, which the
    kernel sees only as the device's time; tests measured in one invocation together."""
    said = entry["said"]
    caps = [w for w in run.warnings if w.kind == Kind.IOPS_CAP and w.test == test]
    if caps and entry["limit"] in ("device", "queueing"):
        said += (f"; the device's time grew as the rate held flat at"
                 f" {float(caps[0].details['iops']):,.0f}/s: a cap beneath this machine (the"
                 " volume's or the instance's provisioned IOPS), which the kernel sees only as"
                 " the device's time")
    together = entry.get("together") or []
    if together:
        said += (f" (measured together with {', '.join(together)}: one fio invocation, whose"
                 " layers are not told apart by job)")
    return said


class ExplainView(View):
    section = EXPLAIN
    title = "The limit that bound each test (--explain)"
    json_key = "explain"
    only_answers = False  # explain.X may also be a figure of a test named explain
    chart_sections: ClassVar[dict[str, str]] = {"explain": "Latency by layer (--explain)"}

    def answers(self, value: dict[str, ExplainEntry]) -> dict[str, Answer]:
        """Each test's layers' p99: ``explain.TEST.LAYER_p99``."""
        return {f"{test}.{name}_p99": Answer(layer.get("p99_ns"), "latency",
                                             label=f"{named(entry, name)} p99 of {test}")
                for test, entry in value.items()
                for name, layer in entry["layers"].items() if name in NAMES}

    def shown(self, run: Run, value: dict[str, ExplainEntry], u: Units) -> list[Block]:
        out: list[Block] = []
        for test, entry in value.items():
            fio = entry["fio"]
            out.append(Titled(Table(["layer", "I/Os", "p50", "p99", "of fio's p99"],
                                    layer_rows(entry, u), [False, True, True, True, True]),
                              f"{test}: latency by layer{_whose(entry)} (fio's {_of(entry)} p50"
                              f" {u.latency(fio.get('p50_ns'))}, p99"
                              f" {u.latency(fio.get('p99_ns'))})"))
            if entry.get("cache_percent") is not None:
                out.append(Text(f"{test}: {entry['cache_percent']:.1f}% of the reads never"
                                " reached the device"))
            out.append(Text(f"{test}: bound by {bound(run, test, entry)}", "bold"))
            out.extend(Text(f"{test}: {note}", "warning") for note in entry.get("notes", []))
        return out

    def compared(self, found: list[tuple[Run, dict[str, ExplainEntry]]], u: Units) -> Table:
        heads = ident_heads([run for run, _ in found])
        rows = [[*ident_cells(run, heads), test, entry["limit"], bound(run, test, entry)]
                for run, value in found for test, entry in value.items()]
        return Table([*heads, "test", "bound by", "why"], rows,
                     [False] * (len(heads) + 3))

    def said(self, run: Run, value: dict[str, ExplainEntry]) -> list[str]:
        return [f"#{run.id} {test}: {bound(run, test, entry)}" for test, entry in value.items()]

    def charts(self, runs: list[Run]) -> list[Chart]:
        """Per run and test, a bar per layer (its p99, its p50 marked), fio's p99 beside
        them."""
        out = []
        for run in runs:
            value = EXPLAIN.of(run)
            for test, entry in (value or {}).items():
                shown = [(named(entry, k), entry["layers"][k]) for k in NAMES
                         if k in entry["layers"] and not k.startswith("call_")]
                if not shown:
                    shown = [(named(entry, k), entry["layers"][k]) for k in NAMES
                             if k in entry["layers"]]
                names = [*(n for n, _ in shown), "fio's completion latency"
                         if _of(entry) == "clat" else "fio's sync latency"]
                out.append(Chart(
                    slug("explain", run.name, test), f"{run.name} {test}: p99 by layer",
                    "bar", "latency", names=names,
                    values=[*(layer.get("p99_ns") for _, layer in shown),
                            entry["fio"].get("p99_ns")],
                    marks=[*(layer.get("p50_ns") for _, layer in shown),
                           entry["fio"].get("p50_ns")],
                    mark_label="p50", bar_label="p99", section="explain", log_y=True))
        return out
