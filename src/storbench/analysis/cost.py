"""Price sheets and what a compared run's performance costs per month.

A sheet (YAML; built-in ones in data/costs.yaml, dated, with their source) gives $
per GB-month, the IOPS and throughput included, and $ per provisioned IOPS-month and
MB/s-month above that. A run is priced for the capacity asked for, provisioned with
the performance it achieved: its best IOPS and bandwidth figures in the comparison,
above what the sheet includes and up to the sheet's maximum, unless the
provisioned IOPS and MB/s are given. Then $ per 1,000 IOPS and per MB/s achieved.
An object store's sheet also prices its requests ($ per 1,000 PUTs and GETs): each
object test's requests at the rate it measured, as $ an hour of that load.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from storbench.analysis.briefs import brief
from storbench.analysis.compare import Comparison
from storbench.analysis.metrics import metric, value
from storbench.errors import ConfigError

GB = 1e9  # AWS bills decimal GB
MB = 1e6


@dataclass(frozen=True)
class CostSheet:
    name: str
    per_gb_month: float
    date: str
    source: str
    title: str = ""
    currency: str = "USD"
    included_iops: float = 0.0
    included_mbps: float = 0.0
    per_iops_month: float = 0.0
    per_mbps_month: float = 0.0
    max_iops: float | None = None
    max_mbps: float | None = None
    fixed_month: float = 0.0  # a monthly fee whatever the capacity (instances, licences)
    # an object store's requests: $ per 1,000 PUTs (and COPY, POST, LIST), per 1,000 GETs
    # (and the others but DELETE, which S3 does not charge)
    per_1000_put: float = 0.0
    per_1000_get: float = 0.0


def load_sheets(text: str, source: str) -> list[CostSheet]:
    """Sheets from YAML: one mapping or a list of them. ConfigError says what is wrong."""
    import yaml  # only when a sheet is read: keeps start-up fast

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # one line: what is wrong, and where
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: not YAML: {problem}{where}") from None
    items = doc if isinstance(doc, list) else [doc]
    known = {f.name for f in fields(CostSheet)}
    sheets = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise ConfigError(f"{source}: sheet {i} is not a mapping of fields")
        unknown = sorted(set(item) - known)
        missing = [k for k in ("name", "per_gb_month", "date", "source") if k not in item]
        if unknown or missing:
            raise ConfigError(f"{source}: sheet {i}: "
                              + "; ".join(x for x in (
                                  f"unknown field(s) {', '.join(unknown)}" if unknown else "",
                                  f"missing {', '.join(missing)}" if missing else "") if x)
                              + f" (fields: {', '.join(sorted(known))})")
        values: dict[str, Any] = {}
        for k, v in item.items():
            if k in ("name", "date", "source", "title", "currency"):
                values[k] = str(v).strip()
            elif v is not None:
                if not isinstance(v, int | float) or isinstance(v, bool) or not (
                        math.isfinite(v) and v >= 0):  # YAML's .nan and .inf are floats
                    raise ConfigError(f"{source}: sheet {i}: {k} must be a number >= 0, not"
                                      f" {v!r}")
                values[k] = float(v)
        sheets.append(CostSheet(**values))
    return sheets


def builtin_sheets() -> list[CostSheet]:
    text = resources.files("storbench.data").joinpath("costs.yaml").read_text()
    return load_sheets(text, "built-in price sheets")


def resolve_sheets(spec: str, known: list[CostSheet] | None = None) -> list[CostSheet]:
    """A sheet's name (built in, or from a file named in the same command), or a YAML
    file of sheets: a name and a path are used alike."""
    for s in [*(known or []), *builtin_sheets()]:
        if s.name == spec:
            return [s]
    path = Path(spec)
    if path.is_file():
        return load_sheets(path.read_text(), str(path))
    names = ", ".join(dict.fromkeys(s.name for s in [*(known or []), *builtin_sheets()]))
    raise ConfigError(f"--cost {spec!r} is neither a price sheet ({names}) nor a YAML file")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?)B?\s*$", re.I)


def parse_capacity(text: str) -> float:
    """'500GiB', '500Gi', '1TB', '500GB' -> bytes (GiB binary, GB decimal)."""
    m = _SIZE.match(text)
    if m is None or not m.group(2):
        raise ConfigError(f"--capacity {text!r} is not a size with a unit (500GiB, 1TB, 500Gi)")
    power = "KMGTP".index(m.group(2).upper()) + 1
    base = 1024 if m.group(3) else 1000
    return float(m.group(1)) * float(base**power)


@dataclass(frozen=True)
class Priced:
    """One run's monthly cost on one sheet."""

    run: int  # index into the comparison's runs
    sheet: CostSheet
    capacity_bytes: float
    iops: float | None  # the best IOPS figure in the comparison's columns
    iops_column: str | None
    bw_bytes_per_s: float | None
    bw_column: str | None
    provisioned_iops: float
    provisioned_mbps: float
    monthly: float
    # what storbench flagged on the figures priced ("randread: page cache"): a price is
    # only as true as the figures it was computed from
    caveats: tuple[str, ...] = ()
    # what it flagged on the best IOPS and bandwidth shown beside the price (and the $ per
    # 1k IOPS and per MB/s divided by them), priced or not
    iops_caveats: tuple[str, ...] = ()
    bw_caveats: tuple[str, ...] = ()
    # an achieved figure above the most the sheet provisions a volume: priced at that
    # most (the $ per 1k IOPS and per MB/s still divide by what was achieved)
    limits: tuple[str, ...] = ()
    requests: tuple[RequestCost, ...] = ()  # an object store's, at the rates measured

    @property
    def per_kiops(self) -> float | None:
        return self.monthly / (self.iops / 1000) if self.iops else None

    @property
    def per_mbps(self) -> float | None:
        return self.monthly / (self.bw_bytes_per_s / MB) if self.bw_bytes_per_s else None


