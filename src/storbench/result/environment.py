"""What a subject says of itself when a run begins (``Subject.describe``), typed: the
record stored as the run's environment, for people (``show --env``, the report) and,
through ``result/facts.TargetFacts``, for analysis.

Its top level is the same for every subject: the machine fio ran on (or the node of a
pod, the smallest of several hosts' memory), how fio was confined, fio's version, and
what the target is. What each storage adds under ``target`` (a device's serial and
write cache, a bucket's endpoint, a class's provisioner) and the hosts' and the
cluster's facts stay open records, written and documented where they are found
(target/environment.py, target/blockguard.py, target/kubernetes/facts.py). Stored runs
are read back as they were stored (older ones lack keys): readers take a ``Mapping``.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Machine(TypedDict, total=False):
    """The machine fio ran on (target/environment.host_facts; a pod's node)."""

    hostname: str | None
    os: str | None
    kernel: str | None
    machine: str
    cpu_count: int | None
    cpu_model: str | None
    ram_bytes: int | None  # the page cache fio's reads could meet (a memory limit's, if lower)
    memory_limit_bytes: int  # a memory cgroup's limit, when it is below the RAM


class Environment(Machine, total=False):
    confinement: str  # how fio was kept to the run's places ("none: why")
    target: dict[str, Any]  # its "kind", then what its place and storage say of it
    hosts: list[dict[str, Any]]  # per host of --hosts: its address, fio, file system, device
    kubernetes: dict[str, Any]  # the cluster, the class's PVC, PV and node
    fio_path: str
    fio_version: str | None
    storbench_version: str
