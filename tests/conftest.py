"""Shared fixtures: real databases, real file systems, real fio."""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from storbench.store import Store

pytest_plugins = ["tests.k8s", "tests.images"]  # the Kubernetes test-bed, image builds

IS_ROOT = os.geteuid() == 0
FIO = shutil.which("fio")
STORBENCH = [sys.executable, "-m", "storbench"]

# storbench's cache (change points) of the tests' runs: their own, never the user's
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="storbench-tests-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], True)

# A test run started in the background (`nohup ... &`, a CI step without job control)
# inherits SIGINT ignored, and so would every storbench it starts: the tests that press
# Ctrl-C (SIGINT) would see it unheard. The suite hears it again, and so do its children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# --- what a test needs, and the tiers that follow from it -------------------------------
# A test says what real resource it needs, by a fixture that stands for it (``fio``,
# ``root``, ``kubeconfig``, ``sshfs_server``, ...) or by one of the ``needs_*`` marks below
# (for a parametrized case, which cannot take a fixture). The collection hook marks it
# with each resource and with ``integration``: `pytest -m "not integration"` (scripts/test
# --fast) is the fast tier, which needs none, and skips what this machine lacks.
RESOURCES = {
    "fio": "runs real fio",
    "root": "needs root: mounts, loop devices, cgroups, tracefs",
    "kubernetes": "runs on the Kubernetes test-bed",
    "services": "starts real servers (PostgreSQL, Prometheus, a Pushgateway, ...)",
    "netfs": "mounts a network file system (sshfs through a latency proxy)",
    "tracer": "traces a process (strace, bpftrace)",
    "ssh": "starts sshd servers here for hosts reached over SSH",
    "images": "builds container images (podman) and loads them into the test-bed",
    "vm": "boots a virtual machine",
    "s3": "starts real S3 servers (moto, s3proxy) and puts objects through fio's http engine",
    # a known truth measured against time or a rate (a throttled volume's caps, a network
    # file system's latency, a real application's rate): no lane of other tests beside it
    "timing": "measures a known truth in time or rate: with no other lane beside it"
              " (scripts/test)",
    # a timing test that a second one beside it would move: a CPU-bound step, a p99
    # beside neighbours, a real application's CPU per transaction, a series' run-to-run
    # levels, a traced run, a network file system's latency through a proxy. The other
    # timing tests (a cap's rate, its warnings) run two at a time (scripts/test)
    "alone": "a timing test with nothing at all beside it (scripts/test)",
}
# fixtures that stand for a resource (those that depend on them are found through them)
FIXTURE_NEEDS: dict[str, tuple[str, ...]] = {
    "fio": ("fio",), "root": ("root",), "fio_json_text": ("fio",), "fio_servers": ("fio",),
    "small_tmpfs": ("root",), "throttled": ("root", "fio", "timing"),
    "cached_loop_dir": ("root", "timing"), "sshfs_server": ("netfs", "fio"),
    "postgres_server": ("services",), "kubeconfig": ("kubernetes",),
    "image_env": ("root", "images"), "vm_ready": ("vm", "fio"),
    "ssh_hosts": ("root", "fio", "ssh"), "s3": ("services", "fio", "s3"),
}

FAST = os.environ.get("STORBENCH_TEST_TIER") == "fast"


def needs(*resources: str, unavailable: str | None = None) -> pytest.MarkDecorator:
    """The mark that says a test needs ``resources``; ``unavailable``: why it cannot run
    here (it is skipped, saying so)."""
    return pytest.mark.needs(*resources, unavailable=unavailable)


needs_fio = needs("fio", unavailable=None if FIO else "fio is not installed (scripts/setup)")
needs_root = needs("root", unavailable=None if IS_ROOT else "needs root (mounts, loop devices)")
needs_timing = needs("timing")
needs_alone = needs("timing", "alone")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true",
                     help="write what is printed now as the golden files"
                          " (tests/render/golden/): review their diff")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*resources, unavailable=None): what real"
                            " resource a test needs (tests/conftest.py)")
    config.addinivalue_line("markers", "integration: needs a real resource (derived)")
    for name, what in RESOURCES.items():
        config.addinivalue_line("markers", f"{name}: {what} (derived from what it needs)")


def needed(item: pytest.Item) -> set[str]:
    """The resources a collected test needs: from its fixtures and its needs marks."""
    found = {r for f in getattr(item, "fixturenames", ()) for r in FIXTURE_NEEDS.get(f, ())}
    for mark in item.iter_markers("needs"):
        found.update(mark.args)
    return found


# The width storbench is given: the user's, or none (as from a pipe). GNU readline, once
# something of pytest's loads it, sets COLUMNS and LINES in the process's own environment
# (not os.environ): every storbench a test starts without env= then wrapped its output at
# 80 columns, cutting the words the tests look for.
WIDTH = {k: os.environ.get(k) for k in ("COLUMNS", "LINES")}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for key, value in WIDTH.items():
        if value is None:
            os.unsetenv(key)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        resources = needed(item)
        for r in sorted(resources):
            item.add_marker(getattr(pytest.mark, r))
        if resources - {"alone"}:  # alone is how a timing test runs, not a resource
            item.add_marker(pytest.mark.integration)
        for mark in item.iter_markers("needs"):
            if mark.kwargs.get("unavailable"):
                item.add_marker(pytest.mark.skip(reason=mark.kwargs["unavailable"]))


