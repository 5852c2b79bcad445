"""fio's own client/server mode: this machine's fio is the client of ``fio --server``
on each host, sending each its job file so that all run at the same time.

fio's "All clients" entry has no percentiles on 3.33 and vanishes with several job
sections: the run loop merges the per-host results itself (IOPS and bandwidth
summed, percentiles from the merged json+ bins).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from storbench.errors import FioError, TargetError
from storbench.execute.base import Execution, FioJob, Progress, fio_message
from storbench.execute.fio import FioBinary
from storbench.execute.local import Confinement, FioProcess
from storbench.execute.signals import SignalGuard

Server = tuple[str, int] | str  # (address, port), or the path of a unix socket

# A job of fio's null engine: no file, no I/O, over at once. The server announces its
# version on connecting. (A job the server rejects while parsing did the same over TCP,
# but on a server's own unix socket the server dropped the connection before its
# answer: nothing was printed.)
PROBE_JOB = "[storbench-probe]\nioengine=null\nsize=4k\nrw=read\n"
PROBE_TIMEOUT_S = 20.0
_VERSION = re.compile(r"fio=(fio-\S+?),")


def key(server: Server) -> str:
    """fio's name for a server in its output: ADDRESS:PORT, or the socket's path."""
    return server if isinstance(server, str) else f"{server[0]}:{server[1]}"


def client_arg(server: Server) -> str:
    if isinstance(server, str):
        return f"--client=sock:{server}"
    address, port = server
    ip = f"ip6:{address}" if ":" in address else address
    return f"--client={ip},{port}"


class ClientServerExecutor:
    """The Executor for fio servers: each job's worker is a server's HOST:PORT."""

    def __init__(self, fio: FioBinary, workdir: Path, guard: SignalGuard,
                 servers: dict[str, Server]) -> None:
        self.process = FioProcess(fio, workdir, guard, Confinement())  # fio's client
        self.servers = servers  # worker name -> (address, port)

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        """A server that disconnects stops the test (fio's client tells the others to
        stop); so does ``deadline_s``."""
        args: list[str] = []
        for job in jobs:
            path = self.process.write(job.text, job.key)
            args += [client_arg(self.servers[job.worker]), *job.fio_args, str(path)]
        # No --output: in client mode fio reports a lost server in its normal output,
        # which must be read live; the JSON follows on stdout at the end.
        # fio's client reads the job files and expands their ${VARS} (a bucket's secret
        # key) from its own environment before it sends them to the servers
        execution = self.process.run(args, None, on_progress, deadline_s=deadline_s,
                                     stop_on_lost_host=True,
                                     env=tuple(dict(e for j in jobs for e in j.env).items()))
        # fio names a server by the address and port it reached (an SSH forward's, for
        # a host reached over SSH): back to the worker's own name
        by_address = {s if isinstance(s, str) else s[0]: worker
                      for worker, s in self.servers.items() if worker != key(s)}
        return replace(execution, log_dir=None,  # fio's logs stay with the servers
                       lost=tuple(by_address.get(a, a) for a in execution.lost),
                       aliases={key(s): worker for worker, s in self.servers.items()})


def probe(fio: FioBinary, servers: list[Server], workdir: Path) -> dict[str, str]:
    """Each server's fio version ({HOST:PORT: version}), asked through fio's client (a
    null-engine job: no file, no I/O).

    Raises TargetError naming every server that cannot be reached, and FioError when
    a server's fio is not the client's version (fio's protocol needs the same one).
    Nothing runs anywhere before every server answered. One fio client asks all at
    once (a fio process costs ~0.15 s of CPU); only if the answers differ is each
    asked alone, to name the odd ones.
    """
    job = workdir / "probe.fio"
    job.write_text(PROBE_JOB)
    with ThreadPoolExecutor(max_workers=min(16, len(servers))) as pool:
        refused = [(s, why) for s, why in pool.map(_connect, servers) if why]
    if refused:
        raise TargetError(
            f"cannot reach the fio server on {len(refused)} of {len(servers)} host(s):"
            f" {'; '.join(f'{key(s)} ({why})' for s, why in refused)}. Nothing was started."
            " Run `storbench agent` (fio --server) on each host and check the address, port"
            " and firewall.")
    versions, _ = _ask(fio, servers, job)
    if len(versions) == len(servers) and set(versions) == {fio.version_text}:
        return {key(s): fio.version_text for s in servers}
    with ThreadPoolExecutor(max_workers=min(16, len(servers))) as pool:
        answers = list(pool.map(lambda s: (s, *_ask(fio, [s], job)), servers))
    down = [f"{key(s)} ({why})" for s, v, why in answers if not v]
    if down:
        raise TargetError(f"no answer from the fio server on: {'; '.join(down)}."
                          " Nothing was started.")
    other = {key(s): v[0] for s, v, _ in answers if v[0] != fio.version_text}
    if other:
        listed = ", ".join(f"{k} runs {v}" for k, v in other.items())
        raise FioError(
            f"fio versions differ: this client runs {fio.version_text}, {listed}. fio's"
            " client/server protocol needs the same fio version everywhere; install it,"
            " or point --fio at a matching binary. Nothing was started.")
    return {key(s): v[0] for s, v, _ in answers}


def _connect(server: Server) -> tuple[Server, str]:
    where: str | tuple[str, int] = server
    if isinstance(server, str):
        family = socket.AF_UNIX
    else:
        family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    try:
        with socket.socket(family) as sock:
            sock.settimeout(5)
            sock.connect(where)
    except OSError as exc:
        return server, exc.strerror or str(exc)
    return server, ""


def _ask(fio: FioBinary, servers: list[Server], job: Path) -> tuple[list[str], str]:
    """The fio versions the servers announce (in arrival order), and fio's message."""
    args = []
    for s in servers:
        args += [client_arg(s), str(job)]
    # SIGPIPE stays ignored (as in Python): a server that closes the connection while
    # fio's client still writes to it would kill it with its answer unprinted
    proc = subprocess.Popen([fio.path, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, restore_signals=False)
    timer = threading.Timer(PROBE_TIMEOUT_S, proc.kill)
    timer.start()
    versions: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _VERSION.search(line)
            if m is not None:
                versions.append(m.group(1))
                if len(versions) == len(servers):
                    return versions, ""  # fio's client lingers ~1 s: not waited for
        proc.wait()
        said = (proc.stderr.read() if proc.stderr else "").strip()
        if not timer.is_alive():
            return versions, f"no answer within {PROBE_TIMEOUT_S:.0f} s"
        return versions, fio_message(said)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def engine_refusals(fio: FioBinary, servers: dict[str, Server], job_text: str,
                    workdir: Path) -> dict[str, str]:
    """Each server that cannot run ``job_text`` (a job that loads an engine and moves
    nothing: create_only), with its fio's own words ({host: words}; none: all can). An
    agent's fio is asked this way: only an SSH session can ask ``fio --enghelp``."""
    job = workdir / "engine-check.fio"
    job.write_text(job_text)

    def one(item: tuple[str, Server]) -> tuple[str, str]:
        host, server = item
        try:  # SIGPIPE ignored: the server's words come back before it closes
            proc = subprocess.run([fio.path, client_arg(server), "--output-format=json",
                                   str(job)], text=True, capture_output=True,
                                  timeout=PROBE_TIMEOUT_S, restore_signals=False)
        except subprocess.TimeoutExpired:
            return host, f"no answer within {PROBE_TIMEOUT_S:.0f} s"
        # the job's own result is the answer (fio's client in its normal output format
        # ended with 0 after its server had dropped the job)
        if proc.returncode == 0 and _ran(proc.stdout):
            return host, ""
        # fio's client prefixes each line with the server's name ("<sock> fio: ...")
        said = [line.split("> ", 1)[-1] for line in proc.stdout.splitlines() if "fio: " in line]
        return host, (said[0] if said else fio_message(proc.stderr)) or \
            f"fio's client ended with exit status {proc.returncode}"

    with ThreadPoolExecutor(max_workers=min(16, len(servers) or 1)) as pool:
        return {h: why for h, why in pool.map(one, servers.items()) if why}


def _ran(output: str) -> bool:
    """Did fio's JSON output (after any lines of the server's) hold a job that ran
    without an error?"""
    try:
        doc = json.loads(output[output.index("{"):])
    except ValueError:
        return False
    jobs = doc.get("client_stats") or doc.get("jobs") or [] if isinstance(doc, dict) else []
    return any(isinstance(j, dict) and j.get("error") == 0 for j in jobs)
