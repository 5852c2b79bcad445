import sqlite3

import pytest

from storbench.errors import StoreError
from storbench.result.fio_json import parse_fio_json
from storbench.result.record import Invocation
from storbench.store import MIGRATIONS, Store


def add_run(store, text, *, label="a", suite="quick", tags=None, status="completed",
            target="/mnt/x"):
    run_id = store.begin_run(
        uid=f"u{label}{suite}{len(store.list_runs())}", suite=suite, target=target,
        environment={"hostname": "h", "ram_bytes": 1},
        settings={"size": None, "workload": f"{suite}:mix"},
        storbench_version="0", fio_version="fio-3.33", label=label, tags=tags or {},
    )
    _, results = parse_fio_json(text)
    store.add_invocation(run_id, Invocation(0, "[mix]\nrw=randrw\n", text, 0, "", 1.5),
                         list(enumerate(results)))
    store.finish_run(run_id, status)
    return run_id


def test_migrations_recorded(store):
    assert store.schema_version() == len(MIGRATIONS)
    names = [r[0] for r in store.db.execute("SELECT name FROM schema_migrations")]
    assert names == [n for n, _ in MIGRATIONS]


def test_file_db_uses_wal_and_reopens(store_path, fio_json_text):
    s = Store(store_path)
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    run_id = add_run(s, fio_json_text)
    s.close()
    s2 = Store(store_path)
    assert s2.get_run(run_id).label == "a"
    assert s2.schema_version() == len(MIGRATIONS)
    s2.close()


def test_round_trip_keeps_results_and_raw_json(store, fio_json_text):
    run_id = add_run(store, fio_json_text, tags={"zone": "a"})
    run = store.get_run(run_id)
    _, expected = parse_fio_json(fio_json_text)
    assert [t.result for t in run.tests] == expected
    assert run.invocations[0].raw_json == fio_json_text  # verbatim
    assert run.tags == {"zone": "a"}
    assert run.status == "completed" and run.finished_at is not None
    assert run.environment["hostname"] == "h"


def test_results_are_immutable(store, fio_json_text):
    run_id = add_run(store, fio_json_text)
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        store.db.execute("UPDATE results SET test = 'x'")
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        store.db.execute("UPDATE invocations SET raw_json = ''")
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        store.finish_run(run_id, "failed", "late change")


def test_rm_deletes_everything(store, fio_json_text):
    run_id = add_run(store, fio_json_text, tags={"k": "v"})
    store.delete_run(run_id)
    for table in ("runs", "run_tags", "invocations", "results"):
        assert store.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
    with pytest.raises(StoreError, match="does not exist"):
        store.delete_run(run_id)


def test_list_filters(store, fio_json_text):
    a = add_run(store, fio_json_text, label="gp3", suite="quick", tags={"zone": "a"})
    b = add_run(store, fio_json_text, label="io2", suite="etcd", tags={"zone": "b"})
    c = add_run(store, fio_json_text, label="gp3", suite="etcd", tags={"zone": "a", "x": "1"})
    ids = lambda runs: [r.id for r in runs]  # noqa: E731
    assert ids(store.list_runs()) == [c, b, a]
    assert ids(store.list_runs(label="gp3")) == [c, a]
    assert ids(store.list_runs(suite="etcd")) == [c, b]
    assert ids(store.list_runs(tags={"zone": "a", "x": "1"})) == [c]
    assert ids(store.list_runs(limit=1)) == [c]


def test_resolve(store, fio_json_text):
    with pytest.raises(StoreError, match="no runs"):
        store.resolve("last")
    run_id = add_run(store, fio_json_text)
    assert store.resolve("last") == run_id
    assert store.resolve(f"#{run_id}") == run_id
    with pytest.raises(StoreError, match="neither a run id nor a label"):
        store.resolve("abc")
    newer = add_run(store, fio_json_text, label="a")
    assert store.resolve("a") == newer  # a label: its latest run


def test_newer_database_is_refused(store_path):
    s = Store(store_path)
    s.db.execute("INSERT INTO schema_migrations VALUES ('9999_future', 'x')")
    s.close()
    with pytest.raises(StoreError, match="newer storbench"):
        Store(store_path)


