"""The store: every run with its environment, results and fio's raw JSON, in an
embedded SQLite file or a team's PostgreSQL database (``--db postgresql://…``, the
dialect seam in store/postgres.py: the SQL here is written once for both).

Schema changes are an ordered list of migrations, each applied in a transaction
with the row that records it. Results are immutable (triggers refuse updates);
a run's row changes once, from 'running' to its final status.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storbench.errors import ConfigError, NotFound, StoreError
from storbench.result.hidden import hide
from storbench.result.record import (
    STATUSES,
    Invocation,
    Regression,
    Run,
    StoredTest,
    Verdict,
    Warning,
)
from storbench.store import schema
from storbench.store.migrations import MIGRATIONS
from storbench.store.postgres import is_url
from storbench.store.processes import crash_note, this_process, vanished
from storbench.store.sqliteopen import now_iso, open_sqlite

if TYPE_CHECKING:
    from storbench.result.model import TestResult


def default_db_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "storbench" / "results.db"


SCHEMA_VERSION = len(MIGRATIONS)


def insert_warnings(db: Any, run_id: int, warnings: Sequence[Warning]) -> None:
    db.executemany(
        "INSERT INTO warnings (run_id, test, kind, message, details) VALUES (?, ?, ?, ?, ?)",
        [(run_id, w.test, w.kind, hide(w.message), hide(json.dumps(w.details)))
         for w in warnings])


RUN_ID = re.compile(r"#?[0-9]+")  # ASCII digits only: "²" is a digit to str.isdigit()



def _sqlite_header(path: str) -> bool:
    """Whether the file begins as every SQLite database does."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def damaged(path: str, exc: Exception, said: str, undecodable: bool = False
            ) -> StoreError | None:
    """A SQLite file found damaged (``said``: the driver's words for ``exc``), in our
    words: how to save what is readable. None for any other error."""
    if isinstance(exc, sqlite3.DatabaseError) and (
            type(exc) is sqlite3.DatabaseError or "malformed" in said
            or "not a database" in said or undecodable):
        return StoreError(
            f"the results database {path!r} is damaged ({said}); recover what is readable"
            f" with: sqlite3 {path!r} .recover | sqlite3 recovered.db, then pass --db"
            " recovered.db")
    return None

