"""What I/O to do: fio jobs, job files and the built-in suites."""

from storbench.workload.jobfile import JobFile, Section, parse_jobfile
from storbench.workload.sizes import format_bytes_iec, parse_size
from storbench.workload.suites import SUITES, Suite, TestSpec, get_suite

__all__ = [
    "SUITES",
    "JobFile",
    "Section",
    "Suite",
    "TestSpec",
    "format_bytes_iec",
    "get_suite",
    "parse_jobfile",
    "parse_size",
]
