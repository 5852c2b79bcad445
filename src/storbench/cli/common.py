"""What every command shares: the group, the consoles, the --db/--json/--assert options."""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.segment import Segment

from storbench.errors import EXIT_CODES_HELP, ConfigError, StoreError
from storbench.render.strict import finite
from storbench.render.text import harmless

if TYPE_CHECKING:  # `storbench --help` needs no store
    from storbench.result.record import Run
    from storbench.store import Store

F = TypeVar("F", bound=Callable[..., Any])

class SafeConsole(Console):
    """A console that shows control characters in what it prints (a label's escape
    sequence, from a shared database) instead of sending them to the terminal; its own
    styling and cursor control go through untouched (render/text.py)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if not self.is_terminal:  # a file or a log: a line too long is kept whole, not cut
            kwargs.setdefault("crop", False)
        super().print(*objects, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            s if s.control else Segment(harmless(s.text), s.style, s.control) for s in buffer)


def _columns() -> int | None:
    """COLUMNS as a user or a CI job set it (a number of at least 40), else None."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) >= 40 else None


out = SafeConsole(highlight=False, soft_wrap=False)
if not out.is_terminal:
    # pipes, files and CI logs: COLUMNS if set (a table wider is printed as blocks,
    # never cut), else as wide as each table is: no column ever left out
    out = SafeConsole(highlight=False, width=_columns() or 100_000)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True)


class Number(click.ParamType[float]):
    """A finite number (``--runtime nan`` or ``inf`` is no number of seconds)."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


NUMBER = Number()


class FiniteRange(click.FloatRange):
    """click's FloatRange, refusing nan (which no bound of its refuses: every comparison
    with nan is false)."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = NUMBER.convert(value, param, ctx)
        return super().convert(number, param, ctx)


def only_with(*rules: tuple[str, str, bool, str]) -> None:
    """ConfigError for an option given (on the command line or in its variable) that does
    nothing without another: ``(parameter, its flag, the other is given, the other)``;
    ``--max-regression 5%`` with no --baseline was ignored, unsaid."""
    for param, flag, other_given, other in rules:
        if not other_given and given(param):
            raise ConfigError(f"{flag} applies to {other}")


def none_with(other: str, *params: tuple[str, str]) -> None:
    """ConfigError for an option given (on the command line or in its variable) that
    does nothing with ``other``: ``(parameter, its flag)``."""
    for param, flag in params:
        if given(param):
            raise ConfigError(f"{flag} does nothing with {other}: leave it out")


