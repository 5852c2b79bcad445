"""The third layer alone: fio confined by the kernel (Landlock) stops the section-name
attacks of issue #26 even when the name and option checks are not there.

Each attack is a job file the checks refuse (tests/workload/test_guard.py); here it
goes straight to the executor's fio process, past every check, as a bug in them
would let it. It is first shown to work on plain fio, then to fail confined, with
fio's own "Permission denied" and nothing outside touched. Real fio, real files, a
real loop device with ext4 on it (mounted and not).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from storbench.execute import SignalGuard, confine
from storbench.execute.fio import find_fio
from storbench.execute.local import Confinement, FioProcess
from tests.conftest import FIO, IS_ROOT, needs_fio
from tests.target.test_blockdev import Loop, mkfs

pytestmark = [needs_fio,
              pytest.mark.skipif(not confine.abi(), reason="the kernel offers no Landlock")]

PRECIOUS = "precious: written by the test\n"


def places(tmp_path: Path) -> tuple[Path, Path]:
    scratch, work = tmp_path / "target" / "storbench-t", tmp_path / "work"
    scratch.mkdir(parents=True)
    work.mkdir()
    return scratch, work


def run_fio(text: str, scratch: Path, work: Path, confinement: Confinement | None,
            may_exec: bool = False) -> tuple[int, str]:
    """One job file through storbench's fio process, no check in front: (status, fio's
    words)."""
    with SignalGuard() as guard:
        process = FioProcess(find_fio(), work, guard, confinement)
        path = process.write(text, "attack.fio")
        done = process.run([str(path)], path.with_suffix(".json"), None, deadline_s=60,
                           may_exec=may_exec)
    out = path.with_suffix(".json")
    return done.returncode, done.stderr + (out.read_text() if out.exists() else "")


def denied(said: str) -> bool:
    """fio's words for EACCES (its message is cut short after a long path)."""
    return "Permission denied" in said or "err=13/" in said


def section_attack(name: str, scratch: Path) -> str:
    return (f"[{name}]\ndirectory={scratch}\nfilename_format=$jobname\nrw=write\nbs=4k\n"
            "size=64k\nbuffer_pattern=\"OWNED\"\n")


def test_a_section_name_cannot_overwrite_a_file_outside(tmp_path):
    scratch, work = places(tmp_path)
    victims = tmp_path / "victims"
    victims.mkdir()
    victim = victims / "victim.txt"
    name = os.path.relpath(victim, scratch)  # ../../victims/victim.txt
    victim.write_text(PRECIOUS)
    status, _ = run_fio(section_attack(name, scratch), scratch, work, None)
    assert status == 0 and victim.read_text().startswith("OWNED")  # what it does unconfined
    victim.write_text(PRECIOUS)
    status, said = run_fio(section_attack(name, scratch), scratch, work, Confinement((scratch,)))
    assert status != 0 and denied(said)
    assert victim.read_text() == PRECIOUS


def test_the_section_name_alone_cannot_make_a_file_outside(tmp_path):
    scratch, work = places(tmp_path)
    text = f"[../x]\ndirectory={scratch}\nrw=write\nbs=4k\nsize=64k\n"
    status, said = run_fio(text, scratch, work, Confinement((scratch,)))
    assert status != 0 and denied(said)
    assert not (scratch.parent / "x.0.0").exists()


@pytest.mark.skipif(not IS_ROOT, reason="loop devices need root")
@pytest.mark.parametrize("mounted", [False, True])
def test_a_section_name_cannot_wipe_a_device(tmp_path, mounted):
    scratch, work = places(tmp_path)
    loop = Loop(tmp_path)
    try:
        mkfs(loop.dev)
        if mounted:
            loop.mount(loop.dev, tmp_path / "mnt", "ro")  # read-only: ext4 writes nothing itself
        before = loop.digest()
        name = os.path.relpath(loop.dev, scratch)  # ../../../../dev/loopN
        status, said = run_fio(section_attack(name, scratch), scratch, work,
                               Confinement((scratch,)))
        assert status != 0 and denied(said), said[:2000]
        assert loop.digest() == before
        found = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", loop.dev],
                               capture_output=True, text=True).stdout.strip()
        assert found == "ext4"
    finally:
        loop.close()


@pytest.mark.skipif(not IS_ROOT, reason="loop devices need root")
def test_the_device_named_with_destructive_is_written(tmp_path):
    scratch, work = places(tmp_path)
    loop = Loop(tmp_path)
    try:
        text = f"[w]\nfilename={loop.dev}\nrw=write\nbs=64k\nsize=1m\ndirect=1\n"
        status, said = run_fio(text, scratch, work, Confinement(files=(loop.dev,)))
        assert status == 0, said
        assert Path(loop.dev).read_bytes()[:4096] != bytes(4096)
        status, said = run_fio(text, scratch, work, Confinement())  # not named: refused
        assert status != 0 and denied(said)
    finally:
        loop.close()


def test_commands_run_only_when_the_job_may_exec(tmp_path):
    """Without --allow-exec the kernel runs no program but fio; with it the job file is
    trusted (a command may drop the page cache): fio runs unconfined."""
    scratch, work = places(tmp_path)
    inside, outside = scratch / "ran", tmp_path / "ran"
    text = (f"[a]\ndirectory={scratch}\nrw=write\nbs=4k\nsize=64k\n"
            f"exec_prerun=/usr/bin/touch {inside} {outside}\n")
    run_fio(text, scratch, work, Confinement((scratch,)))
    assert not inside.exists()  # the kernel refused to execute touch
    assert not outside.exists()
    run_fio(text, scratch, work, Confinement((scratch,)), may_exec=True)
    assert inside.exists() and outside.exists()  # --allow-exec: trusted, not confined


def test_an_ordinary_job_runs_confined_with_its_logs(tmp_path):
    scratch, work = places(tmp_path)
    text = (f"[a]\ndirectory={scratch}\nfilename_format=$jobname.$jobnum.$filenum\n"
            "rw=randwrite\nbs=4k\nsize=1m\nwrite_bw_log=bw\nlog_avg_msec=100\n")
    status, said = run_fio(text, scratch, work, Confinement((scratch,)))
    assert status == 0, said
    assert (scratch / "a.0.0").exists() and list(work.glob("bw_bw*.log"))


def test_the_loader_of_fio_is_found_and_scripts_are_not_elf():
    loader = confine.interpreter(FIO or "fio")
    assert loader and Path(loader).exists()
    assert confine.interpreter("/usr/bin/ldd") is None  # a shell script
    assert confine.status()[0] and "Landlock ABI" in confine.status()[1]
