"""An object store's GETs faster than the link they came over (#59): a cache on this side
of the link answered them (minio/warp#188: a gateway's page cache). A GET rate no link
could carry cannot be caused here (the test servers are on loopback, which states no
speed): the warning is checked on recorded real fio output (tests/data/fio) read as a
GET, and the link's speed is read from a real veth pair the kernel states one for."""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from storbench.analysis.warnings import Kind, compute
from storbench.result.facts import TargetFacts
from storbench.result.fio_json import parse_fio_json
from tests.conftest import needs

DATA = Path(__file__).resolve().parents[1] / "data" / "fio"


def _get(bw_bytes_per_s: float):
    """The recorded randread as an object store's GETs at this rate."""
    _, (result,) = parse_fio_json((DATA / "randread.json").read_text())
    assert result.read is not None
    read = dataclasses.replace(result.read, bw_bytes_per_s=bw_bytes_per_s)
    return dataclasses.replace(result, read=read,
                               options={**result.options, "ioengine": "http"})


def _facts(link: object) -> TargetFacts:
    return TargetFacts.of({"target": {"kind": "directory", "bucket": "b", "link": link}})


def test_gets_faster_than_the_link_are_a_caches():
    ten = _facts({"interface": "eth0", "speed_mbps": 10000})
    (w,) = [w for w in compute(_get(2.0e9), ten) if w.kind == Kind.BEYOND_LINK]
    assert "GETs at 1.9 GiB/s (16.00 Gb/s), more than the 10 Gb/s of eth0" in w.message
    assert "a cache on this side of it answered them" in w.message
    assert w.details == {"gbps": 16.0, "link": "eth0", "link_gbps": 10.0}
    # at the link's speed (framing aside), under it, on a link of no stated speed, or
    # files (not objects): nothing said
    for result, facts in ((_get(1.3e9), ten), (_get(0.5e9), ten),
                          (_get(2.0e9), _facts({"interface": "lo"})),
                          (_get(2.0e9), _facts(None)),
                          (dataclasses.replace(_get(2.0e9), options={}), ten)):
        assert Kind.BEYOND_LINK not in {w.kind for w in compute(result, facts)}


@needs("root")
def test_the_link_to_an_endpoint_is_the_route_s_interface_and_its_speed():
    """A veth pair into a network namespace: the kernel states 10,000 Mb/s for it."""
    from storbench.execute.s3 import link_to

    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and ip(8)")
    ns, here = f"sbt-{secrets.token_hex(3)}", f"sbl{secrets.token_hex(3)}"
    subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    ip("netns", "add", ns)
    try:
        ip("link", "add", here, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("addr", "add", f"{subnet}.1/30", "dev", here)
        ip("link", "set", here, "up")
        assert link_to(f"{subnet}.2") == {"interface": here, "speed_mbps": 10000}
        assert link_to("127.0.0.1") == {"interface": "lo"}
        assert link_to("no-such-host.invalid") == {}
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
