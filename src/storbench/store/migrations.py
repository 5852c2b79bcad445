"""How a database made by an earlier storbench reaches the schema of store/schema.py: an
ordered list of named migrations (SQL scripts; SQLite's here, PostgreSQL's in
store/postgres.SCRIPTS). A new database is made from the declaration at once.

Never edit one that has shipped: add another. Each is applied in one transaction
with the row that records it (store/sqliteopen.py).
"""

from storbench.store.schema import (
    NEW_VERSION,
    Dialect,
    figures_insert,
    immutable_sql,
    index_sql,
    series_versions_sql,
    table,
)

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

_VERDICTS = """
CREATE TABLE verdicts (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('verdict', 'regression')),
    passed INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX verdicts_run ON verdicts(run_id);
CREATE TRIGGER verdicts_immutable BEFORE UPDATE ON verdicts
    BEGIN SELECT RAISE(ABORT, 'verdicts are immutable'); END;
ALTER TABLE runs ADD COLUMN judged INTEGER NOT NULL DEFAULT 0;
"""

# A run killed outright (SIGKILL, OOM, power) stays 'running' unless someone notices:
# each run records the process that runs it, so a later command can tell it crashed.
# SQLite cannot change a CHECK constraint: the table is rebuilt (with foreign keys off,
# as its documentation's 12 steps say; see REBUILDS).
_CRASHED = """
CREATE TABLE runs_new (
    id INTEGER PRIMARY KEY,
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
    environment TEXT NOT NULL,
    settings TEXT NOT NULL,
    storbench_version TEXT NOT NULL,
    fio_version TEXT,
    judged INTEGER NOT NULL DEFAULT 0,
    host TEXT,
    pid INTEGER,
    pid_start TEXT,
    boot_id TEXT
);
INSERT INTO runs_new (id, uid, created_at, finished_at, status, origin, label, suite, target,
                      error, environment, settings, storbench_version, fio_version, judged)
    SELECT id, uid, created_at, finished_at, status, origin, label, suite, target, error,
           environment, settings, storbench_version, fio_version, judged FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_running ON runs(status) WHERE status = 'running';
CREATE TRIGGER runs_final BEFORE UPDATE ON runs WHEN OLD.status != 'running'
    BEGIN SELECT RAISE(ABORT, 'a finished run is immutable'); END;
"""

# A run is alive while its process holds the lock on its work directory's marker:
# ``lock_path`` says where, ``pid_ns`` in which PID namespace its PID means anything
# (a storbench in another one, a container with the host's name, cannot judge by it).
RUN_LOCKS = """
ALTER TABLE runs ADD COLUMN lock_path TEXT;
ALTER TABLE runs ADD COLUMN pid_ns TEXT;
"""

# Runs of the same storage and suite form a series (`storbench history`): its name is
# kept beside the run, not in it (a finished run is immutable; its series may be renamed).
SERIES = """
CREATE TABLE run_series (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL
);
CREATE INDEX run_series_name ON run_series(name);
INSERT INTO run_series (run_id, name)
    SELECT id, suite || '@' || CASE
        WHEN json_extract(environment, '$.kubernetes') IS NOT NULL THEN
            COALESCE(json_extract(environment, '$.kubernetes.context') || ':', '') || target
        WHEN json_type(environment, '$.hosts') = 'array'
             AND json_array_length(environment, '$.hosts') > 0 THEN target
        WHEN json_extract(environment, '$.hostname') IS NOT NULL THEN
            json_extract(environment, '$.hostname') || ':' || target
        ELSE target END
    FROM runs WHERE origin = 'measured';
"""
# the runs measured before series existed join theirs (analysis.naming.auto_series)
SERIES_POSTGRES = """
CREATE TABLE run_series (
    run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL
);
CREATE INDEX run_series_name ON run_series(name);
INSERT INTO run_series (run_id, name)
    SELECT id, suite || '@' || CASE
        WHEN environment -> 'kubernetes' IS NOT NULL THEN
            COALESCE((environment -> 'kubernetes' ->> 'context') || ':', '') || target
        WHEN jsonb_typeof(environment -> 'hosts') = 'array'
             AND jsonb_array_length(CASE WHEN jsonb_typeof(environment -> 'hosts') = 'array'
                                    THEN environment -> 'hosts' ELSE '[]' END) > 0 THEN target
        WHEN environment ->> 'hostname' IS NOT NULL THEN
            (environment ->> 'hostname') || ':' || target
        ELSE target END
    FROM runs WHERE origin = 'measured';
"""

# A run's label is a name people give it and may change (`storbench label`); what it
# measured, and how it ended, stay immutable: the trigger watches those columns only.
_RUN_COLUMNS = ("uid, created_at, finished_at, status, origin, suite, target, error,"
                " environment, settings, storbench_version, fio_version, judged")
RELABEL = f"""
DROP TRIGGER runs_final;
CREATE TRIGGER runs_final BEFORE UPDATE OF {_RUN_COLUMNS} ON runs
    WHEN OLD.status != 'running'
    BEGIN SELECT RAISE(ABORT, 'a finished run is immutable'); END;
"""
RELABEL_POSTGRES = f"""
DROP TRIGGER runs_final ON runs;
CREATE TRIGGER runs_final BEFORE UPDATE OF {_RUN_COLUMNS} ON runs FOR EACH ROW
    WHEN (OLD.status <> 'running') EXECUTE FUNCTION storbench_refuse('a finished run is immutable');
"""

