"""The history of a storage: `storbench history` (series, a figure over the runs, its
change points) and `storbench series` (put runs in a series by hand)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from storbench.analysis import history as hist
from storbench.analysis.naming import check_series_name
from storbench.cli.common import (
    MAX_REGRESSION,
    cli,
    err,
    json_option,
    load_run,
    only_with,
    out,
    percent,
    print_json,
    read_db_option,
    searched_early,
)
from storbench.cli.histories import answered, every_history, figure_history, histories
from storbench.cli.kept import kept, read_kept
from storbench.errors import ConfigError
from storbench.result.record import Run
from storbench.store import Store
from storbench.store.changes import (
    ChangeCache,
    latest_runs,
    no_change_key,
    question_key,
    series_runs,
    sharing,
)
from storbench.store.series import (
    series_exists,
    series_last,
    series_left_out,
    series_list,
    series_of,
    series_workloads,
    set_series,
)


def resolve_series(store: Store, ref: str) -> str:
    """A series from what a user typed: its name, or its number in `storbench history`."""
    if series_exists(store, ref):
        return ref
    names = [row[0] for row in series_list(store)]
    if ref.isascii() and ref.isdigit() and 1 <= int(ref) <= len(names):
        return names[int(ref) - 1]
    left = series_left_out(store, ref)
    if left:  # `show --json` names its series: it is there, with nothing to follow
        shown = ", ".join(f"#{i} {status}" for i, status in left[:5])
        raise ConfigError(f"series {ref!r} holds no completed run ({shown}): a history"
                          " follows completed runs only")
    raise ConfigError(f"no series {ref!r} in {store.path}; `storbench history` lists them")


def say_left_out(store: Store, name: str) -> None:
    """Say the runs of series ``name`` that history leaves out: they did not complete."""
    left = series_left_out(store, name)
    if left:
        shown = ", ".join(f"#{i} {status}" for i, status in left[:5])
        more = f", and {len(left) - 5} more" if len(left) > 5 else ""
        err.print(f"Left out: {len(left)} run(s) of series {name!r} that did not complete"
                  f" ({shown}{more}): a history follows completed runs only.", markup=False)


SERIES_RUNS = 6  # compare, export, report and push consult a series this long


def series_histories(store: Store, runs: list[Run], *, every: bool = False
                     ) -> dict[str, dict[str, hist.History]]:
    """The histories of the series two or more of ``runs`` share (for 'within noise'),
    or with ``every`` of each run's series (for their change points); only of a series
    of SERIES_RUNS runs or more: fewer say little of its noise, and finding change points
    costs a moment (`history` and `check --no-change` look at any series)."""
    from collections import Counter

    wanted = [name for name, n in Counter(r.series for r in runs if r.series).items()
              if n > 1 or every]
    if not wanted:
        return {}
    long_enough = {name for name, n, _, _ in series_list(store) if n >= SERIES_RUNS}
    return {name: {h.figure.name: h for h in histories(store, name)} for name in wanted
            if name in long_enough}


REFRESH_RUNS = 40  # a shorter series' first answer takes well under a second anyway


def refresh(store: Store, runs: list[Run]) -> None:
    """After new runs are stored: find their series' change points now, while the run
    ends, and keep them (store.changes), so that `history`, `check --no-change` and
    `compare` answer at once afterwards (a 100,000-run series' first answer otherwise
    waits ~1.5 s). Only series of REFRESH_RUNS runs or more;
    a failure here is said and changes nothing stored."""
    refresh_series(store, {r.series for r in runs if r.series and r.status == "completed"})


def refresh_series(store: Store, names: set[str],
                   say: Callable[[int], str] | None = None) -> None:
    """refresh's work for the series ``names`` (those of REFRESH_RUNS runs or more);
    ``say``: the line said first, given their number (nothing said when none)."""
    if not names:
        return
    long_enough = {name for name, n, _, _ in series_list(store) if n >= REFRESH_RUNS}
    if say is not None and names & long_enough:
        err.print(say(len(names & long_enough)), markup=False)
    for name in sorted(names & long_enough):
        try:
            # the newest run's --no-change answer, from the whole series' history,
            # which is kept for `history NAME` (and `history`) too
            latest = series_last(store, name)
            if latest is not None:
                with sharing(store):  # for every machine that reads this store
                    keep_answer(store, name, latest)
        except Exception as exc:  # the history is a cache here: it says why when asked
            err.print(f"storbench: the history of series {name!r} was not brought up to"
                      f" date ({type(exc).__name__}: {exc}); `storbench history` will"
                      " retry", markup=False)


@cli.command(name="history")
@click.argument("series", required=False)
@click.option("--metric", "-m", metavar="TEST.DIRECTION.FIGURE",
              help="The figure to follow run by run, e.g. randread.read.iops,"
                   " etcd.sync.lat_p99, or an application's answer, postgresql.tps"
                   " (default: an overview of every headline figure).")
@click.option("--all", "every", is_flag=True,
              help="With --metric: a row for every run (a series longer than 60 runs shows"
                   " the runs around each change and the latest ten).")
@click.option("--min-change", default="5%", show_default=True, metavar="PERCENT",
              help="A smaller change of a figure's level is not called a change (e.g."
                   " 5% or 5; a bare 0.05 is refused: write 0.05% or 5%).")
@json_option
@searched_early()  # (a cold answer reads a long series' figures)
@read_db_option
def history_(store: Store, series: str | None, metric: str | None, every: bool,
             min_change: str, as_json: bool) -> None:
    """Series of runs over time, and where a figure changed.

    Runs of the same suite on the same storage form a series (named SUITE@HOST:PATH,
    SUITE@CONTEXT:storageclass/NAME, ...; or given with `run --series NAME`). Without
    SERIES, list them, oldest first. With SERIES (its name, or its # in that list: a new
    series never moves it; scripts should use the name): every headline figure and
    application answer, its noise and its change points; with --metric, that figure run
    by run.

    A change point is where a figure's level moved and stayed: found with E-Divisive
    means and a t-test (Apache Otava), significant at p < 0.001, at least --min-change,
    with 2 runs or more on each side (one odd run is an outlier, not a change).

    \b
    Example:
      storbench history
      storbench history 'quick@db1:/var/lib/postgresql'
      storbench history nightly-gp3 --metric randread.read.iops
      storbench history nightly-gp3 --metric etcd.sync.lat_p99 --json
      storbench history pg-gp3 --metric postgresql.tps
      storbench history 2
    """
    from storbench.render import history as render

    only_with(("metric", "--metric", series is not None, "a SERIES (`storbench history NAME"
                                                         " --metric FIGURE`)"),
              ("every", "--all", metric is not None, "--metric"))
    floor = percent(min_change, "--min-change", "5%", below_100=True)
    if series is None:
        rows = []
        listed = series_list(store)
        each = every_history(store, [(name, n) for name, n, _, _ in listed], floor)
        for name, n, first, last in listed:
            changes = [(c, h) for h in each[name] for c in h.changes]
            newest = max(changes, key=lambda ch: ch[0].run, default=None)
            said = (f"run #{newest[0].run}: {newest[1].figure.name}"
                    f" {100 * newest[0].relative:+.1f}%") if newest else ""
            rows.append((name, n, first, last, said))
        if as_json:
            print_json([{"series": r[0], "runs": r[1], "first": r[2], "last": r[3],
                         "last_change": r[4] or None} for r in rows])
        elif not rows:
            err.print(f"No series in {store.path} yet: every completed `storbench run` joins"
                      " one.", markup=False)
        else:
            render.print_series_list(out, rows)
        return
    name = resolve_series(store, series)
    say_left_out(store, name)
    if metric is None:
        found = histories(store, name, min_change=floor)
        if as_json:
            print_json([render.history_dict(h) for h in found])
        elif not found:
            err.print(f"Series {name!r} has no completed run with figures.", markup=False)
        else:
            render.print_overview(out, found)
        return
    # the series' overview, kept as a run ended (refresh), holds its headline figures
    runs = series_runs(store, name)
    overview = read_kept(store, ["history", floor], name, runs)
    h = next((h for h in overview or [] if h.figure.name == metric), None) or kept(
        store, ["history --metric", metric, floor], name,
        lambda: [_metric_history(store, name, metric, floor)], runs)[0]
    if as_json:
        print_json(render.history_dict(h))
    else:
        render.print_history(out, h, every)


def _metric_history(store: Store, name: str, metric: str, floor: float) -> hist.History:
    """`history NAME --metric METRIC`'s answer, found from the series' figures."""
    answers = {f.name: (f, pts) for f, pts in answered(store, name).items()}
    found: hist.History | None = None
    pts: Sequence[hist.Point]
    if metric in answers:  # an application's answer (postgresql.tps), a curve's
        fig, pts = answers[metric]
    else:
        try:
            fig = hist.Figure.parse(_with_direction(store, name, metric))
        except ConfigError as e:
            said = f"; the series' answers are {', '.join(answers)}" if answers else ""
            raise ConfigError(f"{e}{said}") from None
        found = figure_history(store, name, fig, floor)
        pts = found.points
    if not pts:
        known = ", ".join(h.figure.name for h in histories(store, name))
        raise ConfigError(f"series {name!r} has no figure {fig.name!r}"
                          + (f"; it has {known}" if known else ""))
    return found if found is not None else hist.history(
        name, fig, pts, min_change=floor, cache=ChangeCache(),
        workloads=series_workloads(store, name))


def _with_direction(store: Store, name: str, metric: str) -> str:
    """TEST.FIGURE as --assert takes it (randread.iops): the one direction of the series'
    figures that has it (randread.read.iops); any other name as it is."""
    test, dot, figure = metric.rpartition(".")
    if not dot or "." in test:
        return metric
    found = {h.figure.name for h in histories(store, name)
             if h.figure.name in (f"{test}.{d}.{figure}" for d in ("read", "write", "trim"))}
    return found.pop() if len(found) == 1 else metric


@cli.command(name="series")
@click.argument("name")
@click.argument("run_refs", metavar="RUN...", nargs=-1, required=True)
@read_db_option
def series_(store: Store, name: str, run_refs: tuple[str, ...]) -> None:
    """Put runs in the series NAME (out of the one they were in).

    A run joins a series when it starts (`run --series NAME`, else its suite and
    storage); this moves runs measured before a rename, or imported ones.

    \b
    Example:
      storbench series nightly-gp3 12 13 14
    """
    check_series_name(name)
    ids = list(dict.fromkeys(store.resolve(r) for r in run_refs))
    was = {series_of(store, i) for i in ids}
    set_series(store, ids, name)
    left = {i for i, _ in series_left_out(store, name)} & set(ids)
    note = (f" ({len(left)} did not complete: `storbench history` leaves them out)"
            if left else "")
    err.print(f"{len(ids)} run(s) now in series {name!r}{note}.", markup=False)
    # the answers of the series they left and joined, kept as a run keeps its series'
    refresh_series(store, {n for n in (*was, name) if n},
                   lambda n: f"Finding the change points of {n} series whose runs moved")


# -- check --no-change: the answer of a series' run, kept ----------------------------

Shift = tuple[str, dict[str, Any], bool]  # (figure, the change, failed)


def no_change(store: Store, r: Run, name: str, limit: float, key: str | None = None,
              runs: str | None = None, keep_history: bool = True) -> list[Shift]:
    """--no-change: per headline figure of series ``name`` (its runs up to run ``r``),
    the change that began the stretch the run is in: (figure, the change, failed); kept
    (store/changes.py) under a digest of what it depends on (no_change_key), so that it
    is read (cli/checking.py), not found again, when asked again or right after the run
    that kept it (keep_answer); ``key`` and ``runs`` (latest_runs): its key and the
    digest of the series' runs, when the caller has them already. ``keep_history``: the
    series' whole history is kept too (as a run ends: refresh), not only read where it
    was (`check`: histories' ``keep``)."""
    if key is None:
        runs = latest_runs(store, name, r.id)
        key = no_change_key(store, name, r.id, limit, runs)
    out = _found(store, r, name, limit, runs, keep_history)
    # (the store keeps one a series and limit: the latest run's, as refresh keeps it)
    ChangeCache(store=store).put(key, [[n, c, b] for n, c, b in out],
                                 question=question_key(["check --no-change", limit], name))
    return out


def keep_answer(store: Store, name: str, run_id: int) -> None:
    """Find and keep the --no-change answer of a series' newest run at the default
    --max-regression (cli/trend.refresh, as a run or an import ends: a `check SERIES
    --no-change` in CI right after it reads it, not 100,000 runs' figures)."""
    try:
        no_change(store, load_run(store, run_id), name, percent(MAX_REGRESSION, "",
                                                              MAX_REGRESSION))
    except ConfigError:  # no figure of that run to follow: the series' change points kept
        histories(store, name)


def _found(store: Store, r: Run, name: str, limit: float, runs: str | None,
           keep_history: bool) -> list[Shift]:
    """no_change's answer, found; ``runs``: latest_runs's (None: ``r`` is not the
    series' latest run)."""
    from storbench.render.history import change_text, shift_words, step_text

    # the newest run's: the whole series' answer, kept for `history` too (refresh)
    found = (histories(store, name, runs=runs, keep=keep_history) if runs is not None else
             histories(store, name, up_to=r.id))
    out: list[Shift] = []
    for h in found:
        index = h.points.index_of(r.id)
        if index is None:
            continue
        c = h.last_change_before(index)
        if c is None:
            runs = f"{len(h.points)} run{'s' if len(h.points) != 1 else ''}"
            said = (f"too few runs to tell: series {name!r} has {runs} (a change needs"
                    f" {hist.MIN_RUNS} runs on each side)" if h.too_short else
                    f"no change in the {runs} of series {name!r}")
            if h.shift is not None and h.shift.index <= index:  # said, not failed on
                said += f"; {step_text(h)}"
            out.append((h.figure.name, {"run": None, "said": said}, False))
            continue
        bad = c.worse and abs(c.relative) > limit
        shift = shift_words(h, c.run)
        out.append((h.figure.name, {"run": c.run, "relative_change": c.relative,
                                    "pvalue": c.pvalue, "workload_changed": bool(shift),
                                    "said": f"since run #{c.run}: "
                                            + change_text(c, h.figure.metric.kind)
                                            + (f"; {shift}" if shift else "")
                                            + (f"; within --max-regression {limit:.0%}"
                                               if c.worse and not bad else "")}, bad))
    if not out:
        raise ConfigError(f"series {name!r} has no figure of run #{r.id} to follow")
    return out
