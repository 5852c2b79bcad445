"""The command layer: flags -> one library call -> a renderer. No fio, SQL or formatting here.

Commands live in cli/run.py (run), cli/checking.py (check), cli/agent.py,
cli/history.py (list, show, rm), cli/compare.py (compare, export), cli/importing.py,
cli/catalog.py (suites, reference, cost), cli/report.py and cli/k8s.py; importing one
registers its commands on the group, and `cli` imports only the module of the command
that runs (common.COMMANDS).
"""

from __future__ import annotations

import itertools
import os
import sys

import click

from storbench.cli.common import cli, err, load_all, load_command
from storbench.errors import StorbenchError, without_passwords

__all__ = ["cli", "load_all", "main", "preload"]


def preload(argv: list[str]) -> None:
    """Import the module of the command ``argv`` names (its first word that is not an
    option), so that it loads while ``__main__`` still holds Ctrl-C back."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is not None:
        load_command(word)


def wants_tracebacks(argv: list[str]) -> bool:
    """Whether ``--debug`` (or STORBENCH_DEBUG) asks for tracebacks: the option is the
    group's, so only the words before the command count (``--hosts --debug`` names a
    host)."""
    try:  # read as the group reads it (its --debug's envvar): click's boolean words
        if click.BOOL.convert(os.environ.get("STORBENCH_DEBUG", ""), None, None):
            return True
    except click.BadParameter:
        pass  # the group refuses it, in one line
    before = itertools.takewhile(lambda a: a.startswith("-"), argv)
    return "--debug" in before


def main(argv: list[str] | None = None) -> None:
    """Entry point: the only place that prints errors and exits."""
    debug = wants_tracebacks(argv if argv is not None else sys.argv[1:])
    try:
        cli.main(args=argv, prog_name="storbench", standalone_mode=False)
    except StorbenchError as exc:
        if debug:
            raise
        err.print(f"storbench: error: {without_passwords(str(exc))}", markup=False)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("storbench: interrupted")
        sys.exit(130)
    except OSError as exc:  # the machine's refusal nobody turned into ours: its words
        if debug:
            raise
        where = f": {exc.filename}" if exc.filename else ""
        err.print(f"storbench: error: {exc.strerror or exc}{where}", markup=False)
        sys.exit(1)
    except click.exceptions.NoArgsIsHelpError as exc:  # `storbench`, `storbench db`: the
        # group's help, as asked, not an error line with a hint to ask for it
        err.print(exc.format_message(), markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:  # a bad flag or argument: one line, as ours
        if debug:
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
        said = without_passwords(exc.format_message().rstrip("."))
        err.print(f"storbench: error: {said}{hint}", markup=False)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("storbench: interrupted")
        sys.exit(130)
