"""The store on a real PostgreSQL server (tests/services.py): the same behaviour as
SQLite's, many writers at once, and `storbench db copy` between the two."""

from __future__ import annotations

import json
import subprocess

import psycopg
import pytest

from storbench.errors import StoreError
from storbench.result.fio_json import parse_fio_json
from storbench.store import MIGRATIONS, Store
from tests.conftest import STORBENCH, needs_fio, run_cli
from tests.store.test_sqlite import add_run


@pytest.fixture
def pg(postgres_db):
    s = Store(postgres_db)
    yield s
    s.close()


def test_round_trip_immutability_and_cascade(pg, fio_json_text):
    assert [r[0] for r in pg.db.execute("SELECT name FROM schema_migrations ORDER BY name",
                                        ())] == [n for n, _ in MIGRATIONS]
    run_id = add_run(pg, fio_json_text, tags={"zone": "a"})
    run = pg.get_run(run_id)
    _, expected = parse_fio_json(fio_json_text)
    assert [t.result for t in run.tests] == expected
    assert run.invocations[0].raw_json == fio_json_text  # verbatim, not jsonb's re-ordering
    assert run.tags == {"zone": "a"} and run.status == "completed" and run_id == 1
    pg.db.execute("INSERT INTO warnings (run_id, test, kind, message, details)"
                  " VALUES (?, 't', 'k', 'm', '{}')", (run_id,))
    for sql in ("UPDATE results SET test = 'x'", "UPDATE invocations SET raw_json = ''",
                "UPDATE warnings SET kind = 'x'", "UPDATE runs SET target = 'x'"):
        add_run(pg, fio_json_text)
        with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
            pg.db.execute(sql, ())
    with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
        pg.finish_run(run_id, "failed", "late change")
    # the figures are queryable in SQL: results are jsonb
    iops = pg.db.execute("SELECT (result->'read'->>'iops')::float FROM results WHERE run_id = ?",
                         (run_id,)).fetchone()[0]
    assert iops == pytest.approx(expected[0].read.iops)
    pg.delete_run(run_id)
    for table in ("run_tags", "invocations", "results"):
        assert pg.db.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?",
                             (run_id,)).fetchone()[0] == 0
    with pytest.raises(StoreError, match="does not exist"):
        pg.delete_run(run_id)


def test_labels_filters_and_resolve(pg, fio_json_text):
    with pytest.raises(StoreError, match="no runs"):
        pg.resolve("last")
    a = add_run(pg, fio_json_text, label="gp3", tags={"zone": "a"})
    b = add_run(pg, fio_json_text, label="io2", suite="etcd")
    c = add_run(pg, fio_json_text, label="gp3", tags={"zone": "a", "x": "1"})
    assert [r.id for r in pg.list_runs()] == [c, b, a]
    assert [r.id for r in pg.list_runs(tags={"zone": "a", "x": "1"})] == [c]
    assert [r.id for r in pg.list_runs(suite="etcd", limit=1)] == [b]
    assert pg.resolve("gp3") == c and pg.resolve("#1") == a


def test_runs_stored_before_series_join_theirs(postgres_db):
    """A team's database at migration 0007 (before series): upgraded, its measured runs
    are in the series a run would join now; the immutability trigger still holds."""
    from storbench.analysis.naming import auto_series
    from storbench.result.facts import TargetFacts
    from storbench.store import postgres

    conn = postgres.Connection(postgres_db)
    postgres.migrate(conn, MIGRATIONS[:7], "t", "test")
    for uid, suite, target, env in (
            ("a", "quick", "/x", {}),
            ("b", "etcd", "storageclass/fast", {"kubernetes": {"context": "prod"}}),
            ("c", "quick", "/d on 2 hosts", {"hostname": "me", "hosts": [{}, {}]}),
            ("d", "quick", "/mnt/v", {"hostname": "db1", "hosts": "odd"})):
        conn.execute("INSERT INTO runs (uid, created_at, status, suite, target, environment,"
                     " settings, storbench_version) VALUES (?, 't', 'completed', ?, ?, ?, '{}',"
                     " '0')", (uid, suite, target, json.dumps(env)))
    conn.close()
    s = Store(postgres_db)
    runs = sorted(s.list_runs(), key=lambda r: r.id)
    assert [r.series for r in runs] == ["quick@/x", "etcd@prod:storageclass/fast",
                                        "quick@/d on 2 hosts", "quick@db1:/mnt/v"]
    assert all(r.series == auto_series(r.suite, r.target, TargetFacts.of(r.environment))
               for r in runs[:3])
    with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
        s.db.execute("UPDATE runs SET status = 'failed'", ())
    s.close()


def test_a_newer_database_is_refused(postgres_db):
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        Store(postgres_db).close()
        conn.execute("INSERT INTO schema_migrations VALUES ('9999_future', 'x')")
    with pytest.raises(StoreError, match="newer storbench"):
        Store(postgres_db)


def test_an_unreachable_server_is_one_clear_error(tmp_path):
    from tests.testbed import free_port

    url = f"postgresql://bench:secret@127.0.0.1:{free_port()}/storbench"
    proc = run_cli("list", db=url)
    assert proc.returncode == 1
    assert "cannot use the results database postgresql://bench:***@127.0.0.1" in proc.stderr
    assert "secret" not in proc.stderr and "Traceback" not in proc.stderr


