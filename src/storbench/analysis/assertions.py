"""Pass/fail assertions on a run's figures, for CI gating.

Syntax: ``TEST.[DIRECTION.]FIGURE OP VALUE[UNIT]``, for example::

    etcd.fdatasync.p99 < 10ms       randread.iops >= 3000      seqread.bw > 100MiB/s
    randrw75.read.clat.p99.9 <= 5ms  read_latency.lat.mean < 500us   randread.iops >= 3k

DIRECTION is read, write, trim, or sync (also fsync, fdatasync); it may be left
out when the test did only one. FIGURE is iops, bw, or a latency statistic (p50,
p90, p95, p99, p99.9, p99.99, mean, min, max), of clat by default or of lat/slat
when named (``lat.p99``, or ``lat_p99`` as ``history --metric`` names it). With
repeats, the median is compared.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from storbench.analysis import rates
from storbench.analysis.caps import flat_rate
from storbench.analysis.metrics import Metric, metric, percentiles_given, value
from storbench.analysis.stats import estimate
from storbench.errors import ConfigError
from storbench.result.facts import TargetFacts
from storbench.result.model import TestResult
from storbench.result.record import Run, Verdict

_EXPR = re.compile(
    r"^\s*(?P<test>[^.\s]+)\.(?P<path>[\w.]+?)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-zµ/]*)\s*$"
)
# `clat.p99`, or `clat_p99` as history, compare's JSON and the exports name the figure
_FIGURE = re.compile(r"^(?:(?P<which>slat|clat|lat)[._])?(?P<stat>p\d+(?:\.\d+)?|mean|min|max)$")
OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
BW_UNITS = {"B/s": 1.0, "KiB/s": 1024.0, "MiB/s": 1024.0**2, "GiB/s": 1024.0**3,
            "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9}
COUNT_UNITS = {"": 1.0, "iops": 1.0, "IOPS": 1.0, "k": 1e3, "K": 1e3, "M": 1e6}
SYNC_NAMES = ("sync", "fsync", "fdatasync")


@dataclass(frozen=True)
class Assertion:
    text: str
    test: str
    path: str  # what follows the test name, e.g. "fdatasync.p99"
    op: str
    number: float
    unit: str

    @classmethod
    def parse(cls, text: str) -> Assertion:
        m = _EXPR.match(text)
        if m is None:
            raise ConfigError(
                f"cannot read the assertion {text!r}; write TEST.FIGURE OP VALUE, e.g."
                " 'etcd.fdatasync.p99 < 10ms' or 'randread.iops >= 3000'")
        return cls(text.strip(), m["test"], m["path"], m["op"], float(m["number"]), m["unit"])

    def with_test(self, test: str) -> Assertion:
        text = self.text.replace(f"{self.test}.", f"{test}.", 1)
        return Assertion(text, test, self.path, self.op, self.number, self.unit)

    def with_limit(self, number: float, unit: str) -> Assertion:
        text = f"{self.test}.{self.path} {self.op} {number:g}{unit}"
        return Assertion(text, self.test, self.path, self.op, number, unit)

    def _figure(self) -> tuple[str | None, str]:
        """The direction named (None: left out) and the figure: ("sync", "p99")."""
        parts = self.path.split(".")
        direction: str | None = None
        if parts[0] in ("read", "write", "trim"):
            direction, parts = parts[0], parts[1:]
        elif parts[0] in SYNC_NAMES:
            direction, parts = "sync", parts[1:]
        return direction, ".".join(parts)

    def check_before(self, tests: list[str]) -> None:
        """ConfigError, before a run measures anything, for an assertion on a test's
        figure that it could never pass: a test the run does not have (``tests``: fio's
        job names), a figure no test has, a unit that does not fit the figure."""
        if self.test not in tests:
            raise ConfigError(f"--assert {self.text!r}: the run has no test {self.test!r}"
                              f" (its tests: {', '.join(tests) or 'none'})")
        direction, rest = self._figure()
        if rest in ("iops", "bw") and direction != "sync":
            self._unit_of(rest)
        elif _FIGURE.match(rest):
            self._unit_of("latency")
        else:
            raise self._unknown(rest)

    def _unknown(self, figure: str) -> ConfigError:
        return ConfigError(f"assertion {self.text!r}: unknown figure {figure!r}; use iops, bw,"
                           " p50 … p99.99, mean, min, max (optionally lat./clat./slat.)")

    def curve_answer(self) -> tuple[str, str, float]:
        """A curve's answer named (curve.p99_2ms.iops: "p99_2ms"), its figure ("iops"), and
        the limit in IOPS."""
        key, _, figure = self.path.rpartition(".")
        if self.unit not in COUNT_UNITS:
            raise ConfigError(f"assertion {self.text!r}: a curve's answers are IOPS;"
                              f" use no unit, k or M, not {self.unit}")
        return key or figure, figure if key else "iops", self.number * COUNT_UNITS[self.unit]

    def resolve(self, result: TestResult) -> Metric:
        """The metric this assertion names, for this test's result."""
        direction, rest = self._figure()
        if direction is None:
            if rest in ("iops", "bw") or _FIGURE.match(rest):
                done = [d for d, _ in result.directions()]
                if len(done) != 1:
                    raise ConfigError(
                        f"assertion {self.text!r}: test {self.test!r} did"
                        f" {' and '.join(done) or 'no I/O'}; name one, e.g."
                        f" {self.test}.{(done or ['read'])[0]}.{rest}")
                direction = done[0]
        if rest in ("iops", "bw") and direction != "sync":
            return metric(f"{direction}.{rest}")
        fig = _FIGURE.match(rest)
        if fig is None:
            raise self._unknown(rest)
        which = "lat" if direction == "sync" else (fig["which"] or "clat")
        return metric(f"{direction}.{which}_{fig['stat']}")

    def limit(self, m: Metric) -> float:
        """The limit in the metric's base unit."""
        return self.number * self._unit_of(m.kind)

    def _unit_of(self, kind: str) -> float:
        """The given unit's factor to the base unit of a ``kind`` figure (latency: ns,
        bw: B/s, iops: a count)."""
        table = TIME_UNITS if kind == "latency" else BW_UNITS if kind == "bw" else COUNT_UNITS
        if self.unit not in table:
            raise ConfigError(
                f"assertion {self.text!r}: {self.unit or 'no unit'} does not fit a"
                f" {kind} figure; use one of: {', '.join(u for u in table if u)}")
        return table[self.unit]


