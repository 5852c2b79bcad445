"""What storbench knows without a store: the built-in suites, the published
references and the price sheets."""

from __future__ import annotations

from pathlib import Path

import click

from storbench.analysis import references
from storbench.analysis.cost import builtin_sheets, load_sheets
from storbench.cli.common import cli, json_option, out, print_json
from storbench.render import terminal
from storbench.workload.suites import SUITES, get_suite


@cli.command()
@click.argument("name", required=False)
@json_option
def suites(name: str | None, as_json: bool) -> None:
    """List the built-in suites, or show one suite's tests and fio job files.

    \b
    Example:
      storbench suites
      storbench suites dbench
      storbench suites postgresql   # its figures and answers for --assert and history
    """
    from storbench.pipeline.kinds.app import ANSWERS

    chosen = [get_suite(name)] if name else list(SUITES.values())
    if as_json:
        print_json([
            {"name": s.name, "description": s.description, "study": s.study,
             "tests": [{"name": t.name, "description": t.description,
                        "job": jf.render(), "metrics": list(t.metrics),
                        "provenance": [{"option": k, "value": v, "from": origin}
                                       for k, v, origin in s.provenance(t)]}
                       for t, jf in s.jobfiles()],
             "figures": [f"{t.name}.{m}" for t in s.tests for m in t.metrics],
             "answers": [{"name": f"{s.name}.{n}", "label": label, "unit": unit}
                         for n, label, unit in ANSWERS.get(s.name, ())],
             "dropped": s.dropped or {}}
            for s in chosen
        ])
        return
    terminal.print_suites(out, chosen, detailed=name is not None, answers=ANSWERS)





@cli.group()
def reference() -> None:
    """Published reference figures (the studies storbench was built from).

    \b
    Example:
      storbench reference list
      storbench compare 12 --reference ebs-gp3,efs
    """


@reference.command(name="list")
@click.option("--file", "reference_file", type=click.Path(exists=True, dir_okay=False,
                                                           path_type=Path),
              help="Also list the references in this file.")
@json_option
def reference_list(reference_file: Path | None, as_json: bool) -> None:
    """List the published references: name, target, suite, study, source.

    \b
    Example:
      storbench reference list --json
    """
    refs = [*references.BUILTIN, *(references.load_file(reference_file)
                                   if reference_file else [])]
    if as_json:
        print_json([references.describe(r) for r in refs])
        return
    terminal.print_references(out, refs)


@cli.group()
def cost() -> None:
    """Price sheets for `compare --cost` (dated, with their source).

    \b
    Example:
      storbench cost list
      storbench cost list --file my-prices.yaml
    """


@cost.command(name="list")
@click.option("--file", "sheet_file", type=click.Path(exists=True, dir_okay=False,
                                                      path_type=Path),
              help="Also check and list the sheets in this YAML file.")
@json_option
def cost_list(sheet_file: Path | None, as_json: bool) -> None:
    """List the built-in price sheets (and those of a YAML file).

    \b
    Example:
      storbench cost list
      storbench cost list --file prices.yaml --json
    """
    sheets = builtin_sheets() + (load_sheets(sheet_file.read_text(), str(sheet_file))
                                 if sheet_file else [])
    if as_json:
        print_json([vars(s) for s in sheets])
        return
    terminal.print_sheets(out, sheets)