# An application's recorded I/O (`storbench record`, workload/trace.py): fio's iolog,
# zlib-compressed, and what was recorded about it (counts, files, environment) as JSON.
# One declaration for both databases: only the type of bytes differs.
_WORKLOADS = """
CREATE TABLE workloads (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    method TEXT NOT NULL,
    facts TEXT NOT NULL,
    trace {bytes} NOT NULL
);
"""
WORKLOADS = _WORKLOADS.format(bytes="BLOB")
WORKLOADS_POSTGRES = _WORKLOADS.format(bytes="BYTEA")

# Both databases get every declared index (each lacked some the other had).
# (the indexes declared when it shipped: a later table's index is its own migration's)
_INDEXES_0011 = ("runs_running", "runs_label", "results_run", "results_invocation",
                 "warnings_run", "verdicts_run", "run_series_name")
SAME_INDEXES = "".join(index_sql(name, if_not_exists=True) for name in _INDEXES_0011)


def result_figures(dialect: Dialect) -> str:
    """Each result's figures as columns beside it (schema.figures_insert), filled for
    the results stored before: history reads 100,000 runs' figures without their JSON."""
    return (table("result_figures").sql(dialect) + index_sql("runs_when")
            + immutable_sql(dialect, "result_figures") + figures_insert(dialect) + ";\n")


# the series' runs' digest from an index (schema.INDEXES["runs_digest"], as it shipped)
RUNS_DIGEST = "CREATE INDEX runs_digest ON runs(status, created_at, id, uid);\n"

# a small series' runs looked up by id without their rows (schema.INDEXES["runs_of_id"])
RUNS_OF_ID = "CREATE INDEX runs_of_id ON runs(id, status, created_at, uid, suite);\n"


# the runs of a few keys of run_data (schema.INDEXES["run_data_key"], as it shipped)
RUN_DATA_KEY = "CREATE INDEX run_data_key ON run_data(key, run_id);\n"


def kept_answers(dialect: Dialect) -> str:
    """The series' answers kept in the store for every machine (schema.TABLES)."""
    return table("kept_answers").sql(dialect) + ";\n"


def series_versions(dialect: Dialect) -> str:
    """Each series' version (schema.TABLES), kept by triggers from now on; the series
    that hold a completed run get their first."""
    return (table("series_versions").sql(dialect) + series_versions_sql(dialect)
            + f"INSERT INTO series_versions SELECT name, {NEW_VERSION[dialect]} FROM"
            " (SELECT DISTINCT s.name FROM run_series s JOIN runs r ON r.id = s.run_id"
            " WHERE r.status = 'completed') AS named;\n")


# Ordered, named migrations (SQL scripts); never edit one that has shipped, add another.
MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", _INITIAL),
    ("0002_warnings", _WARNINGS),
    ("0003_repeats_and_run_data", _REPEATS_AND_DATA),
    ("0004_per_host_results", _HOSTS),
    ("0005_verdicts", _VERDICTS),
    ("0006_crashed_runs", _CRASHED),
    ("0007_run_locks", RUN_LOCKS),
    ("0008_series", SERIES),
    ("0009_relabel", RELABEL),
    ("0010_workloads", WORKLOADS),
    ("0011_same_indexes", SAME_INDEXES),
    ("0012_result_figures", result_figures("sqlite")),
    ("0013_runs_digest", RUNS_DIGEST),
    ("0014_runs_of_id", RUNS_OF_ID),
    ("0015_kept_answers", kept_answers("sqlite")),
    ("0016_run_data_key", RUN_DATA_KEY),
    ("0017_series_versions", series_versions("sqlite")),
]
REBUILDS = {"0006_crashed_runs"}  # rebuild a table: foreign keys off while they run
MIGRATIONS_TABLE = ("CREATE TABLE IF NOT EXISTS schema_migrations"
                    " (name TEXT PRIMARY KEY, applied_at TEXT)")


LARGE_STORE = 10_000  # runs: a migration that fills a table takes seconds, said first


def say_migrating(where: str, names: list[str], runs: int) -> None:
    """Before migrations that may take a while (a store of LARGE_STORE runs or more: the
    figures' table filled at 100,000 runs took 2.5 s), a line on stderr, so that a
    command that pauses says why (stdout stays the command's own: --json)."""
    if names and runs >= LARGE_STORE:
        import sys

        print(f"storbench: bringing the results database {where} up to this storbench"
              f" ({len(names)} change(s) of its tables, {', '.join(names)}; {runs:,} runs):"
              " once, a few seconds", file=sys.stderr, flush=True)


def pending(done: set[str], where: str,
            migrations: list[tuple[str, str]] = MIGRATIONS) -> list[tuple[str, str]]:
    """The migrations a database that applied ``done`` still lacks, in order (SQLite's
    and PostgreSQL's alike); StoreError if it applied one this storbench does not know
    (a newer storbench wrote it)."""
    from storbench.errors import StoreError

    unknown = done - {name for name, _ in migrations}
    if unknown:
        raise StoreError(f"the database {where!r} was written by a newer storbench"
                         f" (migrations {sorted(unknown)}); upgrade storbench")
    return [(name, sql) for name, sql in migrations if name not in done]
