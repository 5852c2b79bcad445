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
