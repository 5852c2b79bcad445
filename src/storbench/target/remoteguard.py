"""The block device guard on hosts reached over SSH (``run /dev/X --hosts ssh://…``).

The guard that decides for a local device (target/blockguard.py) runs on each host
itself: its source is sent to ``python3 -`` over SSH, so every host is judged by the
same code, on what that host's kernel says (its mounts, swap, holders, an exclusive
open, ``blkid -p``). Its findings, decision and the device's facts come back as JSON,
each host's device a ``device.Seen``. A host refuses (or cannot be asked): the whole run
is refused, naming the host and why, before any fio starts anywhere (device.Device.judge).
"""

from __future__ import annotations

import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from storbench.errors import TargetError
from storbench.execute.ssh import SshHost, run_remote
from storbench.target import blockguard
from storbench.target.device import Seen, seen_in

GUARD_S = 60.0  # ssh login, then the probe (blkid on a slow device)


def report(host: SshHost, config: str | None, device: str, writes: bool,
           destructive: str | None) -> dict[str, Any]:
    """The guard's report for ``device`` on ``host`` (blockguard.report, run there);
    TargetError when the host cannot be asked."""
    source = Path(blockguard.__file__).read_text()
    args = [device, "1" if writes else "0", *([destructive] if destructive else [])]
    try:
        out = run_remote(host, config, "python3 - " + shlex.join(args), source, GUARD_S)
        answer: dict[str, Any] = json.loads(out)
    except TargetError as exc:
        raise TargetError(f"{exc} (the block device guard runs on the host: it needs"
                          " python3 there)") from None
    except ValueError:
        raise TargetError(f"{host.key}: the block device guard answered no JSON:"
                          f" {out.strip()[:200]!r}") from None
    return answer


def look_all(hosts: list[SshHost], config: str | None, device: str, writes: bool,
             destructive: str | None) -> list[Seen]:
    """Every host's device at once, as its guard saw it; a host that cannot be asked
    refuses, saying why."""
    def one(host: SshHost) -> Seen:
        try:
            return seen_in(report(host, config, device, writes, destructive), host.key,
                           host.key)
        except TargetError as exc:
            return Seen(host.key, device, (), {}, str(exc).removeprefix(f"{host.key}: "),
                        host.key)

    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return list(pool.map(one, hosts))
