"""The guard between storbench and a block device: what is on it, and whether fio may
touch it. One wrong letter in a device name destroys a machine: this decides.

A device is refused, always, when it (or a partition of it, or what is built on it)
is mounted, is swap, is held by device-mapper, md-raid or LVM, or the kernel will not
let us open it exclusively (in use, in any mount namespace). Writing is refused
unless the user named the device again with ``--destructive DEVICE``; that flag
overrides the signature checks only (a file system, a partition table, an LVM, RAID
or ZFS member found by ``blkid -p``), never the in-use ones.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYS_BLOCK = Path("/sys/class/block")


@dataclass(frozen=True)
class Findings:
    """What is on a device and who uses it."""

    given: str  # as the user wrote it
    device: str  # /dev/NAME, symlinks resolved
    name: str  # the kernel's name: loop3, vda, nvme0n1p2
    is_block: bool
    dev_t: tuple[int, int] | None = None
    mounted: list[str] = field(default_factory=list)  # "/dev/loop3p1 at /mnt"
    swap: list[str] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)  # dm-0 (vg-lv), md127
    busy: str = ""  # the kernel refused an exclusive open: why
    unopenable: str = ""  # it could not be opened at all (permissions): why
    signatures: list[str] = field(default_factory=list)  # "ext4 file system", "dos partitions"
    partitions: list[str] = field(default_factory=list)

    @property
    def in_use(self) -> list[str]:
        return ([f"mounted: {m}" for m in self.mounted] + [f"swap: {s}" for s in self.swap]
                + [f"held by {h}" for h in self.holders] + ([self.busy] if self.busy else []))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # one line: why not, or what is allowed


def inspect(given: str) -> Findings:
    """Look at the device a path names (symlinks such as /dev/disk/by-id/… resolved)."""
    device = os.path.realpath(given)
    try:
        st = os.stat(device)
    except OSError:
        return Findings(given, device, Path(device).name, is_block=False)
    if not stat.S_ISBLK(st.st_mode):
        return Findings(given, device, Path(device).name, is_block=False)
    dev_t = (os.major(st.st_rdev), os.minor(st.st_rdev))
    name = _sys_name(dev_t) or Path(device).name
    family = _family(name)  # the device, its partitions, and what is built on them
    numbers = {n: _dev_t(n) for n in family}
    return Findings(
        given, device, name, True, dev_t,
        mounted=_mounted({v: k for k, v in numbers.items() if v is not None}),
        swap=_swap(set(family)),
        holders=[_holder_name(h) for n in [name, *_partitions(name)] for h in _holders(n)],
        busy=busy if (busy := _exclusive_open(device)).startswith("the kernel") else "",
        unopenable=busy if busy and not busy.startswith("the kernel") else "",
        signatures=signatures(device),
        partitions=_partitions(name))


def decide(f: Findings, *, writes: bool, destructive: str | None) -> Decision:
    """Whether fio may run on the device: reading, or writing (``writes``)."""
    if not f.is_block:
        return Decision(False, f"{f.given} is not a block device")
    if f.in_use:
        return Decision(False, f"{f.given} ({f.device}) is in use, storbench never touches it:"
                               f" {'; '.join(f.in_use)}")
    if f.unopenable:
        return Decision(False, f"{f.given} ({f.device}): {f.unopenable}")
    if not writes:
        return Decision(True, f"reading {f.device} (fio is run with --readonly)")
    if destructive is None:
        found = f"; it holds: {', '.join(f.signatures)}" if f.signatures else ""
        return Decision(False, f"writing to {f.given} destroys what is on it{found}: name it"
                               f" again with --destructive {f.given} to allow it")
    if os.path.realpath(destructive) != f.device:
        return Decision(False, f"--destructive names {destructive}"
                               f" ({os.path.realpath(destructive)}), not the target {f.given}"
                               f" ({f.device}): name the same device")
    found = ", ".join(f.signatures) or "no signature (blank)"
    return Decision(True, f"writing to {f.device}, allowed by --destructive; found on it:"
                          f" {found}")


def _sys_name(dev_t: tuple[int, int]) -> str | None:
    link = Path(f"/sys/dev/block/{dev_t[0]}:{dev_t[1]}")
    try:
        return link.resolve().name
    except OSError:
        return None


def _dev_t(name: str) -> tuple[int, int] | None:
    try:
        major, minor = (SYS_BLOCK / name / "dev").read_text().strip().split(":")
    except (OSError, ValueError):
        return None
    return int(major), int(minor)


def _partitions(name: str) -> list[str]:
    base = SYS_BLOCK / name
    try:
        return sorted(p.name for p in base.iterdir() if (p / "partition").exists())
    except OSError:
        return []


def _holders(name: str) -> list[str]:
    try:
        return sorted(p.name for p in (SYS_BLOCK / name / "holders").iterdir())
    except OSError:
        return []


def _holder_name(name: str) -> str:
    try:
        dm = (SYS_BLOCK / name / "dm" / "name").read_text().strip()
        return f"{name} ({dm})"
    except OSError:
        return name


def _family(name: str) -> list[str]:
    """The device, its partitions, and everything stacked on them (dm, md), by name."""
    out, todo = [], [name]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out.append(n)
        todo += _partitions(n) + _holders(n)
    return out


def _mounted(by_dev: dict[tuple[int, int], str]) -> list[str]:
    """Where the device or its family is mounted; unknown counts as mounted (the guard
    fails closed)."""
    out: list[str] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        return [f"unknown: cannot read /proc/self/mountinfo ({exc.strerror})"]
    for line in lines:
        parts = line.split()
        try:
            major, minor = (int(x) for x in parts[2].split(":"))
        except (IndexError, ValueError):
            continue
        if (major, minor) in by_dev:
            where = parts[4].replace("\\040", " ")
            out.append(f"/dev/{by_dev[(major, minor)]} at {where}")
    return out


def _swap(names: set[str]) -> list[str]:
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError as exc:
        return [f"unknown: cannot read /proc/swaps ({exc.strerror})"]
    out = []
    for line in lines:
        path = line.split()[0] if line.split() else ""
        real = os.path.realpath(path)
        if Path(real).name in names:
            out.append(path)
    return out


def _exclusive_open(device: str) -> str:
    """The kernel's own word on whether anything holds the device (O_EXCL on a block
    device fails with EBUSY when it is mounted anywhere, swap, or claimed)."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_EXCL)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return "the kernel reports it busy (mounted or claimed, maybe in another namespace)"
        return f"cannot open it: {exc.strerror}"
    os.close(fd)
    return ""


