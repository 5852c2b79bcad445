"""The command layer: flags -> one library call -> a renderer. No fio, SQL or formatting here.

Commands live in cli/run.py (run, check) and cli/history.py (list, show, compare,
export, rm, suites); importing them registers them on the group.
"""

from __future__ import annotations

import sys

import click

from storbench.cli import history, k8s, report, run  # noqa: F401  (registers the commands)
from storbench.cli.common import cli, err
from storbench.errors import StorbenchError

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> None:
    """Entry point: the only place that prints errors and exits."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="storbench", standalone_mode=False)
    except StorbenchError as exc:
        if debug:
            raise
        err.print(f"storbench: error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("storbench: interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("storbench: interrupted")
        sys.exit(130)
