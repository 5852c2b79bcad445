"""Storage targets whose true performance the tests set themselves.

Recipes from shared/testbed/STORAGE.md. Every target is a context manager that
tears down fully (mounts, loop devices, cgroups, servers), also when the body fails.

- tmpfs(): RAM, no latency.
- Throttled: ext4 on a loop device (direct I/O to an image on the disk), capped by
  a cgroup v1 blkio throttle ("gp3-like": e.g. 3000 IOPS, 125 MiB/s). Processes run
  through ``wrap(argv)`` join the cgroup before exec; limits can change mid-run.
- cached_loop(): ext4 on a RAM block device (a zram device of its own when the kernel
  has zram, else a loop device over a tmpfs image without direct I/O): direct reads
  answered from memory, a cache in front of a "disk" (a cache that lies, for warnings).
  The loop fallback's reads take ~20 µs on a slow machine, the warning's very limit;
  zram's take ~4 µs.
- DelayedSSHFS: an "EFS-like" network file system: sshfs to a private sshd on
  127.0.0.1 through toxiproxy adding latency each way; also mountable directly.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Self

BLKIO = Path("/sys/fs/cgroup/blkio")
TOOLS = Path(os.environ.get("STORBENCH_TEST_TOOLS", Path.home() / ".cache" / "storbench-test"))
TOXIPROXY = TOOLS / "bin" / "toxiproxy-server"


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def missing_for_throttled(fs: str = "ext4") -> str | None:
    """Why a Throttled volume of file system ``fs`` cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (loop devices, mounts, cgroups)"
    if not (BLKIO / "cgroup.procs").exists():
        return "cgroup v1 blkio is not mounted at /sys/fs/cgroup/blkio"
    if shutil.which("losetup") is None or shutil.which(f"mkfs.{fs}") is None:
        return f"losetup / mkfs.{fs} missing (scripts/install-testbed installs them)"
    return None


def missing_for_sshfs() -> str | None:
    if os.geteuid() != 0:
        return "needs root (private sshd, FUSE mounts)"
    for tool in ("sshfs", "ssh-keygen", "unshare", "fusermount3"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/install-testbed installs it)"
    if not Path("/usr/sbin/sshd").exists():
        return "openssh-server is not installed (scripts/install-testbed installs it)"
    if not TOXIPROXY.exists():
        return f"toxiproxy is not built at {TOXIPROXY} (scripts/install-testbed builds it)"
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing"
    return None


@contextlib.contextmanager
def tmpfs(size: str = "1g") -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="sb-tmpfs-") as d:
        mnt = Path(d) / "mnt"
        mnt.mkdir()
        sh("mount", "-t", "tmpfs", "-o", f"size={size}", "sb-test", str(mnt))
        try:
            yield mnt
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


