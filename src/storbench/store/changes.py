"""Change points already found, kept between commands (`storbench history` over a long
series answers without finding them again).

A file per question, named by a digest of everything the answer depends on (the
figure's values, the detector's settings and version), so an answer is never stale: a
series with one more run asks another question. In ``$XDG_CACHE_HOME/storbench/changes``
(else ``~/.cache/storbench/changes``), a directory only its user may enter; the oldest
answers go when there are more than ``KEEP``. A run or import (and `db copy`, `series`,
`rm`) keeps its series' answers in the store too (table ``kept_answers``, one a series
and question, written only inside ``sharing``), for a machine whose own cache lacks
them. Nothing here is needed: a cache that cannot be read or written is left alone and
the answer computed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storbench.store import Store

KEEP = 4000


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "storbench" / "changes"


class ChangeCache:
    """Answers kept in this user's cache directory; with a ``store``, also those the
    store keeps for every machine (a team's store: the run or import that added a
    series' latest run kept its answers there, in a ``sharing`` block), read when this
    machine has none (then kept here too)."""

    def __init__(self, root: Path | None = None, store: Store | None = None) -> None:
        self.root = root or cache_dir()
        self.store = store
        # the directory's answers by question (a key's part before its first '-') and
        # how many files it holds: listed once (_listed), then kept up to date here
        self._held: dict[str, set[str]] | None = None
        self._files = 0

    def _mine(self) -> bool:
        """The directory is this user's own and nobody else's to write (an answer planted
        by another user would be a lie told in our name)."""
        try:
            st = self.root.lstat()
        except OSError:
            return False
        return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
                and not st.st_mode & 0o077)

    def get(self, key: str) -> Any:
        if self._mine():
            try:
                return json.loads((self.root / key).read_text())
            except (OSError, ValueError):
                pass
        text = shared_answer(self.store, key) if self.store is not None else None
        try:
            found = json.loads(text) if text is not None else None
        except ValueError:
            return None
        if found is not None:  # asked here again: read here
            self._put_here(key, found, None)
        return found

    def put(self, key: str, value: Any, *, superseding: str | None = None,
            question: str | None = None) -> None:
        """Keep ``value`` under ``key``; with ``superseding``, the answers kept under keys
        ``superseding-...`` go (an earlier answer to the same question about a series
        that has a run more: 6.5 MB at 100,000 runs, kept once, not once a run). In a
        ``sharing`` block, kept in the store too, in place of the store's answer to the
        same ``question`` (else ``superseding``): the store keeps one a question."""
        self._put_here(key, value, superseding)
        if self.store is not None and self.store in _SHARING:
            share_answer(self.store, key, question or superseding or key, value)

    def _put_here(self, key: str, value: Any, superseding: str | None) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._mine():
                return
            tmp = self.root / f".{key}.{os.getpid()}"
            tmp.write_bytes(json.dumps(value).encode())  # (6.5 MB as text: twice as long)
            tmp.replace(self.root / key)
            held = self._listed()
            mine = held.setdefault(key.split("-", 1)[0], set())
            self._files += key not in mine
            mine.add(key)
            before = held.get(superseding, set()) if superseding else set()
            for old in before - {key}:
                (self.root / old).unlink(missing_ok=True)
                before.discard(old)
                self._files -= 1
            if self._files > KEEP:
                self._prune()
        except OSError:
            return

    def _listed(self) -> dict[str, set[str]]:
        """The directory's answers by question, listed once for this cache: keeping 100
        answers in a directory of 4,000 took 5.5 ms each when each listed it (0.55 s of
        a cold `history` over 50 series). Answers another process keeps meanwhile are not
        seen: one it superseded is left for _prune."""
        if self._held is None:
            self._held, self._files = {}, 0
            for name in os.listdir(self.root):
                self._held.setdefault(name.split("-", 1)[0], set()).add(name)
                self._files += 1
        return self._held

    def _prune(self) -> None:
        """The oldest answers go, down to 3/4 of KEEP."""
        self._held = None  # listed again when next needed
        files = list(self.root.iterdir())
        if len(files) <= KEEP:
            return
        by_age = sorted(files, key=lambda p: p.stat().st_mtime)
        for old in by_age[:len(files) - KEEP * 3 // 4]:
            old.unlink(missing_ok=True)


def series_runs(store: Store, name: str) -> str:
    """A digest of series ``name``'s completed runs: of its version (schema's
    series_versions), which the database's triggers make anew whenever a completed run
    joins the series or leaves it, whoever changes it (a stored run's figures and answers
    never change). One row read: the digest of 100,000 runs' ids and uids, which it
    replaces, took 40 ms on SQLite and 95 ms on PostgreSQL of every answer. A name no
    completed run was ever in: the empty digest. An answer about the runs up to one run
    is kept under its version too (answer_key's ``up_to``): found again once the series
    changes, where the runs up to it may not have."""
    row = store.db.execute("SELECT version FROM series_versions WHERE name = ?",
                           (name,)).fetchone()
    return _digest(row[0] if row else None)


def each_series_runs(store: Store, names: list[str]) -> dict[str, str]:
    """series_runs of each of ``names``, in one query."""
    found: dict[str, str] = {}
    for at in range(0, len(names), 500):  # (SQLite's limit of parameters: 32,766)
        some = names[at:at + 500]
        found.update((str(name), str(version)) for name, version in store.db.execute(
            "SELECT name, version FROM series_versions WHERE name IN ("
            + ", ".join("?" for _ in some) + ")", some))
    return {name: _digest(found.get(name)) for name in names}


def _digest(ids: str | None) -> str:
    return hashlib.sha256((ids or "").encode()).hexdigest()


def answer_key(store: Store, question: list[Any], name: str, up_to: int | None = None,
               runs: str | None = None) -> str:
    """The key of an answer about series ``name`` (its runs up to ``up_to``): a digest
    of the ``question`` (the command and its settings), the versions of storbench (its
    words) and of the detector, and the series' runs (series_runs; ``runs`` when the
    caller has it already)."""
    from storbench.result.versions import detector_version, installed_version

    runs = runs or series_runs(store, name)
    return hashlib.sha256(json.dumps(
        [*question, installed_version("storbench", "storbench"), detector_version(), name,
         up_to, runs]).encode()).hexdigest()


def question_key(question: list[Any], name: str) -> str:
    """A question about series ``name`` whatever its runs: the beginning of its answers'
    keys, so that a newer answer supersedes the one before (ChangeCache.put)."""
    return "q" + hashlib.sha256(json.dumps([*question, name]).encode()).hexdigest()[:24]


def latest_runs(store: Store, name: str, run_id: int) -> str | None:
    """series_runs of series ``name`` when run ``run_id`` is its latest (its runs up to it
    are all of them): the digest its whole history is kept under too, read once for both
    (`check --no-change` after a run); None for an older run."""
    from storbench.store.series import series_last

    return series_runs(store, name) if series_last(store, name) == run_id else None


def no_change_key(store: Store, name: str, run_id: int, limit: float,
                  runs: str | None = None) -> str:
    """The key of `check --no-change`'s answer for run ``run_id`` of series ``name``:
    the series' completed runs up to the run (``runs``: their digest, latest_runs's for
    the series' latest run), and the limit (answer_key)."""
    return answer_key(store, ["check --no-change", limit], name, run_id, runs)


