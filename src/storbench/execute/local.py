"""Run fio as a local subprocess in its own process group, with live progress."""

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
from storbench.execute.fio import FioBinary
from storbench.execute.proctree import kill_tree
from storbench.execute.signals import SignalGuard

KILL_AFTER_S = 1.5  # after forwarding a signal, SIGKILL fio if it has not exited by then

_PERCENT = re.compile(r"\]\[(\d+(?:\.\d+)?)%\]")
_BW = re.compile(r"\]\[([rwt]=[^\]]*B/s[^\]]*)\]")
_IOPS = re.compile(r"\]\[([rwt]=[^\]]*) IOPS\]")
_ETA = re.compile(r"\[eta (?:(\d+)d:)?(?:(\d+)h:)?(\d+)m:(\d+)s\]")


@dataclass(frozen=True)
class Progress:
    """What fio's status line says, roughly once a second."""

    percent: float | None
    eta_s: int | None
    bandwidth: str  # fio's own text, e.g. "r=47.3MiB/s,w=47.5MiB/s"
    iops: str  # e.g. "r=12.1k,w=12.2k"


def parse_status_line(line: str) -> Progress | None:
    if not line.startswith("Jobs:"):
        return None
    pct = _PERCENT.search(line)
    eta = _ETA.search(line)
    bw = _BW.search(line)
    iops = _IOPS.search(line)
    eta_s = None
    if eta:
        d, h, m, s = (int(g) if g else 0 for g in eta.groups())
        eta_s = ((d * 24 + h) * 60 + m) * 60 + s
    return Progress(
        percent=float(pct.group(1)) if pct else None,
        eta_s=eta_s,
        bandwidth=bw.group(1) if bw else "",
        iops=iops.group(1) if iops else "",
    )


def status_feeder(on_progress: Callable[[Progress], None]) -> Callable[[str], None]:
    """A function to give fio's stdout as it arrives, in any pieces: each status line
    becomes a Progress for ``on_progress``."""
    pending = [""]

    def feed(data: str) -> None:
        *lines, pending[0] = re.split(r"[\r\n]", pending[0] + data)
        for line in lines:
            p = parse_status_line(line)
            if p is not None:
                on_progress(p)
    return feed


@dataclass(frozen=True)
class Execution:
    raw_json: str
    stderr: str
    returncode: int
    wall_s: float
    lost_hosts: tuple[str, ...] = ()  # client mode: servers that disconnected mid-run
    timed_out: bool = False  # killed at the deadline


_DISCONNECTED = re.compile(r"host=(\S+) disconnected")


def _start_watchdog(pgid: int) -> subprocess.Popen[str]:
    """A process that kills fio's tree if storbench dies without saying "done"."""
    return subprocess.Popen(
        [sys.executable, "-m", "storbench.execute.proctree", str(pgid)],
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


class LocalExecutor:
    """Runs fio job files with fio on this machine; ``workdir`` holds job and output files."""

    def __init__(self, fio: FioBinary, workdir: Path, guard: SignalGuard) -> None:
        self.fio = fio
        self.workdir = workdir
        self.guard = guard
        self._count = 0

    def validate(self, jobfile_text: str, source: str) -> None:
        """fio --parse-only: ConfigError with fio's own message for an invalid job file."""
        path = self._write(jobfile_text, "check")
        proc = subprocess.run(
            [self.fio.path, "--parse-only", str(path)],
            capture_output=True, text=True, cwd=self.workdir, timeout=60,
        )
        if proc.returncode != 0:
            message = fio_message(proc.stderr + proc.stdout)
            raise ConfigError(f"fio rejects the job file {source}: {message}")

    def _write(self, text: str, stem: str) -> Path:
        self._count += 1
        path = self.workdir / f"{self._count:03d}-{stem}.fio"
        path.write_text(text)
        return path

    def run(
        self, jobfile_text: str, on_progress: Callable[[Progress], None] | None = None
    ) -> Execution:
        """Run one job file to completion and return what fio wrote, whatever its status.

        Raises FioError only when fio cannot be started. If the guard receives a
        signal, fio is stopped (the signal forwarded, SIGKILL after KILL_AFTER_S).
        """
        job_path = self._write(jobfile_text, "job")
        return self._run([str(job_path)], job_path.with_suffix(".json"), on_progress)

    def run_clients(
        self,
        jobs: list[tuple[str, int, str]],
        on_progress: Callable[[Progress], None] | None = None,
        deadline_s: float | None = None,
    ) -> Execution:
        """fio's client mode: each (host, port, job text) runs on that host's fio server,
        all at once. A server that disconnects stops the run (the others are told to
        stop); so does ``deadline_s``."""
        args: list[str] = []
        for host, port, text in jobs:
            path = self._write(text, f"client-{host}-{port}")
            args += [f"--client={host},{port}", str(path)]
        # No --output: in client mode fio reports a lost server in its normal output,
        # which must be read live; the JSON follows on stdout at the end.
        return self._run(args, None, on_progress, deadline_s=deadline_s, stop_on_lost_host=True)

    def _run(
        self,
        args: list[str],
        out_path: Path | None,
        on_progress: Callable[[Progress], None] | None,
        *,
        deadline_s: float | None = None,
        stop_on_lost_host: bool = False,
    ) -> Execution:
        argv = [
            self.fio.path, "--output-format=json+",
            *([f"--output={out_path}"] if out_path is not None else []),
            "--eta=always", "--eta-newline=1", *args,
        ]
        lost: list[str] = []
        timed_out = False
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv, cwd=self.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL, start_new_session=True,
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
                        if progress is not None and on_progress is not None:
                            on_progress(progress)
                self._kill_if_overdue(proc)
                if deadline_s is not None and time.monotonic() - start > deadline_s:
                    timed_out = True
                    kill_tree(proc.pid)
            returncode = self._wait(proc)
        finally:
            sel.close()
            if proc.poll() is None:
                kill_tree(proc.pid)
                proc.wait()
            _stop_watchdog(watchdog)
            self.guard.set_child(None)
        stderr = b"".join(stderr_chunks).decode(errors="replace")
        if out_path is None:
            raw = b"".join(stdout_chunks).decode(errors="replace")
        else:
            raw = out_path.read_text(errors="replace") if out_path.exists() else ""
        wall = time.monotonic() - start
        return Execution(raw, stderr, returncode, wall, tuple(lost), timed_out)

    def _kill_if_overdue(self, proc: subprocess.Popen[bytes]) -> None:
        at = self.guard.received_at
        if at is not None and time.monotonic() - at > KILL_AFTER_S and proc.poll() is None:
            kill_tree(proc.pid)

    def _wait(self, proc: subprocess.Popen[bytes]) -> int:
        while True:
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self._kill_if_overdue(proc)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def fio_message(text: str) -> str:
    """fio's error lines, verbatim, joined; the whole text if none look like errors."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("fio:") or "error" in ln.lower()]
    chosen = list(dict.fromkeys(errors or lines))  # once each, in order
    return " | ".join(chosen[:6]) if chosen else "(fio printed nothing)"
