"""How fio runs. An executor returns fio's raw JSON or raises an error with fio's message.

The names below are loaded on first use: the children storbench starts per run
(``python -m storbench.execute.scratchops``, ``…proctree``; six or more a run) import
only their own module, not the executors (~45 ms each otherwise), nor ``typing``."""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms a child)
if TYPE_CHECKING:
    from typing import Any

    from storbench.execute.base import Execution, Executor, FioJob, Progress
    from storbench.execute.fio import FioBinary, find_fio
    from storbench.execute.local import LocalExecutor
    from storbench.execute.signals import SignalGuard

_WHERE = {"Execution": "base", "Executor": "base", "FioJob": "base", "Progress": "base",
          "FioBinary": "fio", "find_fio": "fio", "LocalExecutor": "local",
          "SignalGuard": "signals"}

__all__ = ["Execution", "Executor", "FioBinary", "FioJob", "LocalExecutor", "Progress",
           "SignalGuard", "find_fio"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:  # a submodule (fsops, confine, …) is imported by the import system
        raise AttributeError(f"module 'storbench.execute' has no attribute {name!r}")
    value = getattr(import_module(f"storbench.execute.{where}"), name)
    globals()[name] = value
    return value
