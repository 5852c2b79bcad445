"""Commands over stored results: list, show, compare, export, rm; and suites."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from storbench.analysis import references
from storbench.analysis.compare import compare as build_comparison
from storbench.analysis.compare import select, sentences
from storbench.analysis.cost import builtin_sheets, load_sheets
from storbench.cli.common import (
    cli,
    db_option,
    err,
    json_option,
    load_run,
    out,
    parse_tags,
    print_json,
)
from storbench.cli.costing import check_cost_flags, cost_options, priced_runs
from storbench.errors import ConfigError
from storbench.pipeline.importer import import_runs
from storbench.render import FORMATS, layouts, terminal
from storbench.render.json import cost_dict, run_dict
from storbench.render.layouts import LAYOUTS
from storbench.render.timeline import render_timeline
from storbench.store import Store
from storbench.workload import SUITES, get_suite


@cli.command(name="list")
@click.option("--label", "-l", help="Only runs with this label.")
@click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
              help="Only runs with this tag (repeatable: all must match).")
@click.option("--suite", "-s", help="Only runs of this suite.")
@click.option("--limit", "-n", type=click.IntRange(1, 10**9), default=None,
              help="Show at most N runs, newest first.")
@json_option
@db_option
def list_(store: Store, label: str | None, tags: tuple[str, ...], suite: str | None,
          limit: int | None, as_json: bool) -> None:
    """List stored runs, newest first.

    \b
    Example:
      storbench list --suite etcd --tag zone=a
    """
    runs = store.list_runs(label=label, suite=suite, tags=parse_tags(tags), limit=limit)
    if as_json:
        print_json([{k: v for k, v in run_dict(r).items() if k not in ("tests", "verdicts",
                                                                        "job_files")}
                     for r in runs])
        return
    if not runs:
        err.print(f"No runs stored in {store.path} (match your filters).")
        return
    terminal.print_run_list(out, runs)


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option("--jobs", is_flag=True, help="Also print each fio job file as it ran.")
@click.option("--timeline", is_flag=True,
              help="Also print each test's per-second IOPS, bandwidth and latency.")
@click.option("--raw", is_flag=True, help="With --json: include fio's raw JSON output.")
@json_option
@db_option
def show(store: Store, run_ref: str, jobs: bool, timeline: bool, raw: bool,
         as_json: bool) -> None:
    """Show one run: results, verdicts and the environment it ran in.

    RUN is a run id from `storbench list`, or `last`.

    \b
    Example:
      storbench show 12 --jobs
      storbench show 12 --timeline
      storbench show last --json
    """
    r = load_run(store, store.resolve(run_ref))
    if as_json:
        print_json(run_dict(r, raw=raw))
        return
    terminal.print_run(out, r)
    terminal.print_time_spent(out, r)
    if timeline:
        out.print(render_timeline(r), markup=False)
    terminal.print_environment(out, r.environment)
    if jobs:
        for inv in r.invocations:
            out.print(f"[bold]fio job file {inv.ordinal + 1}[/bold]")
            out.print(inv.job_text, markup=False)


def _comparison(store: Store, refs: tuple[str, ...], baseline: str | None,
                reference: str | None = None, reference_file: Path | None = None) -> Any:
    if not refs:
        raise ConfigError("name at least one run (see `storbench list`)")
    ids = [store.resolve(r) for r in refs]
    base_index = None
    if baseline is not None:
        base_id = store.resolve(baseline)
        if base_id not in ids:
            ids.insert(0, base_id)
        base_index = ids.index(base_id)
    runs = [load_run(store, i) for i in ids]
    if reference or reference_file:
        extra = references.load_file(reference_file) if reference_file else []
        names = [n.strip() for n in (reference or "").split(",") if n.strip()]
        chosen = _select_references(names, runs, extra) if names else [
            r for r in extra if r.suite == runs[0].suite]
        runs += [references.as_run(r, i) for i, r in enumerate(chosen)]
    return build_comparison(runs, base_index)


def _select_references(names: list[str], runs: list[Any], extra: list[Any]) -> list[Any]:
    """The named references for the first compared run's suite that has them all."""
    first_error: ConfigError | None = None
    for run in runs:
        try:
            return references.select(names, run.suite, extra)
        except ConfigError as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def reference_options(f: Any) -> Any:
    f = click.option("--reference-file", type=click.Path(exists=True, dir_okay=False,
                                                         path_type=Path),
                     help="Your own reference set (JSON; see docs/cli.md).")(f)
    return click.option("--reference", "-R", metavar="NAME,...",
                        help="Add published figures for the same workload as rows, e.g."
                             " ebs-gp3,efs (see `storbench reference list`).")(f)


