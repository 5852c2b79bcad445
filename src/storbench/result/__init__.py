"""The typed, unit-explicit result model parsed from fio's JSON."""

from storbench.result.fio_json import parse_fio_json
from storbench.result.model import Direction, Latency, SyncStats, TestResult

__all__ = ["Direction", "Latency", "SyncStats", "TestResult", "parse_fio_json"]
