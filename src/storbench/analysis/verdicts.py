"""A run's verdicts: its suite's profile (etcd: fdatasync p99 < 10 ms) and the
user's own assertions, all through the assertion mechanism."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from storbench.analysis.assertions import Assertion, check
from storbench.errors import ConfigError
from storbench.result.record import Run, Verdict
from storbench.workload.suites import SUITES


def profile_assertions(run: Run) -> list[tuple[Assertion, str]]:
    """The suite profile's assertions for this run, as its settings adjust them."""
    suite = SUITES.get(run.suite)
    if suite is None or not suite.profiles or run.settings.get("curve"):
        return []  # a curve's steps are judged by its answers (curve.KEY.iops)
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
            source += f"; open loop at {run.settings.get('rate_iops'):,.0f} writes/s"
        out.append((a, source))
    return out


def evaluate(run: Run, extra: list[Assertion] | None = None, *,
             unresolvable: Literal["raise", "fail"] = "raise") -> list[Verdict]:
    """Profile verdicts, then the assertions stored with the run, then ``extra``.

    An assertion the run's figures cannot answer as written (a mixed test with no
    direction named) raises ConfigError, or with ``unresolvable="fail"`` (judging a
    run that just finished: its figures are stored either way) is a failed verdict
    that says why.
    """
    rules = [*profile_assertions(run),
             *((Assertion.parse(t), "") for t in run.settings.get("assertions") or []),
             *((a, "") for a in extra or [])]
    verdicts = []
    for a, source in rules:
        try:
            verdicts.append(check(run, a, source))
        except ConfigError as exc:
            if unresolvable == "raise":
                raise
            verdicts.append(Verdict(a.text, None, None, None, None, False, str(exc), source))
    return verdicts


def with_verdicts(run: Run) -> Run:
    """The run as stored; a completed run stored before storbench kept verdicts
    (schema 4 and older) is judged now, the one case they cannot be read from the
    store. A run that did not complete has none."""
    if run.verdicts is not None or run.status != "completed":
        return run
    return replace(run, verdicts=evaluate(run, unresolvable="fail"))
