"""Where the I/O goes: a target prepares a place, describes itself, removes what it made."""

from storbench.target.directory import DirectoryTarget

__all__ = ["DirectoryTarget"]
