"""Hosts reached over SSH: for one run, ``fio --server`` on each host, bound to the
host's loopback and reached through an SSH port forward; stopped at the end.

storbench runs the ``ssh`` client itself, so the user's ssh configuration, agent and
known_hosts apply as for any ssh command (``--ssh-config FILE`` names another
configuration). No listener is left on any host: the remote fio server lives as
long as the SSH session. The session ends when storbench closes its standard input;
if storbench dies, even by SIGKILL, that pipe closes all the same and the remote
side stops the server.

Each host's forward listens on a loopback address of its own here (127.77.x.y), so
that fio's client tells the hosts apart by address, as it does for real hosts.
"""

from __future__ import annotations

import random
import re
import shlex
import socket
import subprocess
import threading
from dataclasses import dataclass, field

from storbench.errors import TargetError

CONNECT_S = 30.0  # ssh login, fio found, its server listening
STOP_S = 5.0
TRIES = 3  # remote ports tried (another process may hold one)

# Runs on the host: its facts, then fio's server on its loopback until stdin closes.
REMOTE = r"""
port=$1
command -v fio >/dev/null 2>&1 || {
  echo "storbench-error fio is not installed on this host"; exit 1; }
echo "storbench-host $(hostname)"
echo "storbench-mem-kib $(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
echo "storbench-fio $(fio --version)"
fio --server=ip:127.0.0.1,$port >/dev/null 2>&1 </dev/null &
pid=$!
hex=$(printf '%04X' "$port")
i=0
until grep -qi "^ *[0-9]*: 0100007F:$hex 00000000:0000 0A" /proc/net/tcp; do
  kill -0 $pid 2>/dev/null || { echo "storbench-busy"; exit 2; }
  i=$((i + 1))
  [ $i -gt 100 ] && { kill $pid; echo "storbench-error fio --server did not listen"; exit 3; }
  sleep 0.1
done
echo "storbench-ready"
read _ || true
# storbench closed the session (or died): the server and the job processes it forked
tree() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do tree $c; done; echo $1; }
pids=$(tree $pid)
kill $pids 2>/dev/null
sleep 1
kill -9 $pids 2>/dev/null
exit 0
"""


@dataclass(frozen=True)
class SshHost:
    """ssh://[user@]host[:port]"""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def key(self) -> str:
        who = f"{self.user}@" if self.user else ""
        where = f"[{self.host}]" if ":" in self.host else self.host
        return f"ssh://{who}{where}" + (f":{self.port}" if self.port else "")


@dataclass
class Tunnel:
    """One host's SSH session: its fio server reached at ``local`` (address, port)."""

    ssh: SshHost
    local: tuple[str, int]
    facts: dict[str, object] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None

    def stop(self) -> None:
        """Close the session (the remote script stops fio's server)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def local_address(index: int) -> str:
    """A loopback address of this machine for the index-th host (127.77.x.y)."""
    return f"127.77.{index // 250}.{index % 250 + 1}"


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def open_tunnels(hosts: list[SshHost], config: str | None) -> list[Tunnel]:
    """Start every host's session at once; TargetError naming each host that could not
    be reached (ssh's own words), after stopping the others."""
    tunnels: list[Tunnel | None] = [None] * len(hosts)
    errors: list[str] = [""] * len(hosts)

    def one(i: int) -> None:
        try:
            tunnels[i] = _open(hosts[i], local_address(i), config)
        except TargetError as exc:
            errors[i] = str(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(hosts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [e for e in errors if e]
    if failed:
        for tunnel in tunnels:
            if tunnel is not None:
                tunnel.stop()
        raise TargetError(f"cannot start fio's server over SSH on {len(failed)} of"
                          f" {len(hosts)} host(s): {'; '.join(failed)}. Nothing was started.")
    return [t for t in tunnels if t is not None]


def ssh_argv(host: SshHost, config: str | None, *options: str) -> list[str]:
    """The ssh command line that reaches ``host`` (the remote command follows)."""
    return ["ssh", *(["-F", config] if config else []),
            *(["-p", str(host.port)] if host.port else []), "-o", "BatchMode=yes", *options,
            f"{host.user}@{host.host}" if host.user else host.host]


def run_remote(host: SshHost, config: str | None, command: str, stdin: str,
               timeout_s: float = CONNECT_S) -> str:
    """Run ``command`` on the host with ``stdin``; its stdout, or TargetError with its
    own words (or ssh's)."""
    try:
        proc = subprocess.run([*ssh_argv(host, config), command], input=stdin, text=True,
                              capture_output=True, timeout=timeout_s)
    except OSError as exc:
        raise TargetError(f"{host.key}: cannot run ssh: {exc.strerror} (install"
                          " openssh-client)") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"{host.key}: no answer within {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        said = proc.stderr.strip().splitlines()
        raise TargetError(f"{host.key}: `{command.split()[0]}` failed (exit status"
                          f" {proc.returncode}): {said[-1] if said else 'no message'}")
    return proc.stdout


def _open(host: SshHost, address: str, config: str | None) -> Tunnel:
    for _ in range(TRIES):
        remote = random.randint(20000, 60999)
        tunnel = Tunnel(host, (address, _free_port(address)))
        argv = [*ssh_argv(host, config, "-o", "ExitOnForwardFailure=yes",
                          "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                          "-L", f"{address}:{tunnel.local[1]}:127.0.0.1:{remote}"),
                "sh -c " + shlex.quote(REMOTE) + f" sh {remote}"]
        try:
            tunnel.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True,
                                           start_new_session=True)
        except OSError as exc:
            raise TargetError(f"{host.key}: cannot run ssh: {exc.strerror} (install"
                              " openssh-client)") from None
        outcome = _until_ready(tunnel)
        if outcome == "ready":
            return tunnel
        tunnel.stop()
        if outcome != "busy":
            raise TargetError(f"{host.key}: {outcome}")
    raise TargetError(f"{host.key}: no free port for fio's server after {TRIES} tries")


def _until_ready(tunnel: Tunnel) -> str:
    """'ready', 'busy' (the remote port was taken), or what went wrong, in ssh's words."""
    proc = tunnel.proc
    assert proc is not None and proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(CONNECT_S, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "storbench-ready":
                return "ready"
            if word == "storbench-busy":
                return "busy"
            if word == "storbench-error":
                return rest
            if word == "storbench-host":
                tunnel.facts["hostname"] = rest
            elif word == "storbench-mem-kib" and re.fullmatch(r"[0-9]+", rest):
                tunnel.facts["ram_bytes"] = int(rest) * 1024
            elif word == "storbench-fio":
                tunnel.facts["fio_version"] = rest
        said = proc.stderr.read().strip() if timer.is_alive() else ""
        proc.wait()
        if not timer.is_alive():
            return f"no answer within {CONNECT_S:.0f} s"
        return f"ssh failed (exit status {proc.returncode}): {said or 'no message'}"
    finally:
        timer.cancel()


def parse_ssh(text: str) -> SshHost | None:
    """ssh://[user@]host[:port] -> SshHost; None when ``text`` is no ssh:// address."""
    if not text.startswith("ssh://"):
        return None
    rest = text[len("ssh://"):].rstrip("/")
    user, _, hostport = rest.rpartition("@")
    if hostport.startswith("["):
        host, _, tail = hostport[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port = hostport.partition(":")
    if (not host or (port and not re.fullmatch(r"[0-9]+", port))
            or not re.fullmatch(r"[A-Za-z0-9._:%-]+", host)):
        raise ValueError(text)
    return SshHost(host, user or None, int(port) if port else None)

