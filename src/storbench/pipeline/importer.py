"""Importing fio output produced elsewhere (tickets, wikis, old runs) as stored runs.

fio's JSON and json+ from any fio >= 2.x, local or client/server (``client_stats``);
terse (version 3); normal text output of fio 2.x and 3.x, also pasted inside other
text (result/fio_text.py). A file holding several forms is read from its JSON, the
most complete. Every file is parsed before anything is stored: a bad file stores
nothing. fio's averaged per-second logs beside a JSON file (the layout bench-fio
writes) become the tests' timelines (result/fio_logs.py).
"""

from __future__ import annotations

import json
import math
import re
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storbench import __version__
from storbench.analysis import warnings
from storbench.analysis.naming import check_series_name
from storbench.analysis.verdicts import evaluate
from storbench.errors import ConfigError, FioError
from storbench.pipeline.failures import job_errors
from storbench.result import fio_logs, fio_text
from storbench.result.documents import Document, Part, parse_document
from storbench.result.facts import TargetFacts
from storbench.result.fio_json import parse_fio_json, parse_per_host, results_of
from storbench.result.model import TestResult
from storbench.result.record import Invocation, Warning
from storbench.result.sections import IMPORT_LEFT_OUT, IMPORT_SOURCES
from storbench.store import Store
from storbench.store.series import check_label
from storbench.workload.suites import get_suite

LABEL_FROM = ("filename", "dirname", "jobname")


@dataclass(frozen=True)
class Source:
    name: str  # how errors name it: the path given, or <stdin>
    text: str
    path: Path | None = None  # the file it was read from: logs beside it are read too


@dataclass(frozen=True)
class Parsed:
    source: str
    text: str
    fio_version: str
    results: list[TestResult]
    per_host: dict[str, list[TestResult]]
    kind: str = "json"  # json, terse or normal
    # a text document with several fio runs: each run's tests and where they came from
    parts: list[Part] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    absent: list[str] = field(default_factory=list)  # beyond what the form never holds

    def sources(self) -> list[dict[str, Any]]:
        """For every test, the lines of the document it came from."""
        return [{"test": r.name, "lines": [p.first_line, p.last_line],
                 "named_from": p.named_from} for p in self.parts for r in p.results]


def looks_like_fio_output(text: str) -> bool:
    """Whether ``text`` may hold fio's output (a file in a folder that does not is
    skipped; a file named on its own is read and refused with a reason)."""
    if "{" in text and ('"jobs"' in text or '"client_stats"' in text):
        return True
    return fio_text.looks_like_terse(text) or fio_text.looks_like_text(text)


def parse_source(source: str, text: str, path: Path | None = None) -> Parsed:
    """fio's output in ``text`` (named ``source`` in errors), or ConfigError; figures
    fio cannot have written are refused (plausible()). With the ``path`` of a JSON
    file, fio's averaged logs beside it become its tests' series."""
    parsed = _parse_any(source, text)
    for r in [*parsed.results, *(r for rs in parsed.per_host.values() for r in rs)]:
        problem = implausible(r)
        if problem and not r.directions() and _unified(r.options):
            how = f"unified_rw_reporting={r.options['unified_rw_reporting']}"
            raise ConfigError(f"{source}: job {r.name!r}: {fio_text.mixed_said(how)}; nothing was"
                              " imported")
        if problem:
            raise ConfigError(f"{source}: job {r.name!r}: {problem}: this is not fio's output"
                              " as fio writes it; nothing was imported")
    absent = [] if parsed.kind != "json" else [
        f"latency percentiles of {r.name} ({r.jobs} jobs): plain JSON has no histogram bins"
        " to merge them from; use --output-format=json+ or group_reporting"
        for r in parsed.results if r.jobs > 1 and _without_percentiles(r)]
    parsed = replace(parsed, path=path, absent=absent)
    return with_logs(parsed) if path is not None and parsed.kind == "json" else parsed


def _without_percentiles(r: TestResult) -> bool:
    return any(d.clat is not None and d.clat.samples > 0 and not d.clat.percentiles_ns
               for _, d in r.directions())


