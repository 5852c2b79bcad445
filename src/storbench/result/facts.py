"""What a run's stored environment says of where the I/O went, typed: the one reader of
its keys for analysis (warnings, notes, published figures).

The environment is stored as the targets describe themselves (a dict: hostname, the
target's facts, the hosts', a class's, …), for people to read in `show` and the report.
Analysis needs a few facts of it, the same for every kind of target and every version
of storbench that stored it: ``TargetFacts.of(run.environment)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from storbench.result.record import BLANK_DEVICE

RAM_FILESYSTEMS = ("tmpfs", "ramfs", "devtmpfs")  # /dev is devtmpfs: a tmpfs too


@dataclass(frozen=True)
class Device:
    """A block device the run read or wrote (local, a host's, a Kubernetes Block volume)."""

    name: str  # for messages: "/dev/loop7", "a Block volume of class fast"
    blank: bool  # nothing was found on it when the run began
    preconditioned: bool  # written whole first (--precondition)


@dataclass(frozen=True)
class TargetFacts:
    place: str  # "here", "hosts" (fio's servers), "pods" (Kubernetes)
    workers: int  # hosts, or pods; 1 here
    ram_bytes: int | None  # the memory of the smallest worker (its page cache); None: unknown
    fs_type: str | None  # the target's file system (None: a device, or unknown)
    devices: tuple[Device, ...] = ()
    hostname: str | None = None  # of the machine storbench ran on
    kube_context: str | None = None  # the kubeconfig context of a Kubernetes run
    memory_limited: bool = False  # ram_bytes is a memory cgroup's limit, below the RAM
    hosts: tuple[str, ...] = ()  # the hosts fio ran on (ssh://db1, sock:PATH, ADDR:PORT)
    host_fs: tuple[tuple[str, str], ...] = ()  # (host, its path's file system) as each said
    access_mode: str | None = None  # a Kubernetes volume's (ReadWriteOnce, ...)
    # the network link an object store is reached through from here, and its Mb/s
    link: tuple[str, int] | None = None

    def in_ram(self) -> tuple[str, str] | None:
        """The RAM file systems the run's writes went to, and where, for messages:
        ("tmpfs", "tmpfs") for the target's; ("ramfs", "ramfs on ssh://b (1 of 3 hosts)")
        when the hosts' differ (no one file system is the target's); None: none."""
        if self.fs_type in RAM_FILESYSTEMS:
            return self.fs_type, self.fs_type
        by_fs: dict[str, list[str]] = {}
        for host, fs in self.host_fs:
            if fs in RAM_FILESYSTEMS:
                by_fs.setdefault(fs, []).append(host)
        if not by_fs:
            return None
        count = sum(map(len, by_fs.values()))
        # no "; " in it: a verdict's caveats are joined by it
        where = " and ".join(f"{fs} on {', '.join(hosts)}" for fs, hosts in by_fs.items())
        if count < self.workers:
            where += f" ({count} of {self.workers} hosts)"
        return ", ".join(by_fs), where

    @classmethod
    def of(cls, environment: Mapping[str, Any]) -> TargetFacts:
        target = environment.get("target") or {}
        hosts = environment.get("hosts") or []
        place = "pods" if "kubernetes" in environment else "hosts" if hosts else "here"
        workers = len(hosts) or int(target.get("clients") or 1)
        ram = environment.get("ram_bytes")
        devices = tuple(_device(d) for d in (target, *(h.get("device") or {} for h in hosts))
                        if d.get("found_on_it") is not None)
        return cls(place, workers, ram if isinstance(ram, int) else None,
                   target.get("fs_type"), devices, environment.get("hostname"),
                   (environment.get("kubernetes") or {}).get("context"),
                   environment.get("memory_limit_bytes") is not None,
                   tuple(str(h["host"]) for h in hosts if isinstance(h, dict) and h.get("host")),
                   tuple((str(h["host"]), h["fs_type"]) for h in hosts if isinstance(h, dict)
                         and h.get("host") and isinstance(h.get("fs_type"), str)),
                   target.get("access_mode"), _link(target.get("link")))


def _link(found: Any) -> tuple[str, int] | None:
    if isinstance(found, dict) and isinstance(found.get("speed_mbps"), int):
        return str(found.get("interface")), int(found["speed_mbps"])
    return None


def _device(facts: Mapping[str, Any]) -> Device:
    if "storage_class" in facts:  # a Kubernetes Block volume
        name = f"a Block volume of class {facts['storage_class']}"
    else:
        name = str(facts.get("device") or facts.get("path"))
    return Device(name, facts.get("found_on_it") == [BLANK_DEVICE],
                  bool(facts.get("preconditioned")))


def published_figures(environment: Mapping[str, Any]) -> dict[str, list[str]]:
    """A published run's figures per test (the metrics its study printed)."""
    return dict(environment.get("figures") or {})


def printed(environment: Mapping[str, Any], test: str, metric: str) -> str | None:
    """How a study printed one figure (its precision), for a published run."""
    return ((environment.get("printed") or {}).get(test) or {}).get(metric)