@cli.command(name="compare")
@click.argument("run_refs", nargs=-1, metavar="RUN...")
@click.option("--baseline", "-b", metavar="RUN",
              help="Show each figure as a ratio to this run (× the baseline).")
@reference_options
@cost_options
@json_option
@db_option
def compare_cmd(store: Store, run_refs: tuple[str, ...], baseline: str | None,
                reference: str | None, reference_file: Path | None, costs: tuple[str, ...],
                capacity: str | None, provisioned_iops: tuple[str, ...],
                provisioned_mbps: tuple[str, ...], as_json: bool) -> None:
    """Compare runs side by side: one row per run, one column per metric.

    With --cost, a second table prices each run: $ per month for --capacity with the
    performance it achieved, and $ per 1,000 IOPS and per MB/s.

    \b
    Example:
      storbench compare 12 13 14
      storbench compare 13 14 --baseline 12
      storbench compare 12 --reference ebs-gp3,efs   # beside published figures
      storbench compare 12 --reference ebs-gp3,efs --cost ebs-gp3 --cost efs \\
          --cost 12=ebs-gp3 --capacity 500GiB
    """
    check_cost_flags(costs, capacity, provisioned_iops + provisioned_mbps)
    comp = _comparison(store, run_refs, baseline, reference, reference_file)
    priced = priced_runs(comp, costs, capacity, provisioned_iops, provisioned_mbps)
    if as_json:
        doc = json.loads(FORMATS["json"](comp))
        if priced:
            doc["cost"] = [cost_dict(comp, p) for p in priced]
        print_json(doc)
        return
    terminal.print_comparison(out, comp)
    measured = [r for r in comp.runs if r.origin != "published"]
    if comp.baseline is None and len(measured) > 1:
        # hyperfine-style words even without --baseline: relative to the first run
        words = sentences(build_comparison(comp.runs, comp.runs.index(measured[0])))
        if words:
            out.print(f"Summary, relative to {measured[0].name}:", markup=False)
            for line in words:
                out.print(f"  {line}", markup=False)
    if priced:
        out.print()
        terminal.print_costs(out, comp, priced)


@cli.command()
@click.argument("run_refs", nargs=-1, metavar="RUN...")
@click.option("--format", "-f", "fmt", type=click.Choice(sorted(FORMATS)), default="md",
              show_default=True, help="Output format.")
@click.option("--layout", type=click.Choice(LAYOUTS),
              help="md, wiki, html-table: how the tables are shaped. wide: one table (md's"
                   " default); per-metric: a table per figure (wiki's default); read-write:"
                   " Read and Write side by side, a table per figure pair (study 5); rows:"
                   " a row per platform with its figures and verdict (study 3's wiki).")
@click.option("--columns", metavar="FIGURE,...",
              help="Only these figures, in this order: a test (etcd), a figure"
                   " (sync.lat_p99) or both (etcd.write.iops).")