def with_logs(p: Parsed) -> Parsed:
    """Each test's series from fio's logs in the JSON file's directory: under the
    prefix its options named (write_iops_log=...), else bench-fio's names."""
    path = p.path
    assert path is not None
    directory = path.parent
    results = []
    for r in p.results:
        prefix = fio_logs.logged_prefix(r.options)
        if prefix is None or not fio_logs.has_logs(directory, prefix):
            guess = fio_logs.bench_fio_prefix(path) if len(p.results) == 1 else None
            prefix = guess if guess and fio_logs.has_logs(directory, guess) else None
        interval = fio_logs.interval_of(r.options)
        if prefix is None:
            results.append(r)
        elif interval is None:
            results.append(r)
            p = replace(p, absent=[*p.absent, f"timeline of {r.name}: its logs hold every"
                                   " I/O (no log_avg_msec); only averaged logs are read"])
        else:
            results.append(replace(r, series=fio_logs.read_series(directory, prefix, interval)))
    return replace(p, results=results)


def _unified(options: dict[str, str]) -> bool:
    """Whether fio reported the job's reads and writes only as one ("mixed")."""
    return options.get("unified_rw_reporting", "").strip().lower() in ("1", "mixed")


# Beyond any storage a fio job measures: refused rather than stored.
MAX_IOPS = 1e9
MAX_BYTES_PER_S = 1e14  # 100 TB/s
MAX_LATENCY_NS = 1e15  # 11.6 days


def implausible(r: TestResult) -> str:
    """What makes a parsed result impossible as fio output ("" when nothing)."""
    if not r.directions() and r.sync is None and not r.error:
        return "no results (no read, write, trim or sync figures)"
    for name, d in r.directions():
        figures = {"IOPS": (d.iops, MAX_IOPS), "bandwidth": (d.bw_bytes_per_s, MAX_BYTES_PER_S),
                   "runtime": (float(d.runtime_ms), MAX_LATENCY_NS)}
        for lat_name, lat in (("slat", d.slat), ("clat", d.clat), ("lat", d.lat)):
            if lat is not None:
                figures[f"{lat_name} mean"] = (lat.mean_ns, MAX_LATENCY_NS)
                figures[f"{lat_name} max"] = (lat.max_ns, MAX_LATENCY_NS)
                for p, v in lat.percentiles_ns.items():
                    figures[f"{lat_name} p{p:g}"] = (v, MAX_LATENCY_NS)
        for what, (value, limit) in figures.items():
            if not math.isfinite(value) or value < 0:
                return f"{name} {what} is {value}"
            if value > limit:
                return f"{name} {what} of {value:g} is beyond any storage"
    if r.sync is not None:
        for what, value in (("mean", r.sync.lat.mean_ns), ("max", r.sync.lat.max_ns)):
            if not math.isfinite(value) or value < 0 or value > MAX_LATENCY_NS:
                return f"sync latency {what} is {value}"
    return ""


def _parse_any(source: str, text: str) -> Parsed:
    start = text.find("{")
    if start != -1 and ('"jobs"' in text or '"client_stats"' in text):
        return _parse_json(source, text, start)
    try:
        if fio_text.looks_like_terse(text):
            out = fio_text.parse_terse(text)
        elif fio_text.looks_like_text(text):
            return _document(source, text, parse_document(text))
        else:
            raise ConfigError(f"{source}: no fio output found (fio's JSON, terse output, or"
                              " job results such as 'name: (groupid=0, jobs=1): err= 0');"
                              " nothing was imported")
        version, results = results_of({"fio version": out.fio_version, "jobs": out.jobs})
    except fio_text.TextFormatError as exc:
        raise ConfigError(f"{source}:{exc.line}: {exc}; nothing was imported") from None
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
        raise ConfigError(f"{source}: damaged fio output ({type(exc).__name__}: {exc});"
                          " nothing was imported") from None
    return Parsed(source, text, version, results, {}, out.kind)


