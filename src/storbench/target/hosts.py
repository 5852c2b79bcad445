"""Many hosts at once, through fio's own client/server mode.

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

import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute import Executor, FioBinary, FioJob, SignalGuard
from storbench.execute.clientserver import ClientServerExecutor, Server, key, probe
from storbench.execute.ssh import (
    Remote,
    Tunnel,
    open_tunnels,
    put_remote,
    run_remote,
    session_dir,
    stop_all,
)
from storbench.target.base import DeviceRoom, Placed, Quiet
from storbench.target.environment import agent_path_facts, host_facts
from storbench.target.files import Files, Room, run_file_name
from storbench.target.hostlist import Host
from storbench.workload.jobfile import JobFile
from storbench.workload.plan import Plan, PlannedTest


@dataclass
class HostsTarget(Quiet):
    """A path on every host (each serves fio); the same test runs on all at once. It
    leaves nothing on the hosts: fio deletes its files as each job ends (unlink=1)."""

    path: Path  # on the hosts; not checked from here
    hosts: list[Host]
    shared_file: bool = False  # every host works on one file (a shared file system)
    ssh_config: str | None = None  # ssh -F FILE for hosts reached over SSH
    kind = "hosts"
    worker_noun = "host"
    needs_local_fio = True  # fio's client runs here
    series_logs = False
    versions: dict[str, str] = field(default_factory=dict, init=False)
    tunnels: dict[str, Tunnel] = field(default_factory=dict, init=False)
    uid: str = field(default="", init=False)  # the run's id (scratch_path)
    session_dirs: dict[str, str] = field(default_factory=dict, init=False)  # _session_dir
    # the hosts over SSH that see one another's files in the path (_sharing), in groups
    sharing: list[list[str]] = field(default_factory=list, init=False)
    # the path's file system and space as each agent on a unix socket sees it
    agent_facts: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)
    layout_with: tuple[FioBinary, Path] = field(init=False)  # check()'s: fio and its workdir
    guard: SignalGuard = field(init=False)  # prepare()'s
    files_in_path = True  # the path is a directory (a device's hosts write none)
    # the storage: fio's files in the path on each host (target/files.py)
    files: Files = field(init=False)

    def __post_init__(self) -> None:
        self.files = Files(str(self.path), self.shared_file, every="host",
                           hint="pass a smaller --size or another path")

    @property
    def name(self) -> str:
        return f"{self.path} on {len(self.hosts)} hosts"

    @property
    def short_name(self) -> str:
        return f"{self.path}@{len(self.hosts)}hosts"

    def settings(self) -> dict[str, Any]:
        return {"hosts": [h.key for h in self.hosts], "shared_file": self.shared_file}

    def scratch_path(self, uid: str) -> Path:
        self.uid = uid  # the run's: each host's session removes its files when it ends
        return self.path  # files are named storbench-<uid>-... in it (job_files)

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        """Start the SSH hosts' servers; ask every server its fio version. Nothing runs
        anywhere before every host answered (and, for a block device, allowed it)."""
        assert fio is not None
        self.layout_with = (fio, workdir)
        ssh = [h for h in self.hosts if h.ssh is not None]
        if ssh:
            opened = open_tunnels([h.ssh for h in ssh if h.ssh is not None], self.ssh_config,
                                  workdir, self.remote(), [self._session_dir(h) for h in ssh])
            self.tunnels = {h.key: t for h, t in zip(ssh, opened, strict=True)}
        # what fails from here leaves the sessions open: the run loop's cleanup ends them
        if self.files_in_path:
            self.agent_facts = {h.key: agent_path_facts(h.socket, self.path)
                                for h in self.hosts if h.socket}
        if self.files_in_path:
            self.sharing = self._sharing()
            if self.shared_file:
                self._check_shared()
            self.files.check(plan, self.rooms(), self.sharing)
        endpoints = self.endpoints()
        found = probe(fio, list(endpoints.values()), workdir)
        self.versions = {w: found[key(s)] for w, s in endpoints.items()}

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

    def _sharing(self) -> list[list[str]]:
        """The hosts in groups that see one another's files in the path: those over SSH
        (_ssh_sharing), then the agents on unix sockets whose path each saw as one
        directory of one file system (the device and the place in it: agent_path_facts);
        an agent whose view could not be read is in no group."""
        agents: dict[str, list[str]] = {}
        for host, facts in self.agent_facts.items():
            if isinstance(facts.get("fs_dir"), str):
                agents.setdefault(facts["fs_dir"], []).append(host)
        return self._ssh_sharing() + list(agents.values())

    def _ssh_sharing(self) -> list[list[str]]:
        """The hosts over SSH in groups that see one another's files in the path (one
        file system shared by them: an NFS export, a cluster file system): each host's
        session wrote a file of the run's there as it started (removed as it ends), and
        each host looks for the others'. [] for fewer than two hosts."""
        ssh = [h for h in self.hosts if h.ssh is not None]
        if len(ssh) < 2:
            return []
        marks = [f"{self.remote().prefix}{self._session_dir(h).rsplit('-', 1)[1]}-mark"
                 for h in ssh]
        look = "sh -c " + shlex.quote("; ".join(  # sh: whatever the user's login shell
            f"if [ -e {shlex.quote(m)} ]; then echo {i}; fi" for i, m in enumerate(marks)))

        def seen(h: Host) -> set[int]:
            assert h.ssh is not None
            return {int(i) for i in run_remote(h.ssh, self.ssh_config, look, "").split()}

        with ThreadPoolExecutor(max_workers=min(16, len(ssh))) as pool:
            sees = list(pool.map(seen, ssh))
        groups: list[list[str]] = []
        placed: set[int] = set()
        for i in range(len(ssh)):
            if i not in placed:
                group = [j for j in range(len(ssh)) if j not in placed and (j == i or j in sees[i])]
                placed.update(group)
                groups.append([ssh[j].key for j in group])
        return groups

    def _check_shared(self) -> None:
        """--shared-file: every host over SSH must see the file the first one wrote, and
        the agents on unix sockets one directory of one file system; else each would work
        on a file of its own while the run says one."""
        if len(agents := [g for g in self.sharing if g[0] in self.agent_facts]) > 1:
            seen = "; ".join(f"{', '.join(g)}: {self.agent_facts[g[0]]['fs_type']}" for g in agents)
            raise TargetError(f"--shared-file: the agents do not see {str(self.path)!r} as one"
                              f" directory of one file system ({seen}): each would work on a"
                              " file of its own; leave out --shared-file")
        ssh = [g for g in self.sharing if g[0] not in self.agent_facts]
        if len(ssh) > 1:
            first = ssh[0][0]
            blind = [h for group in ssh[1:] for h in group]
            raise TargetError(
                f"--shared-file: {', '.join(blind)} did not see the file {first} wrote in"
                f" {str(self.path)!r}: the path is not one file system shared by these hosts,"
                " and each would work on a file of its own; leave out --shared-file")

    def remote(self) -> Remote:
        """What each host's session may write and removes as it ends: the run's files in
        the path (a file per host, storbench-<uid>-...)."""
        return Remote(f"{self.path}/storbench-{self.uid}-", ("--write", str(self.path)))

    def endpoints(self) -> dict[str, Server]:
        """Where fio's client reaches each host's server: its address, its unix socket,
        or (over SSH) a unix socket of this run forwarded to the host's."""
        return {h.key: str(self.tunnels[h.key].local) if h.key in self.tunnels
                else h.socket or (h.address, h.port) for h in self.hosts}

    def job_files(self, jobfile: JobFile, index: int, uid: str) -> list[FioJob]:
        return [FioJob(h.key, f"t{index:03d}-h{i}.fio", self._for_host(jobfile, uid, i).render())
                for i, h in enumerate(self.hosts)]

    def _for_host(self, jobfile: JobFile, uid: str, i: int) -> JobFile:
        """The job file for host ``i``: its own file names (for_host); an iolog it
        replays is that host's copy (put_file); with every host reached over SSH, a
        job that says unlink=0 keeps its files until the host's session ends and
        removes them (a replay's prefill: the replay reads them next)."""
        mine = self.files.for_worker(jobfile, f"storbench-{uid}", f"h{i}")
        keep = all(h.ssh is not None for h in self.hosts)
        effective = dict(jobfile.effective())
        sections = []
        for section in mine.sections:
            log = section.get("read_iolog")
            if log is not None:
                section = section.with_option("read_iolog",
                                              self.run_file(uid, i, Path(log).name))
            if keep and not section.is_global and \
                    effective.get(section.name, {}).get("unlink") == "0":
                section = section.with_option("unlink", "0")
            sections.append(section)
        return JobFile(tuple(sections))

    def run_file(self, uid: str, i: int, name: str) -> str:
        """Where host ``i`` keeps the run's file ``name`` (as for_host names it; its
        session removes every such file when it ends)."""
        return f"{self.path}/storbench-{uid}-h{i}-{name}"

    def _session_dir(self, host: Host) -> str:
        """The host's SSH session directory (0700, made by its session, removed as it
        ends), chosen before the session starts (job files name it): where a replay's
        iolog is put when fio runs on the host's device."""
        return self.session_dirs.setdefault(host.key, session_dir())

    def replay_device(self) -> DeviceRoom | None:
        return None  # in files, prefilled

    def put_dirs(self) -> list[str]:
        return []  # each host's copy is a file of the run's in the path

    def check_put(self) -> None:
        if self.shared_file:
            raise ConfigError("--replay on --hosts gives each host its own files: leave out"
                              " --shared-file")
        agents = [h.key for h in self.hosts if h.ssh is None]
        if agents:
            raise ConfigError(f"--replay puts its iolog on each host over SSH; not reached"
                              f" over SSH (ssh://HOST): {', '.join(agents)}")

    def put_file(self, uid: str, name: str, text: Placed) -> None:
        """Write ``text`` for each host as its own file of the run, over SSH (a new file,
        the SSH user's only), all hosts at once."""
        run_file_name(name)
        self.check_put()

        with ThreadPoolExecutor(max_workers=min(16, len(self.hosts))) as pool:
            list(pool.map(lambda i: self._put_one(i, uid, name, text),
                          range(len(self.hosts))))

    def _put_one(self, i: int, uid: str, name: str, text: Placed) -> None:
        host = self.hosts[i].ssh
        assert host is not None
        put_remote(host, self.ssh_config, self.run_file(uid, i, name),
                   text(lambda n: self.run_file(uid, i, n)))

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
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
            hosts.append(entry)
        rams = [e.get("ram_bytes") for e in hosts]
        known = [r for r in rams if isinstance(r, int)]
        # the path's file system, when every host said it and all say the same
        fs = {e.get("fs_type") for e in hosts}
        return {
            **here,
            # the page cache that could answer is the smallest host's; unknown if any is
            "ram_bytes": min(known) if known and len(known) == len(rams) else None,
            "target": {"kind": self.kind, "path": str(self.path), "on_hosts": True,
                       "shared_file": self.shared_file, "block_device": False,
                       # hosts that see one another's files in the path (one file system)
                       **({"shared_by": shared} if (shared := [
                           g for g in self.sharing if len(g) > 1]) else {}),
                       **({"fs_type": fs.pop()} if len(fs) == 1 and None not in fs else {})},
            "hosts": hosts,
            **({"fio_path": fio.path, "fio_version": fio.version_text} if fio else {}),
        }

    def prepare(self, uid: str, invocations: list[list[FioJob]], guard: SignalGuard,
                note: Callable[[str], None]) -> None:
        """What earlier runs left on a host, said (its session removed it); hosts whose
        path is on different file systems, said (one figure merges them)."""
        self.guard = guard  # before_test's layouts stop with the run
        kinds: dict[str, list[str]] = {}
        for host, facts in self.said().items():
            removed = facts.get("removed_leftovers")
            for left in removed if isinstance(removed, list) else []:
                note(f"{host}: removed {left}*, left by a run whose session had ended")
            if isinstance(fs := facts.get("fs_type"), str):
                kinds.setdefault(fs, []).append(host)
        for group in self.sharing:
            if len(group) > 1 and not self.shared_file:
                note(f"{', '.join(group)} share {self.path} (each sees the others' files):"
                     f" each works on its own files in it, {len(group)} at once")
        if self.files_in_path:
            self.files.say(note, self.hosts[0].key)
        if len(kinds) > 1:
            note(f"{self.path} is on different file systems on the hosts ("
                 + "; ".join(f"{fs} on {', '.join(hosts)}" for fs, hosts in kinds.items())
                 + "): each figure merges them (the hosts whose fsync is a no-op in RAM are"
                   " named in a warning; nothing else is judged per file system)")

    def executor(self, fio: FioBinary | None, workdir: Path, guard: SignalGuard) -> Executor:
        assert fio is not None
        return ClientServerExecutor(fio, workdir, guard, self.endpoints())

    def before_test(self, test: PlannedTest, keep: set[str]) -> None:
        """--shared-file: the test's file laid out from the first host alone (sharedlayout)."""
        if self.files_in_path:
            first = self.hosts[0].key
            self.files.lay_out_first(
                lambda: self.executor(*self.layout_with, self.guard), first, test,
                self._for_host(test.jobfile, self.uid, 0), self.deadline(test),
                f"check that {first} can write the path, or list another host first"
                " in --hosts")

    def cleanup(self, hurry: bool = False) -> None:
        """End the SSH sessions: their fio servers stop with them."""
        stop_all(list(self.tunnels.values()))
