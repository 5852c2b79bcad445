"""`storbench db`: the results database itself (copy history between stores)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from storbench.cli.common import cli, database_error, err, out
from storbench.errors import ConfigError
from storbench.store import Store
from storbench.store.postgres import is_url

PROGRESS_S = 2.0  # db copy: a progress line at most this often


@cli.group()
def db() -> None:
    """The results database: copy history between SQLite files and PostgreSQL.

    Every command takes --db (or STORBENCH_DB): a SQLite file, or a team's PostgreSQL
    as postgresql://user@host/dbname (docs/teams.md).

    \b
    Example:
      storbench db copy results.db postgresql://bench@db.example.com/storbench
    """


def _open(where: str, *, must_exist: bool) -> Store:
    if not where.strip():  # SQLite would open a temporary database: the copy would vanish
        raise ConfigError(f"{where!r} names no database: give a SQLite file or a"
                          " postgresql:// URL (an unset variable?)")
    if must_exist and not is_url(where) and not Path(where).is_file():
        raise ConfigError(f"{where}: no such database file")
    return Store(where, make_dir=False)


@db.command("copy")
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
def copy(src: str, dst: str) -> None:
    """Copy every finished run of SRC into DST: SQLite files or postgresql:// URLs.

    A run is known by its uid: one that DST already holds is not copied again, so a
    copy can be repeated (and interrupted). Copied runs keep their times, status,
    results, fio output, warnings and verdicts, and get DST's next ids. A run still
    running in SRC is not copied. Recorded workloads (`storbench record`) are copied
    too, those whose name DST lacks. The change points of each series runs were copied
    into (40 runs or more) are found and kept in DST, for every machine that reads it.

    \b
    Example:
      storbench db copy ~/.local/share/storbench/results.db postgresql://bench@db/storbench
      storbench db copy ci-runner-7.db "$STORBENCH_DB"
      storbench db copy postgresql://bench@db/storbench laptop.db     # and back
    """
    from storbench.cli.trend import refresh_series
    from storbench.store import workloads
    from storbench.store.copy import copy_runs

    if not is_url(src) and not is_url(dst) and Path(dst).exists() and \
            Path(src).resolve() == Path(dst).resolve():
        raise ConfigError(f"{src} and {dst} are the same database: nothing to copy")
    source = _open(src, must_exist=True)
    try:
        target = _open(dst, must_exist=False)
        try:
            said = [time.monotonic()]

            def progress(i: int, n: int) -> None:
                # a line every PROGRESS_S, and the last (every 50 runs, a copy of 100,000
                # runs said 2,000 lines)
                if i == n or time.monotonic() - said[0] >= PROGRESS_S:
                    said[0] = time.monotonic()
                    err.print(f"  {i:,}/{n:,} runs looked at ({100 * i // max(n, 1)}%)",
                              markup=False)

            try:
                done = copy_runs(source, target, progress)
                recorded, had = workloads.copy(source, target)
                # the answers of the series copied into, as a run keeps its series'
                # (the source's name its own run ids, not these)
                refresh_series(target, done.series, lambda n: (
                    f"Finding the change points of {n} series runs were copied into, kept in"
                    f" {target.path} for every machine that reads it"))
            except (*source.errors, *target.errors) as exc:
                raise database_error(f"{source.path} -> {target.path}", exc, source.mask,
                                     target.mask) from None
        finally:
            target.close()
    finally:
        source.close()
    out.print(f"Copied {len(done.copied)} run(s) from {source.path} to {target.path};"
              f" {len(done.already)} were there already.", markup=False)
    for uid, old, new in done.copied:
        out.print(f"  #{old} -> #{new} ({uid})", markup=False)
    if recorded or had:
        out.print(f"Copied {len(recorded)} recorded workload(s)"
                  + (f"; {', '.join(had)} were there already (same name, not replaced)"
                     if had else "") + ".", markup=False)
    if done.running:
        out.print(f"Not copied, still running: {', '.join(f'#{i}' for _, i in done.running)}",
                  markup=False)
