"""storbench: storage benchmarks driven by fio, with history, comparison and verdicts."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__`` from the installed package, looked up on first use (reading the
    package metadata costs ~70 ms of every start-up otherwise)."""
    if name != "__version__":
        raise AttributeError(f"module 'storbench' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("storbench")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found

