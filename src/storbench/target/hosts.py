"""Many hosts at once, through fio's own client/server mode: a place (target/storage.py)
for any storage, files in the path on every host (FilesStorage) or each host's block
device at the path (DeviceStorage, every host over SSH: the guard runs there,
target/remoteguard.py).

A host is reached over SSH (``ssh://user@host``: for the run, storbench starts
``fio --server`` on it, on its loopback, through an SSH port forward; execute/ssh.py)
or runs ``fio --server`` itself (``storbench agent``). storbench, as fio's client,
sends every host the test's job file (with its own file names, or one shared file)
so that all run it at the same time against the path on their side. Results come
back per host and are merged by the run loop: IOPS and bandwidth summed,
percentiles from the merged json+ histogram bins.

What a host is made of is known where storbench can see it: a host over SSH says it
in its session; a host on a loopback address is this machine (its memory is this
machine's), and an agent on a unix socket has its path's file system and space read
where it sees them (agent_path_facts); for others fio's protocol tells only the fio
version, so their memory is unknown and the page-cache check says so instead of
guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute import Executor, FioBinary, FioJob, SignalGuard, clientserver, hosttrace
from storbench.execute.clientserver import ClientServerExecutor, Server, key, probe
from storbench.execute.hosttrace import HostsTracer
from storbench.execute.ssh import (
    Remote,
    Tunnel,
    open_tunnels,
    put_remote,
    session_dir,
    stop_all,
)
from storbench.result.environment import Environment
from storbench.target.base import Deadline, Quiet
from storbench.target.device import Seen
from storbench.target.environment import agent_path_facts, host_facts
from storbench.target.hostlist import Host, ssh_sharing
from storbench.target.remoteguard import look_all
from storbench.target.sharedlayout import lay_out, remove
from storbench.target.storage import OnStorage, ReachesOutside, Room, Storage, Worker
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest


@dataclass
class HostsTarget(ReachesOutside, OnStorage, Quiet):
    """A storage at the same path on every host (each serves fio); the same test runs on
    all at once. It leaves nothing on the hosts: fio deletes a host's own files as each
    job ends (unlink=1), a --shared-file test's file is removed from the first host once
    every host ended it, and each host's SSH session removes the run's files as it ends."""

    storage: Storage
    hosts: list[Host]
    ssh_config: str | None = None  # ssh -F FILE for hosts reached over SSH
    kind = "hosts"
    worker_noun = "host"
    needs_local_fio = True  # fio's client runs here
    series_logs = False
    # what this place is to a storage (target/storage.Place)
    every = "host"
    looks_early = True  # the guard runs on each host over SSH, before any session starts
    refused_after = "Nothing was started."
    versions: dict[str, str] = field(default_factory=dict, init=False)
    tunnels: dict[str, Tunnel] = field(default_factory=dict, init=False)
    uid: str = field(default="", init=False)  # the run's id (scratch_path)
    plan: Plan | None = field(default=None, init=False)  # check()'s
    session_dirs: dict[str, str] = field(default_factory=dict, init=False)  # _session_dir
    # the hosts over SSH that see one another's files in the path (_sharing), in groups;
    # None until a storage asks
    groups: list[list[str]] | None = field(default=None, init=False)
    # the path's file system and space as each agent on a unix socket sees it
    agent_facts: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    layout_with: tuple[FioBinary, Path] = field(init=False)  # check()'s: fio and its workdir
    shared_left: JobFile | None = field(default=None, init=False)  # lay_out's: to remove
    guard: SignalGuard = field(init=False)  # prepare()'s
    explain: bool = field(default=False, init=False)  # run --explain: tracer()'s

    @property
    def path(self) -> Path:
        return Path(self.storage.path)

    @property
    def keeps_until_end(self) -> bool:
        """Every host over SSH: its session removes the run's files as it ends, so a job
        that keeps its files (unlink=0) keeps them until then."""
        return all(h.ssh is not None for h in self.hosts)

    @property
    def name(self) -> str:
        return f"{self.storage.path} on {len(self.hosts)} hosts"

    @property
    def short_name(self) -> str:
        return f"{self.storage.path}@{len(self.hosts)}hosts"

    def settings(self) -> dict[str, Any]:
        return {"hosts": [h.key for h in self.hosts], **self.storage.settings(self)}

    def preflight(self) -> None:
        self.storage.preflight(self)

    def scratch_path(self, uid: str) -> Path:
        self.uid = uid  # the run's: each host's session removes its files when it ends
        return Path(self.storage.scratch(self, uid))

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        """The storage's own look (a device's guard on every host); then the SSH hosts'
        servers started, every server asked its fio version, and the storage checked
        where the hosts said what they see. Nothing runs anywhere before every host
        answered (and, for a block device, allowed it)."""
        assert fio is not None
        self.plan = plan
        self.layout_with = (fio, workdir)
        self.storage.approve(plan, self)
        ssh = [h for h in self.hosts if h.ssh is not None]
        if ssh:
            opened = open_tunnels([h.ssh for h in ssh if h.ssh is not None], self.ssh_config,
                                  workdir, self.remote(), [self._session_dir(h) for h in ssh])
            self.tunnels = {h.key: t for h, t in zip(ssh, opened, strict=True)}
            if self.explain:
                hosttrace.check(self.tunnels)
        # what fails from here leaves the sessions open: the run loop's cleanup ends them
        if self.storage.in_files:
            self.agent_facts = {h.key: agent_path_facts(h.socket, self.path)
                                for h in self.hosts if h.socket}
        self.storage.check(plan, self)
        endpoints = self.endpoints()
        found = probe(fio, list(endpoints.values()), workdir)
        self.versions = {w: found[key(s)] for w, s in endpoints.items()}
        self._engines()  # every host reached, its fio the client's version

    def _engines(self) -> None:
        """Every host has a fio with the engine an outside storage needs: over SSH, as its
        session said; an agent, as its fio answers a job that loads it and moves nothing."""
        if self.outside is None:
            return
        engine = self.outside.engine
        lacking = {h: (m.get(engine) if isinstance(m := t.facts.get("engines_missing"), dict)
                       else None) or "?" for h, t in self.tunnels.items()
                   if not isinstance(has := t.facts.get("engines"), list) or engine not in has}
        if agents := {h.key: s for h, s in zip(self.hosts, self.endpoints().values(),
                                               strict=True) if h.ssh is None}:
            lacking.update(clientserver.engine_refusals(
                self.layout_with[0], agents, self.outside.engine_check, self.layout_with[1]))
        if lacking:
            said = "; ".join(f"{h}: {words}" for h, words in lacking.items())
            raise TargetError(f"fio on {len(lacking)} of {len(self.hosts)} host(s) has no"
                              f" {engine} engine, which {self.storage.kind} {self.storage.path}"
                              f" needs ({said}). {self.outside.engine_hint} On a host, the fio"
                              " its SSH session finds first in its PATH is the one run (an"
                              " agent's: its --fio). Nothing was started.")

    def rooms(self) -> list[Room]:
        """The room in the path on each host that said its free space; a file system
        that keeps no count (ramfs: 0 bytes of 0) is not judged."""
        return [Room(host, self._free(host)) for host in self.said()]

    def said(self) -> dict[str, dict[str, Any]]:
        """What each host said of itself and its path: over SSH, its session; an agent on
        a unix socket, through it (agent_path_facts); an agent over TCP, nothing."""
        return {**{h: t.facts for h, t in self.tunnels.items()}, **self.agent_facts}

    def _free(self, host: str) -> int | None:
        """The free bytes a host said its path has; None when it did not say, or its file
        system keeps no count (ramfs says 0 of 0)."""
        facts = self.said().get(host, {})
        free = facts.get("free_bytes")
        return free if isinstance(free, int) and facts.get("total_bytes") else None

    def sharing(self) -> list[list[str]]:
        """The hosts in groups that see one another's files in the path: those over SSH
        (_ssh_sharing), then the agents on unix sockets whose path each saw as one
        directory of one file system (the device and the place in it: agent_path_facts);
        an agent whose view could not be read is in no group. Looked for once."""
        if self.groups is None:
            agents: dict[str, list[str]] = {}
            for host, facts in self.agent_facts.items():
                if isinstance(facts.get("fs_dir"), str):
                    agents.setdefault(facts["fs_dir"], []).append(host)
            self.groups = self._ssh_sharing() + list(agents.values())
        return self.groups

    def _ssh_sharing(self) -> list[list[str]]:
        """The hosts over SSH in groups that see one another's files in the path
        (hostlist.ssh_sharing: each looks for the file each session wrote there)."""
        ssh = [h for h in self.hosts if h.ssh is not None]
        return ssh_sharing(ssh, [f"{self.remote().prefix}"
                                 f"{self._session_dir(h).rsplit('-', 1)[1]}-mark" for h in ssh],
                           self.ssh_config)

    def apart(self, path: str) -> str | None:
        """Every host over SSH must see the file the first one wrote, and the agents on
        unix sockets one directory of one file system; else (said) each would work on a
        file of its own while the run says one."""
        groups = self.sharing()
        if len(agents := [g for g in groups if g[0] in self.agent_facts]) > 1:
            seen = "; ".join(f"{', '.join(g)}: {self.agent_facts[g[0]]['fs_type']}" for g in agents)
            return (f"the agents do not see {path!r} as one directory of one file system"
                    f" ({seen}): each would work on a file of its own")
        ssh = [g for g in groups if g[0] not in self.agent_facts]
        if len(ssh) > 1:
            first = ssh[0][0]
            blind = [h for group in ssh[1:] for h in group]
            return (f"{', '.join(blind)} did not see the file {first} wrote in {path!r}: the"
                    " path is not one file system shared by these hosts, and each would work"
                    " on a file of its own")
        return None

    def remote(self) -> Remote:
        """What each host's session may write (what the storage lets fio write: the path,
        or the device when the run writes it) and removes as it ends (the run's files in
        the path, storbench-<uid>-...; none for a device)."""
        assert self.plan is not None
        access = self.storage.access(self, self.uid, self.plan)
        flags = [*(f for d in access.dirs for f in ("--write", d)),
                 *(f for d in access.files for f in ("--file", d))]
        prefix = f"{self.path}/storbench-{self.uid}-" if self.storage.in_files else ""
        return Remote(prefix, tuple(flags), (self.outside.engine,) if self.outside else (),
                      self.storage.path if self.explain else "")

    def tracer(self) -> Callable[[Path], HostsTracer]:
        """run --explain: each host's fio followed by its own kernel, over its SSH session
        (execute/hosttrace.py); ConfigError for a host not reached over SSH, or a storage
        outside the hosts (no block layer of theirs to follow)."""
        if (agents := [h.key for h in self.hosts if h.ssh is None]) or self.outside:
            raise ConfigError("--explain follows fio through each host's kernel over its SSH"
                              " session: " + (f"not reached over SSH (ssh://HOST): "
                                              f"{', '.join(agents)}" if agents else
                                              f"{self.storage.kind} is no storage of theirs"))
        self.explain = True
        return lambda _workdir: HostsTracer(self.tunnels, self.ssh_config)

    def endpoints(self) -> dict[str, Server]:
        """Where fio's client reaches each host's server: its address, its unix socket,
        or (over SSH) a unix socket of this run forwarded to the host's."""
        return {h.key: str(self.tunnels[h.key].local) if h.key in self.tunnels
                else h.socket or (h.address, h.port) for h in self.hosts}

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        return [self.storage.job(jobfile, self, w, f"t{index:03d}-{w.tag}.fio", uid)
                for w in self.workers()]

    def _session_dir(self, host: Host) -> str:
        """The host's SSH session directory (0700, made by its session, removed as it
        ends), chosen before the session starts (job files name it): where a replay's
        iolog is put when fio runs on the host's device."""
        return self.session_dirs.setdefault(host.key, session_dir())

    # -- what the hosts give a storage (target/storage.Place) ---------------------------

    def workers(self) -> list[Worker]:
        return [Worker(h.key, f"h{i}", h.key) for i, h in enumerate(self.hosts)]

    def files_dir(self, uid: str) -> str:
        return str(self.path)  # files are named storbench-<uid>-h<i>-... in it (for_host)

    def files_words(self, path: str) -> tuple[str, str]:
        return path, "pass a smaller --size or another path"

    def clean(self, keep: set[str], before: str) -> tuple[int, Room] | None:
        return None  # fio removes each job's files as it ends (unlink=1)

    def lay_out(self, test: PlannedTest, jobfile: JobFile, deadline: Deadline | None) -> None:
        """The earlier test's shared file removed (no host's fio removes it), then this
        test's one file laid out from the first host alone (sharedlayout)."""
        self._remove_shared()
        first = self.hosts[0].key
        lay_out(self.executor(*self.layout_with, self.guard), first, test.name, jobfile,
                deadline, f"check that {first} can write the path, or list another host"
                " first in --hosts")
        self.shared_left = jobfile

    def _remove_shared(self) -> None:
        """The last test's shared file, removed from the first host once every host ended
        that test (sharedlayout.remove)."""
        if self.shared_left is not None:
            left, self.shared_left = self.shared_left, None
            remove(self.executor(*self.layout_with, self.guard), self.hosts[0].key, left)

    def look(self, path: str, writes: bool, destructive: str | None) -> list[Seen]:
        """Each host's guard, over SSH, all hosts at once: every host must be reached
        over SSH (the guard runs there)."""
        if any(h.ssh is None for h in self.hosts):
            raise ConfigError(f"{path} on --hosts: a block device needs every host"
                              " reached over SSH (ssh://HOST): storbench checks the"
                              " device on each host before fio touches it")
        return look_all([h.ssh for h in self.hosts if h.ssh is not None], self.ssh_config,
                        path, writes, destructive)

    def device(self, worker: Worker, path: str) -> str:
        return path  # at the same path on every host

    def own_dir(self, worker: Worker, uid: str) -> str | None:
        return self.session_dirs.get(worker.key) or self._session_dir(
            next(h for h in self.hosts if h.key == worker.key))

    def volume_size(self) -> int | None:
        return None

    def check_putting(self) -> None:
        agents = [h.key for h in self.hosts if h.ssh is None]
        if agents:
            raise ConfigError(f"--replay puts its iolog on each host over SSH; not reached"
                              f" over SSH (ssh://HOST): {', '.join(agents)}")

    def put(self, files: list[tuple[Worker, str, str]]) -> None:
        """Each file a new one, the SSH user's only, on its host; all hosts at once."""
        by_key = {h.key: h.ssh for h in self.hosts}

        def one(item: tuple[Worker, str, str]) -> None:
            host = by_key[item[0].key]
            assert host is not None
            put_remote(host, self.ssh_config, item[1], item[2])

        with ThreadPoolExecutor(max_workers=min(16, len(files) or 1)) as pool:
            list(pool.map(one, files))

    def describe(self, fio: FioBinary | None) -> Environment:
        here = host_facts()
        hosts = []
        for h in self.hosts:
            entry: dict[str, Any] = {"host": h.key, "fio_version": self.versions.get(h.key)}
            if h.key in self.tunnels:
                entry.update(via="ssh", **self.tunnels[h.key].facts)
            elif h.is_this_machine():
                entry.update({k: v for k, v in self.agent_facts.get(h.key, {}).items()
                              if k != "fs_dir"}, this_machine=True, ram_bytes=here["ram_bytes"])
            entry.setdefault("confinement", "the agent's own: storbench does not start its"
                                            " fio server")
            entry.update(self.storage.facts(self, Worker(h.key)))  # its device's, say
            hosts.append(entry)
        rams = [e.get("ram_bytes") for e in hosts]
        known = [r for r in rams if isinstance(r, int)]
        # the path's file system, when every host said it and all say the same
        fs = {e.get("fs_type") for e in hosts}
        return {
            **here,
            # the page cache that could answer is the smallest host's; unknown if any is
            "ram_bytes": min(known) if known and len(known) == len(rams) else None,
            "target": {"kind": self.kind, "path": self.storage.path, "on_hosts": True,
                       "shared_file": bool(self.settings().get("shared_file")),
                       "block_device": not self.storage.in_files and self.outside is None,
                       **({"storage": self.storage.kind, **self.storage.facts(self, None)}
                          if self.outside is not None else {}),
                       # hosts that see one another's files in the path (one file system)
                       **({"shared_by": shared} if (shared := [
                           g for g in (self.groups or []) if len(g) > 1]) else {}),
                       **({"fs_type": fs.pop()} if len(fs) == 1 and None not in fs else {})},
            "hosts": hosts,
            **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {}),
        }

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """What earlier runs left on a host, said (its session removed it); hosts whose
        path is on different file systems, said (one figure merges them); then the
        storage, ready (a device's guard once more)."""
        self.guard = guard  # before_test's layouts stop with the run
        kinds: dict[str, list[str]] = {}
        for host, facts in self.said().items():
            removed = facts.get("removed_leftovers")
            for left in removed if isinstance(removed, list) else []:
                note(f"{host}: removed {left}*, left by a run whose session had ended")
            if isinstance(fs := facts.get("fs_type"), str):
                kinds.setdefault(fs, []).append(host)
        if len(kinds) > 1:
            note(f"{self.path} is on different file systems on the hosts ("
                 + "; ".join(f"{fs} on {', '.join(hosts)}" for fs, hosts in kinds.items())
                 + "): each figure merges them (the hosts whose fsync is a no-op in RAM are"
                   " named in a warning; nothing else is judged per file system)")
        assert self.plan is not None
        self.storage.ready(self.plan, self, note)

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None
        return ClientServerExecutor(fio, workdir, guard, self.endpoints())

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        self.storage.between(self, test, keep, self.deadline(test), self.uid)

    def cleanup(self, hurry: bool = False) -> None:
        """End the SSH sessions: their fio servers stop with them; then what the run put
        in an outside storage (a bucket's objects) is removed."""
        try:  # an agent's: no session of storbench's removes it (hosts over SSH: theirs do)
            if not hurry and not self.keeps_until_end:
                self._remove_shared()
        finally:
            stop_all(list(self.tunnels.values()))
        if self.outside is not None:
            self.outside.end(hurry)
