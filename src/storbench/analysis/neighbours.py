"""Noisy neighbours' figures (`storbench neighbours`, pipeline/kinds/neighbours.py): a
victim's at one step, a step's, and the answer in one sentence."""

from __future__ import annotations

from typing import Any

from storbench.analysis import rates
from storbench.analysis.curve import Objective, job_latency, percentiles_at, waited_by
from storbench.analysis.stats import times
from storbench.result.model import TestResult
from storbench.workload.sizes import format_latency

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
ISOLATED = "-isolated"  # a step's and its jobs' names' end, when the aggressors are held


def victim_record(result: TestResult, alone: dict[str, Any] | None,
                  offered: float, limit: Objective | None = None) -> dict[str, Any]:
    """A victim at one step: p50…p99.9 (ns) of what it waits for (curve.waited_by: its
    I/O's completion; a writer that syncs each write, that call: the write alone lands in
    the page cache; one that syncs every few, both), and the ``limit``'s percentile (from
    the bins: any, p95 or p97.5 too), growth of p50 and p99 over alone (×), the IOPS it
    did of those fio offered, and whether it kept its rate (Poisson-aware)."""
    (name, d), *_ = result.directions()
    lat = job_latency(result, [name])  # a synced writer's sync calls: curve.waited_by
    percentiles = percentiles_at(lat, {*PERCENTILES, *([limit.percentile] if limit else [])})
    out: dict[str, Any] = {"latency": waited_by(result),
                           "p50_ns": percentiles["50"], "p99_ns": percentiles["99"],
                           "percentiles_ns": percentiles, "achieved_iops": d.iops,
                           "requested_iops": offered,
                           "rate_kept": not rates.shortfalls(result)}
    for key in ("p50", "p99"):
        now, before = out[f"{key}_ns"], alone[f"{key}_ns"] if alone else out[f"{key}_ns"]
        out[f"growth_{key}"] = now / before if now and before else None
    return out


def step_record(n: int, results: list[TestResult], victims: dict[str, float],
                alone: dict[str, Any] | None, isolated: bool = False,
                limit: Objective | None = None) -> dict[str, Any]:
    """One step: each victim's figures (``victims``: name -> the rate fio offers it;
    ``limit``: their objective, whose percentile they keep too), and the aggressors'
    IOPS and bandwidth (all directions); ``isolated``: theirs held in their cgroup
    (--isolate)."""
    at = f"{n}{ISOLATED if isolated else ''}"
    theirs = [r for r in results if r.name == f"aggressors-{at}"]
    return {
        "aggressors": n, "test": f"step-{at}", "isolated": isolated,
        "victims": {v: victim_record(next(r for r in results if r.name == f"{v}-{at}"),
                                     alone["victims"][v] if alone else None, offered,
                                     limit)
                    for v, offered in victims.items()},
        "aggressor_iops": sum(x.iops for r in theirs for _, x in r.directions()),
        "aggressor_bw_bytes_per_s": sum(x.bw_bytes_per_s for r in theirs
                                        for _, x in r.directions()),
    }


def meets(step: dict[str, Any], objective: Objective) -> bool:
    """The victim kept its rate and its percentile is within the objective's limit."""
    value = step["percentiles_ns"].get(f"{objective.percentile:g}")
    return bool(step["rate_kept"]) and value is not None and value <= objective.limit_ns


def _ms(ns: float | None) -> str:
    return "?" if ns is None else format_latency(ns)


def split(steps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The steps as they came (alone, then beside aggressors), and those measured again
    with the aggressors held (--isolate)."""
    return ([s for s in steps if not s.get("isolated")], [s for s in steps if s.get("isolated")])


def _beside(r: dict[str, Any], n: int) -> str:
    """'31.0 ms beside 2 aggressors (78×)', with a rate not kept."""
    grew = f" ({times(r['growth_p99'])}×)" if r["growth_p99"] is not None else ""
    lost = "" if r["rate_kept"] else (f", its rate not kept: {r['achieved_iops']:,.0f}"
                                      f" of {r['requested_iops']:,.0f} IOPS")
    return f"{_ms(r['p99_ns'])} beside {n} aggressor{'s' if n > 1 else ''}{grew}{lost}"


def _missed(steps: list[dict[str, Any]], limit: str) -> str:
    missed = next((s for s in steps if any(r.get("missed") for r in s["victims"].values())),
                  None)
    return f"{limit} " + ("held at every step" if missed is None else "missed even alone"
                          if not missed["aggressors"] else
                          f"missed beside {missed['aggressors']}")


def said(steps: list[dict[str, Any]], subjects: dict[str, str], limit: str | None,
         isolation: dict[str, Any] | None = None) -> str:
    """The answer in one sentence: each victim's p99 alone, beside the first aggressor
    and beside the most, with how much it grew and a rate not kept; with --isolate, its
    p99 beside the most aggressors held in their cgroup; the objective.
    ``subjects``: victim -> what its clause begins with ("your 4k random reads' p99")."""
    plain, held = split(steps)
    clauses = []
    for v, subject in subjects.items():
        at = [s["victims"][v] for s in plain]
        parts = [f"{subject} went from {_ms(at[0]['p99_ns'])} alone"]
        shown = [1] if len(plain) > 1 else []
        shown += [len(plain) - 1] if len(plain) > 2 else []
        parts += [f"to {_beside(at[i], plain[i]['aggressors'])}" for i in shown]
        clause = parts[0] + (" " + ", then ".join(parts[1:]) if parts[1:] else "")
        if held:
            clause += (f", and {_beside(held[-1]['victims'][v], held[-1]['aggressors'])}"
                       " with them held")
        clauses.append(clause)
    text = "; ".join(clauses)
    if isolation is not None and held:
        text += f" (held: {isolation['words']}, in a cgroup of their own"
        text += f"; {isolation['ignored']})" if isolation.get("ignored") else ")"
    if limit is not None:
        text += "; " + _missed(plain, limit)
        if held:
            text += "; with them held, " + _missed(held, limit)
    return text