class Store:
    db: Any  # sqlite3.Connection, or postgres.Connection (the same calls)

    def __init__(self, path: str | Path, make_dir: bool = True, create: bool = True) -> None:
        """Open (or create) the database ``path``: a SQLite file, or a PostgreSQL URL.
        ``make_dir``: create its directory when missing (the default location's; a
        path a user gave names a file in a directory that is there). ``create=False``
        (commands that only read or change stored runs): a SQLite file that is not there
        is read as an empty database and not made (a typo leaves no file behind)."""
        self.path = str(path)  # as shown: a URL without its secrets
        # a message with the database's secrets replaced by *** (PostgreSQL's password)
        self.mask: Callable[[str], str] = str
        self.errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
        if isinstance(path, str) and is_url(path):
            self._open_postgres(path)
            return
        self.postgres = False
        if self.path != ":memory:" and not make_dir and not Path(self.path).parent.is_dir():
            raise StoreError(f"the directory of the database {self.path!r} does not exist:"
                             " create it, or give --db a file in a directory that does")
        if not create and self.path != ":memory:" and not Path(self.path).exists():
            self.db = open_sqlite(":memory:")
            return
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the directory of the database {self.path!r}:"
                                 f" {exc.strerror}; pass --db a writable path") from exc
        try:
            self.db = open_sqlite(self.path)
            self._mark_crashed()
        except sqlite3.DatabaseError as exc:
            # a SQLite file that cannot be opened is damaged; any other file is no database
            raise (damaged(self.path, exc, str(exc)) if _sqlite_header(self.path) else None) \
                or StoreError(f"cannot open the results database {self.path!r}: {exc}; pass"
                              " --db another file") from exc

    def _open_postgres(self, url: str) -> None:
        import psycopg

        from storbench.store import postgres

        self.path = postgres.shown(url)
        self.mask = functools.partial(postgres.masked, url=url)
        self.postgres = True
        self.errors = (psycopg.Error,)
        try:
            self.db = postgres.Connection(url)
            postgres.migrate(self.db, MIGRATIONS, now_iso(), self.path)
            self._mark_crashed()
        except psycopg.Error as exc:
            said = postgres.masked(str(exc), url)
            raise StoreError(f"cannot use the results database {self.path}: {said}") from None

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        self.db.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _mark_crashed(self) -> None:
        """Runs of this host still 'running' whose process is gone (or from before the
        machine's last boot) were killed outright: they become 'crashed'."""
        me = this_process()
        rows = self.db.execute(
            "SELECT id, pid, pid_start, boot_id, lock_path, pid_ns FROM runs"
            " WHERE status = 'running' AND host = ?", (me.host,)).fetchall()
        gone = [(r["id"], r["pid"]) for r in rows
                if vanished(r["pid"], r["pid_start"], r["boot_id"], me, r["lock_path"],
                            r["pid_ns"])]
        if not gone:
            return
        with self._tx() as db:
            db.executemany(
                "UPDATE runs SET status = 'crashed', error = ?, finished_at = ? WHERE id = ?"
                " AND status = 'running'",
                [(crash_note(pid, me.host), now_iso(), run_id) for run_id, pid in gone])

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
        lock_path: str | None = None,
        series: str | None = None,
    ) -> int:
        """A new run, 'running' (``lock_path``: the file its process holds locked while
        it lives; ``series``: the history it belongs to)."""
        with self._tx() as db:
            me = this_process()
            cur = db.execute(
                "INSERT INTO runs (uid, created_at, status, origin, label, suite, target,"
                " environment, settings, storbench_version, fio_version, host, pid,"
                " pid_start, boot_id, lock_path, pid_ns) VALUES (?, ?, 'running', ?, ?, ?,"
                " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (uid, now_iso(), origin, label, suite, target, hide(json.dumps(environment)),
                 hide(json.dumps(settings)), storbench_version, fio_version, me.host, me.pid,
                 me.start, me.boot_id, lock_path, me.pid_ns),
            )
            run_id = int(cur.fetchone()[0])
            db.executemany(
                "INSERT INTO run_tags VALUES (?, ?, ?)",
                [(run_id, k, v) for k, v in (tags or {}).items()],
            )
            if series:
                db.execute("INSERT INTO run_series VALUES (?, ?)", (run_id, series))
        return run_id

    def add_invocation(
        self,
        run_id: int,
        invocation: Invocation,
        results: Sequence[tuple[int, TestResult]],
        warnings: Sequence[Warning] = (),
        repeat: int = 0,
        per_host: Sequence[tuple[int, str, TestResult]] = (),
    ) -> None:
        """Store one fio invocation (raw JSON verbatim), the tests parsed from it and
        the warnings about them, in one transaction."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO invocations (run_id, ordinal, job_text, raw_json, returncode,"
                " stderr, wall_s) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, invocation.ordinal, hide(invocation.job_text),
                 hide(invocation.raw_json), invocation.returncode, hide(invocation.stderr),
                 invocation.wall_s),
            )
            invocation_id = cur.fetchone()[0]
            db.executemany(
                "INSERT INTO results (run_id, invocation_id, ordinal, test, result, repeat,"
                " host) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(run_id, invocation_id, ordinal, r.name, hide(json.dumps(r.to_dict())),
                  repeat, "") for ordinal, r in results]
                + [(run_id, invocation_id, ordinal, r.name, hide(json.dumps(r.to_dict())),
                    repeat, host) for ordinal, host, r in per_host],
            )
            db.execute(self.figures_insert("res.invocation_id = ?"), (invocation_id,))
            insert_warnings(db, run_id, warnings)

    def figures_insert(self, where: str) -> str:
        """The INSERT that keeps the figures of the results ``where`` (schema.py)."""
        return schema.figures_insert("postgresql" if self.postgres else "sqlite", where)

    def update_environment(self, run_id: int, environment: dict[str, Any],
                           fio_version: str | None) -> None:
        """Complete a running run's environment (facts learnt once its target is up)."""
        with self._tx() as db:
            db.execute("UPDATE runs SET environment = ?, fio_version = ? WHERE id = ?"
                       " AND status = 'running'", (hide(json.dumps(environment)), fio_version,
                                                   run_id))

    def finish_run(
        self, run_id: int, status: str, error: str | None = None,
        data: dict[str, Any] | None = None,
        warnings: Sequence[Warning] = (),
        verdicts: Sequence[Verdict] | None = None,
        regressions: Sequence[Regression] = (),
    ) -> None:
        """The run's final status, once, with run-level data (e.g. probes), warnings and
        what it was judged: ``verdicts`` None leaves it unjudged (a failed run)."""
        if status not in STATUSES[1:]:
            raise ValueError(status)
        with self._tx() as db:
            insert_warnings(db, run_id, warnings)
            db.executemany("INSERT INTO run_data VALUES (?, ?, ?)",
                           [(run_id, k, hide(json.dumps(v))) for k, v in (data or {}).items()])
            db.executemany(
                "INSERT INTO verdicts (run_id, kind, passed, record) VALUES (?, ?, ?, ?)",
                [(run_id, "verdict", v.passed, json.dumps(v.to_dict()))
                 for v in verdicts or ()]
                + [(run_id, "regression", not r.failed, json.dumps(r.to_dict()))
                   for r in regressions])
            db.execute(
                "UPDATE runs SET status = ?, error = ?, finished_at = ?, judged = ?"
                " WHERE id = ?",
                (status, None if error is None else hide(error), now_iso(),
                 verdicts is not None, run_id),
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
                raise NotFound(f"no runs stored yet in {self.path}")
            return int(row[0])
        if RUN_ID.fullmatch(ref):
            run_id = int(ref.lstrip("#"))
            if run_id >= 2**63:  # beyond any SQLite row id
                raise NotFound(f"run {run_id} does not exist in {self.path};"
                                 " `storbench list` shows the stored runs")
            return run_id
        row = self.db.execute("SELECT max(id) FROM runs WHERE label = ?", (ref,)).fetchone()
        if row[0] is None:
            raise NotFound(f"{ref!r} is neither a run id nor a label; `storbench list` shows"
                             " the runs")
        return int(row[0])

    def resolve_baseline(self, ref: str, *, exclude: int | None = None) -> int:
        """A run id, 'last', or a label: the latest completed run with that label.
        ConfigError (a bad flag, exit 2) when there is none."""
        if ref == "last" or RUN_ID.fullmatch(ref):
            try:
                run_id = self.resolve(ref)
            except StoreError as exc:
                raise ConfigError(f"--baseline {ref}: {exc}") from None
            if self.db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise ConfigError(f"--baseline {ref}: run {run_id} does not exist in"
                                  f" {self.path}; `storbench list` shows the stored runs")
            return run_id
        row = self.db.execute(
            "SELECT max(id) FROM runs WHERE label = ? AND status = 'completed' AND id != ?",
            (ref, exclude if exclude is not None else -1)).fetchone()
        if row[0] is None:
            raise ConfigError(f"--baseline {ref}: no completed run labelled {ref!r} to use as"
                              " the baseline; `storbench list` shows the runs")
        return int(row[0])

    def get_run(self, run_id: int, *, with_results: bool = True) -> Run:
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"run {run_id} does not exist in {self.path};"
                             " `storbench list` shows the stored runs")
        return self._run(row, with_results)

    def _run(self, row: Any, with_results: bool) -> Run:
        tags = {
            r["key"]: r["value"]
            for r in self.db.execute("SELECT key, value FROM run_tags WHERE run_id = ?"
                                     " ORDER BY key", (row["id"],))
        }
        tests: list[StoredTest] = []
        invocations: list[Invocation] = []
        warnings: list[Warning] = []
        verdicts: list[Verdict] = []
        regressions: list[Regression] = []
        data: dict[str, Any] = {}
        if with_results:
            from storbench.result.model import TestResult

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
                warnings.append(Warning(r["kind"], r["test"], r["message"],
                                        json.loads(r["details"])))
            for r in self.db.execute(
                "SELECT kind, record FROM verdicts WHERE run_id = ? ORDER BY id", (row["id"],)
            ):
                record = json.loads(r["record"])
                if r["kind"] == "verdict":
                    verdicts.append(Verdict.from_dict(record))
                else:
                    regressions.append(Regression.from_dict(record))
        series = self.db.execute("SELECT name FROM run_series WHERE run_id = ?",
                                 (row["id"],)).fetchone()
        return Run(
            id=row["id"], uid=row["uid"], created_at=row["created_at"],
            finished_at=row["finished_at"], status=row["status"], origin=row["origin"],
            label=row["label"], suite=row["suite"], target=row["target"], error=row["error"],
            environment=json.loads(row["environment"]), settings=json.loads(row["settings"]),
            storbench_version=row["storbench_version"], fio_version=row["fio_version"],
            tags=tags, tests=tests, invocations=invocations, warnings=warnings,
            verdicts=verdicts if row["judged"] else None, regressions=regressions, data=data,
            series=series[0] if series else None,
        )

    def list_runs(
        self,
        *,
        label: str | None = None,
        suite: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        sql = "SELECT * FROM runs WHERE 1 = 1"
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
