"""The hosts of `run --hosts`: each given as ssh://[USER@]HOST[:PORT] (reached over SSH),
sock:PATH (an agent's unix socket on this machine) or HOST[:PORT] (an agent over TCP)."""

from __future__ import annotations

import ipaddress
import re
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from storbench.errors import ConfigError
from storbench.execute.ssh import SshHost, parse_ssh, run_remote

DEFAULT_PORT = 8765
# a host name: labels of letters, digits, '-' (not first or last) and '_' (common in
# practice), joined by dots; or an IPv4 address (such labels too), or [IPv6]
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST = re.compile(rf"^\s*(?:\[(?P<v6>[0-9A-Fa-f:.%]+)\]|(?P<name>{_LABEL}(?:\.{_LABEL})*\.?))"
                   r"(?::(?P<port>[0-9]+))?\s*$")


@dataclass(frozen=True)
class Host:
    address: str
    port: int = DEFAULT_PORT
    ssh: SshHost | None = None  # reached over SSH (address and port unused)
    socket: str = ""  # a `storbench agent`'s unix socket on this machine (sock:PATH)

    @property
    def key(self) -> str:
        if self.socket:
            return f"sock:{self.socket}"
        return self.ssh.key if self.ssh is not None else f"{self.address}:{self.port}"

    def is_this_machine(self) -> bool:
        """Does the address reach this machine's loopback (127.0.0.0/8, ::1, localhost)?"""
        if self.socket:
            return True
        if self.ssh is not None:
            return False  # its facts come over SSH
        return loopback(self.address)

    def on_loopback(self) -> bool:
        """Is the host reached on this machine's loopback (an agent's unix socket here, an
        agent or an SSH host at 127.0.0.0/8, ::1, localhost), so that its loopback is
        this machine's?"""
        return bool(self.socket) or loopback(self.ssh.host if self.ssh else self.address)


def loopback(name: str) -> bool:
    """Does ``name`` (an address or a host name) reach only a loopback address?"""
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


_USER_PASSWORD = re.compile(r"^((?:ssh://)?[^/:@\s\[]*):[^@/\s]+@")  # user:PASSWORD@host


def parse_hosts(text: str, source: str = "--hosts") -> list[Host]:
    """'h1,h2:8766,[::1]:8765' (or one per line, # comments) -> hosts."""
    hosts = []
    for line in text.replace(",", "\n").splitlines():
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        shown = _USER_PASSWORD.sub(r"\1:***@", item)
        if shown != item:
            raise ConfigError(f"{source}: {shown!r}: an SSH address takes no password (ssh"
                              " asks for it, or uses your key or agent): give"
                              " ssh://[USER@]HOST[:PORT]")
        try:
            ssh = parse_ssh(item)
        except ValueError:
            raise ConfigError(f"{source}: {item!r} is not ssh://[USER@]HOST[:PORT] (a user name"
                          " of letters, digits, '.', '_', '-')") from None
        if ssh is not None:
            hosts.append(Host("", 0, ssh))
            continue
        if item.startswith("sock:"):
            if not item[5:].startswith("/"):
                raise ConfigError(f"{source}: {item!r}: give the agent's socket as an absolute"
                                  " path (sock:/run/storbench/agent.sock)")
            hosts.append(Host("", 0, socket=item[5:]))
            continue
        m = _HOST.match(item)
        if m is None:
            raise ConfigError(f"{source}: {item!r} is not ssh://[USER@]HOST[:PORT],"
                              " sock:PATH, HOST or HOST:PORT")
        hosts.append(Host(m["v6"] or m["name"], int(m["port"] or DEFAULT_PORT)))
    if not hosts:
        raise ConfigError(f"{source}: no hosts given")
    if len({h.key for h in hosts}) != len(hosts):
        raise ConfigError(f"{source}: a host is listed twice")
    return hosts


def ssh_sharing(ssh: list[Host], marks: list[str], config: str | None) -> list[list[str]]:
    """The hosts over SSH (``ssh``) in groups that see one another's files in the path
    (one file system shared by them: an NFS export, a cluster file system): each host's
    session wrote its file ``marks[i]`` there as it started (removed as it ends), and each
    host looks for the others'. [] for fewer than two hosts."""
    if len(ssh) < 2:
        return []
    look = "sh -c " + shlex.quote("; ".join(  # sh: whatever the user's login shell
        f"if [ -e {shlex.quote(m)} ]; then echo {i}; fi" for i, m in enumerate(marks)))

    def seen(h: Host) -> set[int]:
        assert h.ssh is not None
        return {int(i) for i in run_remote(h.ssh, config, look, "").split()}

    with ThreadPoolExecutor(max_workers=min(16, len(ssh))) as pool:
        sees = list(pool.map(seen, ssh))
    groups: list[list[str]] = []
    placed: set[int] = set()
    for i in range(len(ssh)):
        if i not in placed:
            group = [j for j in range(len(ssh)) if j not in placed and (j == i or j in sees[i])]
            placed.update(group)
            groups.append([ssh[j].key for j in group])
    return groups