def check(run: Run, assertion: Assertion, source: str = "") -> Verdict:
    """Judge one assertion on a run's figures (the median over repeats)."""
    def verdict(m: Metric | None, measured: float | None, limit: float | None, passed: bool,
                note: str) -> Verdict:
        return Verdict(assertion.text, m.key if m else None, m.kind if m else None, measured,
                       limit, passed, note, source)

    answered = answer(run, assertion, source)
    if answered is not None:
        return answered
    results = run.results_by_test().get(assertion.test)
    if not results:
        names = ", ".join(run.results_by_test()) or "none"
        own = answer_names(run)
        return verdict(None, None, None, False,
                       f"has no test {assertion.test!r}: run #{run.id}'s tests are {names}"
                       + (f"; its answers are {', '.join(own)}" if own else ""))
    m = assertion.resolve(results[0])
    limit = assertion.limit(m)
    if any(r.error for r in results):
        return verdict(m, None, limit, False, "the test failed")
    est = estimate(value(r, m) for r in results)
    if est is None:
        given = percentiles_given(results[0], m)
        return verdict(m, None, limit, False, "not measured by this test" if given is None
                       else f"fio reported no p{m.field.rsplit('_p', 1)[1]} for this test:"
                       f" its percentiles are {', '.join(f'p{p:g}' for p in given)}"
                       " (a job file's percentile_list= asks fio for others)")
    passed = OPS[assertion.op](est.center, limit)
    note = "; ".join(caveats(run, results[0], m, passed))
    return verdict(m, est.center, limit, passed, note)


# an answer's kind -> the units a limit on it may be given in, per its base unit
ANSWER_UNITS = {"latency": TIME_UNITS, "bw": BW_UNITS,
                "seconds": {u: f / 1e9 for u, f in TIME_UNITS.items()}}
