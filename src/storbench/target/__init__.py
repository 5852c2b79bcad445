"""Where the I/O goes: a target prepares a place, describes itself, removes what it made.

The contract is target/base.py; the kinds are directory.py, hosts.py and
kubernetes/. The CLI picks one from its flags (cli/run.py, ``_targets``).
"""

from storbench.target.base import Deadline, Leftover, Target

__all__ = ["Deadline", "Leftover", "Target"]
