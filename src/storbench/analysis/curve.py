"""IOPS-latency curves (``storbench curve``): the steps' figures, and the answers a
platform team plans capacity with.

A curve run holds two kinds of steps. Closed loop (``qd1``, ``qd2``, … or ``jobs1``,
``jobs2`` … for a synchronous engine): as fast as the storage allows, depth doubled
until IOPS stop rising by more than 5%; the highest is the maximum. Open loop
(``rate-N``): fio issues N IOPS with Poisson arrivals (``rate_iops``,
``rate_process=poisson``; N is the rate fio's whole-microsecond gaps really give,
analysis/rates.poisson_pace; a synchronous engine's, evenly spaced: rates.paced). A step
that fell behind (achieved < 95% of the requested rate, and short by more than Poisson
chance: analysis/rates.py) is saturated: its latency is that of a queue that grew, and
it never counts as meeting an objective.
Neither does a step that ran faster than its rate (``exceeded``): it was not at it.

Per objective (``p99<=2ms``): the highest achieved rate of a step that met it, and the
next step that did not ("max 2,870 IOPS at p99 <= 2 ms"); when even the lowest step
misses it, "never met" with the latency floor. The knee: the highest rate before p99
rises past twice its low-load value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storbench.analysis import rates
from storbench.errors import ConfigError
from storbench.result.merge import merge_latency, percentiles_from_bins
from storbench.result.model import Latency, TestResult
from storbench.workload.sizes import parse_count

RISING = 0.05  # closed loop: deeper queues until IOPS rise by less than this
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
KNEE = 2.0  # p99 this many times its low-load value: the curve has bent
# fio's own CPU (usr + sys) at this % of a core, with the time tasks here waited for a
# CPU (a busy machine takes fio's core from it): the CPU limits
CPU_BOUND = 95.0
CPU_OWN = 50.0  # and fio's own CPU at least this: a busy machine alone is not fio's limit
_OBJECTIVE = re.compile(r"^\s*p(?P<p>\d+(?:\.\d+)?)\s*(?P<op><=|<)\s*(?P<n>\d+(?:\.\d+)?)\s*"
                        r"(?P<unit>ns|us|µs|ms|s)\s*$")
_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


@dataclass(frozen=True)
class Objective:
    """A latency objective: ``percentile`` at most ``limit_ns`` (``p99<=2ms``)."""

    text: str
    percentile: float
    limit_ns: float

    @classmethod
    def parse(cls, text: str, option: str = "--slo") -> Objective:
        """``text`` as an objective; ConfigError naming the ``option`` it was given to."""
        m = _OBJECTIVE.match(text)
        if m is None or not 0 < float(m["p"]) < 100 or float(m["n"]) <= 0:
            raise ConfigError(f"{option} {text!r}: write a percentile and a limit, e.g."
                              " 'p99<=2ms', 'p99.9<=500us', 'p50<=1ms'")
        return cls(text.replace(" ", ""), float(m["p"]), float(m["n"]) * _UNITS[m["unit"]])

    @property
    def key(self) -> str:
        """How assertions name it: p99<=2ms -> p99_2ms, p99.9<=0.5ms -> p99_9_0_5ms."""
        return re.sub(r"[^0-9a-zµ]+", "_", self.text.split("<")[0] + "_"
                      + self.text.split("=")[-1].split("<")[-1]).strip("_")


def synced(r: TestResult) -> tuple[str, int] | None:
    """How a job syncs its writes: the call and every how many writes (fio's
    ``fdatasync=N``, ``fsync=N``), where fio timed those calls; else None."""
    if r.sync is None or not r.sync.calls or not r.sync.lat.samples:
        return None
    return next(((call, n) for call in ("fdatasync", "fsync")
                 if (n := parse_count(r.options.get(call), 0)) > 0), None)


def waited_by(r: TestResult) -> str:
    """What a job's latency is of: each write's sync call ("fdatasync") where it syncs
    every write (a write alone lands in the page cache: etcd's wait for fdatasync),
    each write's completion and each sync call ("completion and fsync") where it syncs
    every few, else each I/O's completion ("completion")."""
    how = synced(r)
    return "completion" if how is None else how[0] if how[1] == 1 else f"completion and {how[0]}"


def waited_words(waited: str) -> str:
    """waited_by's answer in words: "" for completion (what a latency is by default)."""
    if waited == "completion":
        return ""
    if waited.startswith("completion and "):
        call = waited.removeprefix("completion and ")
        return f"each I/O's completion and each {call} (every few writes), merged"
    return f"each write's {waited}, what it waits for"


def waited_of(record: Mapping[str, Any]) -> str:
    """What a stored curve's, step's or victim's latency is of (waited_by's answer); one
    stored before that was kept: its I/Os' completion, which is what it measured."""
    return str(record.get("latency", "completion"))


def waited_column(kinds: Sequence[str]) -> list[str] | None:
    """Each row's latency in words (``kinds``: waited_by's answers, a row's each), for
    curves or victims side by side: None when all are of one kind, so that a write's
    completion is never put beside an fdatasync's unsaid (a curve stored before its
    latency was recorded is of completion, which is what it measured)."""
    if len(set(kinds)) < 2:
        return None
    return [waited_words(k) or "each I/O's completion" for k in kinds]


def waited_for(results: list[TestResult]) -> str:
    """waited_by of a step's jobs: the first that syncs, else "completion"."""
    return next((w for r in results if (w := waited_by(r)) != "completion"), "completion")


def job_latency(r: TestResult, directions: Sequence[str] | None = None) -> Latency | None:
    """A job's latency as waited_by says (of ``directions``, all when None), merged from
    the bins: its I/Os' completion, a synced write's sync call in its place (every write
    synced) or beside it (every few)."""
    how = synced(r)
    parts = [d.clat for name, d in r.directions() if d.clat is not None
             and (directions is None or name in directions)
             and not (how is not None and how[1] == 1 and name == "write")]
    if how is not None and r.sync is not None and (directions is None or "write" in directions):
        parts.append(r.sync.lat)
    return merge_latency(parts) if parts else None


def latency(results: list[TestResult]) -> Latency | None:
    """The step's latency, all jobs and directions merged from the bins (job_latency's
    parts: a mixed job's reads by their completion)."""
    parts = [lat for r in results if (lat := job_latency(r)) is not None]
    return merge_latency(parts) if parts else None


def step_record(name: str, requested: float | None, results: list[TestResult],
                depth: int, jobs: int, poisson: bool = True,
                objectives: Sequence[Objective] = ()) -> dict[str, Any]:
    """One step as stored: its rates, its percentiles (PERCENTILES and each objective's:
    a p95 objective was judged on steps that kept no p95, "never met"), and whether fio
    kept the rate (neither fell behind it, ``saturated``, nor ran faster, ``exceeded``)."""
    achieved = sum(d.iops for r in results for _, d in r.directions())
    seconds = max((d.runtime_ms for r in results for _, d in r.directions()), default=0) / 1000
    lat = latency(results)
    cpu = sum(r.usr_cpu_percent + r.sys_cpu_percent for r in results) / max(jobs, 1)
    expected = (requested or 0.0) * seconds
    return {
        "test": name, "requested_iops": requested, "achieved_iops": achieved,
        "iodepth": depth, "numjobs": jobs,
        "saturated": requested is not None and not rates.kept(
            requested, achieved, expected, poisson=poisson),
        "exceeded": requested is not None and rates.exceeded(
            requested, achieved, expected, poisson=poisson),
        "latency": waited_for(results),
        "percentiles_ns": percentiles_at(lat, {*PERCENTILES, *(o.percentile for o in objectives)}),
        "cpu_percent": round(cpu, 1),
    }


def percentiles_at(lat: Latency | None, wanted: set[float]) -> dict[str, float | None]:
    """A step's (or a victim's) latency at each wanted percentile: from fio's histogram
    bins (with fio's rule: any percentile, not only fio's list), else as fio gave it;
    None when unknown."""
    found = percentiles_from_bins(lat.bins, wanted) if lat is not None and lat.bins else {}
    return {f"{p:g}": found.get(p, lat.percentile(p) if lat is not None else None)
            for p in sorted(wanted)}


def cpu_taken(step: dict[str, Any]) -> float:
    """A step's CPU as % of a core per job: fio's own, and the time tasks here waited for
    a CPU in it (``cpu_waited_percent``: /proc/pressure/cpu; a remote fio has none)."""
    return float(step["cpu_percent"]) + float(step.get("cpu_waited_percent") or 0.0)


def cpu_bound(step: dict[str, Any]) -> bool:
    """fio ran out of CPU in this step: its own CPU at a whole core, or most of one with
    the rest of the step spent waiting for a CPU another task held. Not a paced step that
    kept its rate: at short gaps fio spins while it waits for its next I/O (a whole core at
    20,000 IOPS, analysis/explain.py), and its CPU limited nothing."""
    if step.get("requested_iops") is not None and not off_rate(step):
        return False
    return step["cpu_percent"] >= CPU_OWN and cpu_taken(step) >= CPU_BOUND


def off_rate(step: dict[str, Any]) -> bool:
    """Whether an open-loop step did not run at its rate: behind it or faster."""
    return bool(step["saturated"] or step.get("exceeded"))


def answers(steps: list[dict[str, Any]], objectives: list[Objective]) -> list[dict[str, Any]]:
    """Per objective, the highest rate that met it and the next step that did not."""
    opened = sorted((s for s in steps if s["requested_iops"] is not None),
                    key=lambda s: s["requested_iops"])
    out = []
    for o in objectives:
        def value(s: dict[str, Any], o: Objective = o) -> float | None:
            v = s["percentiles_ns"].get(f"{o.percentile:g}")
            return None if v is None else float(v)

        met = [s for s in opened if not off_rate(s) and (v := value(s)) is not None
               and v <= o.limit_ns]
        best = max(met, key=lambda s: s["achieved_iops"]) if met else None
        above = [s for s in opened if best is None or s["requested_iops"] > best[
            "requested_iops"]]
        failed = next((s for s in above if off_rate(s) or (value(s) or 0) > o.limit_ns),
                      None)
        # the latency at the lowest load: of the slowest step that completed I/O (a step
        # of a second at a few IOPS may complete none: its latency is unknown, not 0)
        floor = next((v for s in opened if (v := value(s)) is not None), None)
        # a slower step that missed it (latency is noisy, or not monotonic): said, as a
        # reader takes "max N IOPS at p99<=X" to hold for every rate below N
        slower = next((s for s in opened if best is not None and s["requested_iops"]
                       < best["requested_iops"] and not off_rate(s)
                       and (value(s) or 0) > o.limit_ns), None)
        out.append({
            "objective": o.text, "key": o.key, "percentile": o.percentile,
            "limit_ns": o.limit_ns, "iops": best["achieved_iops"] if best else None,
            "step": best["test"] if best else None,
            "next_failed": None if failed is None else {
                "step": failed["test"], "achieved_iops": failed["achieved_iops"],
                "latency_ns": value(failed), "saturated": failed["saturated"],
                "exceeded": bool(failed.get("exceeded"))},
            "never_met": best is None, "floor_ns": floor,
            "slower_missed": None if slower is None else {
                "step": slower["test"], "achieved_iops": slower["achieved_iops"],
                "latency_ns": value(slower)},
        })
    return out


def knee(steps: list[dict[str, Any]]) -> float | None:
    """The highest achieved rate before p99 passed KNEE times its low-load value (or
    a step was not at its rate): ``bend`` says which ended it."""
    return bend(steps)[0]


def bend(steps: list[dict[str, Any]]) -> tuple[float | None, str | None]:
    """The knee, and what the next step did: "p99" (more than KNEE times the floor),
    "saturated", "exceeded"; None when no step bent (the knee is the fastest step's)."""
    opened = sorted((s for s in steps if s["requested_iops"] is not None
                     and s["percentiles_ns"].get("99") is not None),
                    key=lambda s: s["requested_iops"])
    if not opened:
        return None, None
    floor = float(opened[0]["percentiles_ns"]["99"])
    before = None
    for s in opened:
        if off_rate(s):
            return before, "saturated" if s["saturated"] else "exceeded"
        if float(s["percentiles_ns"]["99"]) > KNEE * floor:
            return before, "p99"
        before = s["achieved_iops"]
    return before, None


KNEE_BENT = {
    "p99": "beyond it p99 is more than twice its low-load value",
    "saturated": "beyond it the next step fell behind its rate",
    "exceeded": "beyond it the next step ran faster than its rate",
    None: "p99 stayed within twice its low-load value up to the fastest step: no knee"
          " measured below it",
}


def knee_why(curve: Mapping[str, Any]) -> str:
    """What the knee's next step did, in words; a curve stored before ``knee_bent``
    was kept says the p99 reason, as it did then."""
    return KNEE_BENT[curve.get("knee_bent", "p99")]


def describe(answer: dict[str, Any], fmt_latency: Any) -> str:
    """'max 2,870 IOPS at p99<=2ms (rate-3100 missed it: 4.1 ms)' or 'never met'."""
    if answer["never_met"]:
        floor = answer["floor_ns"]
        return (f"{answer['objective']}: never met, the floor at the lowest load is"
                f" {fmt_latency(floor) if floor is not None else 'unknown'}")
    text = f"max {answer['iops']:,.0f} IOPS at {answer['objective']}"
    nxt = answer["next_failed"]
    if nxt is not None:
        why = ("fell behind its rate" if nxt["saturated"] else
               "ran faster than its rate" if nxt.get("exceeded") else
               f"{fmt_latency(nxt['latency_ns'])}")
        text += f" (next step {nxt['achieved_iops']:,.0f} IOPS: {why})"
    slower = answer.get("slower_missed")
    if slower is not None:
        text += (f"; but the slower {slower['step']} missed it"
                 f" ({slower['achieved_iops']:,.0f} IOPS: {fmt_latency(slower['latency_ns'])}),"
                 " so it does not hold at every lower rate")
    return text


def check_answer(text: str, key: str, figure: str, keys: list[str]) -> None:
    """ConfigError unless an assertion names one of a curve's answers ``keys`` (its
    objectives' keys, max, knee) as a rate."""
    if figure != "iops":
        raise ConfigError(f"assertion {text!r}: a curve's answers are rates: use"
                          f" curve.{key}.iops")
    if key not in keys:
        raise ConfigError(f"assertion {text!r}: the curve has no {key!r}; it has:"
                          f" {', '.join(keys)}")
