"""Answers about a series kept between commands (`history NAME`, its `--metric`, each
series' in `history`): read when the same question is asked of the same runs, found and
kept otherwise. Each is kept under a digest of the question and of the series' runs
(store/changes.py), so it is never stale; the answer to the same question of a run less
is superseded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from storbench.analysis import history as hist
from storbench.store import Store
from storbench.store.changes import ChangeCache, answer_key, each_series_runs, question_key


def read_kept(store: Store, question: list[Any], series: str, runs: str | None = None
              ) -> list[hist.History] | None:
    """The answer kept to ``question`` about ``series`` (``runs``: the digest of its runs,
    when the caller has it), or None."""
    return _read(ChangeCache(store=store), _key(store, question, series, runs))


def _key(store: Store, question: list[Any], series: str, runs: str | None) -> str:
    return f"{question_key(question, series)}-{answer_key(store, question, series, runs=runs)}"


def kept(store: Store, question: list[Any], series: str,
         find: Callable[[], list[hist.History]], runs: str | None = None,
         keep: bool = True) -> list[hist.History]:
    """The answer to ``question`` about ``series`` as kept under a digest of it and of
    the series' runs (store/changes.answer_key; ``runs``: their digest, when the caller
    has it); else ``find``'s, kept (not, where not ``keep``)."""
    return kept_each(store, question, [series], lambda names: {n: find() for n in names},
                     {series: runs} if runs else None, keep)[series]


def kept_each(store: Store, question: list[Any], names: list[str],
              find: Callable[[list[str]], dict[str, list[hist.History]]],
              runs: dict[str, str] | None = None, keep: bool = True
              ) -> dict[str, list[hist.History]]:
    """``kept`` of each of the series ``names`` (``runs``: the digests of their runs,
    when the caller has them): those whose answers nobody kept found together by
    ``find`` (given their names: `history` over a store of many series reads their
    figures at once), and kept where ``keep``."""
    cache = ChangeCache(store=store)  # this machine's, else the store's (store/changes.py)
    runs = runs or each_series_runs(store, names)
    keys = {name: _key(store, question, name, runs[name]) for name in names}
    out = {name: found for name in names if (found := _read(cache, keys[name])) is not None}
    for name, found in find([name for name in names if name not in out]).items():
        if keep:
            _keep(cache, keys[name], question, name, found)
        out[name] = found
    return out


def _keep(cache: ChangeCache, key: str, question: list[Any], series: str,
          found: list[hist.History]) -> None:
    """Keep ``found``, the answer to ``question`` about ``series``, under ``key``."""
    shared: list[list[Any]] = []
    # each list given (by id: all alive in ``stored``) and its column: a test's figures
    # share their runs' lists, compared once (runs of 5 tests: ~0.1 s of 100,000 runs'
    # lists compared again for each figure)
    given: dict[int, int] = {}

    def column(values: list[Any]) -> int:
        if (at := given.get(id(values))) is None:
            at = next((i for i, c in enumerate(shared) if c == values), None)
            if at is None:
                shared.append(values)
                at = len(shared) - 1
            given[id(values)] = at
        return at

    stored = [h.stored() for h in found]
    histories = [{**h, "runs": column(h["runs"]), "ats": column(h["ats"]),
                  "values": packed(h["values"], "d")} for h in stored]
    cache.put(key, {"columns": [packed(c, "s" if c and isinstance(c[0], str) else "q")
                                for c in shared], "histories": histories},
              superseding=question_key(question, series))  # of a run less


def packed(values: list[Any], code: str) -> dict[str, Any]:
    """A column as kept: run ids ("q") and figures ("d") as the bytes of an array of
    64-bit integers or doubles, in base64; times ("s") joined by newlines. 100,000 runs'
    figures as JSON numbers took 0.1 s to write and as long to read. A column that is
    not all of its kind ("l") is kept as a list."""
    import array
    import base64

    try:
        if code == "s":
            text = "\n".join(values)
            if values and (text.count("\n") != len(values) - 1 or not text):
                raise ValueError("a time with a newline, or one time of nothing")
            return {"s": text}
        return {code: base64.b64encode(array.array(code, values).tobytes()).decode("ascii")}
    except (TypeError, ValueError, OverflowError):
        return {"l": values}


def unpacked(kept: dict[str, Any]) -> list[Any]:
    """A column as `packed` keeps it (KeyError, TypeError, ValueError: not one)."""
    import array
    import base64

    ((code, text),) = kept.items()
    if code == "l" and isinstance(text, list):
        return text
    if code == "s":
        return text.split("\n") if text else []
    if code not in ("q", "d"):
        raise ValueError(code)
    column = array.array(code)
    column.frombytes(base64.b64decode(text, validate=True))
    return column.tolist()


def _read(cache: ChangeCache, key: str) -> list[hist.History] | None:
    """The histories kept under ``key``; None: none kept, or not one of ours."""
    got = cache.get(key)
    if not isinstance(got, dict):
        return None
    try:
        # figures of the same runs share their runs' columns
        columns = [unpacked(c) for c in got["columns"]]
        return [hist.History.of_stored({**h, "runs": columns[h["runs"]],
                                        "ats": columns[h["ats"]],
                                        "values": unpacked(h["values"])})
                for h in got["histories"]]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None
