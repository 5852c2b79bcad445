"""What a host's session says for `run --explain --hosts` is checked before it goes into a
bpftrace program (execute/hosttrace.py, execute/beneath.place_of), and the hosts' slices,
each on its own clock, are summed over each host's own window. The real tracing on real
sshd hosts: tests/pipeline/test_explain_hosts.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from storbench.errors import TargetError
from storbench.execute import hosttrace, layers
from storbench.execute.beneath import place_of
from storbench.execute.hosttrace import TRACE, HostsTracer, Merged, check
from storbench.execute.ssh import SshHost, Tunnel
from tests.conftest import needs_root

PLACE = {"fs_type": "ext4", "throttle": {"read_iops": 3000},
         "device": {"name": "vda", "dev": 266338304, "part_dev": 266338305,
                    "start_sector": 2048, "backing": None, "backing_fs": None}}


def tunnel(**said: str) -> Tunnel:
    return Tunnel(SshHost("h"), Path("/nonexistent"), said=dict(said))


def able(**changes: str) -> dict[str, str]:
    said = {"trace-machine": "x86_64", "trace-uid": "0", "trace-bpftrace": "yes",
            "trace-place": json.dumps(PLACE), "server": "4242"}
    said.update(changes)
    return {k: v for k, v in said.items() if v != "-"}


def test_a_place_is_numbers_where_the_program_takes_numbers() -> None:
    place = place_of(PLACE)
    assert place.device is not None and place.device.start_sector == 2048
    assert place.throttle == {"read_iops": 3000}
    for bad in ({"dev": '1 } system("id") {'}, {"start_sector": -1}, {"part_dev": 1.5},
                {"dev": True}):
        with pytest.raises(ValueError):
            place_of({**PLACE, "device": {**PLACE["device"], **bad}})
    with pytest.raises(ValueError):
        place_of({**PLACE, "throttle": {"read_iops": "3000; x"}})
    with pytest.raises(ValueError):
        place_of(["not", "a", "place"])


def test_each_host_that_cannot_trace_is_named_with_why() -> None:
    check({"ssh://a": tunnel(**able())})  # nothing lacking: no error
    with pytest.raises(TargetError) as caught:
        check({"ssh://a": tunnel(**able()),
               "ssh://b": tunnel(**able(**{"trace-bpftrace": "-", "trace-uid": "1000"})),
               "ssh://c": tunnel(**able(**{"trace-machine": "mips"})),
               "ssh://d": tunnel(**able(**{"trace-place": '{"device": {"dev": "x"}}'})),
               "ssh://e": tunnel(**able(**{"trace-place": "-", "server": "12; rm"}))})
    said = str(caught.value)
    assert said.startswith("--explain cannot follow fio on 4 of 5 host(s): ")
    assert "ssh://a" not in said and said.endswith("Nothing was started.")
    assert "ssh://b: bpftrace is not installed; the SSH user is not root" in said
    assert "ssh://c: storbench does not know the system calls of mips" in said
    assert "ssh://d: what is beneath the path could not be read" in said
    assert "ssh://e: python3 is not installed" in said and "fio server's PID" in said


def slices(counts: dict[int, int], slice_ns: int = 100) -> layers.Slices:
    """The device layer's I/Os counted in these slices (slice -> count, bucket 5)."""
    device = layers.LAYERS.index("device")
    return layers.Slices(slice_ns, {(device, k): {5: n} for k, n in counts.items()})


def test_the_hosts_are_summed_each_over_its_own_window() -> None:
    """Host 0's clock is 1,000 ns behind this machine's, and its I/O (after its layout, in
    slice 0) ended 300 ns before host 1's: its window is moved back to end with its own
    I/O, the layout left out as the time after it would be."""
    early = slices({0: 1, 1: 5, 2: 5, 3: 5})  # its I/O: 100 to 400 on its clock
    late = slices({13: 1, 14: 7, 15: 7, 16: 7})  # its I/O: 1,400 to 1,700 (this clock)
    merged = Merged([early, late], [1000, 0])
    seen = merged.between(1400, 1700)  # the I/O lasted 300 ns and ended at 1,700 here
    assert seen.layer("device") == {5: 5 + 5 + 5 + 7 + 7 + 7}
    assert merged.span_s(1400, 1700) == pytest.approx(300e-9)


