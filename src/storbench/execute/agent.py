"""`storbench agent`: fio's server for `run --hosts`, where nobody else gets in.

fio's server runs any job a client sends (files written anywhere its user may write,
``exec_prerun=`` commands) with no authentication. So by default it listens on a unix
socket (0600, in a directory of its user's that no one else may enter): only its own
user (and root) can connect, and they could run fio themselves. TCP is only for an
explicit ``--bind``, with a warning on every start that says who can use it. As root it
refuses unless ``--allow-root``: an agent's user should be one that may write the target
and nothing else. With ``--confine DIR`` the kernel (Landlock) keeps the server's jobs
to DIR, whoever sends them.
"""

from __future__ import annotations

import errno
import getpass
import ipaddress
import os
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from storbench.errors import ConfigError
from storbench.execute import confine
from storbench.execute.fio import FioBinary


def default_socket() -> Path:
    """$XDG_RUNTIME_DIR/storbench-agent.sock, else /tmp/storbench-agent-UID/agent.sock."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "storbench-agent.sock"
    return Path(f"/tmp/storbench-agent-{os.getuid()}") / "agent.sock"


@dataclass(frozen=True)
class AgentSpec:
    socket: Path | None  # a unix socket (the default), or
    bind: str | None  # an address to listen on over TCP (with ``port``)
    port: int
    allow_root: bool
    confine: tuple[Path, ...]  # directories its jobs may write (Landlock); () : anywhere


def check_user(spec: AgentSpec) -> None:
    """Refuse root without --allow-root (ConfigError saying why and what to do)."""
    if os.geteuid() == 0 and not spec.allow_root:
        raise ConfigError(
            "storbench agent refuses to run as root: fio's server runs whatever job a"
            " client sends, as its user (any file written, commands run). Run it as an"
            " unprivileged user that may write the benchmark target (the systemd unit in"
            " docs/cli.md), or pass --allow-root if that is what you want")


def prepare_socket(path: Path) -> None:
    """Make ``path``'s directory ours and private (0700), and the path free: a stale
    socket of a stopped agent is removed; a live agent's, or any other file, is not."""
    parent = path.parent
    try:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = parent.lstat()
    except OSError as exc:
        raise ConfigError(f"--socket {str(path)!r}: cannot use {str(parent)!r}:"
                          f" {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise ConfigError(f"--socket {str(path)!r}: {str(parent)!r} is not a directory of"
                          f" {getpass.getuser()}'s; give a socket in a directory you own")
    if st.st_mode & 0o077:
        if parent.name.startswith("storbench"):
            os.chmod(parent, 0o700)  # a directory of the agent's own: made private
        else:
            shown = oct(st.st_mode & 0o777)[2:]
            raise ConfigError(
                f"--socket {str(path)!r}: {str(parent)!r} lets other users in (mode {shown}):"
                " they could replace the socket; use a directory only you may enter (0700)")
    if len(str(path).encode()) > 107:
        raise ConfigError(f"--socket {str(path)!r} is longer than a unix socket's 107 bytes")
    try:
        found = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(found.st_mode):
        raise ConfigError(f"--socket {str(path)!r} exists and is not a socket; remove it or"
                          " name another path")
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody answers: a stopped agent's
            return
    raise ConfigError(f"--socket {str(path)!r}: an agent already listens there")


def check_bind(address: str, port: int) -> None:
    """ConfigError unless this host has ``address`` and ``port`` is free on it (fio's
    server says "failed" and exits 0 otherwise)."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 \
            else socket.AF_INET
    except ValueError:
        raise ConfigError(f"--bind {address!r} is not an IP address") from None
    with socket.socket(family) as sock:
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"--bind {address}: this host has no such address; give"
                                  " one of its own (ip -brief address)") from None
            raise ConfigError(f"--bind {address} --port {port}: {exc.strerror}") from None


def warning(spec: AgentSpec) -> str | None:
    """What is said on every start: who can use this agent."""
    if spec.bind is None:
        return None
    who = ("every local user of this host" if ipaddress.ip_address(spec.bind).is_loopback
           else f"anyone who can reach {spec.bind}:{spec.port}")
    return (f"WARNING: listening on TCP {spec.bind}:{spec.port}: fio's server has no"
            f" authentication: {who} can write any file {getpass.getuser()} may write and run"
            f" commands as {getpass.getuser()}, with a stock `fio --client`. Firewall it to the"
            " benchmark client and run it as an unprivileged user (docs/cli.md), or leave"
            " --bind out (a unix socket only this user reaches), or use `run --hosts"
            " ssh://HOST`.")


def argv(spec: AgentSpec, fio: FioBinary) -> list[str]:
    """fio's server command line: on the socket or the address, confined if asked."""
    if spec.socket is not None:
        server = f"--server=sock:{spec.socket}"
    else:
        assert spec.bind is not None
        family = "ip6" if ":" in spec.bind else "ip"
        server = f"--server={family}:{spec.bind},{spec.port}"
    program = [fio.path, server]
    if not spec.confine:
        return program
    if not confine.abi():
        raise ConfigError(f"--confine: {confine.status()[1]}; without it the agent cannot be"
                          " confined (leave --confine out, or run it under systemd's"
                          " ReadWritePaths=)")
    flags = [f for d in spec.confine for f in ("--write", str(d))]
    if spec.socket is not None:
        flags += ["--write", str(spec.socket.parent)]
    return [sys.executable, "-I", confine.__file__, *flags, "--file", "/dev/null", "--",
            *program]


def serve(command: list[str], sock: Path | None) -> int:
    """Run fio's server until it ends (Ctrl-C, SIGTERM: passed on to it); its socket
    made 0600 as soon as it exists (fio creates it open to all: the 0700 directory is
    what keeps others out, and now the socket too). fio's exit status."""
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(command)

    def forward(signum: int, frame: object) -> None:
        proc.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    while sock is not None and proc.poll() is None:
        try:
            os.chmod(sock, 0o600)
            break
        except FileNotFoundError:
            time.sleep(0.02)
    return proc.wait()