def signatures(device: str) -> list[str]:
    """What blkid's low-level probe finds: file systems, partition tables, RAID, LVM and
    ZFS members, swap."""
    try:
        proc = subprocess.run(["blkid", "-p", "-o", "export", device], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"unknown: blkid could not probe it ({exc})"]
    if proc.returncode == 2 and not proc.stderr.strip():  # nothing found
        return []
    if proc.returncode != 0:
        return [f"unknown: blkid -p failed ({proc.stderr.strip() or proc.returncode})"]
    values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    found = []
    if "TYPE" in values:
        usage = values.get("USAGE", "")
        kind = {"filesystem": "file system", "raid": "RAID/LVM/ZFS member",
                "crypto": "encrypted volume", "other": "signature"}.get(usage, "signature")
        found.append(f"{values['TYPE']} {kind}")
    if "PTTYPE" in values:
        found.append(f"{values['PTTYPE']} partition table")
    return found or ["a signature blkid could not name"]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def device_facts(name: str) -> dict[str, Any]:
    """What the device is (sysfs): model, serial, firmware, size, sectors, rotational,
    scheduler, queue depth, write cache, discard; a loop device's backing file; an
    NVMe namespace's facts (nvme_facts)."""
    base = SYS_BLOCK / name
    disk = base.resolve().parent if (base / "partition").exists() else base.resolve()
    facts: dict[str, Any] = {"name": name}
    for key, rel in (("model", "device/model"), ("serial", "device/serial"),
                     ("wwid", "device/wwid"), ("firmware", "device/firmware_rev"),
                     ("vendor", "device/vendor")):
        if (v := _read(disk / rel)) is not None:
            facts[key] = v
    sectors = _read(base / "size")
    if sectors is not None:
        facts["size_bytes"] = int(sectors) * 512
    q = disk / "queue"
    for key, rel in (("logical_sector_bytes", "logical_block_size"),
                     ("physical_sector_bytes", "physical_block_size"),
                     ("nr_requests", "nr_requests")):
        if (v := _read(q / rel)) is not None and v.isdigit():
            facts[key] = int(v)
    if (v := _read(q / "rotational")) is not None:
        facts["rotational"] = v == "1"
    if (v := _read(q / "scheduler")) is not None:
        chosen = [w.strip("[]") for w in v.split() if w.startswith("[")]
        facts["scheduler"] = chosen[0] if chosen else v
    if (v := _read(q / "write_cache")) is not None:
        facts["write_cache"] = v
    if (v := _read(q / "discard_max_bytes")) is not None and v.isdigit():
        facts["discard"] = int(v) > 0
    if (v := _read(disk / "loop" / "backing_file")) is not None:
        facts["loop_backing_file"] = v
    if name != disk.name:
        facts["partition_of"] = disk.name
    if (nsid := _read(disk / "nsid")) is not None:
        facts["nvme"] = {"namespace_id": int(nsid), **nvme_facts(f"/dev/{disk.name}")}
    return facts


