"""What every command shares: the group, the consoles, the --db/--json/--assert options."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

from storbench import __version__
from storbench.analysis.verdicts import with_verdicts
from storbench.errors import EXIT_CODES_HELP, ConfigError, StoreError
from storbench.render.json import finite
from storbench.result.record import Run
from storbench.store import Store, default_db_path

F = TypeVar("F", bound=Callable[..., Any])

out = Console(highlight=False, soft_wrap=False)
if not out.is_terminal:
    out = Console(highlight=False, width=200)  # pipes and CI: never truncate a table
err = Console(stderr=True, highlight=False, soft_wrap=True)


def parse_tags(values: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise ConfigError(f"--tag {v!r} is not key=value (example: --tag zone=us-east-1a)")
        tags[key.strip()] = val.strip()
    return tags


def db_option(f: F) -> F:
    @click.option("--db", "db", type=click.Path(dir_okay=False), envvar="STORBENCH_DB",
                  default=None, show_envvar=True,
                  help="Results database (default: $XDG_DATA_HOME/storbench/results.db).")
    @functools.wraps(f)
    def wrapper(*args: Any, db: str | None, **kwargs: Any) -> Any:
        store = Store(db or default_db_path())
        try:
            return f(*args, store=store, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise database_error(store.path, exc) from None
        finally:
            store.close()

    return wrapper  # type: ignore[return-value]


def load_run(store: Store, run_id: int) -> Run:
    """A stored run with its verdicts (judged now only if it predates stored verdicts)."""
    return with_verdicts(store.get_run(run_id))


def database_error(path: str, exc: sqlite3.DatabaseError) -> StoreError:
    """A database error in our words: a damaged file says how to save what is readable."""
    said = str(exc)
    if type(exc) is sqlite3.DatabaseError or "malformed" in said or "not a database" in said:
        return StoreError(
            f"the results database {path!r} is damaged ({said}); recover what is readable"
            f" with: sqlite3 {path!r} .recover | sqlite3 recovered.db, then pass --db"
            " recovered.db")
    return StoreError(f"the results database {path!r}: {said}")


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def assert_options(f: F) -> F:
    f = click.option("--max-regression", default="10%", show_default=True, metavar="PERCENT",
                     help="With --baseline: how much worse a figure may get (beyond the"
                          " noise, when repeats measure it).")(f)
    f = click.option("--baseline", "-b", metavar="RUN|LABEL",
                     help="Fail when a headline figure got worse than in this run (an id,"
                          " or the latest run with this label).")(f)
    return click.option("--assert", "assertions", multiple=True, metavar="EXPR",
                        help="Fail (exit 3) unless EXPR holds, e.g. 'randread.iops >= 3000',"
                             " 'etcd.fdatasync.p99 < 10ms' (repeatable).")(f)


def print_json(doc: Any) -> None:
    """Strict JSON: a figure that is not a finite number is null."""
    click.echo(json.dumps(finite(doc), indent=2, allow_nan=False))


@click.group(
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="storbench")
@click.option("--debug", is_flag=True, envvar="STORBENCH_DEBUG",
              help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Benchmark storage with fio, keep every result, compare runs.

    \b
    Example:
      storbench run /mnt/data                     # the `quick` suite
      storbench run /mnt/data --suite etcd --label nvme
      storbench list; storbench compare 1 2
    """
    ctx.obj = {"debug": debug}


