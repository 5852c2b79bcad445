"""Moving history between stores (`storbench db copy`): SQLite files into a team's
PostgreSQL database, and back. A run is known by its uid: one copied twice is stored
once. Copied runs keep their times, status, results, fio output, warnings and
verdicts; they get the destination's next ids."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from storbench.result.record import Run
from storbench.store.sqlite import Store, insert_warnings


@dataclass
class Copied:
    copied: list[tuple[str, int, int]]  # (uid, id in the source, id in the destination)
    already: list[str]  # uids the destination had
    running: list[tuple[str, int]]  # not finished: not copied
    series: set[str] = field(default_factory=set)  # the series runs were copied into


def put_run(store: Store, run: Run) -> int | None:
    """Store a finished run from elsewhere in one transaction; None if ``store``
    already holds a run with its uid (also when another copy wins the race)."""
    with store._tx() as db:
        row = db.execute(
            "INSERT INTO runs (uid, created_at, finished_at, status, origin, label, suite,"
            " target, error, environment, settings, storbench_version, fio_version, judged)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (uid) DO NOTHING RETURNING id",
            (run.uid, run.created_at, run.finished_at, run.status, run.origin, run.label,
             run.suite, run.target, run.error, json.dumps(run.environment),
             json.dumps(run.settings), run.storbench_version, run.fio_version,
             run.verdicts is not None)).fetchone()
        if row is None:
            return None
        run_id = int(row[0])
        db.executemany("INSERT INTO run_tags VALUES (?, ?, ?)",
                       [(run_id, k, v) for k, v in run.tags.items()])
        if run.series:
            db.execute("INSERT INTO run_series VALUES (?, ?)", (run_id, run.series))
        invocations = {}
        for inv in run.invocations:
            invocations[inv.ordinal] = db.execute(
                "INSERT INTO invocations (run_id, ordinal, job_text, raw_json, returncode,"
                " stderr, wall_s) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (run_id, inv.ordinal, inv.job_text, inv.raw_json, inv.returncode, inv.stderr,
                 inv.wall_s)).fetchone()[0]
        db.executemany(
            "INSERT INTO results (run_id, invocation_id, ordinal, test, result, repeat, host)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(run_id, invocations[t.invocation], t.ordinal, t.result.name,
              json.dumps(t.result.to_dict()), t.repeat, t.host) for t in run.tests])
        db.execute(store.figures_insert("res.run_id = ?"), (run_id,))
        insert_warnings(db, run_id, run.warnings)
        db.executemany("INSERT INTO run_data VALUES (?, ?, ?)",
                       [(run_id, k, json.dumps(v)) for k, v in run.data.items()])
        db.executemany(
            "INSERT INTO verdicts (run_id, kind, passed, record) VALUES (?, ?, ?, ?)",
            [(run_id, "verdict", v.passed, json.dumps(v.to_dict()))
             for v in run.verdicts or ()]
            + [(run_id, "regression", not r.failed, json.dumps(r.to_dict()))
               for r in run.regressions])
    return run_id


def copy_runs(src: Store, dst: Store, progress: Callable[[int, int], None]) -> Copied:
    """Every finished run of ``src`` that ``dst`` lacks, oldest first."""
    have = {r[0] for r in dst.db.execute("SELECT uid FROM runs", ())}
    runs = sorted(src.list_runs(), key=lambda r: r.id)
    done = Copied([], [], [])
    for i, listed in enumerate(runs, 1):
        if listed.uid in have:
            done.already.append(listed.uid)
        elif listed.status == "running":
            done.running.append((listed.uid, listed.id))
        else:
            new = put_run(dst, src.get_run(listed.id))
            if new is None:
                done.already.append(listed.uid)
            else:
                done.copied.append((listed.uid, listed.id, new))
                done.series.update([listed.series] if listed.series else [])
        progress(i, len(runs))
    return done
