"""PostgreSQL as a team's shared store (``--db postgresql://user@host/dbname``): the
dialect seam under store/sqlite.py's Store.

The Store's SQL is written once, with ``?`` placeholders; this connection turns them
into psycopg's and gives rows that index by position and by name, as sqlite3.Row does.
JSON columns are ``jsonb`` (queryable in SQL) but read back as the text they hold, so
that the Store decodes them as it does SQLite's; fio's raw output is ``text``: jsonb
would reorder its keys and drop the duplicates fio writes, and it is kept verbatim.

Migrations: the same named list as SQLite. PostgreSQL support began at 0006, so
0001_initial creates that schema here and 0002..0006 have nothing left to do; every
later migration is written for both. Migrating holds an advisory lock: many machines
starting at once migrate once.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from storbench.errors import StoreError
from storbench.store import schema
from storbench.store.migrations import (
    MIGRATIONS,
    MIGRATIONS_TABLE,
    RELABEL_POSTGRES,
    RUN_DATA_KEY,
    RUN_LOCKS,
    RUNS_DIGEST,
    RUNS_OF_ID,
    SAME_INDEXES,
    SERIES_POSTGRES,
    WORKLOADS_POSTGRES,
    kept_answers,
    pending,
    result_figures,
    say_migrating,
    series_versions,
)

SCHEMES = ("postgresql://", "postgres://")
_LOCK = 7_202_611  # pg_advisory_xact_lock key: storbench's migrations


def is_url(target: str) -> bool:
    return target.startswith(SCHEMES)


SECRET_PARAMETERS = ("password", "sslpassword")  # libpq's, in a URL's query string


def secrets_of(url: str) -> list[str]:
    """The secrets a URL holds: its password, and any in its query (?password=...)."""
    p = urllib.parse.urlsplit(url)
    found = [p.password] if p.password else []
    found += [v for k, v in urllib.parse.parse_qsl(p.query, keep_blank_values=True)
              if k.lower() in SECRET_PARAMETERS and v]
    return found


def shown(url: str) -> str:
    """The URL without its secrets, for messages (user:***@host, ?password=***)."""
    p = urllib.parse.urlsplit(url)
    netloc = p.netloc
    if p.password is not None:
        user, _, where = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{where}"
    query = "&".join(
        f"{k}=***" if k.lower() in SECRET_PARAMETERS else
        (f"{k}={v}" if v else k)
        for k, v in urllib.parse.parse_qsl(p.query, keep_blank_values=True))
    where = f"{p.scheme}://{netloc}{p.path}"  # (urlunsplit drops an empty netloc's //)
    return where + (f"?{query}" if query else "") + (f"#{p.fragment}" if p.fragment else "")


def masked(text: str, url: str) -> str:
    """``text`` (a driver's message) with every secret of ``url`` replaced by ***."""
    forms = {f for s in secrets_of(url) for f in (s, urllib.parse.unquote(s))}
    for secret in sorted(forms, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


class Row(tuple[Any, ...]):
    """A row indexable by position and by column name (and ``dict(row)``)."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _rows(cursor: Any) -> Any:
    names = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, names)


class _Cursor:
    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def fetchone(self) -> Any:
        return self.cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self.cursor.fetchall())

    def __iter__(self) -> Any:
        return iter(self.cursor.fetchall() if self.cursor.description else ())


def _sql(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class Connection:
    """The part of sqlite3.Connection the Store uses, over psycopg (autocommit: the
    Store opens its own transactions)."""

    in_transaction = False

    def __init__(self, url: str) -> None:
        import psycopg  # only a PostgreSQL store pays for it
        from psycopg.types.string import TextLoader

        self.conn = psycopg.connect(url, autocommit=True, row_factory=_rows,
                                    connect_timeout=10, application_name="storbench")
        self.conn.adapters.register_loader("jsonb", TextLoader)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> _Cursor:
        if params is None:  # a script: no placeholders ('%' in a function body is kept)
            return _Cursor(self.conn.execute(sql.encode()))
        return _Cursor(self.conn.execute(_sql(sql), tuple(params)))

    def tuples(self, sql: str, params: Sequence[Any],
               part: Callable[[list[tuple[Any, ...]]], None] | None = None,
               size: int = 10_000, streamed: bool = False, binary: bool = False
               ) -> list[tuple[Any, ...]]:
        """A query's rows as plain tuples (many rows: no row objects made); each ``size``
        of them given to ``part`` as they are made, when given: ``streamed``, as the
        server sends them (libpq 17's chunked rows: the first part of a series' 100,000
        rows ~0.1 s after the query rather than ~0.2 s, each row ~0.2 µs slower), else
        once the server has sent them all. ``binary``: the values sent as their bytes,
        not as text (numbers and text only: the same values; 100,000 rows of a series'
        figures ~30 ms sooner, no double parsed from its digits)."""
        from psycopg import pq
        from psycopg.rows import tuple_row

        with self.conn.cursor(row_factory=tuple_row) as cur:
            if part is None:
                return cur.execute(_sql(sql), tuple(params), binary=binary).fetchall()
            rows: list[tuple[Any, ...]] = []
            if streamed and pq.version() >= 170000:
                at = 0
                for row in cur.stream(_sql(sql), tuple(params), size=size, binary=binary):
                    rows.append(row)
                    if len(rows) - at == size:
                        part(rows[at:])
                        at = len(rows)
                if len(rows) > at:
                    part(rows[at:])
                return rows
            cur.execute(_sql(sql), tuple(params), binary=binary)
            while more := cur.fetchmany(size):
                part(more)
                rows += more
            return rows

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(r) for r in rows]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(_sql(sql), rows)

    def close(self) -> None:
        self.conn.close()


def migrate(db: Connection, migrations: list[tuple[str, str]], now: str,
            where: str) -> None:
    """Apply what is missing, all in one transaction under the migration lock."""
    db.execute("BEGIN")
    try:
        db.execute(f"SELECT pg_advisory_xact_lock({_LOCK})")
        db.execute(MIGRATIONS_TABLE)
        done = {r[0] for r in db.execute("SELECT name FROM schema_migrations", ())}
        whole = [n for n, _ in migrations] == [n for n, _ in MIGRATIONS]
        fresh = whole and not done and not db.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema()"
            " AND table_name = 'runs'", ()).fetchall()
        if whole and not done and not fresh:
            raise StoreError(f"the database {where} holds a table 'runs' that storbench did"
                             " not make (no schema_migrations): use another database or"
                             " schema")
        if fresh:  # made from the declaration at once
            db.execute(schema.script("postgresql"))
        todo = pending(done, where, migrations)
        if todo and done:  # a store of ours with runs (a new one: nothing to count)
            (runs,) = db.execute("SELECT count(*) FROM runs", ()).fetchone()
            say_migrating(where, [name for name, _ in todo], int(runs))
        for name, _ in todo:
            script = None if fresh else SCRIPTS.get(name)
            if script:
                db.execute(script)
            db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, now))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


_IMMUTABLE = {"results": "results are immutable", "invocations": "fio output is immutable",
              "warnings": "warnings are immutable", "run_data": "run data is immutable",
              "verdicts": "verdicts are immutable"}

# 0001_initial as it shipped: what every PostgreSQL database made before store/schema.py
# holds (a new one is made from the declaration); kept so that tests make such a database
# and upgrade it
_SCHEMA = """
CREATE TABLE runs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    uid TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL
        CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'crashed')),
    origin TEXT NOT NULL DEFAULT 'measured',
    label TEXT,
    suite TEXT NOT NULL,
    target TEXT NOT NULL,
    error TEXT,
    environment JSONB NOT NULL,
    settings JSONB NOT NULL,
    storbench_version TEXT NOT NULL,
    fio_version TEXT,
    judged BOOLEAN NOT NULL DEFAULT FALSE,
    host TEXT,
    pid INTEGER,
    pid_start TEXT,
    boot_id TEXT
);
CREATE INDEX runs_running ON runs(status) WHERE status = 'running';
CREATE INDEX runs_label ON runs(label);
CREATE TABLE run_tags (
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE invocations (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    job_text TEXT NOT NULL,
    raw_json TEXT NOT NULL,
    returncode INTEGER,
    stderr TEXT NOT NULL,
    wall_s DOUBLE PRECISION,
    UNIQUE (run_id, ordinal)
);
CREATE TABLE results (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    invocation_id BIGINT NOT NULL REFERENCES invocations(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    test TEXT NOT NULL,
    result JSONB NOT NULL,
    repeat INTEGER NOT NULL DEFAULT 0,
    host TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, ordinal)
);
CREATE INDEX results_invocation ON results(invocation_id);
CREATE TABLE warnings (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    test TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    details JSONB NOT NULL
);
CREATE INDEX warnings_run ON warnings(run_id);
CREATE TABLE run_data (
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value JSONB NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE verdicts (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('verdict', 'regression')),
    passed BOOLEAN NOT NULL,
    record JSONB NOT NULL
);
CREATE INDEX verdicts_run ON verdicts(run_id);
CREATE FUNCTION storbench_refuse() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$;
CREATE TRIGGER runs_final BEFORE UPDATE ON runs FOR EACH ROW
    WHEN (OLD.status <> 'running') EXECUTE FUNCTION storbench_refuse('a finished run is immutable');
""" + "".join(
    f"CREATE TRIGGER {table}_immutable BEFORE UPDATE ON {table} FOR EACH ROW"
    f" EXECUTE FUNCTION storbench_refuse('{why}');\n" for table, why in _IMMUTABLE.items())

# Per migration name, what it does on PostgreSQL (absent: nothing left to do).
SCRIPTS: dict[str, str] = {"0001_initial": _SCHEMA, "0007_run_locks": RUN_LOCKS,
                           "0008_series": SERIES_POSTGRES,
                           "0009_relabel": RELABEL_POSTGRES,
                           "0010_workloads": WORKLOADS_POSTGRES,
                           "0011_same_indexes": SAME_INDEXES,
                           "0012_result_figures": result_figures("postgresql"),
                           "0013_runs_digest": RUNS_DIGEST,
                           "0014_runs_of_id": RUNS_OF_ID,
                           "0015_kept_answers": kept_answers("postgresql"),
                           "0016_run_data_key": RUN_DATA_KEY,
                           "0017_series_versions": series_versions("postgresql")}
