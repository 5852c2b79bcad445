"""SIGINT/SIGTERM during a run: remember the signal, forward it to fio's process group."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from storbench.errors import Interrupted

HANDLED = (signal.SIGINT, signal.SIGTERM)


class SignalGuard:
    """Context manager: while active, SIGINT/SIGTERM are recorded, not raised.

    The first signal is forwarded to the registered child process group (fio runs
    in its own group, so a terminal's Ctrl-C reaches storbench only). Code polls
    ``check()`` at safe points, which raises Interrupted(signum).
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0  # how many came (a second one ends a cleanup's wait)
        self.received_at: float | None = None
        self._child_pgid: int | None = None
        self._previous: dict[int, Any] = {}
        self._on_signal: Callable[[int], None] | None = None

    def __enter__(self) -> SignalGuard:
        for sig in HANDLED:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
            self.received_at = time.monotonic()
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        if self._child_pgid is not None:
            try:
                os.killpg(self._child_pgid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def set_child(self, pgid: int | None) -> None:
        self._child_pgid = pgid
        if pgid is not None and self.signum is not None:
            self._forward(self.signum)

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake up (and raise Interrupted) as soon as a signal arrives."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.check()
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        self.check()

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)
