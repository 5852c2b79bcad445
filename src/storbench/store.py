"""The SQLite store: every run with its environment, results and fio's raw JSON.

Schema changes are an ordered list of migrations, each applied in a transaction
with the row that records it. Results are immutable (triggers refuse updates);
a run's row changes once, from 'running' to its final status.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storbench.errors import StoreError
from storbench.result.model import TestResult

STATUSES = ("running", "completed", "failed", "interrupted")


def default_db_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "storbench" / "results.db"


_INITIAL = """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            uid TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL
                CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
            origin TEXT NOT NULL DEFAULT 'measured',
            label TEXT,
            suite TEXT NOT NULL,
            target TEXT NOT NULL,
            error TEXT,
            environment TEXT NOT NULL,
            settings TEXT NOT NULL,
            storbench_version TEXT NOT NULL,
            fio_version TEXT
        );
        CREATE TABLE run_tags (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (run_id, key)
        );
        CREATE TABLE invocations (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            job_text TEXT NOT NULL,
            raw_json TEXT NOT NULL,
            returncode INTEGER,
            stderr TEXT NOT NULL,
            wall_s REAL,
            UNIQUE (run_id, ordinal)
        );
        CREATE TABLE results (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            invocation_id INTEGER NOT NULL REFERENCES invocations(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            test TEXT NOT NULL,
            result TEXT NOT NULL,
            UNIQUE (run_id, ordinal)
        );
        CREATE INDEX results_run ON results(run_id);
        CREATE TRIGGER results_immutable BEFORE UPDATE ON results
            BEGIN SELECT RAISE(ABORT, 'results are immutable'); END;
        CREATE TRIGGER invocations_immutable BEFORE UPDATE ON invocations
            BEGIN SELECT RAISE(ABORT, 'fio output is immutable'); END;
        CREATE TRIGGER runs_final BEFORE UPDATE ON runs WHEN OLD.status != 'running'
            BEGIN SELECT RAISE(ABORT, 'a finished run is immutable'); END;
"""

_WARNINGS = """
CREATE TABLE warnings (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    test TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    details TEXT NOT NULL
);
CREATE INDEX warnings_run ON warnings(run_id);
CREATE TRIGGER warnings_immutable BEFORE UPDATE ON warnings
    BEGIN SELECT RAISE(ABORT, 'warnings are immutable'); END;
"""

_REPEATS_AND_DATA = """
ALTER TABLE results ADD COLUMN repeat INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_data (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TRIGGER run_data_immutable BEFORE UPDATE ON run_data
    BEGIN SELECT RAISE(ABORT, 'run data is immutable'); END;
"""

_HOSTS = """
ALTER TABLE results ADD COLUMN host TEXT NOT NULL DEFAULT '';
"""

# Ordered, named migrations (SQL scripts); never edit one that has shipped, add another.
MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", _INITIAL),
    ("0002_warnings", _WARNINGS),
    ("0003_repeats_and_run_data", _REPEATS_AND_DATA),
    ("0004_per_host_results", _HOSTS),
]
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class StoredTest:
    ordinal: int
    invocation: int  # ordinal of the fio invocation that produced it
    result: TestResult
    repeat: int = 0  # 0-based repetition (--repeat N)
    host: str = ""  # "" = the test's result (all hosts merged); else one host's share


@dataclass(frozen=True)
class Invocation:
    ordinal: int
    job_text: str
    raw_json: str
    returncode: int | None
    stderr: str
    wall_s: float | None


@dataclass(frozen=True)
class Run:
    id: int
    uid: str
    created_at: str
    finished_at: str | None
    status: str
    origin: str
    label: str | None
    suite: str
    target: str
    error: str | None
    environment: dict[str, Any]
    settings: dict[str, Any]
    storbench_version: str
    fio_version: str | None
    tags: dict[str, str] = field(default_factory=dict)
    tests: list[StoredTest] = field(default_factory=list)
    invocations: list[Invocation] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)  # kind, test, message, details
    data: dict[str, Any] = field(default_factory=dict)  # e.g. "metadata_probe"

    def results_by_test(self) -> dict[str, list[TestResult]]:
        """Each test's results, one per repeat, in the order the tests first ran."""
        out: dict[str, list[TestResult]] = {}
        for t in self.tests:
            if not t.host:
                out.setdefault(t.result.name, []).append(t.result)
        return out

    def results_by_host(self) -> dict[str, dict[str, list[TestResult]]]:
        """Client/server runs: {test: {host: results, one per repeat}}; {} for local runs."""
        out: dict[str, dict[str, list[TestResult]]] = {}
        for t in self.tests:
            if t.host:
                out.setdefault(t.result.name, {}).setdefault(t.host, []).append(t.result)
        return out

    @property
    def repeats(self) -> int:
        return max((t.repeat for t in self.tests), default=0) + 1

    @property
    def name(self) -> str:
        """How the run is named in tables: its label, else '#id'."""
        return self.label or f"#{self.id}"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory of the database {self.path!r}:"
                                 f" {exc.strerror}; pass --db a writable path") from exc
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                self.db.execute("PRAGMA journal_mode = WAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open the results database {self.path!r}: {exc};"
                             " pass --db another file") from exc

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _migrate(self) -> None:
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
        )
        done = {r[0] for r in self.db.execute("SELECT name FROM schema_migrations")}
        unknown = done - {name for name, _ in MIGRATIONS}
        if unknown:
            raise StoreError(f"the database {self.path!r} was written by a newer storbench"
                             f" (migrations {sorted(unknown)}); upgrade storbench")
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            # One transaction: the schema change and the row that records it.
            record = f"INSERT INTO schema_migrations VALUES ('{name}', '{now_iso()}');"
            try:
                self.db.executescript(f"BEGIN IMMEDIATE;\n{sql}\n{record}\nCOMMIT;")
            except sqlite3.Error:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM schema_migrations").fetchone()[0])

    # -- writing ---------------------------------------------------------------------------

    def begin_run(
        self,
        *,
        uid: str,
        suite: str,
        target: str,
        environment: dict[str, Any],
        settings: dict[str, Any],
        storbench_version: str,
        fio_version: str | None,
        label: str | None = None,
        tags: dict[str, str] | None = None,
        origin: str = "measured",
    ) -> int:
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO runs (uid, created_at, status, origin, label, suite, target,"
                " environment, settings, storbench_version, fio_version)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
                (uid, now_iso(), origin, label, suite, target, json.dumps(environment),
                 json.dumps(settings), storbench_version, fio_version),
            )
            run_id = int(cur.lastrowid or 0)
            db.executemany(
                "INSERT INTO run_tags VALUES (?, ?, ?)",
                [(run_id, k, v) for k, v in (tags or {}).items()],
            )
        return run_id

    def add_invocation(
        self,
        run_id: int,
        invocation: Invocation,
        results: Sequence[tuple[int, TestResult]],
        warnings: Sequence[dict[str, Any]] = (),
        repeat: int = 0,
        per_host: Sequence[tuple[int, str, TestResult]] = (),
    ) -> None:
        """Store one fio invocation (raw JSON verbatim), the tests parsed from it and
        the warnings about them, in one transaction."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO invocations (run_id, ordinal, job_text, raw_json, returncode,"
                " stderr, wall_s) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, invocation.ordinal, invocation.job_text, invocation.raw_json,
                 invocation.returncode, invocation.stderr, invocation.wall_s),
            )
            db.executemany(
                "INSERT INTO results (run_id, invocation_id, ordinal, test, result, repeat,"
                " host) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run_id, cur.lastrowid, ordinal, r.name, json.dumps(r.to_dict()), repeat, "")
                 for ordinal, r in results]
                + [(run_id, cur.lastrowid, ordinal, r.name, json.dumps(r.to_dict()), repeat,
                    host) for ordinal, host, r in per_host],
            )
            db.executemany(
                "INSERT INTO warnings (run_id, test, kind, message, details)"
                " VALUES (?, ?, ?, ?, ?)",
                [(run_id, w["test"], w["kind"], w["message"], json.dumps(w["details"]))
                 for w in warnings],
            )

    def update_environment(self, run_id: int, environment: dict[str, Any],
                           fio_version: str | None) -> None:
        """Complete a running run's environment (facts learnt once its target is up)."""
        with self._tx() as db:
            db.execute("UPDATE runs SET environment = ?, fio_version = ? WHERE id = ?"
                       " AND status = 'running'", (json.dumps(environment), fio_version, run_id))

    def finish_run(
        self, run_id: int, status: str, error: str | None = None,
        data: dict[str, Any] | None = None,
        warnings: Sequence[dict[str, Any]] = (),
    ) -> None:
        """The run's final status, once, with run-level data (e.g. probes) and warnings."""
        if status not in STATUSES[1:]:
            raise ValueError(status)
        with self._tx() as db:
            db.executemany(
                "INSERT INTO warnings (run_id, test, kind, message, details)"
                " VALUES (?, ?, ?, ?, ?)",
                [(run_id, w["test"], w["kind"], w["message"], json.dumps(w["details"]))
                 for w in warnings],
            )
            db.executemany("INSERT INTO run_data VALUES (?, ?, ?)",
                           [(run_id, k, json.dumps(v)) for k, v in (data or {}).items()])
            db.execute(
                "UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, error, now_iso(), run_id),
            )

    def delete_run(self, run_id: int) -> None:
        self.get_run(run_id, with_results=False)
        with self._tx() as db:
            db.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # -- reading ---------------------------------------------------------------------------

    def resolve(self, ref: str) -> int:
        """A run id from what a user typed: a number, 'last', or a label (its latest run)."""
        if ref == "last":
            row = self.db.execute("SELECT max(id) FROM runs").fetchone()
            if row[0] is None:
                raise StoreError(f"no runs stored yet in {self.path}")
            return int(row[0])
        if ref.lstrip("#").isdigit():
            return int(ref.lstrip("#"))
        row = self.db.execute("SELECT max(id) FROM runs WHERE label = ?", (ref,)).fetchone()
        if row[0] is None:
            raise StoreError(f"{ref!r} is neither a run id nor a label; `storbench list` shows"
                             " the runs")
        return int(row[0])

    def resolve_baseline(self, ref: str, *, exclude: int | None = None) -> int:
        """A run id, 'last', or a label: the latest completed run with that label."""
        if ref == "last" or ref.lstrip("#").isdigit():
            return self.resolve(ref)
        row = self.db.execute(
            "SELECT max(id) FROM runs WHERE label = ? AND status = 'completed' AND id != ?",
            (ref, exclude if exclude is not None else -1)).fetchone()
        if row[0] is None:
            raise StoreError(f"no completed run labelled {ref!r} to use as the baseline;"
                             " `storbench list` shows the runs")
        return int(row[0])

    def get_run(self, run_id: int, *, with_results: bool = True) -> Run:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"run {run_id} does not exist in {self.path};"
                             " `storbench list` shows the stored runs")
        return self._run(row, with_results)

    def _run(self, row: sqlite3.Row, with_results: bool) -> Run:
        tags = {
            r["key"]: r["value"]
            for r in self.db.execute("SELECT key, value FROM run_tags WHERE run_id = ?"
                                     " ORDER BY key", (row["id"],))
        }
        tests: list[StoredTest] = []
        invocations: list[Invocation] = []
        warnings: list[dict[str, Any]] = []
        data: dict[str, Any] = {}
        if with_results:
            data = {r["key"]: json.loads(r["value"]) for r in self.db.execute(
                "SELECT key, value FROM run_data WHERE run_id = ?", (row["id"],))}
            for r in self.db.execute(
                "SELECT results.ordinal AS ordinal, invocations.ordinal AS inv, result, repeat,"
                " host"
                " FROM results JOIN invocations ON invocations.id = results.invocation_id"
                " WHERE results.run_id = ? ORDER BY results.ordinal", (row["id"],)
            ):
                tests.append(StoredTest(r["ordinal"], r["inv"],
                                        TestResult.from_dict(json.loads(r["result"])),
                                        r["repeat"], r["host"]))
            for r in self.db.execute(
                "SELECT ordinal, job_text, raw_json, returncode, stderr, wall_s"
                " FROM invocations WHERE run_id = ? ORDER BY ordinal", (row["id"],)
            ):
                invocations.append(Invocation(**dict(r)))
            for r in self.db.execute(
                "SELECT test, kind, message, details FROM warnings WHERE run_id = ?"
                " ORDER BY id", (row["id"],)
            ):
                warnings.append({"test": r["test"], "kind": r["kind"], "message": r["message"],
                                 "details": json.loads(r["details"])})
        return Run(
            id=row["id"], uid=row["uid"], created_at=row["created_at"],
            finished_at=row["finished_at"], status=row["status"], origin=row["origin"],
            label=row["label"], suite=row["suite"], target=row["target"], error=row["error"],
            environment=json.loads(row["environment"]), settings=json.loads(row["settings"]),
            storbench_version=row["storbench_version"], fio_version=row["fio_version"],
            tags=tags, tests=tests, invocations=invocations, warnings=warnings, data=data,
        )

    def list_runs(
        self,
        *,
        label: str | None = None,
        suite: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        sql = "SELECT * FROM runs WHERE 1"
        params: list[Any] = []
        if label is not None:
            sql += " AND label = ?"
            params.append(label)
        if suite is not None:
            sql += " AND suite = ?"
            params.append(suite)
        for k, v in (tags or {}).items():
            sql += " AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = runs.id"
            sql += " AND t.key = ? AND t.value = ?)"
            params += [k, v]
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [self._run(r, False) for r in self.db.execute(sql, params)]