class _Target:
    """Set up in ``_start``, registering each undo on ``self._stack``; torn down fully,
    also when the setup itself fails half-way."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        raise NotImplementedError


class Throttled(_Target):
    """ext4 (or ``fs``: xfs) on a loop device, throttled by a cgroup v1 blkio cgroup: IOPS
    and bandwidth capped both ways, as a gp3 volume is (3000 IOPS, 125 MiB/s)."""

    def __init__(self, read_iops: int = 3000, write_iops: int = 3000,
                 read_bps: int = 125 * 2**20, size: str = "2G",
                 write_bps: int = 125 * 2**20, backing_dir: str = "/var/tmp",
                 raw: bool = False, fs: str = "ext4") -> None:
        """``backing_dir``: where the image lives (the disk; /dev/shm for a volume whose
        only limit is the cap, with no host disk latency beneath it)."""
        super().__init__()
        self.backing_dir = backing_dir
        self.raw = raw  # a bare block device (self.dev): no file system, not mounted
        self.fs = fs
        self.limits = (read_iops, write_iops, read_bps)
        self.write_bps = write_bps
        self.size = size

    def _start(self) -> None:
        d = Path(self._stack.enter_context(
            tempfile.TemporaryDirectory(prefix="sb-throttled-", dir=self.backing_dir)))
        img, self.mnt = d / "disk.img", d / "mnt"
        self.mnt.mkdir()
        sh("truncate", "-s", self.size, str(img))
        self.dev = sh("losetup", "--find", "--show", "--direct-io=on", str(img))
        self._stack.callback(subprocess.run, ["losetup", "-d", self.dev], check=False)
        if not self.raw:
            sh(*(["mkfs.xfs", "-q", "-K"] if self.fs == "xfs" else [
                "mkfs.ext4", "-q", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0"]),
               self.dev)
            sh("mount", self.dev, str(self.mnt))
            self._stack.callback(subprocess.run, ["umount", "-l", str(self.mnt)], check=False)
        self.majmin = sh("lsblk", "-no", "MAJ:MIN", self.dev).strip()
        self.cgroup = BLKIO / f"storbench-test-{os.getpid()}-{id(self)}"
        self.cgroup.mkdir()
        self._stack.callback(self._remove_cgroup)
        self.set_limits(*self.limits)
        (self.cgroup / "blkio.throttle.write_bps_device").write_text(
            f"{self.majmin} {self.write_bps}")

    def set_limits(self, read_iops: int, write_iops: int, read_bps: int | None = None) -> None:
        cg = self.cgroup
        (cg / "blkio.throttle.read_iops_device").write_text(f"{self.majmin} {read_iops}")
        (cg / "blkio.throttle.write_iops_device").write_text(f"{self.majmin} {write_iops}")
        if read_bps is not None:
            (cg / "blkio.throttle.read_bps_device").write_text(f"{self.majmin} {read_bps}")

    def wrap(self, argv: list[str]) -> list[str]:
        """argv run inside the cgroup (the shell joins it, then execs)."""
        return ["sh", "-c", f'echo $$ > {self.cgroup}/cgroup.procs && exec "$@"', "sh", *argv]

    def _remove_cgroup(self) -> None:
        for _ in range(100):
            procs = (self.cgroup / "cgroup.procs").read_text().split()
            for pid in procs:
                with contextlib.suppress(OSError):
                    (BLKIO / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()
                return
            time.sleep(0.1)


ZRAM = Path("/sys/class/zram-control")


@contextlib.contextmanager
def cached_loop() -> Iterator[Path]:
    """ext4 on a RAM block device: zram when the kernel has it, else a loop device
    backed by a file in tmpfs, buffered. Either way, a cache in front."""
    if (ZRAM / "hot_add").exists():
        with _zram_ext4("512M") as mnt:
            yield mnt
        return
    with tmpfs("600m") as ram, tempfile.TemporaryDirectory(prefix="sb-cached-") as d:
        img, mnt = ram / "disk.img", Path(d) / "mnt"
        mnt.mkdir()
        sh("truncate", "-s", "512M", str(img))
        dev = sh("losetup", "--find", "--show", "--direct-io=off", str(img))
        try:
            sh("mkfs.ext4", "-q", "-E", "nodiscard", dev)
            sh("mount", dev, str(mnt))
            try:
                yield mnt
            finally:
                subprocess.run(["umount", "-l", str(mnt)], check=False)
        finally:
            subprocess.run(["losetup", "-d", dev], check=False)


@contextlib.contextmanager
def _zram_ext4(size: str) -> Iterator[Path]:
    """A zram device of our own (hot_add), ext4 on it, mounted; removed afterwards."""
    n = (ZRAM / "hot_add").read_text().strip()
    block = Path(f"/sys/block/zram{n}")
    try:
        (block / "disksize").write_text(size)
        with tempfile.TemporaryDirectory(prefix="sb-zram-") as d:
            sh("mkfs.ext4", "-q", "-E", "nodiscard", f"/dev/zram{n}")
            sh("mount", f"/dev/zram{n}", d)
            try:
                yield Path(d)
            finally:
                subprocess.run(["umount", "-l", d], check=False)
    finally:
        with contextlib.suppress(OSError):
            (block / "reset").write_text("1")
        with contextlib.suppress(OSError):
            (ZRAM / "hot_remove").write_text(n)


def free_port() -> int:
    """A TCP port no socket is bound to on any address (one free on 127.0.0.1 alone was
    taken on 127.0.0.5 by another lane's server: an agent told to bind 0.0.0.0 could not)."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10) -> None:
    wait_port_on("127.0.0.1", port, timeout)


def wait_port_on(address: str, port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((address, port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {address}:{port}")


class DelayedSSHFS(_Target):
    """A private sshd on 127.0.0.1, toxiproxy in front of it adding ``delay_ms`` each
    way; ``mount(proxied=True)`` mounts the export with sshfs through the proxy."""

    def __init__(self, delay_ms: int = 1) -> None:
        super().__init__()
        self.delay_ms = delay_ms

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)

        def stop() -> None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

        self._stack.callback(stop)
        return proc

    def _start(self) -> None:
        d = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="sb-sshfs-",
                                                                       dir="/var/tmp")))
        self.dir = d
        self.export = d / "export"
        self.export.mkdir()
        self.key = d / "client_key"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        self.ssh_port, self.proxy_port, api = free_port(), free_port(), free_port()
        (d / "sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nPort {self.ssh_port}\nHostKey {d}/host_key\n"
            f"AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n"
            "StrictModes no\nPermitRootLogin prohibit-password\nUsePAM no\n"
            "Subsystem sftp internal-sftp\n")
        self.sshd = self._spawn(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                 "mount -t tmpfs tmpfs /run && mkdir -p /run/sshd && "
                                 f"exec /usr/sbin/sshd -D -e -f {d}/sshd_config"],
                                d / "sshd.log")
        wait_port(self.ssh_port)
        self._spawn([str(TOXIPROXY), "-host", "127.0.0.1", "-port", str(api)],
                    d / "toxiproxy.log")
        wait_port(api)
        base = f"http://127.0.0.1:{api}"
        _post(f"{base}/proxies", {"name": "ssh", "listen": f"127.0.0.1:{self.proxy_port}",
                                  "upstream": f"127.0.0.1:{self.ssh_port}"})
        for stream in ("upstream", "downstream"):
            _post(f"{base}/proxies/ssh/toxics",
                  {"name": f"lat-{stream}", "type": "latency", "stream": stream,
                   "attributes": {"latency": self.delay_ms, "jitter": 0}})
        wait_port(self.proxy_port)

    def mount(self, proxied: bool = True) -> Path:
        """The export mounted with sshfs (once; later calls return the same mount)."""
        mnt = self.dir / ("mnt-proxied" if proxied else "mnt-direct")
        if mnt.exists():
            return mnt
        mnt.mkdir()
        port = self.proxy_port if proxied else self.ssh_port
        sh("sshfs", f"root@127.0.0.1:{self.export}", str(mnt), "-o",
           f"port={port},IdentityFile={self.key},StrictHostKeyChecking=no,"
           "UserKnownHostsFile=/dev/null,LogLevel=ERROR")
        self._stack.callback(subprocess.run, ["fusermount3", "-u", "-z", str(mnt)],
                             check=False)
        return mnt


    @contextlib.contextmanager
    def frozen(self) -> Iterator[list[int]]:
        """The server goes silent: its sessions (sftp) are stopped with SIGSTOP, TCP stays
        open, as in a partition. SIGCONT when the block ends."""
        from storbench.execute.proctree import descendants

        sessions = descendants(self.sshd.pid)
        for pid in sessions:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield sessions
        finally:
            for pid in sessions:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


