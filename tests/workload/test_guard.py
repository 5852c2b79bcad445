"""Job files cannot reach outside the scratch directory: every option of fio that
names a path, a command or an engine, one by one, with real fio.

Each refused option is first shown to do what it does when fio runs it itself (a
file outside grows, a command runs); then storbench refuses it with one line and
nothing outside changes. Relative paths land inside storbench's own directories.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from storbench.errors import ConfigError
from storbench.workload.guard import OPTIONS, Risk
from storbench.workload.jobfile import parse_jobfile
from tests.cli.test_cli import assert_one_line_error, scratch_dirs
from tests.conftest import FIO, needs_fio, run_cli

BASE = "[x]\nrw=write\nbs=4k\nsize=64k\n"


def job(tmp_path: Path, extra: str, name: str = "j.fio") -> Path:
    path = tmp_path / name
    path.write_text(BASE + extra)
    return path


def prepared(extra: str, allow_exec: bool = False) -> str:
    return parse_jobfile(BASE + extra).prepared(Path("/scratch/storbench-1"),
                                                allow_exec=allow_exec).render()


@pytest.mark.parametrize("option", [k for k, (risk, _) in OPTIONS.items() if risk is Risk.PATH])
@pytest.mark.parametrize("value", ["/etc/x", "../x", "${HOME}/x", "a/../../x", "~/x"])
def test_every_path_option_refuses_what_leaves_the_scratch_directory(option, value):
    if option in ("mem", "iomem"):
        value = f"mmap:{value}"
    with pytest.raises(ConfigError, match=f"sets {option}=") as exc:
        prepared(f"{option}={value}\n")
    assert "scratch directory" in str(exc.value)


def test_relative_paths_stay_inside():
    text = prepared("write_iolog=io.log\nread_iolog=in.log\nmem=mmap:buf\n"
                    "write_bw_log=bw\nfilename=data:more\nfilename_format=$jobname.$jobnum\n")
    assert "write_iolog=/scratch/storbench-1/io.log" in text
    assert "read_iolog=/scratch/storbench-1/in.log" in text
    assert "mem=mmap:/scratch/storbench-1/buf" in text
    assert "write_bw_log=bw" in text  # fio's client writes logs in storbench's work directory
    assert "directory=/scratch/storbench-1" in text


@pytest.mark.parametrize("extra, needle", [
    ("exec_prerun=touch /tmp/sb-pwned\n", "does not run commands"),
    ("exec_postrun=touch /tmp/sb-pwned\n", "does not run commands"),
    ("ioengine=exec\nprogram=/bin/true\n", "exec engine runs a program"),
    ("ioengine=external:/tmp/evil.so\n", "external engine"),
    ("ioengine=/tmp/evil.so\n", "external engine"),
    ("ioengine=net\nhostname=127.0.0.1\nport=9\n", "no I/O in the target directory"),
    ("ioengine=sg\n", "no I/O in the target directory"),
    ("ioscheduler=none\n", "I/O scheduler"),
    ("cgroup=storbench-x\n", "cgroups"),
    ("profile=act\n", "built-in fio profile"),
])
def test_commands_engines_and_system_changes_are_refused(extra, needle):
    with pytest.raises(ConfigError, match=needle):
        prepared(extra)


def test_allow_exec_lets_commands_through_but_never_paths():
    assert "exec_prerun=true" in prepared("exec_prerun=true\n", allow_exec=True)
    assert "ioengine=exec" in prepared("ioengine=exec\nprogram=/bin/true\n", allow_exec=True)
    with pytest.raises(ConfigError, match="absolute path"):
        prepared("write_iolog=/etc/x\n", allow_exec=True)




@pytest.mark.integration
@needs_fio
def test_write_iolog_outside_is_refused_and_the_file_does_not_grow(tmpfs, tmp_path,
                                                                   store_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("22 bytes of precious\n")
    # what fio does with it on its own: the file grows
    raw = tmp_path / "raw"
    raw.mkdir()
    own = tmp_path / "own.txt"
    own.write_text("22 bytes of precious\n")
    subprocess.run([FIO, f"--directory={raw}", str(job(tmp_path, f"write_iolog={own}\n",
                                                       "raw.fio"))],
                   check=True, capture_output=True)
    assert own.stat().st_size > 22
    proc = run_cli("run", str(tmpfs), "--job", str(job(tmp_path, f"write_iolog={victim}\n")),
                   db=store_path)
    assert_one_line_error(proc, 2, "write_iolog=", "absolute path", "scratch directory")
    assert victim.read_text() == "22 bytes of precious\n"
    assert scratch_dirs(tmpfs) == []


@pytest.mark.integration
@needs_fio
def test_exec_prerun_runs_only_with_allow_exec(tmpfs, tmp_path, store_path):
    marker = tmp_path / "ran"
    path = job(tmp_path, f"exec_prerun=touch {marker}\n")
    refused = run_cli("run", str(tmpfs), "--job", str(path), db=store_path)
    assert_one_line_error(refused, 2, "exec_prerun=", "--allow-exec")
    assert not marker.exists()
    allowed = run_cli("run", str(tmpfs), "--job", str(path), "--allow-exec", db=store_path)
    assert allowed.returncode == 0, allowed.stderr
    assert marker.exists()  # real fio ran the command


@pytest.mark.integration
@needs_fio
def test_a_relative_iolog_is_written_in_the_scratch_directory(tmpfs, tmp_path, store_path):
    path = job(tmp_path, "write_iolog=io.log\n")
    proc = run_cli("run", str(tmpfs), "--job", str(path), db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "io.log").exists() and not Path("io.log").exists()
    assert scratch_dirs(tmpfs) == []  # it went with the scratch directory


@pytest.mark.integration
@needs_fio
def test_environment_variables_in_paths_are_refused_because_fio_expands_them(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    # fio itself expands ${HOME}: the path is whatever the environment says
    subprocess.run([FIO, str(job(tmp_path, "filename=${HOME}/x\n"))], cwd=tmp_path,
                   check=True, capture_output=True, env={"HOME": str(home), "PATH": "/usr/bin"})
    assert (home / "x").exists()
    with pytest.raises(ConfigError, match="expand"):
        prepared("filename=${HOME}/x\n")


@pytest.mark.integration
@needs_fio
def test_fio_itself_has_no_trigger_option_in_job_files(tmp_path):
    """fio's --trigger* are command-line options storbench never passes; in a job file
    fio rejects them, so nothing of the kind can come in through one."""
    proc = subprocess.run([FIO, "--parse-only", str(job(tmp_path, "trigger=touch /x\n"))],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "Bad option <trigger=touch /x>" in proc.stderr
