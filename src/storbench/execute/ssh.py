"""Hosts reached over SSH: for one run, ``fio --server`` on each host, listening on a unix
socket in a directory only the SSH user may enter (0700), reached through an SSH
forward of that socket to a socket in storbench's own work directory (0700 too);
stopped at the end.

fio's server has no authentication: whoever can connect to it runs jobs, and
``exec_prerun=``, as the SSH user. So no TCP port of fio's exists at any moment of a
run, here or on the host: unix sockets only, each in a directory no other local user
may enter.

storbench runs the ``ssh`` client itself, so the user's ssh configuration, agent and
known_hosts apply as for any ssh command (``--ssh-config FILE`` names another
configuration). No listener is left on any host: the remote fio server lives as long
as the SSH session. The session ends when storbench closes its standard input; if
storbench dies, even by SIGKILL, that pipe closes all the same and the remote side
stops the server, removes the run's files in the target and its socket directory.

Where the host has python3 and the kernel offers Landlock, its fio server is confined
to the target path (and its socket directory) as a local fio is (execute/confine.py,
sent with the session); the host says which.
"""

from __future__ import annotations

import re
import secrets
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from storbench.errors import TargetError
from storbench.execute import beneath, confine

CONNECT_S = 30.0  # ssh login, fio found, its server listening
STOP_S = 5.0
TRIES = 3  # socket directory names tried (one may exist)

