"""How fio runs. An executor returns fio's raw JSON or raises an error with fio's message."""

from storbench.execute.fio import FioBinary, find_fio
from storbench.execute.local import Execution, LocalExecutor, Progress
from storbench.execute.signals import SignalGuard

__all__ = ["Execution", "FioBinary", "LocalExecutor", "Progress", "SignalGuard", "find_fio"]
