"""The one exception hierarchy. The CLI turns these into one line and an exit code.

Exit codes (also in ``storbench --help``):

    0    success
    1    error (fio failed, target unusable, store problem, ...)
    2    bad usage or configuration (unknown suite, invalid job file, bad flag value,
         a run or series that is not stored)
    3    a verdict failed (e.g. etcd fdatasync p99 above the threshold)
    130  interrupted by Ctrl-C (SIGINT)
    143  terminated by SIGTERM
"""

from __future__ import annotations

import re
import signal

EXIT_CODES_HELP = """\b
Exit codes:
  0    success
  1    error (fio failed, target unusable, store problem)
  2    bad usage or configuration (a run or series that is not there)
  3    a verdict failed (threshold exceeded)
  130  interrupted (SIGINT / Ctrl-C)
  143  terminated (SIGTERM)"""


# the password of scheme://user:password@host, or of 'user:password@host' quoted whole,
# as a message may quote it (the placeholder PASSWORD of a hint is left as it is)
_USERINFO = re.compile(r"(?P<user>(?:://|(?<=')(?=[^'/:@\s]*:))[^/:@\s'\"]*)"
                       r":(?!PASSWORD@)[^@/\s'\"]+@")


def without_passwords(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:password@host``,
    or a quoted ``'user:password@host'``) shown as ``***``: an error quotes what a user
    typed, and a CI log keeps it."""
    return _USERINFO.sub(r"\g<user>:***@", text)


class StorbenchError(Exception):
    """Base class of every error storbench reports to its user."""

    exit_code = 1


class ConfigError(StorbenchError):
    """Bad flags, an unknown suite, an invalid job file."""

    exit_code = 2


class FioError(StorbenchError):
    """fio is missing, too old, exited non-zero or a job reported an error.

    ``stderr`` holds fio's own message, verbatim.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


class TargetError(StorbenchError):
    """The target does not exist, is not writable, lacks space, ..."""


class TargetHung(TargetError):
    """The target stopped responding (no I/O, or a file operation that never returns)."""


class StoreError(StorbenchError):
    """The results database cannot be opened, or a run does not exist."""


class NotFound(StoreError):
    """A run a user named (an id, a label, `last`) is not stored: a usage error, as a
    series (`history nosuch`) or a suite that is not there is."""

    exit_code = 2


class ThresholdExceeded(StorbenchError):
    """A verdict failed: the storage works, but is slower than required."""

    exit_code = 3


class Interrupted(StorbenchError):
    """The run was stopped by SIGINT (exit 130) or SIGTERM (exit 143)."""

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name}")
        self.signum = signum
        self.exit_code = 128 + signum
