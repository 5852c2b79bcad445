"""Do the application profiles' estimates agree with the real applications?

For each storage shape of the test-bed, runs the real application from Debian on it
and storbench's profile on the same volume, and prints a table: the real figure, the
estimate and its range, their ratio. Run by hand, as root, on the test-bed machine:

    .venv/bin/python bench/apps.py [--apps postgresql,mysql,redis] [--shapes cap3000,...]
                                    [--seconds 15] [--repeat 1] [--commits] [--busy N]
                                    [--round-trip] [--machine NAME] [--markdown]

The shapes (ext4 on a loop device unless said):
- ``capN``: capped by a cgroup at N IOPS both ways, the image in RAM (the cap is the only
  limit);
- ``diskcapN``: the same cap, the image on the machine's disk (its flushes reach the disk);
- ``latencyNms``: the image on sshfs behind a proxy that delays each packet by N ms
  (each sync waits for the network);
- ``tmpfs``: RAM, where the application's own CPU time decides (analysis/apps.CPU_S).

``--repeat K`` runs the real application K times on fresh volumes and prints the median
and the range: a real figure moves by a tenth or more from one run to the next on a
shared 2-vCPU machine, so one run is no reference for a 30% goal. ``--commits`` also
measures with fio, on the same shape, how long the profile's commit takes (its test of
commits one after another: PostgreSQL's 8 KiB WAL write, MariaDB's 4 KiB O_DIRECT redo
write, Redis's 64-byte append; each then fdatasync): alone (50 a second), back to back,
and at the pace of one client of the application (fio's ``thinktime`` set to its CPU
time per transaction), beside what the real application's rate leaves for its commit
(1 / rate - CPU_S).

``--busy N`` keeps N CPU-bound neighbours (busy loops, no I/O) running through each
shape, the real application's runs and the profile's alike: a machine whose CPUs never
idle. ``--round-trip`` measures, before each real run, how long two processes take to
pass a message back and forth (fio's net engine, ``pingpong`` over a unix socket: p50 of
the sender's round trip), printed beside the figures: on a virtual machine an idle CPU
is put to sleep and waking it is most of a one-client round trip (docs/apps.md). It
times two processes on two CPUs; the applications' client and server are on one CPU as
often as the scheduler puts them there (a context switch, ~4 µs, not a wake, ~50 µs),
so it does not tell machines apart: run the whole under ``taskset -c 0`` for the
applications on one CPU (analysis/apps.ONE_CPU_S, docs/apps.md "A second machine").
``--machine NAME`` says this is not the test-bed machine the CPU times per transaction
(analysis/apps.CPU_S) were measured on: its series are apps-SHAPE-NAME-APP, and NAME and
the CPU's model are kept with them (``--keep``).

- PostgreSQL 15: initdb, pgbench -i -s 16, then pgbench (TPC-B-like) 1 client and 16
  clients (-j 2);
- MariaDB 10.11: mariadb-install-db, sysbench oltp_write_only (1 table of 10,000 rows),
  1 thread; with ``--log-written`` its redo log written through once first (shape
  SHAPE-logwritten): a new database's is preallocated, and until each 4 KiB block of it
  has been written, a commit entering a new block also waits for the file system's
  journal (docs/apps.md);
- Redis 7: redis-server --appendonly yes --appendfsync always, redis-benchmark SET at 1
  and 50 clients.

Goals (issue #29): the estimates rank the shapes as the real applications do; each
within ±30% of the real figure.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.testbed import DelayedSSHFS, Throttled, sh  # noqa: E402

from storbench.analysis.apps import CPU_S  # noqa: E402
from storbench.workload.apps import MYSQL, POSTGRESQL, REDIS  # noqa: E402
from storbench.workload.jobfile import JobFile  # noqa: E402

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
    elif m := re.fullmatch(r"(disk)?cap(\d+)", name):
        iops = int(m[2])
        with Throttled(iops, iops, backing_dir="/var/tmp" if m[1] else "/dev/shm") as t:
            yield t.mnt, t.wrap
    elif m := re.fullmatch(r"latency(\d+)ms", name):
        with DelayedSSHFS(delay_ms=int(m[1])) as s:
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


@contextlib.contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` CPU-bound neighbours (a busy loop each, no I/O) for as long as it lasts."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


PINGPONG = """[global]
ioengine=net
protocol=unix
filename={sock}
bs=64
pingpong=1
size=1g
time_based
runtime=3
[echo]
rw=read
[send]
startdelay=1
rw=write
"""


def round_trip() -> float:
    """A message's round trip between two processes (µs, p50): fio's net engine with
    pingpong over a unix socket. fio 3.33 ends the sender with EISCONN ("sendto udp link
    close": its close sends UDP's close message on every protocol) after every message
    is done: the figures stand, so its return code is not checked here; its counts are."""
    with tempfile.TemporaryDirectory(prefix="sb-apps-rtt-") as tmp:
        job = Path(tmp) / "pingpong.fio"
        job.write_text(PINGPONG.format(sock=Path(tmp) / "rtt.sock"))
        proc = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True,
                              text=True, timeout=60)
    said = proc.stdout
    if "{" not in said:
        raise RuntimeError(f"fio's pingpong gave no figures: {proc.stderr.strip()[-500:]}")
    doc = json.loads(said[said.index("{"):])  # after fio's "waiting for connection"
    send = next(j for j in doc["jobs"] if j["jobname"] == "send")["write"]
    if not send["total_ios"]:
        raise RuntimeError(f"fio's pingpong passed no message: {said[-500:]}")
    return float(send["clat_ns"]["percentile"]["50.000000"]) / 1e3


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


def mysql(where: Path, wrap: Wrap, seconds: int, many: bool = True,
          log_written: bool = False) -> dict[str, float]:
    data, sock, tmp = where / "mysql", where / "mysqld.sock", where / "tmp"
    data.mkdir()
    tmp.mkdir()  # its temporary files: not $TMPDIR, which the mysql user may not write to
    for p in (where, data, tmp):  # where: its socket and PID file
        shutil.chown(p, "mysql")
    run(["mariadb-install-db", f"--datadir={data}", "--user=mysql", "--skip-test-db",
         "--auth-root-authentication-method=normal"], env={**os.environ, "TMPDIR": str(tmp)})
    if log_written:
        write_through(data / "ib_logfile0")
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


def write_through(log: Path) -> None:
    """MariaDB's redo log as a server that has run a while has it: written through once.
    mariadb-install-db preallocates it (fallocate: on ext4 unwritten extents, read as
    zeros), and until a write has reached each 4 KiB block of it, a commit whose
    redo enters a new block makes the file system convert that extent, a journal commit
    that the commit's fdatasync waits for (docs/apps.md). Each block is read and written
    back as it reads, zeros where never written: the bytes MariaDB sees do not change."""
    with open(log, "r+b") as f:
        while block := f.read(1 << 20):
            f.seek(-len(block), os.SEEK_CUR)
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    frags = run(["filefrag", "-v", str(log)])
    if "unwritten" in frags:
        raise RuntimeError(f"{log} still has unwritten extents: {frags[-400:]}")


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
# each application's commit, as its profile's test of commits one after another
COMMIT_TEST = {"postgresql": "wal_commit", "mysql": "redo_commit", "redis": "aof_always_1"}


def commits(app: str, where: Path, wrap: Wrap) -> dict[str, float]:
    """How long a commit of ``app``'s profile takes on this volume (write p50 + fdatasync
    p50, µs): alone (50 a second), back to back, and at the pace of one client (fio's
    thinktime: the application's CPU time per transaction between commits)."""
    suite = {"postgresql": POSTGRESQL, "mysql": MYSQL, "redis": REDIS}[app]
    jobfile = next(j for t, j in suite.jobfiles(runtime=6)
                         if t.name == COMMIT_TEST[app])
    out = {}
    for how, extra in (("alone", {"rate_iops": "50"}), ("back to back", {}),
                       ("paced", {"thinktime": f"{CPU_S[app] * 1e6:.0f}"})):
        sections = list(jobfile.sections)
        for key, value in extra.items():
            sections[-1] = sections[-1].with_option(key, value)
        with tempfile.NamedTemporaryFile("w", suffix=".fio") as f:
            f.write(JobFile(tuple(sections)).render())
            f.flush()
            said = run(wrap(["fio", "--output-format=json", f"--directory={where}", f.name]))
        job = json.loads(said)["jobs"][0]
        write = job["write"]["clat_ns"]["percentile"]["50.000000"]
        sync = job["sync"]["lat_ns"]["percentile"]["50.000000"]
        out[how] = (write + sync) / 1e3
    return out


def profile(app: str, where: Path, wrap: Wrap, db: Path, series: str) -> dict[str, Any]:
    """storbench's run of the profile on the same volume, as `show --json` gives it: its
    estimates (data.app.estimates: metric, value, low, high) and its environment (the
    CPU it ran on)."""
    proc = subprocess.run(wrap([*STORBENCH, "run", str(where), "--suite", app,
                                "--series", series]),
                          capture_output=True, text=True,
                          env={**os.environ, "STORBENCH_DB": str(db)})
    if proc.returncode not in (0, 3):
        raise RuntimeError(proc.stderr[-800:])
    shown = json.loads(subprocess.run([*STORBENCH, "show", "last", "--json"], text=True,
                                      capture_output=True, check=True,
                                      env={**os.environ, "STORBENCH_DB": str(db)}).stdout)
    return dict(shown)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apps", default="postgresql,mysql,redis")
    ap.add_argument("--shapes", default="tmpfs,cap3000,cap300,latency1ms")
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of the real application per shape (median and range shown)")
    ap.add_argument("--commits", action="store_true",
                    help="also time a commit alone, back to back and at the client's pace")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="N CPU-bound neighbours (busy loops) throughout: CPUs that never idle")
    ap.add_argument("--round-trip", action="store_true",
                    help="time a message's round trip between two processes (fio pingpong)"
                         " before each real run")
    ap.add_argument("--log-written", action="store_true",
                    help="MariaDB's redo log written through once before its real runs, as"
                         " a server that has run a while has it (shape SHAPE-logwritten)")
    ap.add_argument("--machine", metavar="NAME",
                    help="this machine is not the test-bed's (its CPU_S constants were"
                         " measured there): series apps-SHAPE-NAME-APP, and NAME and the CPU"
                         " model kept with them")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep the profiles' runs (DIR/runs.db, series apps-SHAPE-APP, the"
                         " shape tmpfs-busy1 with --busy 1, cap300-logwritten with"
                         " --log-written, cap300-NAME with --machine NAME) and the real"
                         " figures"
                         " (DIR/real.json), for tests/data/apps; added to what DIR holds")
    args = ap.parse_args()
    rows = []
    kept: dict[str, dict[str, list[float]]] = {}
    made: dict[str, dict[str, object]] = {}  # series -> when, how long, how busy
    if args.keep and (args.keep / "runs.db.gz").exists() and not (args.keep / "runs.db").exists():
        # (tests/data/apps holds it gzipped: the runs kept would go to a new runs.db
        # beside it, and real.json would name series it does not hold)
        sys.exit(f"{args.keep} holds runs.db.gz and no runs.db: unpack it first (gunzip -k"
                 f" {args.keep / 'runs.db.gz'}), so that the runs kept add to it")
    if args.keep and (args.keep / "real.json").exists():  # add to what it holds
        held = json.loads((args.keep / "real.json").read_text())
        kept, made = held["series"], held["made"]
    with tempfile.TemporaryDirectory(prefix="sb-apps-db-") as tmp, busy(args.busy):
        db = (args.keep or Path(tmp)) / ("runs.db" if args.keep else "results.db")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        for name in args.shapes.split(","):
            for app in args.apps.split(","):
                written = args.log_written and app == "mysql"
                label = (name + (f"-busy{args.busy}" if args.busy else "")  # as in the series
                         + ("-logwritten" if written else "")
                         + (f"-{args.machine}" if args.machine else ""))
                reals: dict[str, list[float]] = {}
                trips: list[float] = []
                for _ in range(args.repeat):
                    if args.round_trip:
                        trips.append(round_trip())
                    with shape(name) as (where, wrap):
                        (where / "real").mkdir()
                        traversable(where / "real")
                        real = (functools.partial(mysql, log_written=True) if written
                                else REAL[app])
                        for metric, v in real(where / "real", wrap, args.seconds).items():
                            reals.setdefault(metric, []).append(v)
                series = f"apps-{label}-{app}"
                with shape(name) as (where, wrap):
                    ran = profile(app, where, wrap, db, series)
                    est = {e["metric"]: e for e in ran["data"]["app"]["estimates"]}
                    took = commits(app, where, wrap) if args.commits else {}
                kept[series] = reals
                made[series] = {"date": time.strftime("%Y-%m-%d"), "seconds": args.seconds,
                                "busy": args.busy, "machine": args.machine or "test-bed",
                                "cpu": ran["environment"]["cpu_model"]}
                if app == "mysql":  # its redo log as the real runs had it
                    made[series]["log"] = "written" if written else "fresh"
                for metric, values in reals.items():
                    value = statistics.median(values)
                    # MariaDB on a new database (mariadb-install-db's log, preallocated):
                    # the new database's estimate
                    e = est.get(f"{metric}_new" if app == "mysql" and not written else metric)
                    rows.append((label, app, metric, value, e))
                    spread = (f" ({min(values):,.0f}–{max(values):,.0f})" if len(values) > 1
                              else "")
                    print(f"{label:<11} {app:<10} {metric:<7} real {value:9,.0f}{spread}  estimate"
                          + (f" {e['value']:9,.0f} ({e['low']:,.0f}–{e['high']:,.0f})"
                             f"  ratio {e['value'] / value:5.2f}" if e else " (none)")
                          + (f"  round trip {statistics.median(trips):.1f} µs" if trips else ""),
                          flush=True)
                if took:
                    left = 1e6 / statistics.median(reals[next(iter(reals))]) - CPU_S[app] * 1e6
                    print(f"{label:<11} {app:<10} a commit takes (µs, write + fdatasync p50):"
                          + "".join(f" {how} {us:,.0f};" for how, us in took.items())
                          + f" the real rate leaves {left:,.0f} for it", flush=True)
    if args.keep:
        (args.keep / "real.json").write_text(json.dumps(
            {"series": kept, "made": made}, indent=1) + "\n")
    if args.markdown:
        print("\n| shape | application | figure | real | estimate (range) | estimate/real |")
        print("|---|---|---|---:|---:|---:|")
        for name, app, metric, value, e in rows:
            shown = f"{e['value']:,.0f} ({e['low']:,.0f}–{e['high']:,.0f})" if e else "—"
            ratio = f"{e['value'] / value:.2f}" if e else "—"
            print(f"| {name} | {app} | {metric} | {value:,.0f} | {shown} | {ratio} |")


if __name__ == "__main__":
    main()
