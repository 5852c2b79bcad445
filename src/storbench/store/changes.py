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
from typing import Any

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
