"""`storbench import`: fio's output from elsewhere (files, documents, folders) as runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from storbench.cli.common import cli, db_option, err, parse_tags
from storbench.errors import ConfigError
from storbench.pipeline.importer import LABEL_FROM, Source, import_runs, looks_like_fio_output
from storbench.result.fio_logs import is_log_file
from storbench.store import Store
from storbench.workload.files import IMPORT_LIMIT, read_text


@cli.command(name="import")
@click.argument("files", nargs=-1, required=True, metavar="FILE|DIR...")
@click.option("--label", "-l", help="Label for the imported run(s).")
@click.option("--label-from", type=click.Choice(LABEL_FROM),
              help="Label each run by its file's name (without .json), its folder's name or"
                   " its first fio job's name (after --label, if given).")
@click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
              help="Attach a tag (repeatable).")
@click.option("--series", metavar="NAME",
              help="The history the imported run(s) join (`storbench history`), e.g. the"
                   " nightly runs of one volume.")
@click.option("--as", "as_suite", metavar="SUITE[:TEST]",
              help="Store the results as this suite's test (the job is renamed), so that they"
                   " line up with runs of that suite and its published references.")
@click.option("--split", type=click.Choice(["tests", "runs"]), default="tests",
              show_default=True,
              help="A document holding several fio runs (a blog post, a wiki page): one run"
                   " with a test per fio run, or a run each (with --as: always a run each).")
@db_option
def import_(store: Store, files: tuple[str, ...], label: str | None, label_from: str | None,
            tags: tuple[str, ...], series: str | None, as_suite: str | None,
            split: str) -> None:
    """Import fio's output from elsewhere as runs: JSON, json+, terse or normal text.

    Reads fio >= 2.x's JSON and json+ (also client/server), terse output (version 3)
    and the normal text output of fio 2.x and 3.x, also inside other text: a
    terminal log, a blog post (HTML entities), lines with line numbers or re-wrapped.
    FILE may be `-` for standard input; a DIR is read with all its folders, each
    file holding fio's output a run (others are skipped and counted). fio's averaged
    logs beside a JSON file (write_iops_log, write_bw_log, write_lat_log with
    log_avg_msec; bench-fio's layout) become its timeline. Every file is read
    before anything is stored: one bad file imports nothing. What a form of output
    does not hold (text has no histogram bins) is recorded as absent, never made up.

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
      storbench import results/ --label-from filename   # bench-fio's output folder
    """
    sources: list[Source] = []
    for name in files:
        if name == "-":
            data = sys.stdin.buffer.read(IMPORT_LIMIT + 1)
            if len(data) > IMPORT_LIMIT:
                raise ConfigError(f"standard input holds more than {IMPORT_LIMIT >> 20} MiB;"
                                  " that is not fio's output")
            sources.append(Source("<stdin>", data.decode(errors="replace")))
        elif Path(name).is_dir():
            sources += _folder(Path(name))
        else:
            sources.append(Source(name, _read(Path(name)), Path(name)))
    if not sources:
        raise ConfigError(f"no fio output found in {', '.join(files)}; nothing was imported")
    if len(sources) > 1:
        err.print(f"Reading {len(sources)} files", highlight=False)
    ids = import_runs(store, sources, label=label, tags=parse_tags(tags), as_suite=as_suite,
                      split=split, label_from=label_from, series=series)
    runs = [store.get_run(i, with_results=False) for i in ids]
    for run in runs:
        named = f" {run.label}" if run.label else ""
        ended = f", {run.status}: {run.error}" if run.status != "completed" else ""
        err.print(f"Imported run #{run.id}{named} ({run.target}){ended}", markup=False)
    from storbench.cli.trend import refresh

    refresh(store, runs)


def _read(path: Path) -> str:
    return read_text(path, "file", IMPORT_LIMIT, lenient=True)


def _folder(top: Path) -> list[Source]:
    """Every file in ``top`` and below holding fio's output, in name order; fio's
    per-second logs are read with their JSON, other files are skipped and said."""
    found, skipped = [], []
    for path in sorted(p for p in top.rglob("*") if p.is_file()):
        if is_log_file(path.name):
            continue
        try:
            with path.open("rb") as f:
                head = f.read(8192)
        except OSError as exc:
            raise ConfigError(f"cannot read {str(path)!r}: {exc.strerror}") from exc
        text = "" if b"\0" in head else _read(path)
        if text and looks_like_fio_output(text):
            found.append(Source(str(path), text, path))
        else:
            skipped.append(path.name)
    if skipped:
        shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5
                                           else "")
        err.print(f"Skipped {len(skipped)} file(s) in {top} without fio output: {shown}",
                  markup=False, highlight=False)
    return found
