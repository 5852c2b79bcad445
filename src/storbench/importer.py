"""Importing fio output produced elsewhere (tickets, wikis, old runs) as stored runs.

fio's JSON and json+ from any fio >= 2.x, local or client/server (``client_stats``);
terse (version 3); normal text output of fio 2.x and 3.x, also pasted inside other
text (result/fio_text.py). A file holding several forms is read from its JSON, the
most complete. Every file is parsed before anything is stored: a bad file stores
nothing.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from storbench import __version__
from storbench.errors import ConfigError, FioError
from storbench.result import TestResult, fio_text, parse_fio_json
from storbench.result.fio_json import parse_per_host, results_of
from storbench.store import Invocation, Store


@dataclass(frozen=True)
class Parsed:
    source: str
    text: str
    fio_version: str
    results: list[TestResult]
    per_host: dict[str, list[TestResult]]
    kind: str = "json"  # json, terse or normal


def parse_source(source: str, text: str) -> Parsed:
    """fio's output in ``text`` (named ``source`` in errors), or ConfigError."""
    start = text.find("{")
    if start != -1 and ('"jobs"' in text or '"client_stats"' in text):
        return _parse_json(source, text, start)
    try:
        if fio_text.looks_like_terse(text):
            out = fio_text.parse_terse(text)
        elif fio_text.looks_like_text(text):
            out = fio_text.parse_text(text)
        else:
            raise ConfigError(f"{source}: no fio output found (fio's JSON, terse output, or"
                              " job results such as 'name: (groupid=0, jobs=1): err= 0');"
                              " nothing was imported")
        version, results = results_of({"fio version": out.fio_version, "jobs": out.jobs})
    except fio_text.TextFormatError as exc:
        raise ConfigError(f"{source}:{exc.line}: {exc}; nothing was imported") from None
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
        raise ConfigError(f"{source}: damaged fio output ({type(exc).__name__}: {exc});"
                          " nothing was imported") from None
    return Parsed(source, text, version, results, {}, out.kind)


def _parse_json(source: str, text: str, start: int) -> Parsed:
    try:
        json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        line = text.count("\n", 0, exc.pos) + 1
        raise ConfigError(f"{source}:{line}: fio's JSON is cut short or damaged ({exc.msg});"
                          " nothing was imported") from None
    try:
        version, results = parse_fio_json(text)
        per_host = parse_per_host(text)
    except (FioError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: not fio's JSON output ({exc}); nothing was imported"
                          ) from None
    if not results:
        raise ConfigError(f"{source}: fio's JSON holds no job; nothing was imported")
    return Parsed(source, text, version, results, per_host, "json")


# What each form of fio's output does not hold (stored with the imported run).
ABSENT = {
    "json": [],
    "terse": ["histogram bins", "job options", "I/O counts (IOPS x runtime stand in)",
              "trim figures", "sync latency"],
    "normal": ["histogram bins (percentiles of several jobs are not merged)",
               "job options other than rw, bs, ioengine, iodepth",
               "latency sample counts (the I/O counts stand in)"],
}


def import_runs(
    store: Store, sources: list[tuple[str, str]], *, label: str | None = None,
    tags: dict[str, str] | None = None,
) -> list[int]:
    """Store each (name, text) as a run with origin "imported"; returns the run ids."""
    parsed = [parse_source(name, text) for name, text in sources]  # all, before storing
    ids = []
    for p in parsed:
        run_id = store.begin_run(
            uid=secrets.token_hex(6), suite="imported", target=p.source,
            environment={"imported_from": p.source, "fio_version": p.fio_version,
                         "imported_format": p.kind, "absent": ABSENT[p.kind]},
            settings={"suite": "imported"}, storbench_version=__version__,
            fio_version=p.fio_version or None, label=label, tags=tags, origin="imported")
        numbered = list(enumerate(p.results))
        n = len(numbered)
        host_rows = [(n + i, host, r) for i, (host, r) in enumerate(
            (h, r) for h, rs in p.per_host.items() for r in rs)]
        store.add_invocation(run_id, Invocation(0, "", p.text, None, "", None), numbered,
                             per_host=host_rows)
        failed = [r.name for r in p.results if r.error]
        store.finish_run(run_id, "failed" if failed else "completed",
                         f"fio reported errors in: {', '.join(failed)}" if failed else None)
        ids.append(run_id)
    return ids