def _document(source: str, text: str, doc: Document) -> Parsed:
    """A text document: several fio runs become tests named as the document names
    them, each run's jobs aggregated only with each other."""
    several = len(doc.parts) > 1 or bool(doc.left_out)
    parts = []
    for part in doc.parts:
        jobs = list(dict.fromkeys(r.name for r in part.results))

        def test_name(job: str, part: Part = part, jobs: list[str] = jobs) -> str:
            if not several:
                return job
            return part.name if len(jobs) == 1 else f"{part.name}/{job}"

        parts.append(replace(part, results=[replace(r, name=test_name(r.name))
                                            for r in part.results]))
    results = [r for p in parts for r in p.results]
    versions = list(dict.fromkeys(p.fio_version for p in parts if p.fio_version))
    return Parsed(source, text, ", ".join(versions), results, {}, "normal", parts,
                  doc.left_out)


def _parse_json(source: str, text: str, start: int) -> Parsed:
    try:
        json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        line = text.count("\n", 0, exc.pos) + 1
        raise ConfigError(f"{source}:{line}: fio's JSON is cut short or damaged ({exc.msg});"
                          " nothing was imported") from None
    try:
        version, results = parse_fio_json(text)
        per_host = parse_per_host(text)
    except (FioError, KeyError, TypeError, ValueError, AttributeError, IndexError,
            ZeroDivisionError, OverflowError) as exc:
        raise ConfigError(f"{source}: not fio's JSON output ({type(exc).__name__}: {exc});"
                          " nothing was imported") from None
    if not results:
        raise ConfigError(f"{source}: fio's JSON holds no job; nothing was imported")
    return Parsed(source, text, version, results, per_host, "json")


# What each form of fio's output does not hold (stored with the imported run).
ABSENT = {
    "json": [],
    "terse": ["histogram bins", "job options", "I/O counts (IOPS x runtime stand in)",
              "trim figures", "sync latency"],
    "normal": ["histogram bins (percentiles of several jobs are not merged)",
               "job options other than rw, bs, ioengine, iodepth",
               "latency sample counts (the I/O counts stand in)"],
}


def as_test(p: Parsed, suite_name: str, test: str | None) -> Parsed:
    """The results renamed to a suite's test names (--as SUITE[:TEST])."""
    suite = get_suite(suite_name)
    names = [t.name for t in suite.tests]
    if test is not None and test not in names:
        raise ConfigError(f"--as {suite_name}:{test}: suite {suite_name} has no test {test!r};"
                          f" its tests: {', '.join(names)}")
    jobs = list(dict.fromkeys(r.name for r in p.results))
    if test is None and len(names) == 1:
        test = names[0]
    if test is not None:
        if len(jobs) != 1:
            raise ConfigError(f"{p.source}: {len(jobs)} jobs ({', '.join(jobs)}) cannot all"
                              f" become test {test!r}; import them without --as, or one job"
                              " per file")
        rename = {jobs[0]: test}
    else:
        unknown = [j for j in jobs if j not in names]
        if unknown:
            raise ConfigError(f"{p.source}: job(s) {', '.join(unknown)} are not tests of suite"
                              f" {suite_name} ({', '.join(names)}); use --as"
                              f" {suite_name}:TEST for a single job")
        rename = {}
    return replace(p, results=[replace(r, name=rename.get(r.name, r.name)) for r in p.results],
                   per_host={h: [replace(r, name=rename.get(r.name, r.name)) for r in rs]
                             for h, rs in p.per_host.items()})


def split_runs(p: Parsed) -> list[Parsed]:
    """A document's fio runs, each as its own Parsed (its own run when stored)."""
    if len(p.parts) <= 1:
        return [p]
    return [replace(p, source=f"{p.source} ({part.name})", text=part.text,
                    fio_version=part.fio_version,
                    results=[replace(r, name=r.name.removeprefix(f"{part.name}/"))
                             for r in part.results],
                    parts=[replace(part, name=part.name)], left_out=[])
            for part in p.parts]


_TERMINATED = re.compile(r"^\s*(fio: terminating on signal \d+)\s*$", re.M)


def terminated(text: str) -> str:
    """fio's own words when its output says it was stopped by a signal (Ctrl-C, a
    timeout's SIGTERM) before its jobs ended: it still writes what it measured, as if
    complete ("" when it was not)."""
    m = _TERMINATED.search(text)
    return m.group(1) if m else ""


