"""The versions of what made an answer, read cheaply (for the keys of kept answers:
store/changes.py)."""

from __future__ import annotations

from functools import cache


@cache  # (listing the import path's folders took 0.1-0.2 ms, and each answer's key asks)
def installed_version(dist: str, package: str) -> str | None:
    """The version of the installed distribution ``dist`` from its dist-info's name (beside
    ``package``, else in the import path), without importlib.metadata, whose import takes
    ~0.1 s; None when it is not found once and once only. For cache keys: an answer a
    command keeps is kept for one version of what made it."""
    import importlib.util
    import os
    import sys
    from pathlib import Path

    spec = importlib.util.find_spec(package)
    places = [str(Path(p).parent) for p in (spec.submodule_search_locations or [])
              ] if spec is not None else []
    if spec is not None and spec.origin:
        places.append(str(Path(spec.origin).parent.parent))
    prefix = dist.replace("-", "_") + "-"
    for place in dict.fromkeys([*places, *sys.path]):
        try:
            found = [n for n in os.listdir(place or ".")
                     if n.startswith(prefix) and n.endswith(".dist-info")]
        except OSError:
            continue
        if len(found) == 1:
            return found[0][len(prefix):-len(".dist-info")]
    return None


@cache
def detector_version() -> str:
    """apache-otava's version (importing importlib.metadata to ask took 0.1 s of a 0.5 s
    answer: the dist-info's name is read instead)."""
    found = installed_version("apache-otava", "otava")
    if found is None:
        from importlib.metadata import version

        found = version("apache-otava")
    return found
