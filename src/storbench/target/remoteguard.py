"""The block device guard on hosts reached over SSH (``run /dev/X --hosts ssh://…``).

The guard that decides for a local device (target/blockguard.py) runs on each host
itself: its source is sent to ``python3 -`` over SSH, so every host is judged by the
same code, on what that host's kernel says (its mounts, swap, holders, an exclusive
open, ``blkid -p``). Its findings, decision and the device's facts come back as JSON.
A host refuses: the whole run is refused, naming the host and why, before any fio
starts anywhere.
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

GUARD_S = 60.0  # ssh login, then the probe (blkid on a slow device)


def judge(host: SshHost, config: str | None, device: str, writes: bool,
          destructive: str | None) -> dict[str, Any]:
    """The guard's report for ``device`` on ``host``; TargetError when it refuses."""
    source = Path(blockguard.__file__).read_text()
    args = [device, "1" if writes else "0", *([destructive] if destructive else [])]
    try:
        out = run_remote(host, config, "python3 - " + shlex.join(args), source, GUARD_S)
        report: dict[str, Any] = json.loads(out)
    except TargetError as exc:
        raise TargetError(f"{exc} (the block device guard runs on the host: it needs"
                          " python3 there)") from None
    except ValueError:
        raise TargetError(f"{host.key}: the block device guard answered no JSON:"
                          f" {out.strip()[:200]!r}") from None
    decision = report["decision"]
    if not decision["allowed"]:
        raise TargetError(f"{host.key}: {decision['reason']}")
    return report


def judge_all(hosts: list[SshHost], config: str | None, device: str, writes: bool,
              destructive: str | None) -> dict[str, dict[str, Any]]:
    """Every host at once: {host key: report}; TargetError naming each host that
    refuses (or cannot be asked)."""
    def one(host: SshHost) -> tuple[str, dict[str, Any] | None, str]:
        try:
            return host.key, judge(host, config, device, writes, destructive), ""
        except TargetError as exc:
            return host.key, None, str(exc)

    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        answers = list(pool.map(one, hosts))
    refused = [why for _, report, why in answers if report is None]
    if refused:
        raise TargetError(f"{len(refused)} of {len(hosts)} host(s) refuse {device}: "
                          + "; ".join(refused) + ". Nothing was started.")
    return {key: report for key, report, _ in answers if report is not None}
