"""`storbench` and `python -m storbench`: the CLI, with Ctrl-C handled from the first
instruction on (importing the CLI takes a moment; an interrupt then is one line and
exit 130, never a traceback)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from storbench.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("storbench: interrupted\n")
        sys.exit(130)
    cli_main()


if __name__ == "__main__":
    main()
