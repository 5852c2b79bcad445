"""Many hosts at once, through fio's own client/server mode.

Each host runs ``fio --server`` (``storbench agent``); storbench, as fio's client,
sends every host the test's job file (with its own file names, or one shared file)
so that all run it at the same time against the path on their side. Results come
back per host and are merged here: IOPS and bandwidth summed, percentiles from the
merged json+ histogram bins (fio's own "All clients" entry has no percentiles on
3.33 and vanishes with several job sections: it is never used).
"""

from __future__ import annotations

import functools
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from storbench import __version__
from storbench.analysis import warnings
from storbench.errors import ConfigError, FioError, TargetError
from storbench.execute import Execution, FioBinary, LocalExecutor, SignalGuard, find_fio
from storbench.execute.local import fio_message
from storbench.result import TestResult, parse_fio_json
from storbench.result.fio_json import parse_per_host
from storbench.runner import (
    Plan,
    Reporter,
    RunSpec,
    make_plan,
    number_results,
    raise_for_fio,
    record_failure,
)
from storbench.store import Invocation, Store
from storbench.target.environment import host_facts

DEFAULT_PORT = 8765
GRACE_S = 30.0  # beyond the test's runtime before hosts that did not answer are given up
_HOST = re.compile(r"^\s*(?:\[(?P<v6>[^\]]+)\]|(?P<name>[^:\s\[\]]+))(?::(?P<port>\d+))?\s*$")


@dataclass(frozen=True)
class Host:
    address: str
    port: int = DEFAULT_PORT

    @property
    def key(self) -> str:
        return f"{self.address}:{self.port}"


def parse_hosts(text: str, source: str = "--hosts") -> list[Host]:
    """'h1,h2:8766,[::1]:8765' (or one per line, # comments) -> hosts."""
    hosts = []
    for line in text.replace(",", "\n").splitlines():
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        m = _HOST.match(item)
        if m is None:
            raise ConfigError(f"{source}: {item!r} is not HOST or HOST:PORT")
        hosts.append(Host(m["v6"] or m["name"], int(m["port"] or DEFAULT_PORT)))
    if not hosts:
        raise ConfigError(f"{source}: no hosts given")
    if len({h.key for h in hosts}) != len(hosts):
        raise ConfigError(f"{source}: a host is listed twice")
    return hosts


# A job every server rejects while parsing: the server announces its version, drops
# the job and the client returns at once. Nothing runs anywhere.
PROBE_JOB = "[storbench-probe]\nioengine=null\nsize=4k\nrw=storbench-version-probe\n"
PROBE_TIMEOUT_S = 20.0
_VERSION = re.compile(r"fio=(fio-\S+?),")


def probe(fio: FioBinary, hosts: list[Host], workdir: Path) -> dict[str, str]:
    """Each host's fio version, asked through fio's client (a job fio rejects: no I/O).

    Raises TargetError naming every host that cannot be reached, and FioError when
    a server's fio is not the client's version (fio's protocol needs the same one).
    Nothing runs anywhere before every host answered. One fio client asks all hosts
    at once (a fio process costs ~0.15 s of CPU); only if the answers differ is each
    host asked alone, to name the odd ones.
    """
    job = workdir / "probe.fio"
    job.write_text(PROBE_JOB)
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        refused = [(h, why) for h, why in pool.map(_connect, hosts) if why]
    if refused:
        raise TargetError(
            f"cannot reach the fio server on {len(refused)} of {len(hosts)} host(s):"
            f" {'; '.join(f'{h.key} ({why})' for h, why in refused)}. Nothing was started."
            " Run `storbench agent` (fio --server) on each host and check the address, port"
            " and firewall.")
    versions, _ = _ask(fio, hosts, job)
    if len(versions) == len(hosts) and set(versions) == {fio.version_text}:
        return {h.key: fio.version_text for h in hosts}
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        answers = list(pool.map(lambda h: (h, *_ask(fio, [h], job)), hosts))
    down = [f"{h.key} ({why})" for h, v, why in answers if not v]
    if down:
        raise TargetError(f"no answer from the fio server on: {'; '.join(down)}."
                          " Nothing was started.")
    other = {h.key: v[0] for h, v, _ in answers if v[0] != fio.version_text}
    if other:
        listed = ", ".join(f"{k} runs {v}" for k, v in other.items())
        raise FioError(
            f"fio versions differ: this client runs {fio.version_text}, {listed}. fio's"
            " client/server protocol needs the same fio version everywhere; install it,"
            " or point --fio at a matching binary. Nothing was started.")
    return {h.key: v[0] for h, v, _ in answers}


def _connect(h: Host) -> tuple[Host, str]:
    family = socket.AF_INET6 if ":" in h.address else socket.AF_INET
    try:
        with socket.socket(family) as sock:
            sock.settimeout(5)
            sock.connect((h.address, h.port))
    except OSError as exc:
        return h, exc.strerror or str(exc)
    return h, ""


