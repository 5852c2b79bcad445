"""Where the I/O goes: a target prepares a place, describes itself, removes what it made.

The contract is target/base.py; a target is a place (here.py, hosts.py,
kubernetes/storageclass.py) composed with a storage (files.py, device.py) through
storage.py. The CLI picks one from its flags (cli/run.py, ``_targets``).
"""

from storbench.target.base import Deadline, Leftover, Target

__all__ = ["Deadline", "Leftover", "Target"]