def _post(url: str, body: dict[str, object]) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


class SshHosts(_Target):
    """``n`` "hosts": sshd instances on 127.0.0.(20+i), each in a private mount namespace
    in which its own tmpfs is mounted at ``target`` (the same path, different storage,
    as on real hosts). ``config`` is an ssh client configuration that reaches them
    (key, known_hosts with their host keys, strict checking). With ``devices`` (one
    block device per host), host i also sees device i at ``device_path`` (/dev/sbtest-…,
    bind-mounted in its namespace): one device name, a different disk on each host.
    ``shared``: a 64 MiB tmpfs every host sees (mounted before their namespaces are
    made: one file system shared by them, as an NFS export is). ``fio``: the fio the hosts
    run (bind-mounted over this machine's in their namespaces: one built with the http
    engine, say), on ``fio_on``'s hosts only where given. ``wrap``: how each sshd is
    started (Throttled.wrap: in a throttled cgroup, which its sessions inherit).
    ``hidden``: a program made unrunnable on a host (bind-mounted over by /dev/null);
    ``replaced``: (a program, a file) another program in its place on a host.
    A host runs no login script of this machine's: root's ~/.bashrc is bind-mounted over
    by an empty one in its namespace, as a fleet's host has its own. This machine's ran
    pyenv's rehash at each SSH session (bash runs ~/.bashrc for sshd's commands): one
    session at a time under its lock (4 at once: 0.4-0.7 s idle), rewriting the shims the
    sessions' python3 ran through, a lock a killed session could leave held (60 s)."""

    def __init__(self, n: int, devices: list[str] | None = None, fio: Path | None = None,
                 fio_on: set[int] | None = None,
                 wrap: Callable[[list[str]], list[str]] | None = None,
                 hidden: dict[int, str] | None = None,
                 replaced: dict[int, tuple[str, Path]] | None = None) -> None:
        super().__init__()
        self.n = n
        self.devices = devices
        self.fio, self.fio_on = fio, fio_on
        self.wrap = wrap or (lambda argv: argv)
        self.covered = {i: (name, Path("/dev/null")) for i, name in (hidden or {}).items()}
        self.covered.update(replaced or {})
        self.device_path = Path(f"/dev/sbtest-{os.getpid()}-{id(self) % 10**6}")
        self.sshd: list[subprocess.Popen[bytes]] = []

    def _start(self) -> None:
        d = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="sb-sshhosts-",
                                                                       dir="/var/tmp")))
        self.dir, self.target = d, d / "target"
        self.target.mkdir()
        self.shared = d / "shared-64m"
        self.shared.mkdir()
        sh("mount", "-t", "tmpfs", "-o", "size=64m", "sbshared", str(self.shared))
        self._stack.callback(subprocess.run, ["umount", "-l", str(self.shared)], check=False)
        key = d / "client_key"
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
        known, self.addresses = [], []
        rc = Path(pwd.getpwnam("root").pw_dir) / ".bashrc"  # whom the sessions log in as
        plain = ""
        if rc.is_file():
            (d / "login_rc").write_text("# a test-bed host: no login script of this machine's\n")
            plain = f"mount --bind {d}/login_rc {shlex.quote(str(rc))} && "
        if self.devices:
            self.device_path.touch()
            self._stack.callback(self.device_path.unlink, missing_ok=True)
        for i in range(self.n):
            bind = plain + (f"mount --bind {self.devices[i]} {self.device_path} && "
                            if self.devices else "")
            if self.fio is not None and (self.fio_on is None or i in self.fio_on):
                bind += f"mount --bind {shlex.quote(str(self.fio))} \"$(command -v fio)\" && "
            if i in self.covered:
                name, by = self.covered[i]
                bind += f"mount --bind {shlex.quote(str(by))} \"$(command -v {name})\" && "
            address, port = f"127.0.0.{20 + i}", free_port()
            hk = d / f"host_key_{i}"
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hk))
            known.append(f"[{address}]:{port} {(d / f'host_key_{i}.pub').read_text().strip()}")
            (d / f"sshd_{i}").write_text(
                f"ListenAddress {address}\nPort {port}\nHostKey {hk}\n"
                f"AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd_{i}.pid\n"
                "StrictModes no\nPermitRootLogin prohibit-password\nUsePAM no\n")
            log = (d / f"sshd_{i}.log").open("wb")
            proc = subprocess.Popen(self.wrap(
                ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 "mount -t tmpfs tmpfs /run && mkdir -p /run/sshd && "
                 f"mount -t tmpfs -o size=256m sbhost{i} {self.target} && {bind}"
                 f"exec /usr/sbin/sshd -D -e -f {d}/sshd_{i}"]),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            self.sshd.append(proc)
            self._stack.callback(_stop, proc)
            self.addresses.append((address, port))
        for address, port in self.addresses:
            wait_port_on(address, port)
        (d / "known_hosts").write_text("\n".join(known) + "\n")
        self.config = d / "ssh_config"
        self.config.write_text(
            "Host 127.0.0.*\n  User root\n  IdentityFile " + str(key) + "\n"
            f"  UserKnownHostsFile {d}/known_hosts\n  StrictHostKeyChecking yes\n"
            "  LogLevel ERROR\n")

    @property
    def hosts(self) -> str:
        return ",".join(f"ssh://root@{a}:{p}" for a, p in self.addresses)

    def files_on(self, i: int) -> list[str]:
        """What host i holds at ``target`` (seen in its own mount namespace)."""
        out = sh("nsenter", "-t", str(self.sshd[i].pid), "-m", "--", "ls", "-A",
                 str(self.target))
        return out.split()

    def logs(self) -> str:
        """Each host's sshd log (for a failing test's message)."""
        return "\n".join(f"sshd {i}: {(self.dir / f'sshd_{i}.log').read_text(errors='replace')}"
                         for i in range(self.n))

    def sessions(self, i: int) -> list[int]:
        """The PIDs serving host i's SSH sessions (and what they run)."""
        from storbench.execute.proctree import descendants

        return descendants(self.sshd[i].pid)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    from storbench.execute.proctree import kill_tree

    kill_tree(proc.pid, signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.wait()


def processes(match: Callable[[list[bytes]], bool]) -> list[int]:
    """PIDs of the processes whose command line (its words) ``match`` says yes to."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if match(argv):
                found.append(int(entry.name))
    return found


def fio_servers_on_loopback() -> list[int]:
    """PIDs of the fio servers storbench starts over SSH: on a unix socket in
    /tmp/storbench-* (and, to catch a return of the old way, on 127.0.0.1)."""
    return processes(lambda argv: any(
        a.startswith(b"--server=ip:127.0.0.1,") or (a.startswith(
            b"--server=sock:/tmp/storbench-") and a.endswith(b"/fio.sock")) for a in argv))


def servers_left(before: Iterable[int], within_s: float = 10.0) -> set[int]:
    """The fio servers of fio_servers_on_loopback that were not there ``before``, once
    none is left or ``within_s`` has passed: a server ends as its SSH session closes, a
    moment after storbench has (a fixed sleep was too short beside CI's other lanes);
    0.5 s where storbench waits for its sessions (a process killed with SIGKILL is gone
    a few milliseconds later)."""
    from tests.conftest import until

    until(lambda: not set(fio_servers_on_loopback()) - set(before), within_s)
    return set(fio_servers_on_loopback()) - set(before)


def tcp_listeners(pids: set[int]) -> list[str]:
    """TCP sockets in LISTEN of these processes, as "name(pid) address:port": what a
    local user could connect to."""
    listening: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                listening[fields[9]] = fields[1]
    found = []
    for pid in pids:
        entry = Path(f"/proc/{pid}")
        try:
            comm = (entry / "comm").read_text().strip()
            for fd in (entry / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in listening:
                    found.append(f"{comm}({entry.name}) {listening[link[8:-1]]}")
        except OSError:
            continue
    return found
