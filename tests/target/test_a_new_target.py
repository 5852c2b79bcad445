"""Adding a target is its class and one line of cli/targets.SCHEMES: nothing else.

The target made here for the proof is one a user could want: ``ram://SIZE``, a RAM disk
of its own (a tmpfs of SIZE mounted for this run, in a fresh 0700 directory, unmounted
and removed when the run ends, however it ends). It reuses the directory target for the
rest. The test adds its scheme to the table as storbench starts (a process of its own:
`storbench` with one line more) and runs `storbench run ram://64m` through the real CLI,
loop, fio and store: no other file knows of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from storbench.cli import targets
from storbench.errors import ConfigError, TargetError
from storbench.execute import FioBinary
from storbench.store import Store
from storbench.target.files import FilesStorage
from storbench.target.here import HereTarget
from storbench.workload.plan import Plan
from storbench.workload.sizes import parse_size
from tests.conftest import needs_fio, needs_root


@dataclass
class RamDiskTarget(HereTarget):
    """A tmpfs of ``size`` bytes mounted for the run, then gone."""

    size: int = 0
    kind = "RAM disk"
    mounted: bool = field(default=False, init=False)

    @property
    def name(self) -> str:
        return f"ram://{self.size}"

    def preflight(self) -> None:
        pass  # nothing exists yet: check() makes it

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        self.path.mkdir(mode=0o700)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0700",
                               "storbench-ram", str(self.path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise TargetError(f"{self.name}: mount: {done.stderr.strip()}")
        self.mounted = True
        super().check(plan, fio, workdir)

    def describe(self, fio: FioBinary | None) -> dict[str, Any]:
        found = super().describe(fio)
        return {**found, "target": {**found["target"], "ram_disk_bytes": self.size}}

    def cleanup(self, hurry: bool = False) -> None:
        try:
            super().cleanup(hurry)
        finally:
            if self.mounted:
                subprocess.run(["umount", str(self.path)], check=True)
                self.mounted = False
            if self.path.exists():
                self.path.rmdir()


def _ram(word: str, f: targets.TargetFlags) -> targets.TargetFlags:
    """ram://SIZE: a RAM disk of SIZE for this run."""
    size = parse_size(word[len("ram://"):])
    if not size:
        raise ConfigError(f"TARGET {word!r}: ram://SIZE, e.g. ram://64m")
    place = Path(tempfile.gettempdir()) / f"storbench-ram-{os.urandom(6).hex()}"
    return replace(f, made=(*f.made, RamDiskTarget(FilesStorage(str(place)), size=size)))


ROOT = Path(__file__).resolve().parents[2]
# storbench as users start it (cli.main), with the one line that adds the target; in a
# process of its own (click keeps state of a command run in-process: the next test's
# help text changed)
WITH_RAM = ("import sys; from storbench.cli import main, targets;"
            " from tests.target.test_a_new_target import _ram;"
            " targets.SCHEMES = (*targets.SCHEMES, ('ram://', _ram)); main(sys.argv[1:])")


def storbench_with_ram(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STORBENCH_DB": str(db),
           "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT),
                                                       os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, "-c", WITH_RAM, *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


def _mounts() -> str:
    return Path("/proc/self/mounts").read_text()


@needs_root
@needs_fio
def test_a_new_target_is_its_class_and_one_scheme_line(store_path, tmpfs, tmp_path):
    before = set(Path(tempfile.gettempdir()).glob("storbench-ram-*"))
    job = tmp_path / "one.fio"
    job.write_text("[randrw]\nrw=randrw\nbs=4k\nsize=8m\nruntime=1\ntime_based=1\n")
    proc = storbench_with_ram("run", "ram://64m", str(tmpfs), "--job", str(job), "--json",
                              db=store_path)
    assert proc.returncode == 0, proc.stderr
    store = Store(store_path)
    try:
        ram, here = (store.get_run(i) for i in (1, 2))  # in the order given
    finally:
        store.close()
    assert ram.status == "completed" and ram.target == "ram://67108864"
    assert ram.environment["target"]["kind"] == "RAM disk"
    assert ram.environment["target"]["fs_type"] == "tmpfs"  # measured on the mount
    assert ram.environment["target"]["ram_disk_bytes"] == 64 * 2**20
    assert here.status == "completed" and here.target == str(tmpfs.resolve())
    assert set(ram.results_by_test()) == set(here.results_by_test()) != set()
    # gone after: the mount and its directory
    assert "storbench-ram" not in _mounts()
    assert set(Path(tempfile.gettempdir()).glob("storbench-ram-*")) == before


@needs_root
@needs_fio
def test_a_new_target_that_fails_is_cleaned_up_and_said(store_path):
    """A test larger than the RAM disk: the run is refused by the directory target's own
    check (no room), and the mount is gone all the same."""
    before = set(Path(tempfile.gettempdir()).glob("storbench-ram-*"))
    proc = storbench_with_ram("run", "ram://4m", "--suite", "quick", "--size", "32m",
                              db=store_path)
    assert proc.returncode == 1 and "not enough free space" in proc.stderr, proc.stderr
    assert "storbench-ram" not in _mounts()
    assert set(Path(tempfile.gettempdir()).glob("storbench-ram-*")) == before


def test_a_made_target_is_refused_beside_hosts_or_classes(store_path):
    for extra in (["--hosts", "ssh://db1"], ["--storage-class", "gp3"], ["k8s://gp3"]):
        proc = storbench_with_ram("run", "ram://64m", *extra, db=store_path)
        assert proc.returncode == ConfigError.exit_code, proc.stderr
        assert "cannot be combined" in proc.stderr or "not both" in proc.stderr, proc.stderr
    proc = storbench_with_ram("run", "ram://64m", "--hosts", "ssh://db1", db=store_path)
    assert "TARGET ram://64m cannot be combined" in proc.stderr, proc.stderr  # as typed