KIND_WORDS = {"latency": "a latency", "seconds": "a time", "bw": "a bandwidth",
              "iops": "a rate in IOPS", "tps": "transactions a second", "ops": "operations a"
              " second", "count": "a count"}


def answer_names(run: Run) -> list[str]:
    """What --assert may name of the run's kind (curve.max.iops, redis.ops_50, ...)."""
    from storbench.analysis.views import VIEWS

    return [f"{view.prefix(value)}.{name}" for view in VIEWS.values()
            if (value := view.section.of(run)) for name in view.answers(value)]


def answer(run: Run, assertion: Assertion, source: str = "") -> Verdict | None:
    """The verdict on one of a kind's answers (curve.max.iops, postgresql.tps,
    lifecycle.bind.p90: analysis/views), or None when the assertion names none: a
    test's figure, then."""
    from storbench.analysis.views import VIEWS

    for view in VIEWS.values():
        value = view.section.of(run)
        if not value or assertion.test != (prefix := view.prefix(value)):
            continue
        found = view.answers(value)
        name = assertion.path
        if name not in found and view.default_figure is not None:
            name = f"{name}.{view.default_figure}"
        a = found.get(name)
        if a is None:
            if not view.only_answers:
                return None
            raise ConfigError(f"assertion {assertion.text!r}: {prefix} has no"
                              f" {assertion.path!r}; it has: {', '.join(found) or 'nothing'}")
        table = ANSWER_UNITS.get(a.kind, COUNT_UNITS)
        if assertion.unit not in table:
            what = (f"{a.label or f'{prefix}.{name}'} is in {a.unit}" if a.unit
                    else f"{prefix}.{name} is {KIND_WORDS.get(a.kind, a.kind)}")
            raise ConfigError(
                f"assertion {assertion.text!r}: {what}; use"
                f" {', '.join(u for u in table if u) or 'no unit'}"
                + (" or no unit" if "" in table else ""))
        limit = assertion.number * table[assertion.unit]
        passed = a.value is not None and bool(OPS[assertion.op](a.value, limit))
        return Verdict(assertion.text, f"{prefix}.{name}", a.kind, a.value, limit, passed,
                       a.note, source)
    return None


def caveats(run: Run, r: TestResult, m: Metric, passed: bool) -> list[str]:
    """What a reader of the verdict must know about how its figure was measured: each
    a gist, a colon, then the detail (and no "; " inside: notes are joined by it)."""
    if run.origin == "published":
        return []  # how a study measured is not known beyond what it printed
    out = [f"not at the requested rate: achieved {s.achieved:,.1f} of"
           f" {rates.amount(s.requested)} {s.direction} {s.unit}, a saturated figure"
           for s in rates.shortfalls(r)]
    out += [f"not at the requested rate: achieved {s.achieved:,.1f} of"
            f" {rates.amount(s.requested)} {s.direction} {s.unit}, faster than asked"
            for s in rates.excesses(r)]
    syncs = m.direction == "sync" or any(
        r.options.get(k) not in (None, "", "0") for k in ("fsync", "fdatasync")) or r.options.get(
        "sync") in ("1", "sync", "dsync")
    ram = TargetFacts.of(run.environment).in_ram()
    if syncs and ram is not None:
        out.append(f"fsync on {ram[1]} is a no-op: RAM is the storage and nothing is made"
                   " durable, so this figure says nothing about a disk's sync latency")
    closed = not (r.options.get("rate_iops") or r.options.get("rate"))
    if syncs and closed and not passed and m.kind == "latency" and r.write is not None:
        flat = flat_rate(r.series.get("write"))
        cap = (f" (its writes ran at a flat {flat:,.0f}/s, the mark of an IOPS cap)"
               if flat is not None else "")
        out.append("closed loop: fio wrote as fast as the storage allowed, so on a volume"
                   " whose IOPS are capped every write waited for the cap" + cap +
                   ". An application that writes at its own pace (etcd) may not, and `--rate"
                   " N` (its writes per second) measures what it sees there")
    return out
