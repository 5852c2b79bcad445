"""Run fio as a local subprocess in its own process group, with live progress.

``LocalExecutor`` runs one job file with this machine's fio; ``FioProcess`` is the
process handling it shares with the client/server executor (execute/clientserver.py):
its own process group, a watchdog that kills it if storbench dies, signals forwarded,
a deadline.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storbench.errors import ConfigError, FioError
from storbench.execute import confine, proctree
from storbench.execute.base import Execution, FioJob, Progress, fio_message, parse_status_line
from storbench.execute.fio import FioBinary
from storbench.execute.proctree import descendants, kill_tree
from storbench.execute.signals import SignalGuard

KILL_AFTER_S = 1.0  # after forwarding a signal, SIGKILL fio if it has not exited by then
GIVE_UP_S = 1.0  # after SIGKILL: fio stuck in the kernel (a dead file system) is left

_DISCONNECTED = re.compile(r"host=(\S+) disconnected")


def _start_watchdog(pgid: int) -> subprocess.Popen[str]:
    """A process that kills fio's tree if storbench dies without saying "done"."""
    return subprocess.Popen(
        [sys.executable, "-I", proctree.__file__, str(pgid)],  # (as fsops.CHILD)
        stdin=subprocess.PIPE, text=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def _stop_watchdog(watchdog: subprocess.Popen[str]) -> None:
    assert watchdog.stdin is not None
    try:
        watchdog.stdin.write("done")
        watchdog.stdin.close()
    except OSError:
        pass
    watchdog.wait()


@dataclass(frozen=True)
class Confinement:
    """Where a local fio may write, besides storbench's work directory (its cwd): the
    run's scratch directory, the one device named with --destructive. Enforced by the
    kernel (execute/confine.py) where it offers Landlock."""

    directories: tuple[Path, ...] = ()
    files: tuple[str, ...] = ()

    def argv(self, workdir: Path, program: list[str], may_exec: bool) -> list[str]:
        """``program`` started through confine.py with these places; as it is where the
        kernel offers no Landlock (the run said so once), and for a job that may run
        commands (--allow-exec: the user trusts it to run as they do, e.g. to drop the
        page cache)."""
        if may_exec or not confine.abi():
            return program
        # absolute: fio starts in the work directory, not where storbench was started
        flags = [f for d in (workdir, *self.directories)
                 for f in ("--write", os.path.abspath(d))]
        flags += [f for p in ("/dev/null", *self.files) for f in ("--file", os.path.abspath(p))]
        return [sys.executable, "-I", confine.__file__, *flags, "--", *program]


class FioProcess:
    """Starts fio processes for one run: in ``workdir``, in their own process group,
    stopped when the run's SignalGuard gets a signal; confined by the kernel to
    ``confinement`` (None: not confined, for fio's client of remote servers)."""

    def __init__(self, fio: FioBinary, workdir: Path, guard: SignalGuard,
                 confinement: Confinement | None = None) -> None:
        self.fio = fio
        self.workdir = workdir
        self.guard = guard
        self.confinement = confinement
        self._count = 0

    def _argv(self, program: list[str], may_exec: bool = False) -> list[str]:
        if self.confinement is None:
            return program
        return self.confinement.argv(self.workdir, program, may_exec)

    def write(self, text: str, stem: str) -> Path:
        self._count += 1
        path = self.workdir / f"{self._count:03d}-{stem}"
        path.write_text(text)
        return path

    def validate_all(self, jobfiles: list[tuple[str, str]]) -> None:
        """fio --parse-only: ConfigError with fio's own message for an invalid job file.

        Over (text, source) job files at once: one fio start, not one each (~0.16 s
        apiece: a suite's tests were checked one after the other before anything ran).
        fio parses each file with its own [global] (none carries over to the next), as
        it runs them one by one. When fio rejects them, each is checked alone, so that
        the error names the one it rejects."""
        if not jobfiles:
            return
        paths = [self.write(text, "check.fio") for text, _ in jobfiles]
        # a clock source named: fio then skips calibrating its CPU clock (~60 ms of
        # ~160), which a check that times nothing does not need (a job file that names
        # one is checked as before)
        proc = subprocess.run(
            self._argv([self.fio.path, "--parse-only", "--clocksource=clock_gettime",
                        *map(str, paths)]),
            capture_output=True, text=True, cwd=self.workdir, timeout=60,
        )
        if proc.returncode == 0:
            return
        if len(jobfiles) > 1:
            for one in jobfiles:
                self.validate_all([one])
        message = fio_message(proc.stderr + proc.stdout)
        sources = " and ".join(source for _, source in jobfiles)
        raise ConfigError(f"fio rejects the job file {sources}: {message}")

    def run(
        self,
        args: list[str],
        out_path: Path | None,
        on_progress: Callable[[Progress], None] | None,
        *,
        deadline_s: float | None = None,
        stop_on_lost_host: bool = False,
        may_exec: bool = False,
        env: tuple[tuple[str, str], ...] = (),
    ) -> Execution:
        """Run fio with ``args`` to completion and return what it wrote, whatever its status.

        Raises FioError only when fio cannot be started. If the guard receives a
        signal, fio is stopped (the signal forwarded, SIGKILL after KILL_AFTER_S).
        """
        argv = [
            self.fio.path, "--output-format=json+",
            *([f"--output={out_path}"] if out_path is not None else []),
            "--eta=always", "--eta-newline=1", *args,
        ]
        lost: list[str] = []
        timed_out = False
        start = last_io = time.monotonic()
        seen_io = False
        self.killed_at: float | None = None
        try:
            proc = subprocess.Popen(
                self._argv(argv, may_exec), cwd=self.workdir, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **dict(env)} if env else None,
            )
        except OSError as exc:
            raise FioError(f"cannot start {self.fio.path}: {exc.strerror}") from exc
        watchdog = _start_watchdog(proc.pid)
        self.guard.set_child(proc.pid)
        stderr_chunks: list[bytes] = []
        stdout_chunks: list[bytes] = []
        pending = b""

        def note_lost(text: str) -> None:
            for host in _DISCONNECTED.findall(text):
                if host not in lost:
                    lost.append(host)
                if stop_on_lost_host:  # fio's client then tells the other servers to stop
                    _signal(proc.pid, signal.SIGINT)

        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        returncode: int | None = None
        try:
            while sel.get_map():
                for key, _ in sel.select(timeout=0.5):
                    data = os.read(key.fd, 65536)
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    if key.data == "err":
                        stderr_chunks.append(data)
                        note_lost(data.decode(errors="replace"))
                        continue
                    if out_path is None:
                        stdout_chunks.append(data)
                    pending += data
                    *lines, pending = re.split(rb"[\r\n]", pending)
                    for line in lines:
                        note_lost(line.decode(errors="replace"))
                        progress = parse_status_line(line.decode(errors="replace"))
                        if progress is not None and progress.did_io:
                            last_io, seen_io = time.monotonic(), True
                        if progress is not None and on_progress is not None:
                            on_progress(progress)
                self._kill_if_overdue(proc)
                if deadline_s is not None and time.monotonic() - start > deadline_s:
                    timed_out = True
                    self._kill(proc)
                if self._given_up():
                    break  # fio's processes do not end (stuck in the kernel): not waited for
            returncode = self._wait(proc)
        finally:
            sel.close()
            if proc.poll() is None:
                self._kill(proc)
                if returncode is None:
                    returncode = self._wait(proc)
            _stop_watchdog(watchdog)
            self.guard.set_child(None)
        stuck = _alive_in_tree(proc.pid) if returncode is None else ()
        stderr = b"".join(stderr_chunks).decode(errors="replace")
        if out_path is None:
            raw = b"".join(stdout_chunks).decode(errors="replace")
        else:
            raw = out_path.read_text(errors="replace") if out_path.exists() else ""
        now = time.monotonic()
        return Execution(raw, stderr, -9 if returncode is None else returncode, now - start,
                         tuple(lost), timed_out, self.workdir,
                         idle_s=now - last_io if seen_io else None, stuck=stuck)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        kill_tree(proc.pid)
        if self.killed_at is None:
            self.killed_at = time.monotonic()

    def _given_up(self) -> bool:
        return self.killed_at is not None and time.monotonic() - self.killed_at > GIVE_UP_S

    def _kill_if_overdue(self, proc: subprocess.Popen[bytes]) -> None:
        at = self.guard.received_at
        if at is not None and time.monotonic() - at > KILL_AFTER_S and proc.poll() is None:
            self._kill(proc)

    def _wait(self, proc: subprocess.Popen[bytes]) -> int | None:
        """fio's exit status; None when it was killed and still has not ended."""
        while True:
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self._kill_if_overdue(proc)
                if self._given_up():
                    return None


class LocalExecutor:
    """The Executor for a directory or a device on this machine: one fio, confined to
    ``confinement`` (and the work directory), its per-second logs in ``workdir`` (where
    fio runs)."""

    def __init__(self, fio: FioBinary, workdir: Path, guard: SignalGuard,
                 confinement: Confinement) -> None:
        self.process = FioProcess(fio, workdir, guard, confinement)

    def run(self, jobs: list[FioJob], on_progress: Callable[[Progress], None] | None = None,
            deadline_s: float | None = None) -> Execution:
        if len(jobs) != 1:
            raise ValueError(f"a local executor runs one job file, not {len(jobs)}")
        path = self.process.write(jobs[0].text, jobs[0].key)
        return self.process.run([*jobs[0].fio_args, str(path)], path.with_suffix(".json"),
                                on_progress, deadline_s=deadline_s, may_exec=jobs[0].may_exec,
                                env=jobs[0].env)


def _alive_in_tree(pid: int) -> tuple[int, ...]:
    """fio's processes that still exist (not zombies): stuck in the kernel."""
    alive = []
    for p in [pid, *descendants(pid)]:
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2:].split()[0] != "Z":
            alive.append(p)
    return tuple(alive)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
