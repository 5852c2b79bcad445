"""`storbench` and `python -m storbench`: the CLI, with Ctrl-C handled from the first
instruction on (importing the CLI takes a moment; an interrupt then is one line and
exit 130, never a traceback).

While the CLI's modules load, SIGINT only sets a flag: a KeyboardInterrupt raised in
the middle of an import can land in one of Python's own callbacks (a module lock's
weakref), which prints "Exception ignored ... Traceback" whatever we catch. Once they
are loaded, a pending interrupt ends the process; otherwise Python's own handler is
back for the CLI to use.

It ends as sys.exit ends it, without the interpreter's teardown (_exit): what a command
made is left to the kernel, not freed object by object.
"""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
from types import FrameType
from typing import NoReturn


def main() -> None:
    interrupted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        interrupted.append(signum)

    previous = signal.signal(signal.SIGINT, note)
    # the cycle collector waits while the modules load (its passes then scan what
    # they define, again and again: ~10 ms of a command's start), which it then leaves
    # out of its passes for good (gc.freeze): they live as long as the process
    gc.disable()
    try:
        try:
            from storbench.cli import main as cli_main
            from storbench.cli import preload

            preload(sys.argv[1:])
        finally:
            gc.freeze()
            gc.enable()
            # a signal that comes in from here on is handled by the handler put back:
            # it raises KeyboardInterrupt, caught below until the CLI catches its own
            signal.signal(signal.SIGINT, previous)
        if interrupted:
            raise KeyboardInterrupt
        cli_main()
    except KeyboardInterrupt:
        sys.stderr.write("storbench: interrupted\n")
        _exit(130)
    except SystemExit as done:
        _exit(done.code)
    _exit(0)


def _exit(code: str | int | None) -> NoReturn:
    """sys.exit(code), without the interpreter's teardown: every object a command made
    freed one at a time (100,000 runs' rows: ~20 ms of a cold `check --no-change`, a
    twentieth of it). What the teardown does that matters is done first: the atexit
    handlers (weakref finalizers, logging's), the standard streams flushed (a failed
    flush said, as Python would end with 120). With another thread still running, it is
    joined as Python joins it: sys.exit. A file object still open would lose what it
    buffered (the teardown would have closed it): storbench opens files in with blocks."""
    if threading.active_count() > 1:
        sys.exit(code)
    status = code if isinstance(code, int) else 0 if code is None else 1
    if not isinstance(code, int) and code is not None:
        sys.stderr.write(f"{code}\n")
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away: it had what it wanted
            status = status or 1
        except (OSError, ValueError) as exc:  # (ValueError: a stream closed)
            if stream is sys.stdout:
                sys.stderr.write(f"storbench: error: {getattr(exc, 'strerror', None) or exc}\n")
            status = status or 120
    os._exit(status)


if __name__ == "__main__":
    main()
