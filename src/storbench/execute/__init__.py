"""How fio runs. An executor returns fio's raw JSON or raises an error with fio's message."""

from storbench.execute.base import Execution, Executor, FioJob, Progress
from storbench.execute.fio import FioBinary, find_fio
from storbench.execute.local import LocalExecutor
from storbench.execute.signals import SignalGuard

__all__ = ["Execution", "Executor", "FioBinary", "FioJob", "LocalExecutor", "Progress",
           "SignalGuard", "find_fio"]
