"""No input makes a traceback: hypothesis over CLI options, job-file options and
import inputs (issue #13). Each case either works or ends in one StorbenchError
line; anything else (a Python exception escaping) fails the test.

The CLI runs in-process (storbench.cli.main, as the `storbench` command does), on
a database holding real runs imported from recorded fio output; `run` is given a
target that does not exist, so every flag is judged and no benchmark starts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from storbench.errors import StorbenchError
from storbench.pipeline.importer import parse_source
from storbench.workload.guard import check_final
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.options import TABLE, Kind

DATA = Path(__file__).resolve().parent / "data" / "fio"
FUZZ = settings(max_examples=int(os.environ.get("STORBENCH_FUZZ_EXAMPLES", "150")),
                deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                      HealthCheck.too_slow])

# what a shell can pass: no NUL (argv entries are C strings), no lone surrogates
words = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                       blacklist_characters="\x00"), max_size=30)
numbers = st.one_of(st.integers(-10**12, 10**12).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(str),
                    st.sampled_from(["0", "-1", "1e999", "nan", "0x10", "1k", "2g", "50%", ""]))
values = st.one_of(words, numbers)


def cli(argv: list[str], db: Path) -> int:
    """storbench ARGV in-process; its exit code. A Python exception escapes (fails)."""
    from storbench.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main([*argv, "--db", str(db)] if argv and argv[0] not in (
                "suites", "reference", "cost", "agent") else argv)
        except SystemExit as exc:
            code = exc.code
            assert "Traceback" not in err.getvalue(), err.getvalue()
            return int(code) if isinstance(code, int) else 1
    return 0


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "r.db"
    for name in ("randread.json", "randwrite-2jobs.json"):
        assert cli(["import", str(DATA / name), "--label", name.split(".")[0]], path) == 0
    return path


RUN_FLAGS = ["--size", "--runtime", "--repeat", "--until-steady", "--threshold", "--rate",
             "--assert", "--baseline", "--timeout", "--tag", "--label", "--suite", "--profile",
             "--steady-window", "--max-regression", "--job", "--hosts", "--clients",
             "--capacity", "--access-mode", "--limits", "--requests", "--node-selector"]


@FUZZ
@given(flags=st.lists(st.tuples(st.sampled_from(RUN_FLAGS), values), max_size=4))
@example(flags=[("--hosts", "--debug")])  # found by CI: a value that is the group's option
@example(flags=[("--suite", "--debug")])
def test_run_flags_never_make_a_traceback(flags, db, tmp_path):
    argv = ["run", str(tmp_path / "does-not-exist")]
    for flag, value in flags:
        argv += [flag, value]
    assert cli(argv, db) in (1, 2)  # refused: a bad flag, or the target does not exist


CURVE_FLAGS = ["--workload", "--slo", "--steps", "--step-time", "--max-depth", "--size",
               "--timeout", "--assert", "--hosts", "--destructive", "--series", "--label",
               "--capacity", "--clients", "--access-mode", "--volume-mode"]
K8S_FLAGS = ["--volumes", "--parallel", "--rate", "--before", "--capacity", "--timeout",
             "--namespace", "--assert", "--baseline", "--access-mode", "--label", "--tag",
             "--node-selector", "--image"]


@FUZZ
@given(flags=st.lists(st.tuples(st.sampled_from(CURVE_FLAGS), values), max_size=4))
@example(flags=[("--slo", "--debug")])
def test_curve_flags_never_make_a_traceback(flags, db, tmp_path):
    """The measuring commands' shared tail (cli/targets.py) as curve takes it."""
    argv = ["curve", str(tmp_path / "does-not-exist")]
    for flag, value in flags:
        argv += [flag, value]
    assert cli(argv, db) in (1, 2)


@FUZZ
@given(command=st.sampled_from(["lifecycle", "failover"]),
       flags=st.lists(st.tuples(st.sampled_from(K8S_FLAGS), values), max_size=4))
def test_k8s_kind_flags_never_make_a_traceback(command, flags, db, tmp_path):
    """`k8s lifecycle|failover` with a kubeconfig that does not exist: every flag is
    judged, no cluster is reached."""
    argv = ["k8s", command, "--storage-class", "fuzz", "--kubeconfig",
            str(tmp_path / "no-kubeconfig")]
    for flag, value in flags:
        argv += [flag, value]
    assert cli(argv, db) in (1, 2)