def nvme_facts(namespace: str) -> dict[str, Any]:
    """An NVMe namespace as nvme-cli reads it (Identify Namespace, Identify Controller,
    the SMART / Health log): the LBA format in use and the others it could have, its
    size, capacity and use, its preferred write sizes, the controller's NVMe version,
    volatile write cache and namespaces, and its wear, spare, temperature and media
    errors. Without nvme-cli, or when it fails, one fact says so with its message."""
    import json
    import shutil

    nvme = shutil.which("nvme")
    if nvme is None:
        return {"nvme_cli": "not installed: namespace facts not read (apt install nvme-cli)"}
    answers: list[dict[str, Any]] = []
    for command in ("id-ns", "id-ctrl", "smart-log"):
        try:
            proc = subprocess.run([nvme, command, namespace, "--output-format=json"],
                                  capture_output=True, text=True, timeout=30, check=False)
            answer = json.loads(proc.stdout) if proc.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"nvme_cli": f"nvme {command} {namespace}: {e}"}
        except ValueError:
            answer = None
        if not answer:
            said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            return {"nvme_cli": f"nvme {command} {namespace} failed"
                                f" ({said[-1] if said else f'exit status {proc.returncode}'})"}
        answers.append(answer)
    try:
        return _nvme_summary(*answers)
    except (KeyError, IndexError, TypeError, ValueError) as e:  # another nvme-cli's JSON
        return {"nvme_cli": f"nvme-cli's JSON for {namespace} not understood"
                            f" ({type(e).__name__}: {e})"}


def _nvme_summary(ns: dict[str, Any], ctrl: dict[str, Any], health: dict[str, Any]
                  ) -> dict[str, Any]:
    """The facts a benchmark needs from nvme-cli's JSON (id-ns, id-ctrl, smart-log)."""
    def num(d: dict[str, Any], *keys: str) -> int | None:
        for k in keys:
            if k in d:
                return int(d[k])
        return None

    formats = [(1 << int(f["ds"]), int(f["ms"]), int(f.get("rp", 0))) for f in ns["lbafs"]]
    flbas = int(ns["flbas"])
    data, meta, rp = formats[(flbas & 0xF) | ((flbas >> 5) & 0x3) << 4]
    out: dict[str, Any] = {
        "lba_data_bytes": data, "lba_metadata_bytes": meta,
        "lba_relative_performance": ("best", "better", "good", "degraded")[rp & 3],
        "lba_formats": ", ".join(f"{d}+{m}" if m else str(d) for d, m, _ in formats),
        "namespace_bytes": int(ns["nsze"]) * data,
        "capacity_bytes": int(ns["ncap"]) * data,
        "utilization_bytes": int(ns["nuse"]) * data,
        "thin_provisioned": bool(int(ns.get("nsfeat", 0)) & 1),
    }
    if int(ns.get("nsfeat", 0)) & 0x10:  # the optimal-performance fields are valid
        out["preferred_write_granularity_bytes"] = (int(ns["npwg"]) + 1) * data
        out["preferred_write_alignment_bytes"] = (int(ns["npwa"]) + 1) * data
        out["optimal_write_bytes"] = (int(ns["nows"]) + 1) * data
    ver = int(ctrl.get("ver", 0))
    if ver:
        out["nvme_version"] = f"{ver >> 16}.{(ver >> 8) & 0xFF}" + (
            f".{ver & 0xFF}" if ver & 0xFF else "")
    out["volatile_write_cache"] = bool(int(ctrl.get("vwc", 0)) & 1)
    out["controller_namespaces"] = int(ctrl.get("nn", 0))
    if (used := num(health, "percent_used", "percentage_used")) is not None:
        out["percent_used"] = used
    if (spare := num(health, "avail_spare", "available_spare")) is not None:
        out["available_spare_percent"] = spare
    if (warning := num(health, "critical_warning")) is not None:
        out["critical_warning"] = warning
    if (temp := num(health, "temperature")) is not None:
        out["temperature_c"] = temp - 273 if temp > 200 else temp  # Kelvin in nvme-cli 2.x
    if (errors := num(health, "media_errors")) is not None:
        out["media_errors"] = errors
    if (units := num(health, "data_units_written")) is not None:
        out["written_bytes"] = units * 512_000  # units of 1000 512-byte blocks
    return out


def report(given: str, writes: bool, destructive: str | None) -> dict[str, Any]:
    """The guard's findings, decision and the device's facts, as JSON-ready data: what a
    host reached over SSH sends back (this module runs there as ``python3 -``)."""
    from dataclasses import asdict

    found = inspect(given)
    verdict = decide(found, writes=writes, destructive=destructive)
    return {"findings": asdict(found), "decision": asdict(verdict),
            "facts": device_facts(found.name) if found.is_block else {}}


if __name__ == "__main__":  # python3 - DEVICE WRITES(0|1) [DESTRUCTIVE] < this file
    import json
    import sys

    print(json.dumps(report(sys.argv[1], sys.argv[2] == "1",
                            sys.argv[3] if len(sys.argv) > 3 else None)))
