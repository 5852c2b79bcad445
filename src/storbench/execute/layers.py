"""Where an I/O's time went, from the kernel's own tracepoints (``run --explain``).

While fio runs a test, a bpftrace program follows fio (every process and thread this one
starts from then on, whose name is fio) and times each of its I/Os through the layers the
kernel passes it through, from tracepoints only (this kernel offers no kprobes):

- ``fs``: the system call's entry (raw_syscalls:sys_enter) to its first bio queued
  (block:block_bio_queue in fio's own thread; or, for a bio the block layer held back,
  the file system mapping it to the disk, iomap:iomap_iter_dstmap): the file system and
  submission (page cache, journal, locks, allocation);
- ``throttle``: that mapping to the bio queued from another thread (blk-throttle, a
  cgroup's I/O limit, let it go from a worker); 0 for a bio queued by fio itself;
- ``queue``: the bio queued to its request issued (block:block_rq_issue): the scheduler,
  the device's tags;
- ``device``: issued to completed (block:block_rq_complete);
- ``between``: for the calls that wait for their I/O, from a completion of the call's own
  I/O to its next bio queued (mapped, for one blk-throttle holds): waking fio up after one
  and the file system making the next (an fdatasync's cache flush after its page);
- ``completion``: the last completion to the system call's return, for the calls that
  wait for their I/O (not io_submit or io_uring_enter): waking fio up, its CPU;
- ``call_bio`` and ``call_nobio``: the whole system call, of the calls that queued a bio
  on the device and of those that queued none (a page-cache hit, tmpfs, a FUSE request);
- ``remote``: on a FUSE file system (sshfs, s3fs, …), per call, the time its requests
  waited for the file system's daemon to answer (fuse:fuse_request_send in fio's thread
  to fuse:fuse_request_end): the daemon and what is behind it, a network's round trips;
- ``journal``: per fsync, fdatasync or sync_file_range, the file system's journal commit
  (ext4's, jbd2's) or log write (xfs's) it waited for (execute/journals.py).

Each is a histogram in the kernel (8 buckets per power of two: a percentile within 6%),
per kind of call (a sync's time and its I/O apart from the other calls': a test that
writes and syncs has its syncs' layers set beside its sync p99, not its writes'), per
slice of time, so that the time fio spent laying out its files before its measured
I/O is left out (analysis/explain.py reads the slices of the measured I/O). The block
layer's events count for the device beneath the target's path only (the whole disk of a
partition). Root only; bpftrace needs tracefs (mounted, where it is not, in a mount
namespace of bpftrace's own, as for `record`).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, StorbenchError
from storbench.execute import journals
from storbench.execute.beneath import Place
from storbench.execute.bpfcapture import NUMBERS, bpftrace_path, launch
from storbench.execute.capcount import Counted, Sampler
from storbench.execute.followed import threads

LAYERS = ("fs", "throttle", "queue", "device", "completion", "call_bio", "call_nobio",
          "remote", "journal", "between")  # (a layer's number is its place: new ones last)
READY_S = 60.0  # how long bpftrace may take to attach its probes
STOP_S = 60.0  # and to print its maps and end, once asked (SIGINT)
KEYS_MAX = 65536  # bpftrace's map size: buckets × slices × layers (× 2 kinds) must fit
SLICES = 150  # a test's I/O is cut into about this many slices of time (≥ 100 ms each)
MIN_SLICE_NS = 100_000_000
# the calls fio makes for its I/O; those that wait for it (completion is timed for them)
CALLS = ("read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
         "preadv2", "pwritev2", "fsync", "fdatasync", "sync_file_range")
SYNCS = ("fsync", "fdatasync", "sync_file_range")  # those that may wait for a journal
# a sync's time and its I/O are counted apart from the other calls', under a layer's
# number plus SYNC (a test that writes and syncs: its sync p99 is set beside its syncs'
# layers, not its writes')
SYNC = 16
ASYNC_CALLS = {"x86_64": {"io_submit": 209, "io_uring_enter": 426},
               "aarch64": {"io_submit": 2, "io_uring_enter": 426}}
# bpftrace 0.17 (Debian 12's) forgets a SIGINT that comes while it is not waiting for
# events: its handler sets a flag that only an event or a wait cut short reads, and one
# that came as its 100 ms wait had timed out (it had not yet run again) is never read, so
# it runs on until killed. The kernel's own tracepoint of the signal, raised in the
# sender's call, has it call exit(): an event, read however the signal fell.
STOPPED = ("tracepoint:signal:signal_generate /args->sig == 2 && args->pid == @self/"
           " { exit(); }")
_ENTRY = re.compile(r"^@h\[(\d+), (\d+), (\d+)\]: (\d+)$")
_BYTES = re.compile(r"^@b\[(\d+), (\d+)\]: (\d+)$")


def _bucket(var: str, into: str, tag: str) -> str:
    """bpftrace statements: ``into`` = the histogram bucket of ``var`` (ns): values below
    16 as they are, then 8 buckets per power of two (analysis/buckets.bucket_value)."""
    x, m = f"$x{tag}", f"$m{tag}"
    return (f"{x} = {var}; {m} = 0;"
            f" if ({x} >= 0x100000000) {{ {x} = {x} >> 32; {m} = {m} + 32; }}"
            f" if ({x} >= 0x10000) {{ {x} = {x} >> 16; {m} = {m} + 16; }}"
            f" if ({x} >= 0x100) {{ {x} = {x} >> 8; {m} = {m} + 8; }}"
            f" if ({x} >= 0x10) {{ {x} = {x} >> 4; {m} = {m} + 4; }}"
            f" if ({x} >= 4) {{ {x} = {x} >> 2; {m} = {m} + 2; }}"
            f" if ({x} >= 2) {{ {m} = {m} + 1; }}"
            f" {into} = {var}; if ({m} >= 3) {{ {into} = ({m} - 2) * 8"
            f" + (({var} >> ({m} - 3)) & 7); }}")


def _timed(layer: str, var: str, slice_ns: int, tag: str, kind: str = "") -> str:
    """Count ``var`` (ns) in ``layer``'s histogram of this slice; with ``kind`` (a
    variable: SYNC for a sync's I/O, else 0), under the layer's number of that kind."""
    n = LAYERS.index(layer)
    key = f"{n} + {kind}" if kind else str(n)
    return _bucket(var, f"$b{tag}", tag) + f" @h[{key}, nsecs / {slice_ns}, $b{tag}] = count();"


def program(token: str, seeds: list[int], place: Place, machine: str,
            slice_ns: int) -> str:
    """The bpftrace program for fio's I/O under ``place`` (docstring above). Few map
    operations per I/O (each costs ~0.1 µs, and a call on tmpfs takes ~1.3 µs): a call's
    entry in @in (sync) or @ai (async), deleted at its return, and a sync's kind in @sy; a
    bio's times in @qt and @it (twice the time, plus 1 for a sync's bio: its kind travels
    with them, no map of its own); the time of a thread's
    first bio and last completion kept per thread (@q1, @done: compared with @in, never
    reset); the file system's mapping (@pend) followed only where a cgroup throttles the
    device."""
    numbers = NUMBERS[machine]
    sync_ids = sorted(numbers[c] for c in CALLS if c in numbers)
    async_ids = sorted(ASYNC_CALLS[machine].values())
    any_sync = " || ".join(f"$id == {n}" for n in sync_ids)
    any_async = " || ".join(f"$id == {n}" for n in async_ids)
    seeded = " ".join(f"@t[{t}] = 1;" for t in seeds)
    d = place.device
    journal = place.journal  # where a sync may wait for a journal (execute/journals.py)
    any_flush = " || ".join(f"$id == {numbers[c]}" for c in SYNCS if c in numbers)
    # (a call's kind, @sy: SYNC for a sync, none for the others)
    end_call = " if ($k) { delete(@sy[tid]); } delete(@in[tid]);"
    lines = [
        # its clock (hosttrace), and its own PID: the SIGINT that asks it to stop ends it
        # through exit() (STOPPED)
        f'BEGIN {{ {seeded} @self = pid; printf("{token} B %lld\\n", nsecs); }}',
        STOPPED,
        "tracepoint:sched:sched_process_fork /@t[args->parent_pid]/"
        " { @t[args->child_pid] = 1; }",
        "tracepoint:sched:sched_process_exit /@t[tid]/ { delete(@t[tid]); }",
        'tracepoint:raw_syscalls:sys_enter /@t[tid]/ { $id = args->id;'
        f' if (comm == "fio") {{ if ({any_sync}) {{ @in[tid] = nsecs;'
        f" if ({any_flush}) {{ @sy[tid] = {SYNC}; }}" + " }"
        + (f" else {{ if ({any_async}) {{ @ai[tid] = nsecs; }} }}" if d is not None else "")
        + " } }",
    ]
    slice_of = f"nsecs / {slice_ns}"
    if d is not None:
        held = bool(place.throttle)  # blk-throttle may queue fio's bios from its worker
        start = "$st"
        lines += [
            # a bio of fio's, mapped to the disk by the file system in fio's thread: the
            # block layer may hold it back and queue it from a worker (blk-throttle)
            f"tracepoint:iomap:iomap_iter_dstmap /@t[tid] && args->bdev == {d.part_dev}/ {{"
            f" $s = (args->addr >> 9) + {d.start_sector}; @pend[$s] = nsecs;"
            " @pendtid[$s] = tid; }" if held else "",
            f"tracepoint:block:block_bio_queue /args->dev == {d.dev}/ {{ $s = args->sector;"
            # (a sync's kind read only for a sync engine's call: io_submit's is never one)
            f" {start} = @in[tid]; $k = 0; $c = 0; if ({start} == 0) {{ {start} = @ai[tid]; }}"
            " else { $k = @sy[tid]; $c = 1; }"
            f" if ({start}) {{"
            f"  if (@q1[tid] < {start}) {{ @q1[tid] = nsecs; $v = nsecs - {start};"
            f"  {_timed('fs', '$v', slice_ns, 'a', '$k')} }}"
            # (a later bio of a call that waits for its I/O, after one of its own completed;
            # nested, so that an async call's bio reads no map for it)
            f"  else {{ if ($c) {{ if (@done[tid] > @q1[tid]) {{ $g = nsecs - @done[tid];"
            f"  {_timed('between', '$g', slice_ns, 'e', '$k')} }} }} }}"
            f"  @own[$s] = tid; @qt[$s] = nsecs * 2 + $k / {SYNC};"
            + (" if (@pend[$s]) { delete(@pend[$s]); delete(@pendtid[$s]); } }"
               " else { if (@pend[$s]) { $o = @pendtid[$s]; $w = nsecs - @pend[$s];"
               " $h = @sy[$o];"
               f"  {_timed('throttle', '$w', slice_ns, 'b', '$h')}"
               "  $so = @in[$o]; if ($so == 0) { $so = @ai[$o]; }"
               "  if ($so && @q1[$o] < $so) { @q1[$o] = nsecs; $f = @pend[$s] - $so;"
               f"  {_timed('fs', '$f', slice_ns, 'c', '$h')} }}"
               "  else { if (@in[$o]) { $d = @done[$o];"
               "  if ($d > @q1[$o] && @pend[$s] > $d) { $g = @pend[$s] - $d;"
               f"  {_timed('between', '$g', slice_ns, 'f', '$h')} }} }} }}"
               f"  @own[$s] = $o; @qt[$s] = nsecs * 2 + $h / {SYNC}; delete(@pend[$s]);"
               " delete(@pendtid[$s]);"
               " } } }" if held else " } }"),
            f"tracepoint:block:block_rq_issue /args->dev == {d.dev} && @qt[args->sector]/ {{"
            f" $s = args->sector; $q = @qt[$s]; $k = ($q & 1) * {SYNC}; $v = nsecs - $q / 2;"
            f" {_timed('queue', '$v', slice_ns, 'a', '$k')} @it[$s] = nsecs * 2 + ($q & 1);"
            " delete(@qt[$s]); }",
            f"tracepoint:block:block_rq_complete /args->dev == {d.dev} && @it[args->sector]/ {{"
            f" $s = args->sector; $q = @it[$s]; $k = ($q & 1) * {SYNC}; $v = nsecs - $q / 2;"
            f" {_timed('device', '$v', slice_ns, 'a', '$k')}"
            " @done[@own[$s]] = nsecs;"
            f' if (strncmp(args->rwbs, "R", 1) == 0) {{ @b[0, {slice_of}] ='
            " sum(args->nr_sector * 512); }"
            f" else {{ @b[1, {slice_of}] = sum(args->nr_sector * 512); }}"
            " delete(@it[$s]); delete(@own[$s]); }",
            *journals.probes(journal, d.part_dev),
            "tracepoint:raw_syscalls:sys_exit /@ai[tid]/ { delete(@ai[tid]); }",
            "tracepoint:raw_syscalls:sys_exit /@in[tid]/ { $e = nsecs; $i = @in[tid];"
            " $v = $e - $i; $k = @sy[tid];"
            f" if (@q1[tid] > $i) {{ {_timed('call_bio', '$v', slice_ns, 'a', '$k')}"
            "  if (@done[tid] > $i) { $w = $e - @done[tid];"
            f"  {_timed('completion', '$w', slice_ns, 'b', '$k')} }} }}"
            f" else {{ {_timed('call_nobio', '$v', slice_ns, 'c', '$k')} }}"
            + journals.waited(journal, _timed("journal", "$j", slice_ns, "d", "$k"))
            + end_call + " }",
        ]
        left = ("clear(@t); clear(@in); clear(@sy); clear(@ai); clear(@q1); clear(@done);"
                " clear(@own); clear(@qt); clear(@it);"
                + (" clear(@pend); clear(@pendtid);" if held else "")
                + journals.cleared(journal))
        printed = "print(@h); print(@b); clear(@h); clear(@b);"
    elif (place.fs_type or "").startswith("fuse"):  # no block device: FUSE's requests
        # sent in fio's call, answered by the daemon (in its own thread: by request id)
        lines += [
            "tracepoint:fuse:fuse_request_send /@in[tid]/ { @fs[args->unique] = nsecs;"
            " @fo[args->unique] = tid; }",
            "tracepoint:fuse:fuse_request_end /@fs[args->unique]/ { $u = args->unique;"
            " $o = @fo[$u]; @fw[$o] = @fw[$o] + nsecs - @fs[$u]; delete(@fs[$u]);"
            " delete(@fo[$u]); }",
            "tracepoint:raw_syscalls:sys_exit /@in[tid]/ { $v = nsecs - @in[tid]; $k = @sy[tid];"
            f" {_timed('call_nobio', '$v', slice_ns, 'c', '$k')}"
            " if (@fw[tid]) { $w = @fw[tid];"
            f" {_timed('remote', '$w', slice_ns, 'd', '$k')} delete(@fw[tid]); }}"
            + end_call + " }",
        ]
        left = "clear(@t); clear(@in); clear(@sy); clear(@fs); clear(@fo); clear(@fw);"
        printed = "print(@h); clear(@h);"
    else:  # nothing reaches a block device: every call is whole, with none
        lines.append("tracepoint:raw_syscalls:sys_exit /@in[tid]/ { $v = nsecs - @in[tid];"
                     f" $k = @sy[tid]; {_timed('call_nobio', '$v', slice_ns, 'c', '$k')}"
                     + end_call + " }")
        left = "clear(@t); clear(@in); clear(@sy);"
        printed = "print(@h); clear(@h);"
    # bpftrace prints every map left when it ends: only the histograms and bytes; then
    # the token's end mark: all of them were printed (ended_whole)
    lines.append(f'END {{ clear(@self); {left} {printed} printf("{token} E\\n"); }}')
    return "\n".join(line for line in lines if line) + "\n"


@dataclass
class Slices:
    """What the program counted, per slice of time (its number: monotonic ns // slice_ns)."""

    slice_ns: int
    hist: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)  # (layer, slice)
    bytes: dict[tuple[int, int], int] = field(default_factory=dict)  # (0 read / 1 write, slice)
    keys: int = 0

    def between(self, start_ns: int, end_ns: int) -> Slices:
        """The slices that lie within [start_ns, end_ns] (monotonic), a partial one at the
        start left out (it holds the layout's end)."""
        first = -(-start_ns // self.slice_ns)
        last = end_ns // self.slice_ns
        keep = range(first, last + 1)
        return Slices(self.slice_ns,
                      {k: v for k, v in self.hist.items() if k[1] in keep},
                      {k: v for k, v in self.bytes.items() if k[1] in keep}, self.keys)

    def span_s(self, start_ns: int, end_ns: int) -> float:
        """How long of [start_ns, end_ns] the slices ``between`` them keep cover (s)."""
        first = -(-start_ns // self.slice_ns) * self.slice_ns
        return max(0.0, (end_ns - first) / 1e9)

    def layer(self, name: str, kind: int | None = None) -> dict[int, int]:
        """A layer's histogram (bucket -> count), over the slices: of every call, or of
        one ``kind`` of them (SYNC: the syncs'; 0: the others')."""
        n = LAYERS.index(name)
        wanted = {n, n + SYNC} if kind is None else {n + kind}
        merged: dict[int, int] = {}
        for (layer, _), buckets in self.hist.items():
            if layer in wanted:
                for b, c in buckets.items():
                    merged[b] = merged.get(b, 0) + c
        return merged

    def device_bytes(self, direction: int) -> int:
        return sum(v for (d, _), v in self.bytes.items() if d == direction)


def parse(text: str, slice_ns: int) -> Slices:
    found = Slices(slice_ns)
    for line in text.splitlines():
        if m := _ENTRY.match(line):
            key = (int(m[1]), int(m[2]))
            found.hist.setdefault(key, {})[int(m[3])] = int(m[4])
            found.keys += 1
        elif m := _BYTES.match(line):
            found.bytes[(int(m[1]), int(m[2]))] = int(m[3])
    return found


def slice_ns(expected_s: float | None) -> int:
    """How long a slice of a test's trace lasts: about SLICES of them over the test (60 s
    when its length is not known), MIN_SLICE_NS at least."""
    return max(MIN_SLICE_NS, int(max(expected_s or 60.0, 1.0) * 1e9 / SLICES))


def usable() -> str | None:
    """Why --explain cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "--explain needs root (it loads programs into the kernel)"
    if bpftrace_path() is None:
        return "--explain needs bpftrace (Debian/Ubuntu: apt install bpftrace)"
    if os.uname().machine not in NUMBERS:
        return f"--explain: storbench does not know the system calls of {os.uname().machine}"
    return None


class LayerTrace:
    """bpftrace following fio while one test runs: ``with LayerTrace(place, s): ...``, then
    ``slices``."""

    def __init__(self, place: Place, expected_s: float | None, directory: Path) -> None:
        why = usable()
        if why is not None:
            raise ConfigError(why)
        self.place = place
        self.slice_ns = slice_ns(expected_s)
        self.directory = directory
        self.slices: Slices | None = None
        self.error: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        # a cgroup's cap on the device: what it let through, read every slice
        self._sampler = Sampler(place.counter, self.slice_ns / 1e9) if place.counter else None
        self.counted: Counted | None = None

    def __enter__(self) -> LayerTrace:
        self._token = token = secrets.token_hex(8)
        prog = self.directory / "layers.bt"
        seeds = [t for t in threads(os.getpid())] or [os.getpid()]
        prog.write_text(program(token, seeds, self.place, os.uname().machine, self.slice_ns))
        self._out = self.directory / "layers.out"
        self._err = self.directory / "layers.err"
        with self._out.open("w") as out, self._err.open("w") as err:
            self._proc = launch(str(bpftrace_path()), prog, out, err,
                                {"BPFTRACE_MAP_KEYS_MAX": str(KEYS_MAX)})
        self._wait_ready(token)
        if self._sampler is not None:
            self._sampler.start()
        return self

    def _wait_ready(self, token: str) -> None:
        assert self._proc is not None
        mark = f"{token} B".encode()
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if mark in self._out.read_bytes():
                return
            if self._proc.poll() is not None:
                words = said(self._err.read_text(errors="replace").strip())
                raise StorbenchError(f"--explain: bpftrace could not start: "
                                     f"{words or 'no message'}")
            time.sleep(0.05)
        self._stop()
        raise StorbenchError(f"--explain: bpftrace did not attach within {READY_S:g} s")

    def __exit__(self, *exc: Any) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self.counted = self._sampler.counted
        code = self._stop()
        text = self._out.read_text(errors="replace")
        if code not in (0, None) and not ended_whole(text, self._token):
            self.error = (not_ended("machine") if code == -signal.SIGKILL else
                          f"bpftrace ended with {code}: {said(self._err.read_text())}")
            return
        self.slices = parse(text, self.slice_ns)
        if self.slices.keys >= KEYS_MAX * 0.95:
            self.error = ("bpftrace's histogram map filled (more buckets and slices than"
                          f" {KEYS_MAX:,}): the explanation would be incomplete")
            self.slices = None

    def _stop(self) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # it runs END: prints the maps, then exits
            try:
                proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None
        return proc.returncode


def ended_whole(text: str, token: str) -> bool:
    """Whether bpftrace printed every map at its end (the program's end mark follows
    them): then what it printed is whole, even where it was killed after (beside two
    lanes of tests here, bpftrace once had not exited 30 s after SIGINT: see STOPPED)."""
    return f"{token} E" in text


def not_ended(where: str) -> str:
    """Why a trace killed before its maps were printed whole explains nothing, and what to
    do (``where``: "machine", "host")."""
    return (f"bpftrace did not end within {STOP_S:g} s of being asked to (its maps not"
            " printed whole): the test's figures stand, its explanation is missing; run it"
            f" again with --explain when the {where} is less busy")


def said(text: str) -> str:
    """bpftrace's message, without its warnings about what it does not need."""
    kept = [line.strip() for line in text.splitlines() if "ERROR" in line
            and "RLIMIT_MEMLOCK" not in line and "available_filter_functions" not in line]
    return " ".join(kept)[-400:] or text.strip()[-400:]