def given(param: str) -> bool:
    """The current command's ``param`` was given: on the command line or in its
    variable (not a default)."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(param) in (
        ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def parse_tags(values: tuple[str, ...], given: str = "--tag ") -> dict[str, str]:
    """KEY=VALUE words as tags (``given``: how a message names where they came from)."""
    tags = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{given}{v!r} is not KEY=VALUE (example: {given}zone=us-east-1a)")
        tags[key.strip()] = val.strip()
    return tags


def db_option(f: F) -> F:
    """--db for a command that stores runs: the database is made if it is not there."""
    return _db_option(f, create=True)


def read_db_option(f: F) -> F:
    """--db for a command that reads or changes stored runs: a database that is not there
    reads as empty and is not made (`list --db typo.db` leaves no file behind)."""
    return _db_option(f, create=False)


def _db_option(f: F, create: bool) -> F:
    @click.option("--db", "db", type=click.Path(dir_okay=False), envvar="STORBENCH_DB",
                  default=None, show_envvar=True,
                  help="Results database: a SQLite file (default:"
                       " $XDG_DATA_HOME/storbench/results.db) or a team's PostgreSQL,"
                       " postgresql://user@host/dbname.")
    @functools.wraps(f)
    def wrapper(*args: Any, db: str | None, **kwargs: Any) -> Any:
        from storbench.store import Store, default_db_path

        # a --db a user gave (a typo too) makes no directories; the default place does
        store = Store(db or default_db_path(), make_dir=db is None, create=create)
        try:
            return f(*args, store=store, **kwargs)
        except store.errors as exc:
            raise database_error(store.path, exc, store.mask) from None
        finally:
            store.close()

    return wrapper  # type: ignore[return-value]


def searched_early(when: Callable[..., bool] | None = None) -> Callable[[F], F]:
    """For a command that may search a long series' figures as they are read
    (analysis/ahead.py; ``when`` its options ask for it, or always): the copy that
    searches made as the command begins, before its store is opened (above
    read_db_option), so that its imports take the other CPU while this process starts
    (PostgreSQL's client: ~90 ms), not while it reads; the command ends it where no
    Reading takes it (made_early)."""
    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when(**kwargs):
                return f(*args, **kwargs)
            from storbench.analysis.ahead import made_early

            with made_early():
                return f(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def load_run(store: Store, run_id: int) -> Run:
    """A stored run with its verdicts (judged now only if it predates stored verdicts)."""
    run = store.get_run(run_id)
    if run.verdicts is not None or run.status != "completed":
        return run  # the common case: no need to load the assertions' machinery
    from storbench.analysis.verdicts import with_verdicts

    return with_verdicts(run)


def database_error(path: str, exc: Exception,
                   *masks: Callable[[str], str]) -> StoreError:
    """A database error in our words: a damaged file says how to save what is readable;
    ``masks`` take the databases' secrets out of the driver's message."""
    said = str(exc).strip()
    for mask in masks:
        said = mask(said)
    # Python's sqlite3 quotes a whole stored text it cannot decode (a result's JSON, bytes
    # of garbage included): the column's name is enough.
    said, undecodable = re.subn(r"^(Could not decode to UTF-8 column '[^']*').*", r"\1",
                                said, flags=re.S)
    from storbench.store.sqlite import damaged

    return damaged(path, exc, said, bool(undecodable)) or StoreError(
        f"the results database {path!r}: {said}")


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
fio_option = click.option("--fio", "fio_path", envvar="STORBENCH_FIO", show_envvar=True,
                          help="fio binary to run (default: fio on PATH).")


def naming_options(f: F) -> F:
    """--label, --tag and --series of a run that is about to be made."""
    f = click.option("--series", metavar="NAME",
                     help="The history this run joins (`storbench history`; default: its"
                          " workload and storage, e.g. quick@host1:/mnt/vol, or"
                          " quick/size=4g@host1:/mnt/vol with --size; with several"
                          " targets, NAME-TARGET).")(f)
    f = click.option("--tag", "-t", "tags", multiple=True, metavar="KEY=VALUE",
                     help="Attach a tag (repeatable), e.g. --tag zone=a.")(f)
    return click.option("--label", "-l",
                        help="Name of the run in tables (e.g. gp3, nvme0; with several"
                             " targets, each run's label names its target).")(f)


MAX_REGRESSION = "10%"  # --max-regression's default


def assert_options(f: F) -> F:
    f = click.option("--max-regression", default=MAX_REGRESSION, show_default=True,
                     metavar="PERCENT",
                     help="With --baseline: how much worse a figure may get (beyond the"
                          " noise, when repeats measure it), e.g. 10% or 10 (a bare 0.1 is"
                          " refused: write 0.1% or 10%).")(f)
    f = click.option("--baseline", "-b", metavar="RUN|LABEL",
                     help="Fail when a headline figure got worse than in this run (an id,"
                          " or the latest run with this label).")(f)
    return click.option("--assert", "assertions", multiple=True, metavar="EXPR",
                        help="Fail (exit 3) unless EXPR holds, e.g. 'randread.iops >= 3000',"
                             " 'etcd.fdatasync.p99 < 10ms' (repeatable).")(f)


def percent(text: str, flag: str, example: str, *, below_100: bool = False) -> float:
    """A flag's percentage ("10%", "10") as a fraction, with a one-line error; a bare
    number below 1 ("0.1": 10% or 0.1%?) is refused as ambiguous."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):  # nan% passed: every comparison with it is false,
        # so --max-regression nan let any regression through
        raise ConfigError(f"{flag} {text!r} is not a percentage (e.g. {example})")
    if below_100 and not 0 <= value < 100:
        raise ConfigError(f"{flag} must be at least 0% and below 100%, not {text}")
    if value < 0:
        raise ConfigError(f"{flag} must not be negative, not {text}")
    if 0 < value < 1 and "%" not in text:  # 0.1 meant as 10% was 0.1%: noise failed it
        raise ConfigError(f"{flag} {text.strip()}: a fraction or a percentage? Write {value:g}% or"
                          f" {value * 100:g}%")
    return value / 100


def write_output(path: Path, text: str) -> bool:
    """``--output``: the file written (True), or ``-``: standard output (False); else
    ConfigError in the system's words."""
    if str(path) == "-":
        from storbench.render.text import harmless

        click.echo(harmless(text), nl=False)  # a label's escape sequence is never obeyed
        return False
    try:
        path.write_text(text)
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror}") from None
    return True