@dataclass(frozen=True)
class RequestCost:
    """One object test's requests of one kind (PUT, GET, DELETE) at the rate it
    measured, and what an hour of them costs on the sheet."""

    test: str
    operation: str
    per_s: float
    per_1000: float  # the sheet's price of 1,000 of them (0: not charged)
    per_hour: float


OPERATIONS = (("write", "PUT"), ("read", "GET"), ("trim", "DELETE"))  # fio's http engine's


def request_costs(comp: Comparison, run: int, sheet: CostSheet) -> tuple[RequestCost, ...]:
    """The run's object tests (fio's http engine) priced by request on ``sheet``: none
    where the sheet prices no request."""
    if not (sheet.per_1000_put or sheet.per_1000_get):
        return ()
    prices = {"PUT": sheet.per_1000_put, "GET": sheet.per_1000_get, "DELETE": 0.0}
    out = []
    for test, results in comp.runs[run].results_by_test().items():
        first = results[0]
        if first.error or first.options.get("ioengine") != "http":
            continue
        for direction, operation in OPERATIONS:
            rate = value(first, metric(f"{direction}.iops"))
            if rate:
                price = prices[operation]
                out.append(RequestCost(test, operation, rate, price, rate * 3600 / 1000 * price))
    return tuple(out)


@dataclass(frozen=True)
class _Best:
    value: float | None = None
    column: str | None = None
    caveats: tuple[str, ...] = ()