def test_hosts_that_differ_beneath_the_path_are_said() -> None:
    """The sentence names what is beneath the first host's path: where another host has
    something else there, that is said as the run starts."""
    tmpfs = json.dumps({"fs_type": "tmpfs", "device": None, "throttle": {}})
    same = HostsTracer({"ssh://a": tunnel(**able()), "ssh://b": tunnel(**able())}, None)
    assert same.notes == [] and same.place == place_of(PLACE)
    mixed = HostsTracer({"ssh://a": tunnel(**able()),
                         "ssh://b": tunnel(**able(**{"trace-place": tmpfs}))}, None)
    assert mixed.notes == ["--explain: the hosts differ beneath the path (ssh://a: ext4 on"
                           " vda; ssh://b: tmpfs): their layers are summed, and each sentence"
                           " names what is beneath ssh://a's"]


@pytest.mark.parametrize("whole", [True, False])
def test_a_host_trace_killed_after_its_maps_keeps_them(monkeypatch, whole) -> None:
    """A host's bpftrace that does not end when told to (beside two lanes of tests,
    bpftrace once had not exited 30 s after SIGINT): its maps printed whole (the end mark
    after them) are kept, however it ended after; without the mark the host is named and
    why. The process is a named stand-in for ssh running a bpftrace that does not end (a
    fault this machine cannot cause on purpose): a shell that prints what the host's
    trace prints, then ignores SIGINT and the line that tells it to stop."""
    monkeypatch.setattr(layers, "STOP_S", 1.0)
    monkeypatch.setattr(hosttrace, "SLACK_S", 0.0)
    token = "0123456789abcdef"
    maps = "@h[3, 11, 40]: 7\n@h[3, 12, 41]: 2\n"
    printed = f"{token} B 1000\n{maps}" + (f"{token} E\n" if whole else "")
    tracer = HostsTracer({"ssh://a": tunnel(**able())}, None)
    trace = tracer.trace(None)
    proc = subprocess.Popen(["sh", "-c", 'trap "" INT; printf %s "$1"; exec sleep 600', "sh",
                             printed], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    trace.sessions.append(trace._follow(tracer.hosts[0], proc, token))
    assert trace.sessions[0].began.wait(10)
    trace.__exit__(None, None, None)
    assert proc.returncode == -signal.SIGKILL  # it was killed
    if whole:
        assert trace.error is None and trace.slices is not None
        assert trace.slices.parts[0].hist == {(3, 11): {40: 7}, (3, 12): {41: 2}}
    else:
        assert trace.slices is None
        assert trace.error is not None and trace.error.startswith(
            "ssh://a: bpftrace did not end within 1 s of being asked to (its maps not"
            " printed whole): the test's figures stand")


@needs_root  # (tracefs, which the script looks for, is root's to read)
def test_a_hosts_bpftrace_that_does_not_end_is_killed_there(tmp_path) -> None:
    """The script a host runs (TRACE) tells bpftrace to stop when storbench's line or
    connection ends, and kills it if it has not ended the given seconds after: nothing
    is left on the host when storbench, killed, no longer waits. Run here with a named
    stand-in for a bpftrace that does not end (first on PATH: a shell that prints a map,
    then ignores SIGINT)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "bpftrace"
    # (a loop, not `exec sleep`: its command line, which names bin_dir, stays while it runs)
    stub.write_text('#!/bin/sh\ntrap "" INT\necho "@h[3, 11, 40]: 7"\n'
                    'while :; do sleep 1; done\n')
    stub.chmod(0o755)
    started = time.monotonic()
    proc = subprocess.Popen(["sh", "-c", TRACE, "sh", "END {}", "100", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "@h[3, 11, 40]: 7\n"
        assert proc.stdin is not None
        proc.stdin.close()  # the connection ended
        proc.wait(timeout=30)
        assert proc.returncode == 128 + signal.SIGKILL  # killed there, 2 s after
        assert 2 <= time.monotonic() - started < 20
        left = subprocess.run(["pgrep", "-f", str(bin_dir)], capture_output=True, text=True)
        assert left.stdout == ""  # the stand-in is gone
    finally:
        subprocess.run(["pkill", "-KILL", "-f", str(bin_dir)], check=False)
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
