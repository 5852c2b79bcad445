"""Runs side by side: one row per run, one column per (test, metric)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from storbench.analysis.briefs import brief
from storbench.analysis.metrics import Metric, default_metrics, higher_is_better, metric, value
from storbench.analysis.references import Printed, printed
from storbench.analysis.stats import Estimate, Ratio, estimate, ratio, times, times_pm
from storbench.errors import ConfigError
from storbench.result import facts
from storbench.result.facts import published_figures
from storbench.result.record import Run, Verdict

if TYPE_CHECKING:
    from storbench.analysis.history import History
from storbench.workload.suites import SUITES


@dataclass(frozen=True)
class Column:
    test: str
    metric: Metric

    @property
    def title(self) -> str:
        return f"{self.test} {self.metric.label}"


@dataclass(frozen=True)
class Cell:
    estimate: Estimate | None  # over repeats; None = not measured (or the test failed)
    ratio: Ratio | None  # to the baseline's figure
    failed: bool
    printed: Printed | None = None  # a published figure as its study printed it
    caveats: tuple[str, ...] = ()  # the run's warnings on this test, in a few words
    # how the baseline's test of this name is another workload ("bs 64.0 KiB vs 4.0
    # KiB"; the first caveat too): its ratio is never better or worse
    unlike: str = ""

    @property
    def value(self) -> float | None:
        return self.estimate.center if self.estimate is not None else None


@dataclass(frozen=True)
class Comparison:
    runs: list[Run]
    columns: list[Column]
    cells: list[list[Cell]]  # [run index][column index]
    baseline: int | None  # index into runs
    caveats: list[list[str]] = field(default_factory=list)  # per run: "randread: page cache"
    outcomes: list[list[str]] = field(default_factory=list)  # per run: "FAIL etcd.… < 10ms"
    # the runs' series (storbench history): {series: {"randread.read.iops": History}}
    histories: Mapping[str, Mapping[str, History]] = field(default_factory=dict)

    def better(self, column: int, run: int) -> bool | None:
        """Whether ``run`` did better than the baseline in ``column`` (None: no ratio)."""
        r = self.cells[run][column].ratio
        if r is None:
            return None
        m = self.columns[column].metric
        return r.value > 1 if m.higher_is_better else r.value < 1


def headline(run: Run) -> list[Column]:
    """The columns a run contributes: its suite's headline metrics, or what each test did."""
    suite = SUITES.get(run.suite)
    specs = {t.name: t for t in suite.tests} if suite else {}
    cols = []
    given = published_figures(run.environment) if run.origin == "published" else {}
    for name, results in run.results_by_test().items():
        spec = specs.get(name)
        metrics = [metric(k) for k in spec.metrics] if spec else default_metrics(results[0])
        # a published run also brings every figure its study printed (study 4's clat mean)
        metrics += [m for k in given.get(name, []) if (m := metric(k)) not in metrics]
        cols += [Column(name, m) for m in metrics]
    return cols


def figure(run: Run, test: str, m: Metric) -> tuple[Estimate | None, bool]:
    """A metric of one test of a run over its repeats, and whether the test failed."""
    results = run.results_by_test().get(test, [])
    failed = any(r.error for r in results)
    return estimate(value(r, m) for r in results), failed


def compare(runs: list[Run], baseline: int | None = None,
            histories: Mapping[str, Mapping[str, History]] | None = None) -> Comparison:
    """Build the comparison once; renderers never recompute a ratio."""
    columns: list[Column] = []
    for run in runs:
        for col in headline(run):
            if col not in columns:
                columns.append(col)
    cells = []
    for run in runs:
        row = []
        for col in columns:
            est, failed = figure(run, col.test, col.metric)
            r = None
            said: list[str] = []
            unlike = ""
            if baseline is not None and est is not None:
                base, _ = figure(runs[baseline], col.test, col.metric)
                r = ratio(est, base) if base is not None else None
                unlike = ", ".join(unlike_workload(run, runs[baseline], col.test)) if r else ""
                said = [f"{UNLIKE} than {runs[baseline].name}'s: {unlike}"] if unlike else []
            shown = facts.printed(run.environment, col.test, col.metric.key)
            row.append(Cell(est, r, failed, printed(shown) if shown else None,
                            tuple(said + test_caveats(run, col)), unlike))
        cells.append(row)
    return Comparison(runs, columns, cells, baseline, [run_caveats(r) for r in runs],
                      [outcomes(r) for r in runs], histories or {})


def select(comp: Comparison, chosen: list[str]) -> Comparison:
    """Only the columns named, in the order named: a test (``etcd``), a figure
    (``sync.lat_p99``) or both (``etcd.sync.lat_p99``)."""
    keep: list[int] = []
    for name in chosen:
        found = [j for j, c in enumerate(comp.columns)
                 if name in (c.test, c.metric.key, f"{c.test}.{c.metric.key}")]
        if not found:
            have = ", ".join(f"{c.test}.{c.metric.key}" for c in comp.columns)
            raise ConfigError(f"--columns: no figure {name!r} in these runs; they have: {have}")
        keep += [j for j in found if j not in keep]
    return replace(comp, columns=[comp.columns[j] for j in keep],
                   cells=[[row[j] for j in keep] for row in comp.cells])