@pytest.fixture(scope="session")
def fio() -> str:
    """This machine's fio (the test is skipped without it)."""
    if FIO is None:
        pytest.skip("fio is not installed (scripts/setup does it)")
    return FIO


@pytest.fixture(scope="session")
def root() -> None:
    """Root: mounts, loop devices, cgroups (the test is skipped without it)."""
    if not IS_ROOT:
        pytest.skip("needs root (mounts, loop devices, cgroups)")


# Beside another pytest (scripts/test's three lanes, pytest -n's workers): a temporary
# directory of its own, where storbench makes its work directories and looks for those
# crashed runs left
_LANE, _XDIST = (os.environ.get(k, "") for k in ("STORBENCH_TEST_LANE", "PYTEST_XDIST_WORKER"))
if worker := (_LANE + _XDIST.removeprefix("gw") if _LANE else _XDIST):  # rest0, gw1, ssh
    # xdist tells its workers COLUMNS=80: storbench would wrap its output to it, where
    # the tests read it unwrapped, as from a pipe
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
        WIDTH.update(COLUMNS=None, LINES=None)
    # short: a unix socket's path beneath it must stay within 107 bytes. A second
    # `pytest -n 2` on the machine has workers of the same names (gw0, gw1): each holds
    # a shared lock on the directory while it runs, and the last one to end removes it
    # (the first to end removed it under the other's runs)
    _own_tmp = Path(tempfile.gettempdir()) / f"sb-{worker}"
    _own_tmp.mkdir(exist_ok=True)
    _held = os.open(_own_tmp, os.O_RDONLY)
    fcntl.flock(_held, fcntl.LOCK_SH)

    def _last_one_out(path: Path = _own_tmp, held: int = _held) -> None:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another pytest still works in it
        shutil.rmtree(path, True)

    atexit.register(_last_one_out)
    os.environ["TMPDIR"] = str(_own_tmp)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again

if FAST:
    # The fast tier runs no fio: a test that does and does not say so fails, naming it
    _stub = Path(tempfile.mkdtemp(prefix="storbench-fast-tier-"))
    atexit.register(shutil.rmtree, _stub, True)
    (_stub / "fio").write_text("#!/bin/sh\necho 'the fast tier runs no fio: this test needs"
                               " the fio fixture or needs_fio (tests/conftest.py)' >&2\n"
                               "exit 127\n")
    (_stub / "fio").chmod(0o755)
    os.environ["PATH"] = f"{_stub}:{os.environ['PATH']}"
    FIO = str(_stub / "fio")  # a test that runs it by this name fails as loudly


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store(":memory:")
    yield s
    s.close()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture
def blk_tracer() -> Iterator[None]:
    """The kernel's blk tracer, one machine-wide (tracefs's current_tracer): held by one
    test at a time, across lanes and workers (a file lock in /tmp, not in a lane's
    TMPDIR). A recording in the SSH lane's test and one in the rest lane's once met there,
    and the second was refused, rightly: "the kernel's tracer is in use"."""
    with open("/tmp/storbench-tests-blk-tracer.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def mount_tmpfs(path: Path, size: str, *options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}", *options))
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "storbench-test", str(path)], check=True)


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A private 512 MiB tmpfs (root), else /dev/shm."""
    if IS_ROOT:
        mnt = tmp_path / "tmpfs"
        mount_tmpfs(mnt, "512m")
        yield mnt
        umount(mnt)
    else:
        shm = Path("/dev/shm") / f"storbench-test-{uuid.uuid4().hex[:8]}"
        shm.mkdir()
        yield shm
        shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs: fills up quickly."""
    if not IS_ROOT:
        pytest.skip("needs root to mount a small tmpfs")
    mnt = tmp_path / "small"
    mount_tmpfs(mnt, "16m")
    yield mnt
    umount(mnt)


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    """A directory on the machine's disk (not tmpfs)."""
    base = Path(os.environ.get("STORBENCH_TEST_DISK", "/var/tmp"))
    d = base / f"storbench-test-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def until(done: Callable[[], object], within_s: float = 10.0, every_s: float = 0.1) -> bool:
    """Whether ``done()`` came true within ``within_s`` (asked every ``every_s``): for
    what ends a moment after storbench has (a fio server as its SSH session closes, a
    host's files as their session removes them). A fixed sleep was too short on a busy
    machine (CI runs lanes side by side) and always that long on an idle one. The
    caller asserts what it waited for afterwards, so that a failure shows it."""
    deadline = time.monotonic() + within_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


