"""`storbench` and `python -m storbench`: the CLI, with Ctrl-C handled from the first
instruction on (importing the CLI takes a moment; an interrupt then is one line and
exit 130, never a traceback).

While the CLI's modules load, SIGINT only sets a flag: a KeyboardInterrupt raised in
the middle of an import can land in one of Python's own callbacks (a module lock's
weakref), which prints "Exception ignored ... Traceback" whatever we catch. Once they
are loaded, a pending interrupt ends the process; otherwise Python's own handler is
back for the CLI to use.
"""

from __future__ import annotations

import gc
import signal
import sys
from types import FrameType


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
        sys.exit(130)


if __name__ == "__main__":
    main()
