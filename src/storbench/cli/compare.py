"""Commands over several runs side by side: compare and export (and what the report
shares with them: choosing the runs, the baseline and the published references)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from storbench.analysis.compare import Comparison, select, sentences
from storbench.analysis.compare import compare as build_comparison
from storbench.cli.common import (
    cli,
    err,
    json_option,
    load_run,
    out,
    print_json,
    read_db_option,
    write_output,
)
from storbench.cli.costing import check_cost_flags, cost_options, priced_runs
from storbench.cli.trend import series_histories
from storbench.errors import ConfigError
from storbench.render.formats import FORMATS, LAYOUTS
from storbench.render.json import cost_dict
from storbench.render.text import harmless
from storbench.store import Store


def comparison(store: Store, refs: tuple[str, ...], baseline: str | None,
                reference: str | None = None, reference_file: Path | None = None) -> Comparison:
    if not refs:
        raise ConfigError("name at least one run (see `storbench list`)")
    ids = list(dict.fromkeys(store.resolve(r) for r in refs))  # a run named twice: once
    base_index = None
    if baseline is not None:
        base_id = store.resolve(baseline)
        if base_id not in ids:
            ids.insert(0, base_id)
        base_index = ids.index(base_id)
    runs = [load_run(store, i) for i in ids]
    if reference is not None and not reference.replace(",", "").strip():
        raise ConfigError(f"--reference {reference!r} names no reference: give NAME,... (see"
                          " `storbench reference list`), or leave it out")
    if reference or reference_file:
        from storbench.analysis import references  # only here: it loads the verdicts

        extra = references.load_file(reference_file) if reference_file else []
        names = [n.strip() for n in (reference or "").split(",") if n.strip()]
        chosen = _select_references(names, runs, extra) if names else [
            r for r in extra if r.suite == runs[0].suite]
        runs += [references.as_run(r, i) for i, r in enumerate(chosen)]
    return build_comparison(runs, base_index, series_histories(store, runs))


def _select_references(names: list[str], runs: list[Any], extra: list[Any]) -> list[Any]:
    """The named references for the first compared run's suite that has them all."""
    from storbench.analysis import references

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
@read_db_option
def compare_cmd(store: Store, run_refs: tuple[str, ...], baseline: str | None,
                reference: str | None, reference_file: Path | None, costs: tuple[str, ...],
                capacity: tuple[str, ...], provisioned_iops: tuple[str, ...],
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
    comp = comparison(store, run_refs, baseline, reference, reference_file)
    priced = priced_runs(comp, costs, capacity, provisioned_iops, provisioned_mbps)
    if as_json:
        doc = json.loads(FORMATS["json"](comp))
        if priced:
            doc["cost"] = [cost_dict(comp, p) for p in priced]
        print_json(doc)
        return
    from storbench.analysis.views import tabulated
    from storbench.render import terminal

    terminal.print_comparison(out, comp)
    measured = [r for r in comp.runs if r.origin != "published"]
    if comp.baseline is None and len(measured) > 1 and tabulated(comp.runs):
        # hyperfine-style words even without --baseline: relative to the first run
        words = sentences(build_comparison(comp.runs, comp.runs.index(measured[0]),
                                           comp.histories))
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
@read_db_option
def export(store: Store, run_refs: tuple[str, ...], fmt: str, layout: str | None,
           columns: str | None, baseline: str | None, output: Path | None,
           reference: str | None, reference_file: Path | None) -> None:
    """Export runs as Markdown or wiki tables, CSV or JSON (the full model, base units),
    or as time series: OpenMetrics, InfluxDB line protocol, NDJSON.

    Each run's caveats (its warnings, in a few words) and verdicts go beside its figures.
    The time-series formats write one sample per run, test, direction, host and figure
    (base units, the unit in the name), at the run's end: storbench_iops,
    storbench_bandwidth_bytes_per_second, storbench_latency_seconds{quantile="0.99"}, ...
    (docs/teams.md: backfilling Prometheus, loading InfluxDB or OpenSearch).

    \b
    Example:
      storbench export 12 13 --format md >> wiki.md
      storbench export gp3 io2 efs --format wiki --layout read-write   # study 5's tables
      storbench export 14 -R nvme-vdo,vsan --layout rows \\
          --columns etcd.write.iops,etcd.sync.lat_p99                # study 3's wiki rows
      storbench export 12 --format json -o run12.json
      storbench export 12 13 --format openmetrics -o runs.om
      promtool tsdb create-blocks-from openmetrics runs.om /var/lib/prometheus/metrics2
    """
    comp = comparison(store, run_refs, baseline, reference, reference_file)
    if columns is not None:
        chosen = [c.strip() for c in columns.split(",") if c.strip()]
        if not chosen:  # '' was every figure, ',' none: a table of no figure
            raise ConfigError(f"--columns {columns!r} names no figure: give FIGURE,... (e.g."
                              " randread.read.iops), or leave it out for every one")
        comp = select(comp, chosen)
    if layout is not None and fmt not in ("md", "wiki", "html-table"):
        raise ConfigError(f"--layout shapes md, wiki and html-table tables, not {fmt}")
    if fmt == "openmetrics":  # each run's change points, for Grafana to annotate
        comp = replace(comp, histories=series_histories(store, comp.runs, every=True))
    if layout is not None:
        from storbench.render import layouts

        render = layouts.render_html if fmt == "html-table" else layouts.render_markdown
        text = render(comp, layout)
    else:
        text = FORMATS[fmt](comp)
    text = harmless(text)  # a label's escape sequence is shown, never obeyed
    if output is None:
        click.echo(text, nl=False)
    elif write_output(output, text):
        err.print(f"Wrote {output}", markup=False)
