"""What a host's session says for `run --explain --hosts` is checked before it goes into a
bpftrace program (execute/hosttrace.py, execute/beneath.place_of), and the hosts' slices,
each on its own clock, are summed over each host's own window. The real tracing on real
sshd hosts: tests/pipeline/test_explain_hosts.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storbench.errors import TargetError
from storbench.execute import layers
from storbench.execute.beneath import place_of
from storbench.execute.hosttrace import HostsTracer, Merged, check
from storbench.execute.ssh import SshHost, Tunnel

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