def _ask(fio: FioBinary, hosts: list[Host], job: Path) -> tuple[list[str], str]:
    """The fio versions the servers announce (in arrival order), and fio's message."""
    args = []
    for h in hosts:
        ip = f"ip6:{h.address}" if ":" in h.address else h.address
        args += [f"--client={ip},{h.port}", str(job)]
    proc = subprocess.Popen([fio.path, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    timer = threading.Timer(PROBE_TIMEOUT_S, proc.kill)
    timer.start()
    versions: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _VERSION.search(line)
            if m is not None:
                versions.append(m.group(1))
                if len(versions) == len(hosts):
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


def run_on_hosts(spec: RunSpec, store: Store, reporter: Reporter) -> int:
    """Run spec's suite on every host at once; returns the run id (see runner.run_benchmark)."""
    hosts: list[Host] = list(spec.hosts)
    fio = find_fio(spec.fio)
    workdir = Path(tempfile.mkdtemp(prefix="storbench-fio-"))
    try:
        with SignalGuard() as guard:
            uid = secrets.token_hex(6)
            remote = Path(str(spec.target))  # a path on the hosts, not checked here
            plan = make_plan(spec, remote)
            executor = LocalExecutor(fio, workdir, guard)
            for t in plan.tests:
                executor.validate(t.jobfile.render(), f"for test {t.name!r}")
            versions = probe(fio, hosts, workdir)
            guard.check()
            environment = {
                **host_facts(),
                "target": {"path": str(remote), "on_hosts": True, "shared_file": spec.shared_file},
                "hosts": [{"host": h.key, "fio_version": versions[h.key]} for h in hosts],
                "fio_path": fio.path,
                "fio_version": fio.version_text,
                "storbench_version": __version__,
            }
            run_id = store.begin_run(
                uid=uid, suite=plan.suite_name, target=f"{remote} on {len(hosts)} hosts",
                environment=environment, settings=spec.settings(plan.suite_name),
                storbench_version=__version__,
                fio_version=fio.version_text, label=spec.label, tags=spec.tags)
            try:
                reporter.run_started(run_id, plan, remote)
                _execute(plan, executor, store, run_id, hosts, uid, spec.shared_file,
                         reporter, guard)
            except BaseException as exc:
                record_failure(store, run_id, exc)
            store.finish_run(run_id, "completed")
            guard.check()
            return run_id
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _execute(plan: Plan, executor: LocalExecutor, store: Store, run_id: int, hosts: list[Host],
             uid: str, shared: bool, rep: Reporter, guard: SignalGuard) -> None:
    ordinal = 0
    for index, (_, repeat, test) in enumerate(plan.schedule()):
        guard.check()
        rep.test_started(index, test)
        jobs = [(h.address, h.port,
                 test.jobfile.for_host(f"storbench-{uid}", f"h{i}", shared=shared).render())
                for i, h in enumerate(hosts)]
        deadline = test.expected_s + GRACE_S if test.expected_s is not None else None
        execution = executor.run_clients(jobs, functools.partial(rep.progress, index), deadline)
        guard.check()
        try:
            _, results = parse_fio_json(execution.raw_json)
            per_host = parse_per_host(execution.raw_json)
        except FioError:
            results, per_host = [], {}
        numbered, host_rows, ordinal = number_results(ordinal, results, per_host)
        found = [w.to_dict() for r in results for w in warnings.compute(r, {})]
        store.add_invocation(
            run_id,
            Invocation(index, "\n".join(f"# host {h}:{p}\n{t}" for h, p, t in jobs),
                       execution.raw_json, execution.returncode, execution.stderr,
                       execution.wall_s),
            numbered, found, repeat=repeat, per_host=host_rows)
        rep.test_finished(index, results)
        _raise_for_failures(test.name, hosts, execution, per_host, deadline)


def _raise_for_failures(test: str, hosts: list[Host], execution: Execution,
                        per_host: dict[str, list[TestResult]], deadline: float | None) -> None:
    if execution.lost_hosts:
        raise FioError(
            f"fio server {', '.join(execution.lost_hosts)} disconnected during test {test!r}"
            " (the host or its fio died, or the network failed); the other hosts were"
            " stopped", returncode=execution.returncode, stderr=execution.stderr)
    missing = [h.key for h in hosts if h.key not in per_host]
    if execution.timed_out:
        raise FioError(
            f"test {test!r}: no result from {', '.join(missing) or 'the fio servers'} within"
            f" {deadline:.0f} s (the test's runtime + {GRACE_S:.0f} s); the run was stopped")
    raise_for_fio(execution, [(h, r) for h, rs in per_host.items() for r in rs],
                  f"; no result from {', '.join(missing)}" if missing else "")
