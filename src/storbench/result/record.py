"""The run record: what a run (or an import) was, as the store keeps it and every
renderer reads it.

A ``Run`` holds its target and environment, the settings it was asked for, each fio
invocation verbatim, the typed results parsed from them, and what analysis judged
once when the run finished: warnings, verdicts (suite profile and ``--assert``)
and regressions against a ``--baseline``. Renderers read these; they never judge
again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from storbench.result.sections import ROUNDS

if TYPE_CHECKING:  # only named in annotations: `list` and `rm` never load the results
    from storbench.result.model import TestResult

STATUSES = ("running", "completed", "failed", "interrupted", "crashed")
BLANK_DEVICE = "nothing (blank)"  # a block device's found_on_it: blkid found nothing


@dataclass(frozen=True)
class StoredTest:
    ordinal: int
    invocation: int  # ordinal of the fio invocation that produced it
    result: TestResult
    repeat: int = 0  # 0-based repetition (--repeat N)
    host: str = ""  # "" = the test's result (all hosts merged); else one host's share


@dataclass(frozen=True)
class Invocation:
    """One fio invocation: the job text it ran and fio's output, verbatim."""

    ordinal: int
    job_text: str
    raw_json: str
    returncode: int | None
    stderr: str
    wall_s: float | None


@dataclass(frozen=True)
class Warning:
    """A reason not to trust a figure as it stands (analysis/warnings.py makes them)."""

    kind: str  # one of analysis.warnings.Kind
    test: str
    message: str  # what was seen, why it skews the figure, what to do
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "test": self.test, "message": self.message,
                "details": self.details}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Warning:
        return cls(str(d["kind"]), str(d["test"]), str(d["message"]), dict(d["details"]))


@dataclass(frozen=True)
class Verdict:
    """A rule judged on a run: its suite's profile or an assertion (``--assert``)."""

    assertion: str  # the rule as written, e.g. "etcd.fdatasync.p99 < 10ms"
    metric: str | None  # the metric key judged ("sync.lat_p99"), None when unresolved
    kind: str | None  # the unit family of measured and limit: iops, bw or latency
    measured: float | None  # base units; None when the test or figure is missing
    limit: float | None
    passed: bool
    note: str  # why it could not be checked, or ""
    source: str = ""  # where the rule comes from (a suite profile), "" for the user's

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(**d)


@dataclass(frozen=True)
class Regression:
    """One headline figure against a baseline run (``--baseline``)."""

    figure: str  # "randread read IOPS"
    kind: str  # iops, bw or latency
    baseline_run: int
    baseline_name: str
    baseline_value: float  # base units
    value: float
    worse_by: float  # fraction; negative = better
    noise: float | None  # the ratio's 95% CI half-width; None without repeats
    max_regression: float  # the limit, a fraction
    failed: bool
    # how the baseline's test of the same name differs ("bs 64.0 KiB vs 4.0 KiB"): two
    # workloads, not two storages, so failed whatever the ratio ("" when alike)
    unlike: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Regression:
        return cls(**d)

    @property
    def said(self) -> str:
        """In a few words, what failed: for exit code 3's line."""
        if self.unlike:
            return f"{self.figure}: another workload than #{self.baseline_run}'s ({self.unlike})"
        return f"{self.figure} {100 * self.worse_by:.1f}% worse than #{self.baseline_run}"


@dataclass(frozen=True)
class Run:
    id: int
    uid: str
    created_at: str
    finished_at: str | None
    status: str
    origin: str
    label: str | None
    suite: str
    target: str
    error: str | None
    environment: dict[str, Any]
    settings: dict[str, Any]
    storbench_version: str
    fio_version: str | None
    tags: dict[str, str] = field(default_factory=dict)
    tests: list[StoredTest] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    warnings: list[Warning] = field(default_factory=list)
    # None: the run was stored before storbench kept verdicts (see pipeline.records)
    verdicts: list[Verdict] | None = None
    regressions: list[Regression] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # e.g. "metadata_probe"
    series: str | None = None  # the history it belongs to (storbench history)

    def results_by_test(self) -> dict[str, list[TestResult]]:
        """Each test's results, one per repeat, in the order the tests first ran. A test
        run in rounds until steady state (``run --precondition``) gives its window's."""
        window = {name: set(entry.get("window") or [])
                  for entry in (ROUNDS.of(self) or {}).values()
                  for name in entry.get("results") or []}
        out: dict[str, list[TestResult]] = {}
        for t in self.tests:
            if t.host or (t.result.name in window and t.repeat not in window[t.result.name]):
                continue
            out.setdefault(t.result.name, []).append(t.result)
        return out

    def results_by_host(self) -> dict[str, dict[str, list[TestResult]]]:
        """Client/server runs: {test: {host: results, one per repeat}}; {} for local runs."""
        out: dict[str, dict[str, list[TestResult]]] = {}
        for t in self.tests:
            if t.host:
                out.setdefault(t.result.name, {}).setdefault(t.host, []).append(t.result)
        return out

    @property
    def repeats(self) -> int:
        return max((t.repeat for t in self.tests), default=0) + 1

    @property
    def name(self) -> str:
        """How the run is named in tables: its label, else '#id'."""
        return self.label or f"#{self.id}"

    @property
    def judged(self) -> list[Verdict]:
        """Its verdicts ([] for a run stored before verdicts were kept and not judged)."""
        return self.verdicts or []

    @property
    def failed_checks(self) -> list[str]:
        """What failed among its verdicts and regressions, in words (for exit code 3)."""
        failed = [v.assertion for v in self.judged if not v.passed]
        failed += [r.said for r in self.regressions if r.failed]
        return failed
