"""A series' name: checked when a user gives one (``--series``), made when nobody does
(the suite @ where its I/O went: analysis/history.py follows each series' runs)."""

from __future__ import annotations

import hashlib

from storbench.errors import ConfigError
from storbench.result.facts import TargetFacts


def check_series_name(name: str | None) -> None:
    """ConfigError for a series name nobody could type or see (empty, control
    characters) or that reads as a run (digits, 'last'); None is no name (the run's own
    series)."""
    if name is not None and (not name.strip() or any(not c.isprintable() for c in name)):
        raise ConfigError(f"a series name must be printable text, not {name!r}")
    if name is not None and (name.isdigit() or name == "last"):
        raise ConfigError(f"a series name of digits alone, or 'last', reads as a run: {name!r}"
                          f" would be run #{name} to `check {name} --assert` and the series"
                          f" to `check {name} --no-change`; name it in words"
                          f" (e.g. {'nightly-' + name!r})")


def auto_series(suite: str, target: str, facts: TargetFacts) -> str:
    """The series a run joins when nobody names one: its suite @ where its I/O went
    (hosts: which ones, in any order; beyond three, the first and a digest of all)."""
    if facts.place == "here" and facts.hostname:
        return f"{suite}@{facts.hostname}:{target}"
    if facts.place == "pods" and facts.kube_context:
        return f"{suite}@{facts.kube_context}:{target}"
    if facts.place == "hosts" and facts.hosts:
        hosts = sorted(facts.hosts)
        digest = hashlib.sha256("\n".join(hosts).encode()).hexdigest()[:6]
        named = (", ".join(hosts) if len(hosts) <= 3 else
                 f"{hosts[0]} and {len(hosts) - 1} more #{digest}")
        return f"{suite}@{target} ({named})"
    return f"{suite}@{target}"
