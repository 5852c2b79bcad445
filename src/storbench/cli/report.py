"""`storbench report`: one offline HTML file (and PNG charts) for people to look at."""

from __future__ import annotations

from pathlib import Path

import click

from storbench.analysis import charts as chart_data
from storbench.cli.common import cli, err, read_db_option, write_output
from storbench.cli.compare import comparison, reference_options
from storbench.cli.costing import check_cost_flags, cost_options, priced_runs
from storbench.errors import ConfigError
from storbench.render import png, report
from storbench.store import Store

MAX_RUNS = 20


@cli.command(name="report")
@click.argument("run_refs", nargs=-1, required=True, metavar="RUN...")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("report.html"), show_default=True,
              help="The HTML file to write (one file, works offline); - for standard"
                   " output.")
@click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write every chart as a PNG file into this directory.")
@click.option("--baseline", "-b", metavar="RUN", help="Add ratios to this run.")
@click.option("--title", default="storbench report", show_default=True,
              help="The report's title.")
@reference_options
@cost_options
@read_db_option
def report_cmd(store: Store, run_refs: tuple[str, ...], output: Path, png_dir: Path | None,
               baseline: str | None, title: str, reference: str | None,
               reference_file: Path | None, costs: tuple[str, ...], capacity: tuple[str, ...],
               provisioned_iops: tuple[str, ...], provisioned_mbps: tuple[str, ...]) -> None:
    """Write an HTML report of 1 to 20 runs: charts, verdicts, warnings, environments.

    The file is self-contained and works offline (no CDN, font or network request):
    bars per figure (latency: p50 with p99 marked), latency percentile curves,
    IOPS and bandwidth over time (from the per-second series), the comparison table,
    verdicts and warnings, and each run's environment and fio job files. It prints
    well. --png writes the same charts as PNG files.

    \b
    Example:
      storbench report 12 13 14 -o gp3-vs-efs.html
      storbench report gp3 efs --reference ebs-gp3,efs --png charts/
      storbench report gp3 efs --cost gp3=ebs-gp3 --cost efs=efs --capacity 500GiB
    """
    if len(run_refs) > MAX_RUNS:
        raise ConfigError(f"a report holds at most {MAX_RUNS} runs, not {len(run_refs)}")
    check_cost_flags(costs, capacity, provisioned_iops + provisioned_mbps)
    comp = comparison(store, run_refs, baseline, reference, reference_file)
    priced = priced_runs(comp, costs, capacity, provisioned_iops, provisioned_mbps)
    charts = chart_data.build(comp)
    html = report.render(comp, charts, title=title, priced=priced)
    if write_output(output, html):
        err.print(f"Wrote {output} ({len(html.encode()) / 1024:,.0f} KiB, {len(charts)} charts)",
                  markup=False)
    if png_dir is not None:
        try:
            png.write_all(charts, png_dir)
        except OSError as exc:
            raise ConfigError(f"cannot write the charts into {str(png_dir)!r}:"
                              f" {exc.strerror}") from None
        err.print(f"Wrote {len(charts)} PNG charts to {png_dir}", markup=False)
