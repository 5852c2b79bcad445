"""Every command has help with an example, a section in docs/cli.md, and the
generated reference is up to date."""

import importlib.util
from pathlib import Path

import pytest

from storbench.cli import cli, load_all

load_all()

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help_example_and_docs(name):
    cmd = cli.commands[name]
    assert cmd.help and "Example:" in cmd.help
    for param in cmd.params:
        if param.param_type_name == "option":
            assert param.help, f"{name} {param.opts} has no help"
    assert f"## storbench {name}\n" in (ROOT / "docs" / "cli.md").read_text()


def test_cli_reference_is_fresh():
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts" / "gen_cli_reference.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (ROOT / "docs" / "cli-reference.md").read_text() == gen.render(), (
        "docs/cli-reference.md is stale: run .venv/bin/python scripts/gen_cli_reference.py")


def test_import_direction():
    """Render and analysis never reach back into execution, targets or the CLI."""
    forbidden = ("storbench.execute", "storbench.runner", "storbench.target", "storbench.cli",
                 "storbench.progress")
    for pkg in ("render", "analysis", "result", "workload"):
        for f in (ROOT / "src" / "storbench" / pkg).glob("*.py"):
            text = f.read_text()
            for mod in forbidden:
                assert f"from {mod}" not in text and f"import {mod}" not in text, (f, mod)


def parse_command_line(line: str) -> None:
    """``storbench ...`` as click reads it (nested groups too), without running it:
    click.UsageError when an option or argument is not what the command takes."""
    import shlex

    import click

    argv = shlex.split(line)[1:]
    cmd: click.Command = cli
    while isinstance(cmd, click.Group):
        name, argv = argv[0], argv[1:]
        found = cmd.get_command(click.Context(cmd), name)
        if found is None:
            raise click.UsageError(f"no command {name!r}")
        cmd = found
    cmd.make_context(cmd.name or "", argv)


@pytest.mark.parametrize("page", ["studies.md"])
def test_every_command_a_walkthrough_shows_is_one_storbench_takes(page):
    """The walkthroughs show real output of the commands they print: each command line
    must still be one storbench accepts (an option renamed since would fail here)."""
    lines = [ln[2:] for ln in (ROOT / "docs" / page).read_text().splitlines()
             if ln.startswith("$ storbench ")]
    assert len(lines) >= 10
    for line in lines:
        parse_command_line(line)


def test_the_walkthrough_check_refuses_an_option_storbench_does_not_take():
    import click

    parse_command_line("storbench compare a b --capacity a=30GB")
    parse_command_line("storbench k8s lifecycle --storage-class x --volumes 3")
    for bad in ("storbench compare a b --capacitty a=30GB", "storbench k8s nothing",
                "storbench run /x --suite"):
        with pytest.raises(click.UsageError):
            parse_command_line(bad)
