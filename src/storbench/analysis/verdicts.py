"""A run's verdicts: its suite's profile (etcd: fdatasync p99 < 10 ms) and the
user's own assertions, all through the assertion mechanism."""

from __future__ import annotations

from storbench.analysis.assertions import Assertion, Outcome, check
from storbench.errors import ConfigError
from storbench.store import Run
from storbench.workload.suites import SUITES


def profile_assertions(run: Run) -> list[tuple[Assertion, str]]:
    """The suite profile's assertions for this run, as its settings adjust them."""
    suite = SUITES.get(run.suite)
    if suite is None or not suite.profiles:
        return []
    name = run.settings.get("profile") or next(iter(suite.profiles))
    if name not in suite.profiles:
        raise ConfigError(f"suite {suite.name} has no profile {name!r};"
                          f" choose one of: {', '.join(suite.profiles)}")
    profile = suite.profiles[name]
    tests = run.results_by_test()
    out = []
    for text in profile.assertions:
        a, source = Assertion.parse(text), f"{name} profile: {profile.source}"
        threshold = run.settings.get("threshold_ms")
        if threshold is not None:
            a, source = a.with_limit(float(threshold), "ms"), f"--threshold {threshold:g} ms"
        if f"{a.test}_rated" in tests:  # --rate: judge the open-loop run, as etcd writes
            a = a.with_test(f"{a.test}_rated")
            source += f"; open loop at {run.settings.get('rate_iops'):g} writes/s"
        out.append((a, source))
    return out


def evaluate(run: Run, extra: list[Assertion] | None = None) -> list[Outcome]:
    """Profile verdicts, then the assertions stored with the run, then ``extra``."""
    outcomes = [check(run, a, source) for a, source in profile_assertions(run)]
    stored = [Assertion.parse(t) for t in run.settings.get("assertions") or []]
    outcomes += [check(run, a) for a in [*stored, *(extra or [])]]
    return outcomes
