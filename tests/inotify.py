"""What is done to files in a directory and in the directories made in it, as it
happens (the kernel's inotify, through libc): each creation of a name, each open of a
file and each close of one that was open for writing, in order, however short the file
lived."""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
from pathlib import Path
from types import TracebackType

IN_CLOSE_WRITE = 0x8
IN_OPEN = 0x20
IN_CREATE = 0x100
IN_ISDIR = 0x40000000


class Events:
    """``with Events(dir) as seen:`` ... ``seen.events``: ("create" | "open" | "written",
    path) in order ("written": closed after writing)."""

    def __init__(self, root: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.watched: dict[int, Path] = {}
        self.events: list[tuple[str, Path]] = []
        self._watch(root)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _watch(self, path: Path) -> None:
        wd = self.libc.inotify_add_watch(self.fd, bytes(path), IN_CREATE | IN_OPEN | IN_CLOSE_WRITE)
        if wd >= 0:  # a directory gone already: nothing more to see in it
            self.watched[wd] = path

    def _read(self) -> None:
        while not self._stop.is_set():
            if not select.select([self.fd], [], [], 0.05)[0]:
                continue
            buf = os.read(self.fd, 65536)
            at = 0
            while at < len(buf):
                wd, mask, _, size = struct.unpack_from("iIII", buf, at)
                name = buf[at + 16:at + 16 + size].rstrip(b"\0").decode()
                at += 16 + size
                if wd not in self.watched or not name:
                    continue
                path = self.watched[wd] / name
                if mask & IN_CREATE:
                    self.events.append(("create", path))
                    if mask & IN_ISDIR:
                        self._watch(path)
                if mask & IN_OPEN:
                    self.events.append(("open", path))
                if mask & IN_CLOSE_WRITE:
                    self.events.append(("written", path))

    def __enter__(self) -> Events:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self.fd)
