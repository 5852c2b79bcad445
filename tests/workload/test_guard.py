"""Job files cannot reach outside the scratch directory: every option of fio that
names a path, a command or an engine, one by one, with real fio.

Each refused option is first shown to do what it does when fio runs it itself (a
file outside grows, a command runs); then storbench refuses it with one line and
nothing outside changes. Relative paths land inside storbench's own directories.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from storbench.errors import ConfigError
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.options import TABLE, Kind
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


@pytest.mark.parametrize("option", [k for k, kind in TABLE.items() if kind is Kind.PATH])
@pytest.mark.parametrize("value", ["/etc/x", "../x", "${HOME}/x", "a/../../x", "~/x"])
def test_every_path_option_refuses_what_leaves_the_scratch_directory(option, value):
    if option in ("mem", "iomem"):
        value = f"mmap:{value}"
    with pytest.raises(ConfigError, match=f"sets {option}=") as exc:
        prepared(f"{option}={value}\n")
    assert ("scratch directory" in str(exc.value) if "$" not in value
            else "fio would expand '$'" in str(exc.value))


def test_relative_paths_stay_inside():
    text = prepared("write_iolog=io.log\nread_iolog=in.log\nmem=mmap:buf\n"
                    "write_bw_log=bw\nfilename=data:more\n")
    assert "write_iolog=/scratch/storbench-1/io.log" in text
    assert "read_iolog=/scratch/storbench-1/in.log" in text
    assert "mem=mmap:/scratch/storbench-1/buf" in text
    assert "write_bw_log=bw" in text  # fio's client writes logs in storbench's work directory
    assert "directory=/scratch/storbench-1" in text
    assert "filename_format=$jobname.$jobnum.$filenum" in text  # storbench's own


@pytest.mark.parametrize("extra, needle", [
    ("exec_prerun=touch /tmp/sb-pwned\n", "does not run commands"),
    ("exec_postrun=touch /tmp/sb-pwned\n", "does not run commands"),
    ("ioengine=exec\nprogram=/bin/true\n", "exec engine runs a program"),
    ("ioengine=external:/tmp/evil.so\n", "external engine"),
    ("ioengine=/tmp/evil.so\n", "external engine"),
    ("ioengine=net\nhostname=127.0.0.1\nport=9\n", "I/O on files in the target"),
    # a unix socket: fio 3.33 binds it at the filename as it is, relative to its working
    # directory, not in directory= (directory=/tmp/x filename=rt.sock bound /rt.sock)
    ("ioengine=net\nprotocol=unix\nfilename=rt.sock\npingpong=1\n", "I/O on files in the target"),
    ("ioengine=sg\n", "I/O on files in the target"),
    ("ioengine=cpuio\n", "I/O on files in the target"),
    ("ioengine=something-new\n", "not known to storbench"),
    ("allow_mounted_write=1\n", "mounted device"),
    ("cgroup_weight=100\n", "cgroup"),
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


@needs_fio
def test_an_exec_engine_job_beside_a_load_is_no_failure(tmpfs, tmp_path, store_path):
    """fio's exec engine runs a program and moves no byte: 11 "I/Os" of 0 bytes in 1 s.
    With --allow-exec such a job (a monitor beside the load) is not taken for a job that
    did no I/O (a job with I/Os counted and no byte moved fails so)."""
    marker = tmp_path / "ran"
    path = tmp_path / "monitored.fio"
    path.write_text("[load]\nrw=randread\nsize=4m\ntime_based\nruntime=1\n\n"
                    f"[monitor]\nioengine=exec\nprogram=/usr/bin/touch\narguments={marker}\n"
                    "time_based\nruntime=1\n")
    proc = run_cli("run", str(tmpfs), "--job", str(path), "--allow-exec", db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()  # real fio ran the program
    run = json.loads(run_cli("show", "last", "--json", db=store_path).stdout)
    assert run["status"] == "completed"
    assert any(t["read"] and t["read"]["io_bytes"] > 0 for t in run["tests"]), run["tests"]


@needs_fio
def test_a_relative_iolog_is_written_in_the_scratch_directory(tmpfs, tmp_path, store_path):
    path = job(tmp_path, "write_iolog=io.log\n")
    proc = run_cli("run", str(tmpfs), "--job", str(path), db=store_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "io.log").exists() and not Path("io.log").exists()
    assert scratch_dirs(tmpfs) == []  # it went with the scratch directory


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


@needs_fio
def test_fio_itself_has_no_trigger_option_in_job_files(tmp_path):
    """fio's --trigger* are command-line options storbench never passes; in a job file
    fio rejects them, so nothing of the kind can come in through one."""
    proc = subprocess.run([FIO, "--parse-only", str(job(tmp_path, "trigger=touch /x\n"))],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "Bad option <trigger=touch /x>" in proc.stderr


# --- issue #26: names, '$', the table of every option, and the last look before fio ---

ATTACK = "rw=write\nbs=4k\nsize=64k\nbuffer_pattern=\"OWNED\"\n"


def attack_file(tmp_path: Path, header: str, extra: str = "") -> Path:
    path = tmp_path / "attack.fio"
    path.write_text(f"{header}\n{extra}{ATTACK}")
    return path


@needs_fio
def test_a_section_name_cannot_overwrite_a_file_outside(tmpfs, tmp_path, store_path):
    victims = tmpfs / "victims"
    victims.mkdir()
    victim = victims / "victim.txt"
    victim.write_text("precious\n")
    target = tmpfs / "a" / "b"
    target.mkdir(parents=True)
    # from storbench-<id> under the target: ../../../victims/victim.txt
    header = "[../../../victims/victim.txt]"
    raw = attack_file(tmp_path, header, "filename_format=$jobname\n")
    # what fio does with it (in a directory as deep as storbench's scratch directory)
    scratch = target / "storbench-raw"
    scratch.mkdir()
    subprocess.run([FIO, f"--directory={scratch}", str(raw)], check=True, capture_output=True)
    assert victim.read_text().startswith("OWNED")
    victim.write_text("precious\n")
    scratch.rmdir()
    for extra in ("filename_format=$jobname\n", ""):  # with fio's own format, and without
        proc = run_cli("run", str(target), "--job", str(attack_file(tmp_path, header, extra)),
                       db=store_path)
        assert_one_line_error(proc, 2, "[../../../victims/victim.txt]", "must be plain")
        assert victim.read_text() == "precious\n"
        assert scratch_dirs(target) == [] and sorted(tmpfs.iterdir()) == [tmpfs / "a", victims]


@needs_fio
@pytest.mark.parametrize("name, said", [
    # a line break would end directory= and begin an option of the directory's naming
    ("a\nexec_prerun=touch {marker}\ndescription=", "a line break"),
    ("a\rx", "a line break"),
    ("semi;x", "';'"),  # fio ends a value at ';' and '#' (a comment), with no escape
    ("hash#x", "'#'"),
    ("e\x1b]0;title\x07", "';'"),  # and said harmlessly: repr, no escape sequence
])
def test_a_directory_name_cannot_write_the_job_file(name, said, tmpfs, tmp_path, store_path):
    """A TARGET whose name fio's job files cannot carry is refused before fio starts and
    before the run is stored, even with --allow-exec (which trusts the job file, not the
    names of directories): its options never reach fio."""
    marker = tmp_path / "ran"
    target = tmpfs / name.format(marker=marker)
    target.mkdir(parents=True)  # the marker's path makes it several directories deep
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=write\nbs=4k\nsize=64k\n")
    proc = run_cli("run", str(target), "--job", str(job), "--allow-exec", db=store_path)
    assert_one_line_error(proc, 2, f"fio's job files cannot name a path with {said}")
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert not marker.exists() and list(target.iterdir()) == []
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"


@needs_fio
@pytest.mark.parametrize("mounted", [False, True])
def test_a_section_name_cannot_reach_a_device(tmp_path, store_path, mounted):
    from tests.conftest import IS_ROOT
    from tests.target.test_blockdev import Loop, mkfs

    if not IS_ROOT:
        pytest.skip("loop devices need root")
    loop = Loop(tmp_path)
    try:
        mkfs(loop.dev)
        if mounted:
            loop.mount(loop.dev, tmp_path / "mnt", "ro")  # read-only: ext4 writes nothing itself
        before = loop.digest()
        target = tmp_path / "t"
        target.mkdir()
        name = os.path.relpath(loop.dev, target / "storbench-x")
        proc = run_cli("run", str(target), "--job",
                       str(attack_file(tmp_path, f"[{name}]", "filename_format=$jobname\n")),
                       db=store_path)
        assert_one_line_error(proc, 2, "must be plain")
        assert loop.digest() == before
    finally:
        loop.close()


@needs_fio
def test_an_engine_from_the_environment_runs_nothing(tmpfs, tmp_path, store_path):
    marker = tmp_path / "ran"
    path = job(tmp_path, f"ioengine=${{VAR}}\nprogram=/usr/bin/touch\narguments={marker}\n")
    for value in ("exec", "net", "rbd"):
        proc = run_cli("run", str(tmpfs), "--job", str(path), db=store_path,
                       env={"VAR": value})
        assert_one_line_error(proc, 2, "ioengine=${VAR}", "expand '$'")
    assert not marker.exists()


@needs_fio
def test_the_e4defrag_donor_stays_inside(tmpfs, tmp_path, store_path):
    path = job(tmp_path, "ioengine=e4defrag\ndonorname=../../donor\n")
    proc = run_cli("run", str(tmpfs), "--job", str(path), db=store_path)
    assert_one_line_error(proc, 2, "donorname=../../donor", "leaves the directory")
    assert not (tmpfs.parent / "donor").exists() and scratch_dirs(tmpfs) == []


@pytest.mark.parametrize("extra, needle", [
    ("name=../x\n", "job name must be plain"),
    ("name=$x\n", "expand '$'"),
    ("wait_for=../y\n", "job name must be plain"),
    ("numjobs=$ncpus\n", "expand '$'"),
    ("size=${SIZE}\n", "expand '$'"),
    ("description=costs $5\n", "expand '$'"),
    ("buffer_pattern='/etc/hostname'\n", "reads a pattern"),
    ("verify_pattern='x'\n", "reads a pattern"),
    ("filename_format=$jobname\n", "names fio's files itself"),
    ("filename_format=x\n", "names fio's files itself"),
    ("frobnicate=1\n", "not an fio option storbench knows"),
    ("FileName=/etc/x\n", "not an fio option storbench knows"),
    ("hostname=127.0.0.1\n", "not an fio option storbench knows"),
])
def test_names_dollars_and_unknown_options_are_refused(extra, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        prepared(extra)


@pytest.mark.parametrize("header", ["[../x]", "[a/b]", "[..]", "[a b]", "[$jobname]", "[~x]",
                                    "[x;y]", "[é]"])
def test_section_names_must_be_plain(header):
    with pytest.raises(ConfigError, match="must be plain"):
        parse_jobfile(f"{header}\nrw=read\nsize=1m\n").prepared(Path("/s/storbench-1"))


def test_plain_names_and_allowed_values_pass():
    text = prepared("name=My_job-2.a\nbuffer_pattern=0xdeadbeef\nverify_pattern=\"abc\"\n"
                    "readwrite=randrw\nss_dur=5s\nioengine=io_uring\nfixedbufs\n")
    assert "name=My_job-2.a" in text and "ioengine=io_uring" in text


@pytest.mark.parametrize("text, needle", [
    ("[a]\nfilename=/etc/passwd\nrw=read\n", "is not inside"),
    ("[a]\nfilename=/s/storbench-1/../x\nrw=read\n", "is not inside"),
    ("[a]\ndirectory=/etc\nrw=read\n", "not inside"),
    # fio reads directory= as a ':' list: an unescaped ':' makes two directories
    ("[a]\ndirectory=/s/storbench-1:/etc\nrw=read\n", "not inside"),
    ("[a]\ndirectory=/s/storbench-1:x\nrw=read\n", "not inside"),
    ("[a]\nfilename_format=$jobname\nrw=read\n", "not storbench's own"),
    ("[a]\nfilename_format=../x.$jobname.$jobnum.$filenum\nrw=read\n", "not storbench's own"),
    ("[../a]\nrw=read\n", "must be plain"),
    ("[a]\nexec_prerun=true\nrw=read\n", "does not run commands"),
    ("[a]\nioengine=net\n", "I/O on files in the target"),
    ("[a]\ngtod_reduce=1\n", "drops latency"),
    ("[a]\nunified_rw_reporting=mixed\n", "reads and writes apart"),
])
def test_the_last_look_refuses_what_storbench_itself_might_build(text, needle):
    from storbench.workload.guard import check_final

    with pytest.raises(ConfigError, match=re.escape(needle)):
        check_final(parse_jobfile(text), ["/s/storbench-1"], allow_exec=False, source="t.fio")


def test_the_last_look_passes_storbench_own_job_files():
    from storbench.workload.guard import check_final

    jf = parse_jobfile(BASE + "write_iolog=io.log\nmem=mmap:b\n").prepared(
        Path("/s/storbench-1"))
    check_final(parse_jobfile(jf.render()), ["/s/storbench-1"], allow_exec=False, source="t")
    hosts = jf.for_host("storbench-1", "h0", shared=False).render()
    check_final(parse_jobfile(hosts), ["/s/storbench-1"], allow_exec=False, source="t")
    check_final(parse_jobfile("[a]\nfilename=/dev/loop7\nrw=read\n"), ["/dev/loop7"],
                allow_exec=False, source="t")


def test_a_scratch_directory_with_a_colon_is_one_directory_to_fio():
    """/mnt/a:b as directory= is /mnt/a and b to fio: storbench escapes it (fio's '\\:'),
    and judges each name of a ':' list as fio opens it."""
    from storbench.workload.guard import check_final, path_parts

    scratch = "/mnt/x:y/storbench-1"
    jf = parse_jobfile(BASE + "opendir=in:also\\:one\n").prepared(Path(scratch))
    text = jf.render()
    assert "directory=/mnt/x\\:y/storbench-1\n" in text
    assert "opendir=/mnt/x\\:y/storbench-1/in:/mnt/x\\:y/storbench-1/also\\:one\n" in text
    check_final(parse_jobfile(text), [scratch], allow_exec=False, source="t")
    assert path_parts("filename", "a\\:b:c") == ["a:b", "c"]
    assert path_parts("directory", "/mnt/x\\:y/s") == ["/mnt/x:y/s"]


def test_a_device_replay_reads_its_log_from_the_run_s_work_directory_only():
    """A replay on a device: fio reads the iolog storbench put in the run's own work
    directory; nothing may write there, and no other log is read from elsewhere."""
    from storbench.workload.guard import check_final

    work = ["/tmp/storbench-fio-1"]
    ok = ("[a]\nread_iolog=/tmp/storbench-fio-1/replay.iolog\nreplay_redirect=/dev/loop7\n"
          "filename=/dev/loop7\nrw=randrw\n")
    check_final(parse_jobfile(ok), ["/dev/loop7"], allow_exec=False, source="t",
                reads_from=work)
    for text in (ok,  # without the work directory given, refused
                 "[a]\nread_iolog=/etc/x.iolog\nfilename=/dev/loop7\n",
                 "[a]\nread_iolog=/tmp/storbench-fio-1/../x.iolog\nfilename=/dev/loop7\n",
                 "[a]\nwrite_iolog=/tmp/storbench-fio-1/replay.iolog\nfilename=/dev/loop7\n",
                 "[a]\nfilename=/tmp/storbench-fio-1/replay.iolog\n",
                 "[a]\nreplay_redirect=/dev/sda\nfilename=/dev/loop7\n"):
        with pytest.raises(ConfigError, match="not inside"):
            check_final(parse_jobfile(text), ["/dev/loop7"], allow_exec=False, source="t",
                        reads_from=[] if text == ok else work)
