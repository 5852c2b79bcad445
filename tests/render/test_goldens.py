"""What storbench prints of stored runs, held in golden files (tests/render/golden/): the
runs are fio's own recorded output imported (tests/data/fio) and the runs storbench
stored with real fio (tests/data/old-runs: a curve, a lifecycle, a failover, by an older
storbench; tests/data/explain-runs: --explain), so the renderers' every line is checked
in the fast tier, with no fio.

A change to what is printed fails here with the difference. When the change is meant:
``pytest tests/render/test_goldens.py --update-goldens`` writes the new files, and the
diff of tests/render/golden/ is reviewed like code.
"""

from __future__ import annotations

import difflib
import gzip
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
GOLDEN = Path(__file__).resolve().parent / "golden"
IMPORTED = (("randread.json", "gp3"), ("randwrite-2jobs.json", "io2"))
PLAIN = {"COLUMNS": ""}  # as a pipe sees it: no width

# name -> (database, command); "new": the recorded fio output imported, "old": the old runs
COMMANDS: dict[str, tuple[str, list[str]]] = {
    "show-imported.txt": ("new", ["show", "1"]),
    "list.txt": ("new", ["list"]),
    "compare.txt": ("new", ["compare", "1", "2", "--baseline", "1"]),
    "compare.json": ("new", ["compare", "1", "2", "--json"]),
    "export.md": ("new", ["export", "1", "2", "--format", "md"]),
    "export.csv": ("new", ["export", "1", "2", "--format", "csv"]),
    "export-wiki.md": ("new", ["export", "1", "2", "--format", "wiki", "--layout",
                               "read-write"]),
    "show-curve.txt": ("old", ["show", "3"]),
    "compare-kinds.txt": ("old", ["compare", "3", "5", "6"]),
    "compare-kinds.json": ("old", ["compare", "3", "5", "6", "--json"]),
    "export-kinds.md": ("old", ["export", "3", "5", "6", "--format", "md"]),
    "show-explain.txt": ("explain", ["show", "1"]),
    "compare-explain.txt": ("explain", ["compare", "1", "2", "3", "4", "5"]),
    "compare-explain.json": ("explain", ["compare", "1", "4", "--json"]),
}
# what differs from one run of the tests to the next, each made one word
VARYING = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<time>"),
    (re.compile(r'"uid": "[0-9a-f]+"'), '"uid": "<uid>"'),
    (re.compile(r"\d+\.\d+\.\d+\.dev\d+\+g[0-9a-f]+(\.d\d+)?|0\.0\.0"), "<version>"),
)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
        ) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("golden")
    new, old, explained = where / "new.db", where / "old.db", where / "explain.db"
    # imported from a path of one length wherever the clone is: a table's columns are as
    # wide as the path it names (the clone's path made the golden files differ)
    fio = Path(tempfile.mkdtemp(prefix="sb-golden-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(fio, ignore_errors=True))
    for name, label in IMPORTED:
        shutil.copy(DATA / "fio" / name, fio / name)
        proc = run_cli("import", str(fio / name), "--label", label, db=new)
        assert proc.returncode == 0, proc.stderr
    old.write_bytes(gzip.decompress((DATA / "old-runs" / "runs.db.gz").read_bytes()))
    explained.write_bytes(gzip.decompress((DATA / "explain-runs" / "runs.db.gz").read_bytes()))
    return {"new": new, "old": old, "explain": explained}


def normalized(text: str) -> str:
    text = text.replace(str(ROOT), "<repo>")
    text = re.sub(r"/tmp/sb-golden-[a-z0-9_]{8}", "<data>", text)
    for pattern, word in VARYING:
        text = pattern.sub(word, text)
    return text


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_what_is_printed_is_the_golden_file(name: str, dbs: dict[str, Path],
                                            request: pytest.FixtureRequest) -> None:
    which, argv = COMMANDS[name]
    proc = run_cli(*argv, db=dbs[which], env=PLAIN)
    assert proc.returncode == 0, proc.stderr
    printed = normalized(proc.stdout)
    golden = GOLDEN / name
    if request.config.getoption("--update-goldens"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(printed)
        return
    assert golden.exists(), f"{golden} is missing: run with --update-goldens and review it"
    expected = golden.read_text()
    if printed != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), printed.splitlines(True),
                                            f"golden/{name}", "printed now"))
        pytest.fail(f"{name} differs from its golden file (--update-goldens if meant):\n"
                    f"{diff}")