UNLIKE = "another workload"  # a ratio of two tests that share a name, not a workload
# fio's options that make a workload what it is, and their other names
_WORKLOAD = {"rw": ("rw", "readwrite"), "bs": ("bs", "blocksize"), "bssplit": ("bssplit",),
             "iodepth": ("iodepth",), "numjobs": ("numjobs",), "ioengine": ("ioengine",),
             "direct": ("direct",), "rwmixread": ("rwmixread",), "fsync": ("fsync",),
             "fdatasync": ("fdatasync",), "sync": ("sync",), "rate_iops": ("rate_iops",),
             "rate": ("rate",)}


def _workload(options: Mapping[str, str]) -> dict[str, str]:
    """The options of ``_WORKLOAD`` a test's fio output names, as fio means them
    (readwrite=rw, 4k = 4096 = 4K); an option not named is not known (an imported text
    or terse output names few), never taken for fio's default."""
    from storbench.workload.sizes import parse_count, parse_size

    low = {k.lower(): v.strip() for k, v in options.items()}
    out = {}
    for key, names in _WORKLOAD.items():
        given = next((low[n] for n in names if n in low), None)
        if given is None:
            continue
        if key == "rw":
            given = {"readwrite": "rw"}.get(given, given)
        elif key == "bs":
            size = parse_size(given)
            given = str(size) if size is not None else given.lower()
        elif key in ("iodepth", "numjobs", "fsync", "fdatasync", "rwmixread", "rate_iops"):
            given = str(parse_count(given, default=-1))
        out[key] = given.lower()
    return out


def unlike_workload(run: Run, base: Run, test: str) -> list[str]:
    """How test ``test`` of ``run`` differs from the same-named test of ``base`` in
    the options both name ("bs 64k vs 4k"): a ratio across them compares workloads,
    not storage (a job file's test renamed, another version of a suite)."""
    from storbench.workload.sizes import format_bytes_iec

    mine, theirs = (run.results_by_test().get(test), base.results_by_test().get(test))
    if not mine or not theirs:
        return []
    a, b = _workload(mine[0].options), _workload(theirs[0].options)

    def said(key: str, v: str) -> str:
        return format_bytes_iec(int(v)) if key == "bs" and v.isdigit() else v

    return [f"{k} {said(k, a[k])} vs {said(k, b[k])}" for k in a if k in b and a[k] != b[k]]


def test_caveats(run: Run, col: Column) -> list[str]:
    """The run's warnings about this test (and this direction, where they name one)."""
    out: list[str] = []
    for w in run.warnings:
        direction = w.details.get("direction")
        if w.test != col.test or direction not in (None, col.metric.direction):
            continue
        if (text := brief(w)) not in out:
            out.append(text)
    return out


def run_caveats(run: Run) -> list[str]:
    """How a run that did not complete ended (blank cells say nothing), then each
    warning in a few words with the tests it concerns ("every test" when all)."""
    tests_of: dict[str, list[str]] = {}
    for w in run.warnings:
        named = tests_of.setdefault(brief(w), [])
        if w.test not in named:
            named.append(w.test)
    every = set(run.results_by_test())
    return ended(run) + [
        f"{'every test' if len(tests) > 1 and set(tests) >= every else ', '.join(tests)}:"
        f" {text}" for text, tests in tests_of.items()]


def ended(run: Run) -> list[str]:
    """How a run that did not complete ended, in fio's words: "run failed: fio exited
    with status 1: …" (its error's first line, cut at 120 characters)."""
    if run.status == "completed" or run.origin == "published":
        return []
    said = run.error.splitlines()[0] if run.error else ""
    said = said if len(said) <= 120 else said[:119] + "…"
    return [f"run {run.status}" + (f": {said}" if said else "")]


def outcomes(run: Run) -> list[str]:
    """Each verdict in a word and its rule: "PASS etcd.fdatasync.p99 < 10ms"; a verdict
    judged open loop (`--rate`) says so when the closed-loop test beside it, the figure
    a reader sees in the table, would have been judged the other way."""
    return [verdict_brief(v) + _other_loop(run, v) for v in run.judged]


def _other_loop(run: Run, v: Verdict) -> str:
    from storbench.analysis.assertions import OPS, Assertion

    try:
        a = Assertion.parse(v.assertion)
    except ConfigError:
        return ""
    closed = a.test.removesuffix("_rated")
    results = run.results_by_test().get(closed)
    if closed == a.test or not results or v.metric is None or v.limit is None:
        return ""
    est = estimate(value(r, metric(v.metric)) for r in results)
    if est is None or OPS[a.op](est.center, v.limit) == v.passed:
        return ""
    rate = run.settings.get("rate_iops")
    at = f" at {rate:,.0f} writes/s" if isinstance(rate, (int, float)) else ""
    return (f" — judged open loop{at} ({a.test}); the closed-loop {closed} (writing as"
            f" fast as it can) would {'PASS' if not v.passed else 'FAIL'} it")


