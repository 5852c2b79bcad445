#!/usr/bin/env python3
"""The kubelet's directories of CSI hostpath volumes the driver no longer has.

A pod deleted with grace period 0 goes from the API at once; its claim and volume are
then deleted in the driver while the kubelet still has the volume in the pod's
directory. The kubelet then retries the unmount every 2 min for ever (the driver answers
NotFound), for each such volume: hundreds of them kept a core a quarter busy on the
test-bed and slowed the throttled-volume tests. storbench deletes pods with a grace
period; `scripts/install-csi-hostpath --clean-orphans` removes what older runs left.

    csi_orphans.py KUBELET_PODS_DIR DRIVER_STATE_JSON [--remove]
"""

from __future__ import annotations

import json
import os
import shutil
import sys

DRIVER = "hostpath.csi.k8s.io"


def find(pods: str, state: str, mounted: bool = True) -> list[str]:
    """Volume directories (PODS/UID/volumes/kubernetes.io~csi/PV) of the driver's volumes
    that its state file no longer lists; with ``mounted`` False only those with nothing
    mounted on or below them (while the test-bed runs, such a volume is still mounted: the
    deleted directory; its `down` unmounts it)."""
    try:
        with open(state) as f:
            known = {v["VolID"] for v in json.load(f).get("Volumes") or []}
    except FileNotFoundError:
        return []
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    found = []
    for uid in sorted(os.listdir(pods)) if os.path.isdir(pods) else []:
        csi = os.path.join(pods, uid, "volumes", "kubernetes.io~csi")
        for vol in sorted(os.listdir(csi)) if os.path.isdir(csi) else []:
            d = os.path.join(csi, vol)
            try:
                with open(os.path.join(d, "vol_data.json")) as f:
                    data = json.load(f)
            except (OSError, ValueError):
                continue
            if data.get("driverName") != DRIVER or data.get("volumeHandle") in known:
                continue
            if mounted or not any(m == d or m.startswith(d + "/") for m in mounts):
                found.append(d)
    return found


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[2:] not in ([], ["--remove"]):
        print(__doc__, file=sys.stderr)
        return 2
    remove = argv[2:] == ["--remove"]
    found = find(argv[0], argv[1], mounted=not remove)
    if remove:
        for d in found:
            shutil.rmtree(d)
        if found:
            print(f"install-csi-hostpath: removed {len(found)} kubelet volume director"
                  f"{'y' if len(found) == 1 else 'ies'} the driver no longer has",
                  file=sys.stderr)
    else:
        print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
