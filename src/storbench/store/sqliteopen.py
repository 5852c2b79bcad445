"""Opening a SQLite results database: write-ahead logging, and the schema made (a new
database, from the declaration at once) or brought up to date (an older one, migration
by migration, each in one transaction with the row that records it).

Several storbench may open one database in the same instant (a CI job's runs side by
side): each waits for the others' switch to WAL and schema change, and one that finds
a migration applied by another as it waited goes on.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime

from storbench.store import schema
from storbench.store.migrations import (
    MIGRATIONS,
    MIGRATIONS_TABLE,
    REBUILDS,
    pending,
    say_migrating,
)

BUSY_WAIT_S = 30.0  # for another storbench's transaction, and its switch to WAL


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_sqlite(path: str) -> sqlite3.Connection:
    """The database at ``path`` (":memory:" too), of today's schema."""
    db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_WAIT_S)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys = ON")
    if path != ":memory:":
        _wal(db)
    _migrate(db, path)
    return db


def _wal(db: sqlite3.Connection) -> None:
    """Write-ahead logging (readers never wait for the writer). Another storbench
    switching a new database at the same instant makes SQLite say "locked" at once,
    without waiting (its busy timeout does not apply to the switch): tried again."""
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _migrate(db: sqlite3.Connection, path: str) -> None:
    db.execute(MIGRATIONS_TABLE)
    done = {r[0] for r in db.execute("SELECT name FROM schema_migrations")}
    if not done and not db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
    ).fetchall():  # a new database: made from the declaration at once
        now = now_iso()
        records = "".join(f"INSERT INTO schema_migrations VALUES ('{name}', '{now}');\n"
                          for name, _ in MIGRATIONS)
        _script(db, f"BEGIN IMMEDIATE;\n{schema.script('sqlite')}{records}COMMIT;",
                MIGRATIONS[-1][0])
        return
    todo = pending(done, path)
    if todo:
        (runs,) = db.execute("SELECT count(*) FROM runs").fetchone()
        say_migrating(path, [name for name, _ in todo], int(runs))
    apply(db, todo)


def apply(db: sqlite3.Connection, migrations: list[tuple[str, str]]) -> None:
    """Apply ``migrations`` in order, each in one transaction with its record."""
    for name, sql in migrations:
        # One transaction: the schema change and the row that records it.
        record = f"INSERT INTO schema_migrations VALUES ('{name}', '{now_iso()}');"
        rebuild = name in REBUILDS
        try:
            if rebuild:  # (PRAGMA foreign_keys cannot change inside a transaction)
                db.execute("PRAGMA foreign_keys = OFF")
            check = "PRAGMA foreign_key_check;\n" if rebuild else ""
            _script(db, f"BEGIN IMMEDIATE;\n{sql}\n{check}{record}\nCOMMIT;", name)
        finally:
            if rebuild:
                db.execute("PRAGMA foreign_keys = ON")


def _script(db: sqlite3.Connection, script: str, migration: str) -> None:
    """Run the transaction ``script``, which ends by recording ``migration`` as applied;
    one that fails because another storbench did the same as it waited for the lock is
    done."""
    try:
        db.executescript(script)
    except sqlite3.Error:
        if db.in_transaction:
            db.execute("ROLLBACK")
        if not db.execute("SELECT 1 FROM schema_migrations WHERE name = ?",
                          (migration,)).fetchall():
            raise
