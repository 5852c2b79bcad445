"""Write docs/cli-reference.md from the commands' --help (tests fail when it is stale).

    .venv/bin/python scripts/gen_cli_reference.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from storbench.cli import cli, load_all

load_all()

OUT = Path(__file__).resolve().parent.parent / "docs" / "cli-reference.md"


def help_text(args: list[str]) -> str:
    # (the group's own settings, -h among its help options, as `storbench --help` is
    # made: a process that ran a command before has them cached on each command)
    ctx = click.Context(cli, info_name="storbench", terminal_width=100, **cli.context_settings)
    if not args:
        return cli.get_help(ctx)
    cmd = cli.commands[args[0]]
    sub = click.Context(cmd, info_name=args[0], parent=ctx, terminal_width=100,
                        max_content_width=100)
    return cmd.get_help(sub)


def render() -> str:
    parts = ["# storbench command reference", "",
             "Generated from `--help` by `scripts/gen_cli_reference.py`; do not edit.", ""]
    for args in ([], *([name] for name in sorted(cli.commands))):
        title = " ".join(["storbench", *args])
        parts += [f"## {title}", "", "```", help_text(list(args)).rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}", file=sys.stderr)