def _best(comp: Comparison, run: int, kind: str) -> _Best:
    """The run's best test for IOPS or bandwidth, its directions added up (a mixed
    75/25 test's read and write IOPS are both served): from the comparison's columns,
    else (a figure no column shows) from the tests' results; with the caveats of the
    figures it took."""
    by_test: dict[str, tuple[float, list[str], list[str]]] = {}
    for i, col in enumerate(comp.columns):
        cell = comp.cells[run][i]
        v = cell.value
        if col.metric.kind == kind and v is not None and not math.isnan(v):
            total, parts, said = by_test.get(col.test, (0.0, [], []))
            by_test[col.test] = (total + v, [*parts, col.metric.direction],
                                 [*said, *cell.caveats])
    if not by_test:
        warned = comp.runs[run].warnings
        for test, results in comp.runs[run].results_by_test().items():
            if any(r.error for r in results):
                continue
            values = [(d, v) for d in ("read", "write", "trim")
                      if (v := value(results[0], metric(f"{d}.{kind}"))) is not None]
            if values:
                by_test[test] = (sum(v for _, v in values), [d for d, _ in values],
                                 [brief(w) for w in warned if w.test == test])
    if not by_test:
        return _Best()
    test, (total, parts, said) = max(by_test.items(), key=lambda kv: kv[1][0])
    label = {"iops": "IOPS", "bw": "BW"}[kind]
    return _Best(total, f"{test} {' + '.join(parts)} {label}", tuple(dict.fromkeys(said)))


def monthly_cost(sheet: CostSheet, capacity_bytes: float, iops: float, mbps: float) -> float:
    """$ per month for the capacity with ``iops`` and ``mbps`` provisioned."""
    return (sheet.fixed_month + sheet.per_gb_month * capacity_bytes / GB
            + sheet.per_iops_month * max(0.0, iops - sheet.included_iops)
            + sheet.per_mbps_month * max(0.0, mbps - sheet.included_mbps))


def price(comp: Comparison, sheets: list[tuple[int, CostSheet]], capacity: dict[int, float], *,
          provisioned_iops: dict[int, float] | None = None,
          provisioned_mbps: dict[int, float] | None = None) -> list[Priced]:
    """(run index, sheet) pairs priced at their capacity (bytes per run index, as
    `per_run` reads --capacity); provisioned IOPS and MB/s per run index where given
    (else what the run achieved)."""
    out = []
    for run, sheet in sheets:
        size = capacity.get(run)
        if size is None:
            raise ConfigError(f"--capacity: no size for {comp.runs[run].name}, priced with"
                              f" {sheet.name}; give SIZE for every row or"
                              f" {row_name(comp, run) or comp.runs[run].id}=SIZE")
        iops, bw = _best(comp, run, "iops"), _best(comp, run, "bw")
        given_iops = (provisioned_iops or {}).get(run)
        given_mbps = (provisioned_mbps or {}).get(run)
        p_iops = given_iops if given_iops is not None else (
            iops.value or 0.0) if sheet.per_iops_month else 0.0
        p_mbps = given_mbps if given_mbps is not None else (
            (bw.value or 0.0) / MB) if sheet.per_mbps_month else 0.0
        limits = []
        for given, wanted, most, unit, option in (
                (given_iops, p_iops, sheet.max_iops, "IOPS", "--provisioned-iops"),
                (given_mbps, p_mbps, sheet.max_mbps, "MB/s", "--provisioned-mbps")):
            if most is None or wanted <= most:
                continue
            if given is not None:  # never a price of something else than was asked
                raise ConfigError(f"{option} {given:,.0f} for {comp.runs[run].name}:"
                                  f" {sheet.name} provisions at most {most:,.0f} {unit}"
                                  " a volume")
            limits.append(f"{sheet.name} provisions at most {most:,.0f} {unit}: priced at"
                          f" that, not the {wanted:,.0f} {unit} achieved")
        if sheet.max_iops is not None:
            p_iops = min(p_iops, sheet.max_iops)
        if sheet.max_mbps is not None:
            p_mbps = min(p_mbps, sheet.max_mbps)
        # a flagged figure priced (not one the user provisioned instead) keeps its flag
        used = [*(iops.caveats if sheet.per_iops_month and given_iops is None else ()),
                *(bw.caveats if sheet.per_mbps_month and given_mbps is None else ())]
        out.append(Priced(run, sheet, size, iops.value, iops.column, bw.value,
                          bw.column, p_iops, p_mbps,
                          monthly_cost(sheet, size, p_iops, p_mbps),
                          tuple(dict.fromkeys(used)), iops.caveats, bw.caveats,
                          tuple(limits), request_costs(comp, run, sheet)))
    return out


