"""Do the application profiles' estimates agree with the real applications?

For each storage shape of the test-bed (a volume capped at 3000 IOPS, one capped at
300, and one with 1 ms of network latency each way: ext4 on a loop device whose image
lives on sshfs behind a delaying proxy; and tmpfs, where the application's own CPU
time decides: analysis/apps.CPU_S), runs the real application from Debian on it
and storbench's profile on the same volume, and prints a table: the real figure, the
estimate and its range, their ratio. Run by hand, as root, on the test-bed machine:

    .venv/bin/python bench/apps.py [--apps postgresql,mysql,redis] [--shapes cap3000,...]
                                    [--seconds 15] [--markdown]

- PostgreSQL 15: initdb, pgbench -i -s 16, then pgbench (TPC-B-like) 1 client and 16
  clients (-j 2);
- MariaDB 10.11: mariadb-install-db, sysbench oltp_write_only (1 table of 10,000 rows),
  1 thread;
- Redis 7: redis-server --appendonly yes --appendfsync always, redis-benchmark SET at 1
  and 50 clients.

Goals (issue #29): the estimates rank the shapes as the real applications do; each
within ±30% of the real figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.testbed import DelayedSSHFS, Throttled, sh  # noqa: E402

STORBENCH = [sys.executable, "-m", "storbench"]
PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), Path("/nonexistent"))
Wrap = Callable[[list[str]], list[str]]


def plain(argv: list[str]) -> list[str]:
    return argv


@contextlib.contextmanager
def shape(name: str) -> Iterator[tuple[Path, Wrap]]:
    """A mounted volume of this shape, and how to run a process so the shape applies."""
    if name == "tmpfs":  # RAM: what the application costs beyond its storage (CPU_S)
        where = Path(tempfile.mkdtemp(prefix="sb-apps-"))
        sh("mount", "-t", "tmpfs", "-o", "size=3g", "tmpfs", str(where))
        try:
            yield where, plain
        finally:
            subprocess.run(["umount", "-l", str(where)], check=False)
            where.rmdir()
    elif name.startswith("cap"):
        iops = int(name[3:])
        with Throttled(iops, iops, backing_dir="/dev/shm") as t:
            yield t.mnt, t.wrap
    elif name == "latency1ms":
        with DelayedSSHFS(delay_ms=1) as s:
            mnt = s.mount(proxied=True)
            image = mnt / "disk.img"
            sh("truncate", "-s", "2G", str(image))
            dev = sh("losetup", "--find", "--show", str(image)).strip()
            where = Path(tempfile.mkdtemp(prefix="sb-apps-"))
            try:
                sh("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
                sh("mount", dev, str(where))
                yield where, plain
            finally:
                subprocess.run(["umount", "-l", str(where)], check=False)
                subprocess.run(["losetup", "-d", dev], check=False)
    else:
        raise SystemExit(f"unknown shape {name!r}")


def traversable(where: Path) -> None:
    """Let the applications' own users (postgres, mysql) reach ``where``: the test-bed's
    directories above it (sb-*, 0700) get o+x."""
    for p in where.parents:
        if p.name.startswith("sb-"):
            p.chmod(p.stat().st_mode | 0o011)


def run(argv: list[str], **kw: object) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()[-500:]}")
    return str(proc.stdout)


def postgresql(where: Path, wrap: Wrap, seconds: int, many: bool = True) -> dict[str, float]:
    data, sock = where / "pgdata", where / "pgsock"
    sock.mkdir()
    shutil.chown(where, "postgres")
    shutil.chown(sock, "postgres")
    pg = ["runuser", "-u", "postgres", "--"]
    run([*pg, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-N"])
    run(wrap([*pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(where / "pg.log"),
              "-o", f"-k {sock} -c listen_addresses= -p 5499", "start"]))
    try:
        conn = ["-h", str(sock), "-p", "5499", "-U", "postgres"]
        run([*pg, str(PG_BIN / "pgbench"), *conn, "-i", "-s", "16" if many else "1", "-q",
             "postgres"])
        out = {}
        for clients in (1, 16) if many else (1,):
            said = run([*pg, str(PG_BIN / "pgbench"), *conn, "-c", str(clients), "-j",
                        str(min(clients, 2)), "-T", str(seconds), "postgres"])
            tps = re.search(r"tps = ([\d.]+)", said)
            assert tps, said
            out["tps" if clients == 1 else "tps_16"] = float(tps.group(1))
        return out
    finally:
        subprocess.run([*pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                       capture_output=True)


def mysql(where: Path, wrap: Wrap, seconds: int, many: bool = True) -> dict[str, float]:
    data, sock, tmp = where / "mysql", where / "mysqld.sock", where / "tmp"
    data.mkdir()
    tmp.mkdir()  # its temporary files: not $TMPDIR, which the mysql user may not write to
    for p in (where, data, tmp):  # where: its socket and PID file
        shutil.chown(p, "mysql")
    run(["mariadb-install-db", f"--datadir={data}", "--user=mysql", "--skip-test-db",
         "--auth-root-authentication-method=normal"], env={**os.environ, "TMPDIR": str(tmp)})
    server = subprocess.Popen(wrap(["mariadbd", f"--datadir={data}", "--user=mysql",
                                    f"--socket={sock}", "--skip-networking", f"--tmpdir={tmp}",
                                    f"--pid-file={where / 'mysqld.pid'}",
                                    "--innodb-buffer-pool-size=256M"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if sock.exists() or server.poll() is not None:
                break
            time.sleep(0.1)
        run(["mariadb", f"--socket={sock}", "-uroot", "-e", "CREATE DATABASE sbtest"])
        sb = ["sysbench", "oltp_write_only", "--db-driver=mysql", f"--mysql-socket={sock}",
              "--mysql-user=root", "--tables=1", "--table-size=10000"]
        run([*sb, "prepare"])
        said = run([*sb, "--threads=1", f"--time={seconds}", "run"])
        tps = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", said)
        assert tps, said
        return {"tps": float(tps.group(1))}
    finally:
        server.terminate()
        server.wait(60)


def redis(where: Path, wrap: Wrap, seconds: int, many: bool = True) -> dict[str, float]:
    sock = where / "redis.sock"
    server = subprocess.Popen(wrap(["redis-server", "--port", "0", "--unixsocket", str(sock),
                                    "--dir", str(where), "--appendonly", "yes",
                                    "--appendfsync", "always", "--save", ""]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.1)
        out = {}
        for clients in (1, 50) if many else (1,):
            n = max(200, int(seconds * (300 if clients == 1 else 3000)))
            said = run(["redis-benchmark", "-s", str(sock), "-t", "set", "-c", str(clients),
                        "-n", str(n), "-q"])
            ops = re.search(r"SET: ([\d.]+) requests per second", said)
            assert ops, said
            out["ops" if clients == 1 else "ops_50"] = float(ops.group(1))
        return out
    finally:
        server.terminate()
        server.wait(60)


REAL = {"postgresql": postgresql, "mysql": mysql, "redis": redis}


def profile(app: str, where: Path, wrap: Wrap, db: Path) -> dict[str, dict[str, float]]:
    """storbench's estimates on the same volume: metric -> value, low, high."""
    proc = subprocess.run(wrap([*STORBENCH, "run", str(where), "--suite", app]),
                          capture_output=True, text=True,
                          env={**os.environ, "STORBENCH_DB": str(db)})
    if proc.returncode not in (0, 3):
        raise RuntimeError(proc.stderr[-800:])
    shown = json.loads(subprocess.run([*STORBENCH, "show", "last", "--json"], text=True,
                                      capture_output=True, check=True,
                                      env={**os.environ, "STORBENCH_DB": str(db)}).stdout)
    return {e["metric"]: e for e in shown["data"]["app"]["estimates"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apps", default="postgresql,mysql,redis")
    ap.add_argument("--shapes", default="tmpfs,cap3000,cap300,latency1ms")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sb-apps-db-") as tmp:
        db = Path(tmp) / "results.db"
        for name in args.shapes.split(","):
            for app in args.apps.split(","):
                with shape(name) as (where, wrap):
                    (where / "real").mkdir()
                    traversable(where / "real")
                    real = REAL[app](where / "real", wrap, args.seconds)
                with shape(name) as (where, wrap):
                    est = profile(app, where, wrap, db)
                for metric, value in real.items():
                    e = est.get(metric)
                    rows.append((name, app, metric, value, e))
                    print(f"{name:<11} {app:<10} {metric:<7} real {value:9,.0f}  estimate"
                          + (f" {e['value']:9,.0f} ({e['low']:,.0f}–{e['high']:,.0f})"
                             f"  ratio {e['value'] / value:5.2f}" if e else " (none)"),
                          flush=True)
    if args.markdown:
        print("\n| shape | application | figure | real | estimate (range) | estimate/real |")
        print("|---|---|---|---:|---:|---:|")
        for name, app, metric, value, e in rows:
            est = f"{e['value']:,.0f} ({e['low']:,.0f}–{e['high']:,.0f})" if e else "—"
            ratio = f"{e['value'] / value:.2f}" if e else "—"
            print(f"| {name} | {app} | {metric} | {value:,.0f} | {est} | {ratio} |")


if __name__ == "__main__":
    main()