def run_cli(*args: str, db: Path, env: dict[str, str] | None = None,
            timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """storbench as a user runs it: a real subprocess (started in ``cwd``)."""
    full_env = {**os.environ, "STORBENCH_DB": str(db), **(env or {})}
    return subprocess.run([*STORBENCH, *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=cwd)


@pytest.fixture(scope="session")
def fio_json_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    """json+ of a small real fio run (2 jobs, randrw with fdatasync)."""
    if FIO is None:
        pytest.skip("fio is not installed")
    d = tmp_path_factory.mktemp("fio-store")
    proc = subprocess.run(
        [FIO, "--name=mix", f"--directory={d}", "--rw=randrw", "--bs=4k", "--size=2m",
         "--numjobs=2", "--fdatasync=8", "--output-format=json+"],
        capture_output=True, text=True, check=True,
    )
    return proc.stdout


def _skip_unless(what: str, reason: str | None) -> None:
    if reason:
        pytest.skip(f"{what}: {reason}")


@pytest.fixture
def throttled() -> Iterator[object]:
    """A "gp3-like" volume: 3000 read / 3000 write IOPS, 125 MiB/s reads (cgroup v1 blkio).

    Its image is in /dev/shm: on the disk, the disk's own stalls (up to ~180 ms here, at
    3000 IOPS: p99.9 2 ms) came on top of the cap, which does not let lost time be made
    up, and runs fell 3-5% short of it (two CI runs failed so)."""
    from tests.testbed import Throttled, missing_for_throttled

    _skip_unless("throttled volume", missing_for_throttled())
    with Throttled(backing_dir="/dev/shm") as t:
        yield t


@pytest.fixture(scope="module")
def sshfs_server() -> Iterator[object]:
    """An "EFS-like" file system: sshfs through a 1 ms-each-way latency proxy."""
    from tests.testbed import DelayedSSHFS, missing_for_sshfs

    _skip_unless("delayed network file system", missing_for_sshfs())
    with DelayedSSHFS(delay_ms=1) as s:
        yield s


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL server for the session (tests/services.py); its URL."""
    from tests import services

    reason = services.missing(("postgresql", services.postgres_bin() and "found"))
    if reason and os.environ.get("STORBENCH_REQUIRE_SERVICES") != "1":
        pytest.skip(reason)
    with services.postgresql() as url:
        yield url


@pytest.fixture(scope="module", params=["s3proxy", "moto"])
def s3(request: pytest.FixtureRequest) -> Iterator[object]:
    """A real S3 server (tests/objects.py: s3proxy on a directory, moto's server), for the
    module; fio with the http engine beside it."""
    from tests import objects

    reason = objects.missing(request.param)
    if reason:
        if os.environ.get("STORBENCH_REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    with objects.s3_server(request.param) as server:
        yield server


@pytest.fixture
def postgres_db(postgres_server: str) -> Iterator[str]:
    """A fresh database on the session's PostgreSQL server, dropped afterwards."""
    import secrets

    import psycopg

    name = f"t_{secrets.token_hex(4)}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def cached_loop_dir() -> Iterator[Path]:
    """ext4 on a RAM block device (zram, else a buffered loop over tmpfs): a cache in
    front of a "disk"."""
    from tests.testbed import cached_loop, missing_for_throttled

    _skip_unless("cached loop device", missing_for_throttled())
    with cached_loop() as mnt:
        yield mnt


def run_cli_wrapped(wrap: Callable[[list[str]], list[str]], *args: str, db: Path,
                    timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """storbench through ``wrap`` (e.g. Throttled.wrap: run inside its cgroup)."""
    env = {**os.environ, "STORBENCH_DB": str(db)}
    return subprocess.run(wrap([*STORBENCH, *args]), capture_output=True, text=True,
                          env=env, timeout=timeout)


class FioServers:
    """Real `fio --server` processes on 127.0.0.2, 127.0.0.3, ... (one port for all)."""

    def __init__(self, n: int) -> None:
        from tests.testbed import free_port

        self.port = free_port()
        self.addresses = [f"127.0.0.{2 + i}" for i in range(n)]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        from tests.testbed import wait_port_on

        for a in self.addresses:
            self.procs[a] = subprocess.Popen([FIO or "fio", f"--server=ip:{a},{self.port}"],
                                             stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
        for a in self.addresses:
            wait_port_on(a, self.port)

    @property
    def hosts(self) -> str:
        return ",".join(f"{a}:{self.port}" for a in self.addresses)

    def kill(self, address: str) -> None:
        """The host dies: its fio server and the job processes it forked."""
        from storbench.execute.proctree import kill_tree

        kill_tree(self.procs[address].pid)

    def stop(self) -> None:
        from storbench.execute.proctree import kill_tree

        for proc in self.procs.values():
            kill_tree(proc.pid)
            proc.wait()


@pytest.fixture
def fio_servers() -> Iterator[Callable[[int], FioServers]]:
    started: list[FioServers] = []

    def start(n: int) -> FioServers:
        if FIO is None:
            pytest.skip("fio is not installed")
        servers = FioServers(n)
        started.append(servers)
        servers.start()
        return servers

    yield start
    for s in started:
        s.stop()