def row_name(comp: Comparison, run: int) -> str:
    r = comp.runs[run]
    return (r.label or "").removesuffix(" (published)")


def runs_called(comp: Comparison, who: str, where: str) -> list[int]:
    """The compared rows a name picks: a label, an id, a reference's name."""
    rows = [i for i, r in enumerate(comp.runs)
            if who in (row_name(comp, i), str(r.id), f"#{r.id}") and (r.id or who != "0")]
    if not rows:
        raise ConfigError(f"{where}: no compared run is called {who!r}")
    return rows


def per_run(comp: Comparison, specs: list[str], what: str,
            parse: Callable[[str], float] | None = None) -> dict[int, float]:
    """--provisioned-iops/-mbps, --capacity values: ``N`` for every run, ``RUN=N`` for
    one (``parse`` reads N: a plain number by default)."""
    out: dict[int, float] = {}
    for spec in sorted(specs, key=lambda x: "=" in x):  # bare values first, then per run
        who, sep, number = spec.rpartition("=")
        try:
            v = parse(number) if parse else float(number)
        except ValueError:
            v = math.nan
        if not math.isfinite(v):  # nan would price every run at $nan
            raise ConfigError(f"{what} {spec!r}: expected a number or RUN=NUMBER")
        if v < 0:
            raise ConfigError(f"{what} {spec!r} must not be negative")
        for i in runs_called(comp, who, f"{what} {spec!r}") if sep else range(len(comp.runs)):
            out[i] = v
    return out


def assign(comp: Comparison, specs: list[str]) -> list[tuple[int, CostSheet]]:
    """--cost specs -> (run index, sheet). ``RUN=SHEET`` names the run (its label, id
    or reference name); a bare ``SHEET`` goes to the rows named like it, or, when it is
    the only bare one and no row is named like it, to every row measured or imported
    without a sheet yet (a file of several sheets prices only rows named like one)."""
    chosen: dict[int, CostSheet] = {}
    bare: list[CostSheet] = []
    # sheets from files first, so that their names can be used like built-in ones
    from_files = [s for spec in specs if Path(p := spec.rpartition("=")[2]).is_file()
                  for s in load_sheets(Path(p).read_text(), p)]
    for spec in specs:
        who, sep, what = spec.rpartition("=")
        sheets = resolve_sheets(what, from_files)
        if not sep:
            bare += sheets
            continue
        rows = runs_called(comp, who, f"--cost {spec!r}")
        if len(sheets) != 1:
            raise ConfigError(f"--cost {spec!r}: {what} holds {len(sheets)} sheets; name one")
        for i in rows:
            chosen[i] = sheets[0]
    # a bare sheet prices the rows named like it; a single bare sheet named by no row
    # prices the runs measured or imported here that have none, never a published
    # study's row (its platform is its own: `--cost NAME=SHEET` prices it)
    for sheet in bare:
        rows = [i for i in range(len(comp.runs)) if row_name(comp, i) == sheet.name]
        if not rows and len(bare) == 1:
            rows = [i for i, r in enumerate(comp.runs)
                    if i not in chosen and r.origin != "published"]
        for i in rows:
            chosen.setdefault(i, sheet)
    return sorted(chosen.items())


def unpriced(comp: Comparison, priced: list[Priced]) -> list[str]:
    """The rows no sheet was given to, named."""
    done = {p.run for p in priced}
    return [comp.runs[i].name for i in range(len(comp.runs)) if i not in done]
