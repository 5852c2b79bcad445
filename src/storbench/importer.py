"""Importing fio output produced elsewhere (tickets, wikis, old runs) as stored runs.

Today: fio's JSON and json+ from any fio >= 2.x, local or client/server
(``client_stats``). fio's terse and normal text output are not read yet.
Every file is parsed before anything is stored: a bad file stores nothing.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from storbench import __version__
from storbench.errors import ConfigError, FioError
from storbench.result import TestResult, parse_fio_json
from storbench.result.fio_json import parse_per_host
from storbench.store import Invocation, Store


@dataclass(frozen=True)
class Parsed:
    source: str
    text: str
    fio_version: str
    results: list[TestResult]
    per_host: dict[str, list[TestResult]]


def parse_source(source: str, text: str) -> Parsed:
    """fio's output in ``text`` (named ``source`` in errors), or ConfigError."""
    start = text.find("{")
    if start == -1:
        kind = "terse" if text.lstrip().startswith("3;") else "text"
        raise ConfigError(
            f"{source}: no fio JSON found; importing fio's {kind} output is not supported"
            " yet: rerun fio with --output-format=json+ (or json)")
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
    return Parsed(source, text, version, results, per_host)


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
            environment={"imported_from": p.source, "fio_version": p.fio_version},
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