HISTORY = st.one_of(
    st.tuples(st.just("show"), values).map(list),
    st.tuples(st.just("compare"), values, values).map(list),
    st.tuples(st.just("compare"), st.just("1"), st.just("--baseline"), values).map(list),
    st.tuples(st.just("compare"), st.just("1"), st.just("--cost"), values,
              st.just("--capacity"), values).map(list),
    st.tuples(st.just("compare"), st.just("1"), st.just("--reference"), values).map(list),
    st.tuples(st.just("export"), st.just("1"), st.just("--format"),
              st.sampled_from(["md", "csv", "json", "wiki", "html-table", "x"])).map(list),
    st.tuples(st.just("check"), values, st.just("--assert"), values).map(list),
    st.tuples(st.just("check"), st.just("1"), st.just("--baseline"), values,
              st.just("--max-regression"), values).map(list),
    st.tuples(st.just("list"), st.just("--limit"), values).map(list),
    st.tuples(st.just("list"), st.just("--tag"), values).map(list),
    st.tuples(st.just("suites"), values).map(list),
    st.tuples(st.just("k8s"), st.just("cleanup"), st.just("--older-than"), values).map(list),
)


@FUZZ
@given(argv=HISTORY)
def test_history_commands_never_make_a_traceback(argv, db):
    assert cli(argv, db) in (0, 1, 2, 3)


RISKY = [k for k, v in TABLE.items() if v is not Kind.VALUE]
JOB_KEYS = sorted({*RISKY, "rw", "bs", "size", "numjobs", "iodepth", "runtime", "time_based",
                   "nrfiles", "filesize", "offset", "offset_increment", "rate_iops", "direct",
                   "include", "ramp_time", "directory", "gtod_reduce"})


@FUZZ
@given(sections=st.lists(st.tuples(st.one_of(st.just("global"), words),
                                   st.lists(st.tuples(st.sampled_from(JOB_KEYS), values),
                                            max_size=6)), min_size=1, max_size=3),
       allow_exec=st.booleans())
def test_job_files_never_make_a_traceback(sections, allow_exec, tmp_path):
    text = "\n".join(f"[{name}]\n" + "\n".join(f"{k}={v}" for k, v in options)
                     for name, options in sections)
    try:
        jf = parse_jobfile(text, "fuzz.fio", tmp_path)
        prepared = jf.prepared(tmp_path / "scratch", size="1m", runtime=1,
                               allow_exec=allow_exec)
        prepared.estimated_bytes()
        prepared.named_files()
        prepared.with_series_logs("sb000")
        prepared.with_steady_state("iops_slope:0.5%", 5, 10)
        hosts = prepared.for_host("storbench-x", "h0", shared=False).render()
    except StorbenchError:
        return
    # whatever the first look lets through, the last look before fio lets through too
    scratch = [str(tmp_path / "scratch")]
    for text in (prepared.render(), hosts):
        check_final(parse_jobfile(text, "fuzz.fio"), scratch, allow_exec=allow_exec,
                    source="fuzz.fio")


def fio_like(draw_value: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Documents shaped like fio's JSON, with any value anywhere."""
    real = json.loads((DATA / "randread.json").read_text())

    def mutate(doc: object, path: list[object], value: object) -> object:
        if not path:
            return value
        head, *rest = path
        if isinstance(doc, dict) and doc:
            key = list(doc)[int(str(head)) % len(doc)]
            return {**doc, key: mutate(doc[key], rest, value)}
        if isinstance(doc, list) and doc:
            i = int(str(head)) % len(doc)
            return [*doc[:i], mutate(doc[i], rest, value), *doc[i + 1:]]
        return value

    return st.builds(mutate, st.just(real), st.lists(st.integers(0, 50), max_size=5),
                     draw_value)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), words),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(words, children, max_size=3)), max_leaves=8)


@FUZZ
@given(doc=fio_like(json_values))
def test_imported_json_never_makes_a_traceback(doc):
    with contextlib.suppress(StorbenchError):
        parse_source("fuzz.json", json.dumps(doc))


@FUZZ
@given(text=st.one_of(words, st.text(max_size=400),
                      st.sampled_from((DATA / "randread.json").read_text().splitlines())
                      .map(lambda line: f"{{\n\"jobs\": [{line}]\n}}")))
def test_imported_text_never_makes_a_traceback(text):
    with contextlib.suppress(StorbenchError):
        parse_source("fuzz.txt", text)
