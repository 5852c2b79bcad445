"""Real servers the team-store tests talk to, each on a loopback port in a temporary
directory of its own, stopped (by its PID) afterwards: Prometheus, a Pushgateway,
InfluxDB 1.x (Debian's packages, scripts/install-testbed installs them) and
PostgreSQL (run as the unprivileged user ``postgres`` or ``nobody``)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testbed import free_port, wait_port

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
PUSHGATEWAY = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")
INFLUXD = shutil.which("influxd")


def missing(*tools: tuple[str, str | None]) -> str | None:
    """Why a test cannot run: the first tool not installed."""
    for name, path in tools:
        if path is None:
            return f"{name} is not installed (scripts/install-testbed installs it)"
    return None


def needs(*tools: tuple[str, str | None]) -> pytest.MarkDecorator:
    """A test that starts real servers (tests/conftest.py: the ``services`` tier); skipped
    when a tool is missing, unless STORBENCH_REQUIRE_SERVICES=1 (scripts/test as root
    installs them): then the test runs and fails, saying which."""
    from tests.conftest import needs as need

    reason = missing(*tools)
    required = os.environ.get("STORBENCH_REQUIRE_SERVICES") == "1"
    return need("services", unavailable=None if required else reason)


@contextlib.contextmanager
def _server(argv: list[str], port: int, log: Path, *, user: str | None = None,
            timeout: float = 30) -> Iterator[subprocess.Popen[bytes]]:
    kwargs: dict[str, Any] = {}
    if user is not None:
        kwargs["user"] = user
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, **kwargs)
    try:
        try:
            wait_port(port, timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"{argv[0]} did not start: {log.read_text()[-2000:]}") from exc
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def pushgateway(users: dict[str, str] | None = None) -> Iterator[str]:
    """A Pushgateway on 127.0.0.1; yields its URL. With ``users`` (name: password) it
    asks for HTTP basic auth (its web config, bcrypt hashes made by libcrypt)."""
    assert PUSHGATEWAY is not None, missing(("prometheus-pushgateway", PUSHGATEWAY))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sb-pgw-") as d:
        web = []
        if users:
            with warnings.catch_warnings():  # deprecated in 3.11, and here in Debian 12's
                warnings.simplefilter("ignore", DeprecationWarning)
                import crypt
            hashes = {u: crypt.crypt(p, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))
                      for u, p in users.items()}
            Path(d, "web.yml").write_text(
                "basic_auth_users:\n" + "".join(f"  {u}: '{h}'\n" for u, h in hashes.items()))
            web = [f"--web.config.file={d}/web.yml"]
        with _server([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{port}", *web,
                      # Debian's build persists to /var/lib/prometheus by default
                      f"--persistence.file={d}/pushgateway.data"], port, Path(d) / "log"):
            yield f"http://127.0.0.1:{port}"


class Prometheus:
    """A running Prometheus's HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": promql} | ({} if at is None else {"time": at}))
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return list(doc["data"]["result"])

    def wait_for(self, promql: str, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.query(promql)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


@contextlib.contextmanager
def prometheus(targets: list[str], data: Path | None = None) -> Iterator[Prometheus]:
    """Prometheus on 127.0.0.1 scraping ``targets`` every second; its TSDB in ``data``
    (e.g. blocks backfilled with promtool) or a temporary directory."""
    assert PROMETHEUS is not None, missing(("prometheus", PROMETHEUS))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sb-prom-") as d:
        tsdb = data or Path(d) / "data"
        config = Path(d) / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: pushgateway\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: {json.dumps(targets)}}}]\n")
        with _server([PROMETHEUS, f"--config.file={config}",
                      f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}"],
                     port, Path(d) / "log"):
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30  # it answers 503 until its TSDB is loaded
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/-/ready", timeout=5):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            yield Prometheus(url)


class Influx:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, path: str, params: dict[str, str], data: bytes | None = None) -> Any:
        q = urllib.parse.urlencode(params)
        req = urllib.request.Request(f"{self.url}{path}?{q}", data=data,
                                     method="POST" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def query(self, db: str, q: str) -> list[dict[str, Any]]:
        """The rows of an InfluxQL query, as dicts."""
        doc = self.call("/query", {"db": db, "q": q, "epoch": "ns"})
        series = doc["results"][0].get("series") or []
        return [dict(zip(s["columns"], row, strict=True)) | s.get("tags", {})
                for s in series for row in s["values"]]


@contextlib.contextmanager
def influxdb() -> Iterator[Influx]:
    """InfluxDB 1.x with its data in a temporary directory, HTTP on 127.0.0.1."""
    assert INFLUXD is not None, missing(("influxd", INFLUXD))
    port, bind = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="sb-influx-") as d:
        config = Path(d) / "influxdb.conf"
        config.write_text(
            f'reporting-disabled = true\nbind-address = "127.0.0.1:{bind}"\n'
            f'[meta]\n  dir = "{d}/meta"\n'
            f'[data]\n  dir = "{d}/data"\n  wal-dir = "{d}/wal"\n'
            '  query-log-enabled = false\n'
            f'[http]\n  bind-address = "127.0.0.1:{port}"\n  log-enabled = false\n'
            '[monitor]\n  store-enabled = false\n')
        with _server([INFLUXD, "-config", str(config)], port, Path(d) / "log"):
            yield Influx(f"http://127.0.0.1:{port}")


def unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("no unprivileged user (postgres, nobody) to run PostgreSQL as")


def postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    return found[-1].parent if found else None


@contextlib.contextmanager
def postgresql() -> Iterator[str]:
    """A PostgreSQL server of the tests' own: initdb in a temporary directory, run as
    an unprivileged user on a loopback port; yields a URL (database ``storbench``).

    Its port is open before it takes connections ("the database system is starting up"),
    and a port another server took in the meantime is open too: it is ready when
    pg_isready says so through its own socket (in its own directory) while it still runs;
    a port taken is tried again with another."""
    bindir = postgres_bin()
    assert bindir is not None
    user = unprivileged_user()
    entry = pwd.getpwnam(user)
    for attempt in range(3):
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="sb-pg-", dir="/var/tmp") as d:
            os.chown(d, entry.pw_uid, entry.pw_gid)
            data, log = Path(d) / "data", Path(d) / "log"
            subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "storbench",
                            "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                           capture_output=True, user=user, cwd=d)
            argv = [str(bindir / "postgres"), "-D", str(data), "-h", "127.0.0.1",
                    "-p", str(port), "-k", d, "-c", "fsync=off", "-c", "max_connections=60"]
            with _server(argv, port, log, user=user) as proc:
                if not _pg_ready(bindir, d, port, proc):
                    said = log.read_text()
                    if "already in use" in said and attempt < 2:
                        continue
                    raise RuntimeError(f"PostgreSQL did not start: {said[-2000:]}")
                subprocess.run([str(bindir / "createdb"), "-h", d, "-p", str(port),
                                "-U", "storbench", "storbench"], check=True,
                               capture_output=True, user=user, cwd=d)
                yield f"postgresql://storbench@127.0.0.1:{port}/storbench"
                return


def _pg_ready(bindir: Path, socket_dir: str, port: int, proc: subprocess.Popen[bytes],
              timeout: float = 60) -> bool:
    """Whether our own server (through its socket) takes connections; False once it has
    ended or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        said = subprocess.run([str(bindir / "pg_isready"), "-q", "-h", socket_dir,
                               "-p", str(port), "-U", "storbench"], check=False)
        if said.returncode == 0:
            return proc.poll() is None
        time.sleep(0.1)
    return False