@click.option("--baseline", "-b", metavar="RUN", help="Add ratios to this run.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@reference_options
@db_option
def export(store: Store, run_refs: tuple[str, ...], fmt: str, layout: str | None,
           columns: str | None, baseline: str | None, output: Path | None,
           reference: str | None, reference_file: Path | None) -> None:
    """Export runs as Markdown or wiki tables, CSV or JSON (the full model, base units).

    Each run's caveats (its warnings, in a few words) and verdicts go beside its figures.

    \b
    Example:
      storbench export 12 13 --format md >> wiki.md
      storbench export gp3 io2 efs --format wiki --layout read-write   # study 5's tables
      storbench export 14 -R nvme-vdo,vsan --layout rows \\
          --columns etcd.write.iops,etcd.sync.lat_p99                # study 3's wiki rows
      storbench export 12 --format json -o run12.json
    """
    comp = _comparison(store, run_refs, baseline, reference, reference_file)
    if columns:
        comp = select(comp, [c.strip() for c in columns.split(",") if c.strip()])
    if layout is not None and fmt not in ("md", "wiki", "html-table"):
        raise ConfigError(f"--layout shapes md, wiki and html-table tables, not {fmt}")
    if layout is not None:
        render = layouts.render_html if fmt == "html-table" else layouts.render_markdown
        text = render(comp, layout)
    else:
        text = FORMATS[fmt](comp)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        err.print(f"Wrote {output}")


@cli.command()
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@db_option
def rm(store: Store, run_refs: tuple[str, ...]) -> None:
    """Delete stored runs (results, environment and fio output).

    \b
    Example:
      storbench rm 12 13
    """
    for ref in run_refs:
        run_id = store.resolve(ref)
        store.delete_run(run_id)
        err.print(f"Deleted run #{run_id}")


@cli.command()
@click.argument("name", required=False)
@json_option
def suites(name: str | None, as_json: bool) -> None:
    """List the built-in suites, or show one suite's tests and fio job files.

    \b
    Example:
      storbench suites
      storbench suites dbench
    """
    chosen = [get_suite(name)] if name else list(SUITES.values())
    if as_json:
        print_json([
            {"name": s.name, "description": s.description, "study": s.study,
             "tests": [{"name": t.name, "description": t.description,
                        "job": jf.render(), "metrics": list(t.metrics),
                        "provenance": [{"option": k, "value": v, "from": origin}
                                       for k, v, origin in s.provenance(t)]}
                       for t, jf in s.jobfiles()],
             "dropped": s.dropped or {}}
            for s in chosen
        ])
        return
    terminal.print_suites(out, chosen, detailed=name is not None)




@cli.command(name="import")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--label", "-l", help="Label for the imported run(s).")
@click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
              help="Attach a tag (repeatable).")
@click.option("--as", "as_suite", metavar="SUITE[:TEST]",
              help="Store the results as this suite's test (the job is renamed), so that they"
                   " line up with runs of that suite and its published references.")
@click.option("--split", type=click.Choice(["tests", "runs"]), default="tests",
              show_default=True,
              help="A document holding several fio runs (a blog post, a wiki page): one run"
                   " with a test per fio run, or a run each (with --as: always a run each).")
@db_option
def import_(store: Store, files: tuple[str, ...], label: str | None,
            tags: tuple[str, ...], as_suite: str | None, split: str) -> None:
    """Import fio's output from elsewhere as runs: JSON, json+, terse or normal text.

    Reads fio >= 2.x's JSON and json+ (also client/server), terse output (version 3)
    and the normal text output of fio 2.x and 3.x, also inside other text: a
    terminal log, a blog post (HTML entities), lines with line numbers or re-wrapped.
    FILE may be `-` for standard input. Every file is read before anything is
    stored: one bad file imports nothing. What a form of output does not hold
    (text has no histogram bins) is recorded as absent, never made up.

    A document with several fio runs (systems compared in a blog post, contributors
    on a wiki page) is split into them: each is its own test (or run, --split runs),
    named by the heading or prose before it, else its command line's --name or
    --directory; jobs are summed only as fio grouped them, never across runs. What
    cannot be read is left out and listed; `show` lists the lines each test came from.

    \b
    Example:
      storbench import old-run.json --label efs-2019
      fio --output-format=json+ job.fio | storbench import - --tag host=db1
      storbench import ticket-1234.txt --as randrw75 --label efs-2016
      storbench import etcd-wiki-page.txt --as etcd     # a run per contributor
    """
    sources = []
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(errors="replace")
        except OSError as exc:
            raise ConfigError(f"cannot read {name!r}: {exc.strerror}") from exc
        sources.append(("<stdin>" if name == "-" else name, text))
    for run_id in import_runs(store, sources, label=label, tags=parse_tags(tags),
                              as_suite=as_suite, split=split):
        err.print(f"Imported run #{run_id}")


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
