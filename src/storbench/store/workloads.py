"""Recorded workloads (`storbench record`, `run --replay`): an application's I/O as fio's
iolog, kept beside the runs in SQLite or PostgreSQL alike."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storbench.errors import ConfigError

if TYPE_CHECKING:
    from storbench.store.sqlite import Store


@dataclass(frozen=True)
class Workload:
    name: str
    created_at: str
    method: str  # how it was captured: "strace (file level)"
    facts: dict[str, Any]  # counts, files, skipped, depth, duration, command, environment
    size: int  # bytes stored (the compressed iolog)

    def iolog(self, store: Store) -> str:
        """Its trace: fio's iolog as `record` stored it (workload/trace.Trace.from_iolog
        reads and checks it)."""
        row = store.db.execute("SELECT trace FROM workloads WHERE name = ?",
                               (self.name,)).fetchone()
        return zlib.decompress(bytes(row[0])).decode()


def save(store: Store, name: str, created_at: str, method: str, facts: dict[str, Any],
         iolog: str, *, replace: bool = False) -> int:
    """Keep the trace ``iolog`` as ``name``; the bytes stored. ConfigError when the name
    is taken (unless ``replace``)."""
    blob = zlib.compress(iolog.encode(), 6)
    with store._tx() as db:
        if db.execute("SELECT 1 FROM workloads WHERE name = ?", (name,)).fetchone():
            if not replace:
                raise ConfigError(f"a workload named {name!r} is stored already: pass"
                                  " --replace, or another name")
            db.execute("DELETE FROM workloads WHERE name = ?", (name,))
        db.execute("INSERT INTO workloads VALUES (?, ?, ?, ?, ?)",
                   (name, created_at, method, json.dumps(facts), blob))
    return len(blob)


def _workload(row: Any) -> Workload:
    return Workload(row[0], row[1], row[2], json.loads(row[3]), int(row[4]))


_COLUMNS = "name, created_at, method, facts, length(trace)"


def get(store: Store, name: str) -> Workload:
    row = store.db.execute(f"SELECT {_COLUMNS} FROM workloads WHERE name = ?",
                           (name,)).fetchone()
    if row is None:
        known = [w.name for w in listed(store)]
        raise ConfigError(f"no recorded workload {name!r} in {store.path}"
                          + (f" (there are: {', '.join(known)})" if known else
                             ": record one with `storbench record NAME --dir DIR -- COMMAND`"))
    return _workload(row)


def listed(store: Store) -> list[Workload]:
    return [_workload(r) for r in store.db.execute(
        f"SELECT {_COLUMNS} FROM workloads ORDER BY name", ())]


def delete(store: Store, name: str) -> None:
    get(store, name)
    with store._tx() as db:
        db.execute("DELETE FROM workloads WHERE name = ?", (name,))


def copy(src: Store, dst: Store) -> tuple[list[str], list[str]]:
    """The recorded workloads of ``src`` that ``dst`` lacks (by name): (copied, there
    already, not replaced)."""
    have = {w.name for w in listed(dst)}
    copied, already = [], []
    for w in listed(src):
        if w.name in have:
            already.append(w.name)
            continue
        save(dst, w.name, w.created_at, w.method, w.facts, w.iolog(src))
        copied.append(w.name)
    return copied, already