def print_json(doc: Any) -> None:
    """Strict JSON: a figure that is not a finite number is null."""
    click.echo(json.dumps(finite(doc), indent=2, allow_nan=False))


# Each command's module and its line in `storbench --help`: a command's module is
# imported only when it runs, so that `list` does not pay for what `run` or `report`
# need (tests/cli/test_startup.py checks these lines against the commands' own help).
COMMANDS: dict[str, tuple[str, str]] = {
    "agent": ("agent", "Serve this host to `storbench run --hosts`: runs `fio --server` in"
                       " the foreground."),
    "check": ("checking", "Check a stored run against assertions and/or a baseline; exit 3 if"
                          " one fails."),
    "compare": ("compare", "Compare runs side by side: one row per run, one column per"
                           " metric."),
    "curve": ("curve", "Measure an IOPS-latency curve: the highest rate that meets a latency"
                       " objective."),
    "neighbours": ("neighbours", "How much other tenants' I/O hurts yours: a workload at its rate,"
                                 " alone, then beside more and more aggressors on the same"
                                 " storage."),
    "cost": ("catalog", "Price sheets for `compare --cost` (dated, with their source)."),
    "db": ("db", "The results database: copy history between SQLite files and PostgreSQL."),
    "export": ("compare", "Export runs as Markdown or wiki tables, CSV or JSON (the full"
                          " model, base units), or as time series: OpenMetrics, InfluxDB"
                          " line protocol, NDJSON."),
    "history": ("trend", "Series of runs over time, and where a figure changed."),
    "import": ("importing", "Import fio's output from elsewhere as runs: JSON, json+, terse"
                            " or normal text."),
    "k8s": ("k8s", "Kubernetes: list StorageClasses, time their volumes' lifecycle,"
                   " remove what crashed runs left, build the runner image."),
    "label": ("history", "Give a stored run a new label (its name in tables); its results"
                         " never change."),
    "list": ("history", "List stored runs, newest first."),
    "push": ("push", "Push runs' figures to a Prometheus Pushgateway, grouped as"
                     ' job="storbench", instance=TARGET.'),
    "record": ("recording", "Record an application's I/O (on the files under DIR, or on a"
                            " whole device) as the workload NAME, to replay it on any"
                            " target later (`storbench run TARGET --replay NAME`)."),
    "reference": ("catalog", "Published reference figures (the studies storbench was built"
                             " from)."),
    "report": ("report", "Write an HTML report of 1 to 20 runs: charts, verdicts, warnings,"
                         " environments."),
    "rm": ("history", "Delete stored runs (results, environment and fio output)."),
    "series": ("trend", "Put runs in the series NAME (out of the one they were in)."),
    "run": ("run", "Run a suite (or a fio job file) on the directory TARGET and store the"
                   " results."),
    "show": ("history", "Show one run: results, verdicts and the environment it ran in."),
    "tag": ("history", "Add, change or remove tags of a stored run; its results never"
                       " change."),
    "workloads": ("recording", "List the recorded workloads (`storbench record`), or delete"
                               " one."),
    "suites": ("catalog", "List the built-in suites, or show one suite's tests and fio job"
                          " files."),
}


def load_command(name: str) -> None:
    """Import the module that defines command ``name`` (it registers itself)."""
    if name in COMMANDS:
        importlib.import_module(f"storbench.cli.{COMMANDS[name][0]}")


def load_all() -> None:
    for name in COMMANDS:
        load_command(name)


class LazyGroup(click.Group):
    """The top-level group: commands are listed from COMMANDS and loaded when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            load_command(cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            # not loaded: a stand-in with the line from COMMANDS, shortened the same way
            cmd = self.commands.get(name) or click.Command(name, help=COMMANDS[name][1])
            rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _version(ctx: click.Context) -> None:
    """storbench's version (git's, at build), the fio it would run, Python's."""
    import platform
    import sys

    import storbench
    from storbench.errors import FioError
    from storbench.execute.fio import find_fio

    try:
        fio = find_fio(os.environ.get("STORBENCH_FIO"))
        fio_text = f"{fio.version_text} ({fio.path})"
    except FioError as exc:
        fio_text = f"none: {exc}"
    click.echo(f"storbench {storbench.__version__}\nfio {fio_text}\n"
               f"Python {platform.python_version()} ({sys.executable})")
    ctx.exit()


@click.group(
    cls=LazyGroup,
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _, given: _version(ctx) if given else None,
              help="Show storbench's version, the fio it finds and Python's, and exit.")
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