def test_unopenable_database(tmp_path):
    bad = tmp_path / "not.db"
    bad.write_text("this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        Store(bad)


def test_a_wave1_database_migrates_with_its_runs_intact(store_path, fio_json_text):
    """A database written by storbench at schema 0004 (applied here from the shipped
    migrations), opened by this one: runs kept, foreign keys and immutability intact."""
    db = sqlite3.connect(store_path)
    db.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for name, sql in MIGRATIONS[:4]:
        db.executescript(f"BEGIN;\n{sql}\nINSERT INTO schema_migrations VALUES ('{name}', 'x');"
                         "\nCOMMIT;")
    db.execute("INSERT INTO runs (uid, created_at, status, suite, target, environment,"
               " settings, storbench_version) VALUES ('old', 't', 'completed', 'quick', '/x',"
               " '{}', '{}', '0.0.1')")
    db.execute("INSERT INTO run_tags VALUES (1, 'zone', 'a')")
    db.execute("INSERT INTO runs (uid, created_at, status, suite, target, environment,"
               " settings, storbench_version) VALUES ('old2', 't', 'completed', 'etcd',"
               " 'storageclass/fast', '{\"kubernetes\": {\"context\": \"prod\"}}', '{}',"
               " '0.0.1'), ('old3', 't', 'completed', 'quick', '/d on 2 hosts',"
               " '{\"hostname\": \"me\", \"hosts\": [{}, {}]}', '{}', '0.0.1'),"
               " ('old4', 't', 'completed', 'quick', '/mnt/v', '{\"hostname\": \"db1\"}',"
               " '{}', '0.0.1')")
    db.commit()
    db.close()
    s = Store(store_path)
    assert s.schema_version() == len(MIGRATIONS)
    # the runs measured before series existed join the series a run would join now
    from storbench.analysis.naming import auto_series
    from storbench.result.facts import TargetFacts

    for r in map(s.get_run, (1, 2, 3, 4)):
        assert r.series == auto_series(r.suite, r.target, TargetFacts.of(r.environment))
    assert [s.get_run(i).series for i in (1, 2, 3, 4)] == [
        "quick@/x", "etcd@prod:storageclass/fast", "quick@/d on 2 hosts", "quick@db1:/mnt/v"]
    run = s.get_run(1)
    assert run.uid == "old" and run.status == "completed" and run.tags == {"zone": "a"}
    assert run.verdicts is None  # judged when read (pipeline: with_verdicts)
    assert s.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        s.db.execute("UPDATE runs SET target = 'x' WHERE id = 1")
    s.delete_run(1)
    assert s.db.execute("SELECT count(*) FROM run_tags").fetchone()[0] == 0  # cascade
    s.close()


def test_a_run_whose_process_is_gone_is_marked_crashed(store_path, fio_json_text):
    """The process is a real one that has ended; a reboot is a stand-in (another boot
    id), the one fault of the two a test cannot cause."""
    import subprocess

    s = Store(store_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    a = s.begin_run(uid="a", suite="quick", target="/x", environment={}, settings={},
                    storbench_version="0", fio_version=None)
    b = s.begin_run(uid="b", suite="quick", target="/x", environment={}, settings={},
                    storbench_version="0", fio_version=None)
    c = s.begin_run(uid="c", suite="quick", target="/x", environment={}, settings={},
                    storbench_version="0", fio_version=None)
    s.db.execute("UPDATE runs SET pid = ? WHERE id = ?", (gone.pid, a))
    s.db.execute("UPDATE runs SET boot_id = 'another-boot' WHERE id = ?", (b,))
    s.close()
    s2 = Store(store_path)  # any command that opens the store
    assert s2.get_run(a).status == "crashed"
    assert f"PID {gone.pid}" in s2.get_run(a).error and "crashed" in s2.get_run(a).error
    assert s2.get_run(b).status == "crashed"
    assert s2.get_run(c).status == "running"  # this very process: still alive
    s2.close()


def _open_at_once(path, barrier, said):
    barrier.wait()  # every process opens the database in the same instant
    try:
        Store(path).close()
        said.put("ok")
    except Exception as exc:  # what a process said is the test's answer
        said.put(repr(exc))


def _several_at_once(path, n=4):
    import multiprocessing

    fork = multiprocessing.get_context("fork")
    barrier, said = fork.Barrier(n), fork.Queue()
    procs = [fork.Process(target=_open_at_once, args=(path, barrier, said)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    return [said.get(timeout=5) for _ in procs]


@pytest.mark.parametrize("what", ["new", "old"])
def test_several_storbench_open_one_database_at_once(what, tmp_path):
    """Several storbench started together on a database that is new (a CI job's first
    runs, side by side) or of an older schema: each opens it, the schema is made or
    upgraded once (before: "table runs already exists", or "database is locked" from the
    switch to WAL, for the slower ones)."""
    import gzip
    from pathlib import Path

    old = Path(__file__).resolve().parent.parent / "data" / "old-runs" / "runs.db.gz"
    for attempt in range(10 if what == "new" else 5):
        path = tmp_path / f"{attempt}.db"
        if what == "old":
            path.write_bytes(gzip.decompress(old.read_bytes()))
        assert _several_at_once(str(path)) == ["ok"] * 4, attempt
        store = Store(path)
        names = [r[0] for r in store.db.execute("SELECT name FROM schema_migrations")]
        assert names == [n for n, _ in MIGRATIONS]
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        store.close()
