"""Where a series' figure changed: E-Divisive means with a t-test (Apache Otava's
algorithm and detector, Fleming et al., "Hunter", ICPE 2023, its windows that cannot hold
a change skipped: analysis/edivisive.py), kept only where the change is significant,
large enough and has runs on each side; answers kept between commands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

MAX_PVALUE = 0.001  # Otava's default: a change this unlikely to be chance
MIN_CHANGE = 0.05  # below 5% a storage figure's change is not worth a word
MIN_RUNS = 2  # runs on each side of a change: a single odd run is an outlier, not a change


@dataclass(frozen=True)
class Change:
    """A change point: the figure's level moved at ``run`` and stayed there."""

    index: int  # of the first point after the change
    run: int
    before: float  # the mean of the segment before
    after: float  # and after (up to the next change)
    pvalue: float  # that both segments have one mean (two-sided t-test)
    worse: bool  # for this metric (IOPS fell, latency rose)

    @property
    def relative(self) -> float:
        """after / before - 1: -0.29 is 29% lower."""
        return self.after / self.before - 1 if self.before else 0.0


class Cache(Protocol):
    """Answers kept between commands (`store.changes.ChangeCache`)."""

    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...


def find_changes(values: Sequence[float], runs: Sequence[int], higher_is_better: bool, *,
                 min_change: float = MIN_CHANGE, max_pvalue: float = MAX_PVALUE,
                 min_runs: int = MIN_RUNS, cache: Cache | None = None) -> list[Change]:
    """Otava's change points, kept only where each side has ``min_runs`` runs, the
    change is significant at ``max_pvalue`` and at least ``min_change`` (relative).
    With a ``cache``, an answer found before for the same values is not sought again."""
    return find_each([(values, runs, higher_is_better)], min_change=min_change,
                     max_pvalue=max_pvalue, min_runs=min_runs, cache=cache)[0]


class Ahead(Protocol):
    """Questions' values sent to be searched as they were read (`analysis.ahead.Reading`)."""

    def end(self) -> set[str]: ...  # the keys of the values sent

    def answer(self, key: str) -> list[Any] | None: ...  # their change points, as kept


Question = tuple[Sequence[float], Sequence[int], bool]  # values, their runs, higher is better


def find_each(questions: Sequence[Question], *, min_change: float = MIN_CHANGE,
              max_pvalue: float = MAX_PVALUE, min_runs: int = MIN_RUNS,
              cache: Cache | None = None, ahead: Ahead | None = None
              ) -> list[list[Change]]:
    """find_changes of each question, those not kept in ``cache`` found on two CPUs
    when there are many points to search (analysis/forked.py); those whose values
    ``ahead`` sent as they were read (their keys) searched there (analysis/ahead.py)."""
    from storbench.analysis import forked

    out: list[list[Change] | None] = []
    keys: dict[int, str] = {}  # the questions to search, by their place
    sent = ahead.end() if ahead is not None else set()
    searched: dict[str, int] = {}  # the questions searched as they were read, by key
    for at, (values, runs, higher_is_better) in enumerate(questions):
        if len(values) < 2 * min_runs:
            out.append([])
            continue
        lo, hi = min(values), max(values)
        if lo > 0 and hi / lo - 1 <= min_change:
            out.append([])  # no two stretches' means can differ by more: nothing to look for
            continue
        key = key_of(values, higher_is_better, min_change, max_pvalue, min_runs)
        known = cache.get(key) if cache else None
        if isinstance(known, list):
            out.append([Change(i, runs[i], before, after, p, worse)
                        for i, before, after, p, worse in known])
            continue
        out.append(None)
        keys[at] = key
        if key in sent and key not in searched:
            searched[key] = at
    ahead_of = set(searched.values())
    todo = [at for at in keys if at not in ahead_of]
    if todo:  # imported here, before a copy of this process is made to search
        from storbench.analysis import edivisive  # noqa: F401
    found = forked.each(lambda at: _otava(*questions[at], min_change, max_pvalue, min_runs),
                        todo, [len(questions[at][0]) for at in todo])
    for key, at in searched.items():
        assert ahead is not None
        todo.append(at)
        known = ahead.answer(key)
        found.append([Change(i, questions[at][1][i], before, after, p, worse)
                      for i, before, after, p, worse in known] if known is not None else
                     _otava(*questions[at], min_change, max_pvalue, min_runs))
    for at, changes in zip(todo, found, strict=True):
        if cache:
            cache.put(keys[at], [[c.index, c.before, c.after, c.pvalue, c.worse]
                                 for c in changes])
        out[at] = changes
    return [changes or [] for changes in out]


def key_of(values: Sequence[float], *settings: object) -> str:
    """A digest of a question to the detector: its data (as doubles: json.dumps of
    100,000 values took 30 ms), settings and version."""
    import array
    import hashlib
    import json

    from storbench.result.versions import detector_version

    digest = hashlib.sha256(json.dumps([detector_version(), *settings]).encode())
    digest.update(array.array("d", values).tobytes())
    return digest.hexdigest()


def _otava(values: Sequence[float], runs: Sequence[int], higher_is_better: bool,
           min_change: float, max_pvalue: float, min_runs: int) -> list[Change]:
    return [Change(i, runs[i], before, after, p, worse) for i, before, after, p, worse
            in found_in(values, higher_is_better, min_change, max_pvalue, min_runs)]


def found_in(values: Sequence[float], higher_is_better: bool, min_change: float,
             max_pvalue: float, min_runs: int, weak: list[Any] | None = None
             ) -> list[list[Any]]:
    """The change points of ``values`` as the cache keeps them: [index, before, after, p,
    worse] (``weak``: the values' split, when an edivisive.Splitter made it)."""
    from storbench.analysis import edivisive

    series = [float(v) for v in values]
    found = edivisive.compute_change_points(series, max_pvalue=max_pvalue,
                                            min_magnitude=min_change, weak=weak)
    # a change whose side holds fewer than min_runs runs is an outlier: dropped, and the
    # others' statistics recomputed over the segments that remain, then merged again
    tester = edivisive.Tester(max_pvalue)
    arr = edivisive.as_array(series)
    while True:
        cuts = [0, *(int(c.index) for c in found), len(series)]
        short = [i for i, c in enumerate(found)
                 if cuts[i + 1] - cuts[i] < min_runs or cuts[i + 2] - cuts[i + 1] < min_runs]
        if not short:
            break
        del found[short[0]]
        found = [edivisive.restated(tester, arr, found, i) for i in range(len(found))]
        found = edivisive.merge(found, arr, max_pvalue, min_change)
    out = []
    for c in found:
        before, after = float(c.stats.mean_1), float(c.stats.mean_2)
        out.append([int(c.index), before, after, float(c.stats.pvalue),
                    after < before if higher_is_better else after > before])
    return out
