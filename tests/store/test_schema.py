"""The schema is declared once (store/schema.py): a new database is made from the
declaration, an old one reaches it through its migrations. Both ways give the same
tables, columns, keys, checks, indexes and triggers, on SQLite and on a real
PostgreSQL; and both refuse to change what was stored."""

from __future__ import annotations

import re
import sqlite3

import pytest

from storbench.store import MIGRATIONS, Store
from storbench.store.migrations import MIGRATIONS_TABLE
from storbench.store.schema import INDEXES, TABLES


def _norm(sql: str) -> str:
    sql = re.sub(r"\s+", "", sql.lower()).replace('"', "")
    return sql.replace("createtableifnotexists", "createtable")


def sqlite_shape(path) -> dict[str, str]:
    """Every table, index and trigger of a SQLite database, as SQL without white space."""
    db = sqlite3.connect(path)
    try:
        return {f"{kind} {name}": _norm(sql) for kind, name, sql in db.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")}
    finally:
        db.close()


def as_shipped(path, migrations) -> sqlite3.Connection:
    """A SQLite database made as storbench made them before: ``migrations``, one after
    the other, each recorded as applied (left open)."""
    db = sqlite3.connect(path)
    db.execute(MIGRATIONS_TABLE)
    for name, sql in migrations:
        db.executescript(f"BEGIN;\n{sql}\nINSERT INTO schema_migrations VALUES ('{name}',"
                         " 'x');\nCOMMIT;")
    return db


def test_a_new_sqlite_database_is_the_declaration(tmp_path):
    Store(tmp_path / "new.db").close()
    old = tmp_path / "old.db"
    as_shipped(old, MIGRATIONS).close()
    Store(old).close()  # nothing left to apply
    made, migrated = sqlite_shape(tmp_path / "new.db"), sqlite_shape(old)
    assert made == migrated
    assert {k for k in made if k.startswith("table ")} == {
        f"table {t.name}" for t in TABLES} | {"table schema_migrations"}
    assert {k for k in made if k.startswith("index ")} == {f"index {n}" for n in INDEXES}


def postgres_shape(url: str) -> dict[str, list[tuple[object, ...]]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        def rows(sql: str) -> list[tuple[object, ...]]:
            return sorted(tuple(r) for r in conn.execute(sql).fetchall())

        return {
            "columns": rows("SELECT table_name, ordinal_position, column_name, data_type,"
                            " is_nullable, column_default, is_identity"
                            " FROM information_schema.columns"
                            " WHERE table_schema = current_schema()"),
            "constraints": rows("SELECT conrelid::regclass::text, conname,"
                                " pg_get_constraintdef(oid) FROM pg_constraint"
                                " WHERE connamespace = current_schema()::regnamespace"),
            "indexes": rows("SELECT indexname, indexdef FROM pg_indexes"
                            " WHERE schemaname = current_schema()"),
            "triggers": rows("SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
                             " WHERE NOT tgisinternal"),
            "functions": rows("SELECT proname, prosrc FROM pg_proc"
                              " WHERE pronamespace = current_schema()::regnamespace"),
        }


def test_a_new_postgresql_database_is_the_declaration(postgres_server, postgres_db):
    import secrets

    import psycopg

    from storbench.store import postgres

    Store(postgres_db).close()  # new: from the declaration
    name = f"t_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    old = postgres_server.rsplit("/", 1)[0] + "/" + name
    try:
        conn2 = postgres.Connection(old)  # as storbench made them before: 0001 as shipped,
        postgres.migrate(conn2, MIGRATIONS[:1], "t", "old")  # then each migration
        conn2.close()
        s = Store(old)
        assert s.schema_version() == len(MIGRATIONS)
        s.close()
        made, migrated = postgres_shape(postgres_db), postgres_shape(old)
        for part in made:
            assert made[part] == migrated[part], part
        tables = {r[0] for r in made["columns"]}
        assert tables == {t.name for t in TABLES} | {"schema_migrations"}
        assert {r[0] for r in made["indexes"]} >= set(INDEXES)
        s = Store(postgres_db)  # what was stored stays as it was
        s.db.execute("INSERT INTO runs (uid, created_at, status, suite, target, environment,"
                     " settings, storbench_version) VALUES ('u', 't', 'completed', 'quick',"
                     " '/x', '{}', '{}', '0')", ())
        s.db.execute("INSERT INTO invocations (run_id, ordinal, job_text, raw_json, stderr)"
                     " VALUES (1, 0, '', '', '')", ())
        s.db.execute("INSERT INTO results (run_id, invocation_id, ordinal, test, result)"
                     " VALUES (1, 1, 0, 't', '{}')", ())
        with pytest.raises(psycopg.errors.RaiseException, match="results are immutable"):
            s.db.execute("UPDATE results SET test = 'x'", ())
        with pytest.raises(psycopg.errors.RaiseException, match="a finished run is immutable"):
            s.db.execute("UPDATE runs SET status = 'failed'", ())
        s.db.execute("UPDATE runs SET label = 'renamed'", ())  # its label may change
        s.close()
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_foreign_runs_table_is_not_taken_for_a_new_database(postgres_db):
    import psycopg

    from storbench.errors import StoreError

    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(StoreError, match="that storbench did not make"):
        Store(postgres_db)