@needs_fio
def test_eight_writers_at_once_lose_nothing(postgres_db, tmpfs):
    """8 `storbench run` processes (each migrates on first use, under the lock) store
    8 runs with ids 1..8."""
    env = {"STORBENCH_DB": postgres_db, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    procs = [subprocess.Popen([*STORBENCH, "run", str(tmpfs), "--suite", "quick", "--size",
                               "4m", "--runtime", "1", "--ramp", "0", "--label", f"w{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for i in range(8)]
    for p in procs:
        _, stderr = p.communicate(timeout=240)
        assert p.returncode == 0, stderr
    s = Store(postgres_db)
    runs = s.list_runs()
    assert sorted(r.id for r in runs) == list(range(1, 9))
    assert sorted(r.label or "" for r in runs) == [f"w{i}" for i in range(8)]
    assert {r.status for r in runs} == {"completed"}
    from storbench.workload.suites import SUITES

    assert {len(s.get_run(r.id).tests) for r in runs} == {len(SUITES["quick"].tests)}
    # one series, one workload: what history reads of each run to mark where it changed
    from storbench.store.series import series_list, series_workloads

    [(name, n, _, _)] = series_list(s)
    assert n == 8 and series_workloads(s, name) == {
        i: "quick/size=4m,runtime=1,ramp=0" for i in range(1, 9)}
    s.close()
    doc = json.loads(run_cli("history", name, "--json", db=postgres_db).stdout)
    assert doc and all(h["workload_changes"] == [] and len(h["points"]) == 8 for h in doc)


@needs_fio
def test_two_machines_histories_compare_in_one_database(postgres_db, tmpfs, tmp_path):
    """Two SQLite files (two machines' runs) copied into PostgreSQL compare side by side;
    a second copy stores nothing twice; copied back, a run is the same run."""
    machines = [tmp_path / "laptop.db", tmp_path / "ci.db"]
    for db, label in zip(machines, ("laptop", "ci"), strict=True):
        proc = run_cli("run", str(tmpfs), "--suite", "quick", "--size", "4m",
                       "--runtime", "1", "--ramp", "0",
                       "--label", label, "--assert", "randread.iops > 1", db=db)
        assert proc.returncode == 0, proc.stderr
    for db in machines:
        copied = subprocess.run([*STORBENCH, "db", "copy", str(db), postgres_db],
                                capture_output=True, text=True)
        assert copied.returncode == 0, copied.stderr
        assert "Copied 1 run(s)" in copied.stdout and "#1 -> #" in copied.stdout
    again = subprocess.run([*STORBENCH, "db", "copy", str(machines[0]), postgres_db],
                           capture_output=True, text=True)
    assert "Copied 0 run(s)" in again.stdout and "1 were there already" in again.stdout
    proc = run_cli("compare", "laptop", "ci", "--json", db=postgres_db)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [r["label"] for r in doc["runs"]] == ["laptop", "ci"]
    back = tmp_path / "back.db"
    assert subprocess.run([*STORBENCH, "db", "copy", postgres_db, str(back)],
                          capture_output=True, text=True).returncode == 0
    original, returned = Store(machines[1]).get_run(1), Store(back).get_run(2)
    assert returned.uid == original.uid and returned.label == "ci"
    assert [i.raw_json for i in returned.invocations] == [
        i.raw_json for i in original.invocations]
    assert returned.tests == original.tests and returned.created_at == original.created_at
    assert returned.verdicts == original.verdicts and returned.verdicts  # judged, passed
    assert returned.environment == original.environment


def test_copy_refuses_a_source_that_is_not_there(tmp_path):
    proc = subprocess.run([*STORBENCH, "db", "copy", str(tmp_path / "nope.db"),
                           str(tmp_path / "x.db")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such database file" in proc.stderr
    assert not (tmp_path / "x.db").exists()
    # an empty name (an unset "$STORBENCH_DB"): SQLite's temporary database, the copy gone
    (tmp_path / "src.db").write_bytes(b"")
    for words in (["", str(tmp_path / "x.db")], [str(tmp_path / "src.db"), " "]):
        proc = subprocess.run([*STORBENCH, "db", "copy", *words], capture_output=True,
                              text=True)
        assert proc.returncode == 2 and "names no database" in proc.stderr, proc.stderr


@needs_fio
def test_a_password_in_the_url_is_in_no_output_and_no_stored_run(postgres_db, tmpfs):
    """A team's URL with ?password=: `list`, a run's output and what it stores never
    hold it (the test server trusts loopback, so the password is only carried)."""
    sep = "&" if "?" in postgres_db else "?"
    url = f"{postgres_db}{sep}password=zz-s3cret-zz"
    listed = run_cli("list", db=url)
    assert listed.returncode == 0 and "zz-s3cret-zz" not in listed.stdout + listed.stderr
    ran = run_cli("run", str(tmpfs), "--suite", "etcd", "--size", "1m", db=url)
    assert ran.returncode == 0, ran.stderr
    shown = run_cli("show", "last", "--json", "--raw", db=url)
    everything = ran.stdout + ran.stderr + shown.stdout + shown.stderr
    assert "zz-s3cret-zz" not in everything and '"status": "completed"' in shown.stdout


def test_a_no_change_answer_is_kept_and_follows_the_series_runs(postgres_db, tmp_path):
    """As on SQLite (tests/analysis/test_history_steps.py): the digest of the series'
    runs is PostgreSQL's own aggregate there."""
    from tests.analysis.test_history_steps import kept_and_followed

    kept_and_followed(postgres_db, tmp_path / "cache")


def test_a_history_answer_is_kept_and_follows_the_series_runs(postgres_db, tmp_path):
    """As on SQLite (tests/analysis/test_history_steps.py)."""
    from tests.analysis.test_history_steps import kept_history_followed

    kept_history_followed(postgres_db, tmp_path / "cache")