def verdict_brief(v: Verdict) -> str:
    """"PASS etcd.fdatasync.p99 < 10ms (fsync on tmpfs is a no-op …)": the verdict and
    the gist of each thing to know about it."""
    gist = [part.split(":", 1)[0].strip() for part in v.note.split("; ") if part.strip()]
    return f"{'PASS' if v.passed else 'FAIL'} {v.assertion}" + (
        f" ({'; '.join(gist)})" if gist else "")


def sentences(comp: Comparison) -> list[str]:
    """hyperfine-style wording: "io2: 1.52 ± 0.03 × the randread read IOPS of gp3"."""
    if comp.baseline is None:
        return []
    base = comp.runs[comp.baseline]
    out = []
    for i, run in enumerate(comp.runs):
        if i == comp.baseline:
            continue
        for j, col in enumerate(comp.columns):
            r = comp.cells[i][j].ratio
            if r is None:
                continue
            text = f"{run.name}: {times_pm(r.value, r.ci95)} × the {col.title} of {base.name}"
            word = ratio_word(comp, i, j)
            text += f" ({word})" if word else ""
            # a ratio is only as good as its two figures: say what is wrong with them
            said = [f"{who.name}: {', '.join(c.caveats)}" for who, c in
                    ((run, comp.cells[i][j]), (base, comp.cells[comp.baseline][j])) if c.caveats]
            if said:
                text += f" — caveats: {'; '.join(said)}"
            out.append(text)
    return out + answer_sentences(comp)


def answer_sentences(comp: Comparison) -> list[str]:
    """The kinds' answers a run shares with the baseline (an application's TPS, a
    curve's IOPS at the objective) as ratios: "#4: 0.39 × the postgresql.tps (pgbench
    TPC-B TPS, 1 client) of #2 (worse)" (`compare` of two PostgreSQL runs gave only fio's
    ratios)."""
    from storbench.analysis.views import answers_of

    if comp.baseline is None:
        return []
    base = comp.runs[comp.baseline]
    theirs = answers_of(base.data)
    out = []
    for i, run in enumerate(comp.runs):
        if run is base:
            continue
        # a test of another workload than the baseline's: its answers judge two workloads
        unlike = any(c.unlike for c in comp.cells[i])
        for (prefix, n), a in answers_of(run.data).items():
            b = theirs.get((prefix, n))
            if b is None or not b.value or b.kind != a.kind or a.value is None:
                continue
            name, r = f"{prefix}.{n}", a.value / b.value
            word = UNLIKE if unlike else _by_history(comp, base, run, name, r)
            if word is None and times(r) != times(1.0):
                word = "better" if (r > 1) == higher_is_better(a.kind) else "worse"
            what = f"{name} ({a.label})" if a.label else name
            out.append(f"{run.name}: {times(r)} × the {what} of {base.name}"
                       + (f" ({word})" if word else ""))
    return out


def ratio_word(comp: Comparison, i: int, j: int) -> str | None:
    """What run ``i``'s ratio to the baseline in column ``j`` means: 'worse: change at
    run #42' or 'within noise, ±3%' (their series), 'within noise' (their repeats),
    'better' or 'worse'; None without a ratio or a direction, or for a ratio shown as
    1.00 with nothing to judge its noise by."""
    r = comp.cells[i][j].ratio
    if comp.baseline is None or r is None:
        return None
    if comp.cells[i][j].unlike:
        return UNLIKE  # better or worse would judge storage on two workloads
    col = comp.columns[j]
    told = _by_history(comp, comp.runs[comp.baseline], comp.runs[i],
                       f"{col.test}.{col.metric.key}", r.value)
    if told:
        return told
    if r.within_noise:
        return "within noise"
    if times(r.value) == times(1.0):
        return None  # shown as 1.00: a direction would claim a change the figure does not show
    better = comp.better(j, i)
    return "better" if better else "worse" if better is False else None


def _by_history(comp: Comparison, base: Run, run: Run, figure: str, ratio: float
                ) -> str | None:
    """What the two runs' series says of their ratio: 'worse: change at run #42' when a
    change point lies between them, 'within noise, ±3%' when the ratio is within what
    two runs of the storage differ by at one level (`History.pair_noise`); None when
    they are in no series together."""
    if base.series is None or base.series != run.series:
        return None
    h = comp.histories.get(base.series, {}).get(figure)
    where = {run: i for i, run in enumerate(h.points.runs)} if h else {}
    if h is None or base.id not in where or run.id not in where:
        return None
    lo, hi = sorted((where[base.id], where[run.id]))
    between = [c for c in h.changes if lo < c.index <= hi]
    if between:
        c = between[-1]
        return f"{'worse' if c.worse else 'better'}: change at run #{c.run}"
    step = h.shift
    if step is not None and lo < step.index <= hi:
        return f"{'worse' if step.worse else 'better'}: a step at run #{step.run}, unproven"
    noise = h.pair_noise(where[base.id])
    if noise is not None and abs(ratio - 1) <= noise:
        return f"within noise, ±{100 * noise:.{1 if noise < 0.1 else 0}f}%"
    return None
