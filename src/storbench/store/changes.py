"""Change points already found, kept between commands (`storbench history` over a long
series answers without finding them again).

A file per question, named by a digest of everything the answer depends on (the
figure's values, the detector's settings and version), so an answer is never stale: a
series with one more run asks another question. In ``$XDG_CACHE_HOME/storbench/changes``
(else ``~/.cache/storbench/changes``), a directory only its user may enter; the oldest
answers go when there are more than ``KEEP``. Nothing here is needed: a cache that cannot
be read or written is left alone and the answer computed.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storbench.store import Store

KEEP = 4000


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "storbench" / "changes"


class ChangeCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_dir()

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
        if not self._mine():
            return None
        try:
            return json.loads((self.root / key).read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: Any) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._mine():
                return
            tmp = self.root / f".{key}.{os.getpid()}"
            tmp.write_text(json.dumps(value))
            tmp.replace(self.root / key)
            self._prune()
        except OSError:
            return

    def _prune(self) -> None:
        files = list(self.root.iterdir())
        if len(files) <= KEEP:
            return
        by_age = sorted(files, key=lambda p: p.stat().st_mtime)
        for old in by_age[:len(files) - KEEP * 3 // 4]:
            old.unlink(missing_ok=True)


def no_change_key(store: Store, name: str, run_id: int, limit: float) -> str:
    """The key of `check --no-change`'s answer for run ``run_id`` of series ``name``: a
    digest of what it depends on, the series' completed runs up to the run (each one's
    id and uid: a stored run's figures and answers never change, and an id used again
    has another uid), the limit, and the versions of storbench (its words) and of the
    detector."""
    import hashlib

    from storbench.result.versions import detector_version, installed_version

    runs = ("string_agg(r.id || '@' || r.uid, ',' ORDER BY r.created_at, r.id)"
            if store.postgres else "group_concat(r.id || '@' || r.uid, ',')")
    (ids,) = store.db.execute(
        f"SELECT {runs} FROM (SELECT r.id, r.uid, r.created_at FROM run_series s"
        " JOIN runs r ON r.id = s.run_id WHERE s.name = ? AND r.status = 'completed'"
        " AND (r.created_at, r.id) <= (SELECT created_at, id FROM runs WHERE id = ?)"
        " ORDER BY r.created_at, r.id) r", (name, run_id)).fetchone()
    digest = hashlib.sha256(json.dumps(
        ["check --no-change", installed_version("storbench", "storbench"),
         detector_version(), name, run_id, limit]).encode())
    digest.update((ids or "").encode())
    return digest.hexdigest()