def run_label(p: Parsed, label: str | None, label_from: str | None) -> str | None:
    """``label``, or (--label-from) the file's name, its folder's name or its first
    job's name, after ``label`` if both are given."""
    if label_from is None:
        return label
    where = Path(p.source.split(" (", 1)[0])
    own = {"filename": where.stem, "dirname": where.resolve().parent.name,
           "jobname": p.results[0].name if p.results else where.stem}[label_from]
    return f"{label}-{own}" if label else own


def imported_warnings(p: Parsed, results: list[TestResult]) -> list[Warning]:
    """The warnings fio's output alone can support (too short, a queue depth or a rate
    not kept, a cache in front of direct reads, a working set small for the speed, a
    burst in the logs beside it, ...). Those that need the machine fio ran on (its RAM
    for the page cache, its file system, a blank device) are not known of an import."""
    facts = TargetFacts("hosts" if p.per_host else "here", len(p.per_host) or 1, None, None)
    return [w for r in results for w in warnings.compute(r, facts)]


def import_runs(
    store: Store, sources: list[Source], *, label: str | None = None,
    tags: dict[str, str] | None = None, as_suite: str | None = None, split: str = "tests",
    label_from: str | None = None, series: str | None = None,
) -> list[int]:
    """Store each source as a run with origin "imported"; returns the run ids.

    A text document with several fio runs gives one run whose tests are those runs
    (``split="tests"``), or one run each (``split="runs"``; also with ``as_suite``,
    where each becomes the suite's test). ``label_from`` labels each run by its file
    (run_label()). ``series``: the history they join (none when not given: an imported
    file says too little of where it ran)."""
    check_series_name(series)
    check_label(label)
    # all, before storing
    parsed = [parse_source(s.name, s.text, s.path) for s in sources]
    if split == "runs" or as_suite is not None:
        parsed = [one for p in parsed for one in split_runs(p)]
    suite = "imported"
    if as_suite is not None:
        suite, _, test = as_suite.partition(":")
        parsed = [as_test(p, suite, test or None) for p in parsed]
    ids = []
    for p in parsed:
        part = p.parts[0] if len(p.parts) == 1 else None
        base = run_label(p, label, label_from)
        named = (f"{base}-{part.name}" if base else part.name) if (
            part is not None and len(parsed) > 1 and part.name) else base
        run_id = store.begin_run(
            uid=secrets.token_hex(6), suite=suite, target=p.source,
            environment={"imported_from": p.source, "fio_version": p.fio_version,
                         "imported_format": p.kind, "absent": [*ABSENT[p.kind], *p.absent]},
            settings={"suite": suite, "imported_as": as_suite}, storbench_version=__version__,
            fio_version=p.fio_version or None, label=named, tags=tags, origin="imported",
            series=series)
        parts: list[Part | None] = [*p.parts] or [None]
        ordinal = 0
        for index, part in enumerate(parts):
            results = part.results if part is not None and len(p.parts) > 1 else p.results
            numbered = list(enumerate(results, start=ordinal))
            ordinal += len(numbered)
            host_rows = []
            if index == 0:
                for host, rs in p.per_host.items():
                    for r in rs:
                        host_rows.append((ordinal, host, r))
                        ordinal += 1
            text = part.text if part is not None and len(p.parts) > 1 else p.text
            store.add_invocation(run_id, Invocation(index, "", text, None, "", None), numbered,
                                 warnings=imported_warnings(p, results), per_host=host_rows)
        data: dict[str, Any] = {}
        if p.parts and p.kind == "normal":
            data |= IMPORT_SOURCES.put([{**s, "test": r.name} for s, r in
                                        zip(p.sources(), p.results, strict=True)])
        if p.left_out:
            data |= IMPORT_LEFT_OUT.put(p.left_out)
        failed = [r for r in p.results if r.error]
        stopped = terminated(p.text)
        if failed:
            store.finish_run(run_id, "failed", job_errors(failed, p.text), data=data)
        elif stopped:
            store.finish_run(run_id, "interrupted", f"{stopped}: fio was stopped before its"
                             " jobs ended; its figures are of the time it ran", data=data)
        else:
            store.finish_run(run_id, "completed", data=data, verdicts=evaluate(
                store.get_run(run_id), unresolvable="fail"))
        ids.append(run_id)
    return ids
