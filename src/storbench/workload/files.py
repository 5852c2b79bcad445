"""Reading a text file a user names (a job file, an include, fio output to import):
a regular file of bounded size, or one clear ConfigError.

``/dev/zero`` would fill memory, a FIFO would never end, ``/etc/shadow`` is not a job
file: only regular files are read, at most ``limit`` bytes; what they hold is never
put into a message by this module.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from storbench.errors import ConfigError

JOB_FILE_LIMIT = 1 << 20  # 1 MiB: fio's own job files are a few KiB
IMPORT_LIMIT = 512 << 20  # 512 MiB: fio's json+ of a long run with many jobs


def read_text(path: Path, what: str, limit: int, *, lenient: bool = False) -> str:
    """The text of ``path`` (a regular file of at most ``limit`` bytes); ConfigError
    naming ``what`` and the path otherwise. ``lenient``: bytes that are not UTF-8
    become U+FFFD instead of an error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ConfigError(f"{what} {str(path)!r} is {kind}; give a regular file")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    if len(data) > limit:
        raise ConfigError(f"{what} {str(path)!r} is larger than {limit >> 20} MiB; that is"
                          " not what storbench reads there")
    try:
        return data.decode(errors="replace" if lenient else "strict")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {str(path)!r} is not text (a binary file?)") from None