# Runs on the host: its facts, then fio's server on a unix socket until stdin closes.
# $1: the socket directory to create; $2: the run's file prefix in the target ("" for a
# device); $3: confine.py's source; $4: the fio engines the run needs (each said there or
# not); $5: the path --explain traces ("" for none), $6: beneath.py's source (what tracing
# needs, said); then confine.py's flags (--write TARGET, or --file DEVICE if written).
REMOTE = r"""
dir=$1 prefix=$2 confine=$3 engines=$4 traced=$5 locate=$6
shift 6
command -v fio >/dev/null 2>&1 || {
  echo "storbench-error fio is not installed on this host"; exit 1; }
path= prev=
for a in "$@"; do
  case $a in --*) ;; *) [ -e "$a" ] || {
    echo "storbench-error $a does not exist on this host"; exit 1; } ;; esac
  [ "$prev" = --write ] && path=$a
  prev=$a
done
echo "storbench-host $(hostname)"
echo "storbench-mem-kib $(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
# the target path's file system (its mount's type, as /proc/mounts names it) and room
if [ -n "$path" ] && real=$(cd -- "$path" 2>/dev/null && pwd -P); then
  P=$real awk 'BEGIN { n = -1; p = ENVIRON["P"] }
    { split($0, s, " - "); split(s[1], f, " "); split(s[2], r, " "); m = f[5]
      gsub(/\\040/, " ", m); gsub(/\\011/, "\t", m); gsub(/\\012/, "\n", m)
      gsub(/\\134/, "\\", m)
      if ((p == m || m == "/" || index(p, m "/") == 1) && length(m) >= n) {
        n = length(m); t = r[1] } }
    END { if (n >= 0) print "storbench-fs " t }' /proc/self/mountinfo 2>/dev/null
  stat -f -c "storbench-space %S %b %a" -- "$real" 2>/dev/null
fi
echo "storbench-fio $(fio --version)"
for e in $engines; do
  if said=$(fio --enghelp="$e" 2>&1); then echo "storbench-engine $e"
  else echo "storbench-no-engine $e $(printf '%s' "$said" | tail -n 1)"; fi
done
if [ -n "$traced" ]; then
  echo "storbench-trace-machine $(uname -m)"; echo "storbench-trace-uid $(id -u)"
  command -v bpftrace >/dev/null 2>&1 && echo "storbench-trace-bpftrace yes"
  command -v python3 >/dev/null 2>&1 &&
    echo "storbench-trace-place $(python3 -I -c "$locate" "$traced" 2>&1 | tail -n 1)"
fi
umask 077
# what a session that could not end well left (its shell killed, the host rebooted
# with /tmp kept): a socket directory of this user's whose lock nobody holds
# (this mount namespace's only: another container's /tmp may be this one, its target not)
ns=$(readlink /proc/self/ns/mnt 2>/dev/null)
if command -v flock >/dev/null 2>&1; then
  for old in /tmp/storbench-????????????????; do
    [ -d "$old" ] && [ -O "$old" ] && [ -f "$old/prefix" ] || continue
    [ "$(cat "$old/ns" 2>/dev/null)" = "$ns" ] || continue
    flock -n "$old/lock" true 2>/dev/null || continue
    left=$(cat "$old/prefix")
    # its fio server and the processes it forked, if they outlived it
    for f in $(grep -la -e "=sock:$old/fio[.]sock" /proc/[0-9]*/cmdline 2>/dev/null); do
      f=${f#/proc/}; kill -9 "${f%/cmdline}" 2>/dev/null
    done
    [ -n "$left" ] && rm -f -- "$left"*
    rm -rf -- "$old"
    echo "storbench-removed ${left:-$old}"
  done
fi
mkdir -m 700 "$dir" 2>/dev/null || { echo "storbench-busy"; exit 2; }
cd "$dir" || exit 3
if command -v flock >/dev/null 2>&1; then  # held as long as this session lives
  exec 9>"$dir/lock" && flock -n 9 && printf '%s' "$ns" > "$dir/ns" &&
    printf '%s' "$prefix" > "$dir/prefix"
fi
fio=$(command -v fio)
abi=0
if [ -n "$confine" ] && command -v python3 >/dev/null 2>&1; then
  abi=$(python3 -I -c "$confine" --abi 2>/dev/null) || abi=0
fi
if [ "$abi" -gt 0 ] 2>/dev/null; then
  echo "storbench-confined Landlock ABI $abi"
  python3 -I -c "$confine" "$@" --write "$dir" --file /dev/null -- \
    "$fio" --server="sock:$dir/fio.sock" >/dev/null 2>&1 </dev/null 9>&- &
else
  if command -v python3 >/dev/null 2>&1; then why="the kernel offers no Landlock"
  else why="python3 is not installed"; fi
  echo "storbench-unconfined $why"
  "$fio" --server="sock:$dir/fio.sock" >/dev/null 2>&1 </dev/null 9>&- &
fi
pid=$!
i=0
until [ -S "$dir/fio.sock" ]; do
  kill -0 $pid 2>/dev/null || { rm -rf "$dir"; echo "storbench-error fio --server ended"; exit 3; }
  i=$((i + 1))
  [ $i -gt 100 ] && { kill $pid; rm -rf "$dir"
    echo "storbench-error fio --server did not listen"; exit 3; }
  sleep 0.1
done
# storbench may be gone already (killed while the server started): the echo then fails
# instead of ending this script by SIGPIPE before its cleanup, which left the server running
trap '' PIPE
# a file of the run's in the path, named by this session: storbench looks for the other
# hosts' to see which share the path; removed with the run's files as the session ends
[ -n "$prefix" ] && [ -n "$path" ] && (set -C; : > "$prefix${dir##*-}-mark") 2>/dev/null
echo "storbench-server $pid"
echo "storbench-ready"
read _ || true
# storbench closed the session (or died): the server and every process it forked, found
# by the server's command line, which they all carry (a job process whose connection
# ended is left to init, and would hold the forwarded connection open), and by parentage;
# stopped until no new one appears (a stopped process forks nothing behind the count),
# then killed. (The pattern's [.] keeps grep from finding its own command line.)
tree() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do tree $c; done; echo $1; }
ours() {
  for f in $(grep -la -e "=sock:$dir/fio[.]sock" /proc/[0-9]*/cmdline 2>/dev/null); do
    f=${f#/proc/}; tree ${f%/cmdline}
  done
  tree $pid
}
pids=$(ours | sort -u) seen= i=0
while [ "$pids" != "$seen" ] && [ $i -lt 50 ]; do
  seen=$pids i=$((i + 1))
  kill -STOP $pids 2>/dev/null
  pids=$(ours | sort -u)
done
kill -9 $pids 2>/dev/null
if [ -n "$prefix" ]; then rm -f -- "$prefix"*; fi
rm -rf "$dir"
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
    """One host's SSH session: its fio server reached at the unix socket ``local``."""

    ssh: SshHost
    local: Path
    facts: dict[str, object] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None
    # said for this run, not of the host: its fio server's PID ("server"); for --explain,
    # "trace-machine", "-uid", "-bpftrace", "-place" (execute/hosttrace.py)
    said: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        """Close the session (the remote script stops fio's server, removes the run's
        files and its socket directory) and wait for it to end."""
        self.close()
        self.wait()

    def close(self) -> None:
        proc = self.proc
        try:
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass

    def wait(self, until: float | None = None) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                proc.wait(STOP_S if until is None else max(0.1, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.local.unlink(missing_ok=True)


def stop_all(tunnels: list[Tunnel]) -> None:
    """End every session at once (each server stops in ~1 s); wait STOP_S at most in all."""
    for tunnel in tunnels:
        tunnel.close()
    until = time.monotonic() + STOP_S
    for tunnel in tunnels:
        tunnel.wait(until)


@dataclass(frozen=True)
class Remote:
    """What a host's session is for: the run's file prefix in the target path (removed
    when the session ends; "" for a device) and the places its fio server may write
    (``--write DIR``/``--file DEVICE`` for confine.py)."""

    prefix: str
    confine_flags: tuple[str, ...]
    engines: tuple[str, ...] = ()  # fio engines the run needs: each host says if it has them
    traced: str = ""  # the path run --explain traces on each host (execute/hosttrace.py)


def open_tunnels(hosts: list[SshHost], config: str | None, sockets: Path,
                 remote: Remote, dirs: list[str] | None = None) -> list[Tunnel]:
    """Start every host's session at once, host i's server reached at
    ``sockets``/hI.sock (``sockets``: a directory of storbench's, 0700), its session
    directory ``dirs[i]`` when given (chosen beforehand: job files name it), else one of
    its own; TargetError naming each host that could not be reached (ssh's own words),
    after stopping the others."""
    tunnels: list[Tunnel | None] = [None] * len(hosts)
    errors: list[str] = [""] * len(hosts)

    def one(i: int) -> None:
        try:
            tunnels[i] = _open(hosts[i], sockets / f"h{i}.sock", config, remote,
                               dirs[i] if dirs else None)
        except TargetError as exc:
            errors[i] = str(exc)
        except Exception as exc:  # never a host left out unsaid, its neighbours' sessions open
            errors[i] = f"{hosts[i].key}: {type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(hosts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [e for e in errors if e]
    if failed:
        stop_all([t for t in tunnels if t is not None])
        raise TargetError(f"cannot start fio's server over SSH on {len(failed)} of"
                          f" {len(hosts)} host(s): {'; '.join(failed)}. Nothing was started.")
    return [t for t in tunnels if t is not None]


def ssh_argv(host: SshHost, config: str | None, *options: str) -> list[str]:
    """The ssh command line that reaches ``host`` (the remote command follows); ``--``
    before the destination, so that nothing in it is read as an option of ssh's."""
    return ["ssh", *(["-F", config] if config else []),
            *(["-p", str(host.port)] if host.port else []), "-o", "BatchMode=yes", *options,
            "--", f"{host.user}@{host.host}" if host.user else host.host]


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


# Writes stdin to a new file $1 (never an existing one, nor through a link: set -C),
# readable by the SSH user only
PUT = 'umask 077; set -C; cat > "$1"'


def put_remote(host: SshHost, config: str | None, path: str, text: str) -> None:
    """A new file ``path`` on the host holding ``text`` (a replay's iolog); TargetError
    with the host's words if it cannot be written (it exists already, no such
    directory)."""
    run_remote(host, config, f"sh -c {shlex.quote(PUT)} sh {shlex.quote(path)}", text)


def session_dir() -> str:
    """A new name for a session's directory on a host (0700, made by the host's script)."""
    return f"/tmp/storbench-{secrets.token_hex(8)}"


def _open(host: SshHost, local: Path, config: str | None, remote: Remote,
          chosen: str | None = None) -> Tunnel:
    source = Path(confine.__file__).read_text()
    locate = Path(beneath.__file__).read_text() if remote.traced else ""
    for _ in range(TRIES):
        there = chosen or session_dir()
        tunnel = Tunnel(host, local)
        argv = [*ssh_argv(host, config, "-o", "ExitOnForwardFailure=yes",
                          "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                          "-o", "StreamLocalBindUnlink=yes",
                          "-L", f"{local}:{there}/fio.sock"),
                " ".join(["sh -c", shlex.quote(REMOTE), "sh", shlex.quote(there),
                          shlex.quote(remote.prefix), shlex.quote(source),
                          shlex.quote(" ".join(remote.engines)),
                          shlex.quote(remote.traced), shlex.quote(locate),
                          *map(shlex.quote, remote.confine_flags)])]
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
        if outcome == "busy" and chosen:
            raise TargetError(f"{host.key}: {chosen} exists already: not this run's session"
                              " directory")
        if outcome != "busy":
            raise TargetError(f"{host.key}: {outcome}")
    raise TargetError(f"{host.key}: no free socket directory for fio's server after {TRIES}"
                      " tries")


_FACTS = {"storbench-host": "hostname", "storbench-fs": "fs_type", "storbench-fio": "fio_version"}


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
            if word.startswith("storbench-trace-") or word == "storbench-server":
                tunnel.said[word.removeprefix("storbench-")] = rest
            elif word in _FACTS and rest:
                tunnel.facts[_FACTS[word]] = rest
            elif word == "storbench-mem-kib" and re.fullmatch(r"[0-9]+", rest):
                tunnel.facts["ram_bytes"] = int(rest) * 1024
            elif word == "storbench-space" and re.fullmatch(r"[0-9]+ [0-9]+ [0-9]+", rest):
                size, total, free = map(int, rest.split())
                tunnel.facts.update(total_bytes=size * total, free_bytes=size * free)
            elif word == "storbench-engine":
                engines = tunnel.facts.setdefault("engines", [])
                assert isinstance(engines, list)
                engines.append(rest)
            elif word == "storbench-no-engine":
                missing = tunnel.facts.setdefault("engines_missing", {})
                assert isinstance(missing, dict)
                engine, _, said = rest.partition(" ")
                missing[engine] = said
            elif word == "storbench-confined":
                tunnel.facts["confinement"] = (f"{rest}: fio may write only to the target"
                                               " path")
            elif word == "storbench-unconfined":
                tunnel.facts["confinement"] = f"none: {rest} on this host"
            elif word == "storbench-removed":
                removed = tunnel.facts.setdefault("removed_leftovers", [])
                assert isinstance(removed, list)
                removed.append(rest)
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
            or not re.fullmatch(r"[A-Za-z0-9._:%-]+", host) or host.startswith("-")
            or (user and not re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*", user))):
        raise ValueError(text)  # "-oProxyCommand=...@host" is no user name
    return SshHost(host, user or None, int(port) if port else None)

