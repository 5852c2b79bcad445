"""storbench: storage benchmarks driven by fio, with history, comparison and verdicts."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("storbench")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"