_SHARING: weakref.WeakSet[Store] = weakref.WeakSet()  # stores in a `sharing` block


@contextmanager
def sharing(store: Store) -> Iterator[None]:
    """Answers kept inside the block (by a ChangeCache of ``store``) are kept in the
    store too, for every machine that reads it: the run or import that added a series'
    run finds them as it ends (cli/trend.refresh); commands that only read never write
    to the store."""
    _SHARING.add(store)
    try:
        yield
    finally:
        _SHARING.discard(store)


def shared_answer(store: Store, key: str) -> str | None:
    """The answer the store keeps under ``key`` (JSON), or None: none, or a store that
    cannot say (an older one, a server that refuses: the answer is found instead)."""
    try:
        row = store.db.execute("SELECT answer FROM kept_answers WHERE key = ?",
                               (key,)).fetchone()
    except store.errors:
        return None
    return str(row[0]) if row is not None else None


def share_answer(store: Store, key: str, question: str, value: Any) -> None:
    """Keep ``value`` in the store under ``key``, in place of its answers to
    ``question`` (a failure changes nothing: the answer is only a cache)."""
    from storbench.store.sqliteopen import now_iso

    try:
        with store._tx() as db:
            db.execute("DELETE FROM kept_answers WHERE question = ?", (question,))
            # (two runs of a series ending at once may keep the same answer)
            db.execute("INSERT INTO kept_answers (key, question, created_at, answer)"
                       " VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET"
                       " question = excluded.question, created_at = excluded.created_at,"
                       " answer = excluded.answer",
                       (key, question, now_iso(), json.dumps(value)))
    except store.errors:
        return
