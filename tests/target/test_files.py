"""Files in a directory as a storage (target/files.py): the rules every place shares.

The room rules are judged on what places said (a Room per worker); the removal between
tests runs for real, in `sh` on a real directory, as it runs in a pod; every place's
own run on real fio is in its own tests (directory, hosts over SSH, pods).
"""

from __future__ import annotations

import subprocess

import pytest

from storbench.errors import TargetError
from storbench.target.files import Files, FilesStorage, Room, remove_script, run_file_name
from storbench.target.here import HereTarget
from storbench.workload.jobfile import parse_jobfile
from storbench.workload.plan import Plan, PlannedTest

MiB = 2**20


def plan(*sizes_mib: int) -> Plan:
    return Plan("t", [PlannedTest(f"t{i}", "", parse_jobfile(
        f"[j]\nrw=write\nbs=4k\nsize={s}m\n"), None) for i, s in enumerate(sizes_mib)])


def refusal(files: Files, *args: object) -> str:
    with pytest.raises(TargetError) as exc:
        files.check(*args)  # type: ignore[arg-type]
    return str(exc.value)


def test_one_worker_needs_room_for_the_largest_test():
    here = Files("/mnt/x")
    here.check(plan(8, 16), [Room("", 16 * MiB)])  # fits exactly
    said = refusal(here, plan(8, 16), [Room("", 12 * MiB)])
    assert said == ("not enough free space in '/mnt/x' for test 't1': it needs 16.0 MiB,"
                    " 12.0 MiB are free; pass a smaller --size or another target")
    ramfs = refusal(here, plan(16), [Room("", MiB, "of memory available (ramfs …)")])
    assert "1.0 MiB of memory available (ramfs …)" in ramfs


def test_each_worker_is_judged_and_only_those_that_said():
    hosts = Files("/data", every="host", hint="pass a smaller --size or another path")
    rooms = [Room("a", 64 * MiB), Room("b", 8 * MiB), Room("c", None), Room("d", 4 * MiB)]
    said = refusal(hosts, plan(16), rooms)
    assert said == ("not enough free space in '/data' for test 't0': it needs 16.0 MiB on"
                    " each host; b has 8.0 MiB free, d has 4.0 MiB free; pass a smaller"
                    " --size or another path")
    hosts.check(plan(16), [Room("a", 64 * MiB), Room("c", None)])  # c could not say


def test_workers_that_share_the_directory_need_room_for_all_their_files():
    hosts = Files("/nfs", every="host")
    rooms = [Room(w, 40 * MiB) for w in "abc"]
    hosts.check(plan(16), rooms, [["a", "b"], ["c"]])  # 32 of 40 MiB
    said = refusal(hosts, plan(16), rooms, [["a", "b", "c"]])
    assert ("a, b, c share it (each sees the others' files), so their 3 files need 48.0 MiB"
            " at once; 40.0 MiB are free; pass a smaller --size, fewer hosts, or"
            " --shared-file") in said
    shared = Files("/nfs", shared_file=True, every="host")
    shared.check(plan(16), rooms, [["a", "b", "c"]])  # one file for all
    assert shared.needed(plan(8, 16), 3) == (16 * MiB, "t1")
    assert hosts.needed(plan(8, 16), 3) == (48 * MiB, "t1")


def test_between_tests_the_kept_files_count():
    here = Files("/mnt/x")
    test = plan(32).tests[0]
    here.between(test, 24 * MiB, Room("", 8 * MiB))  # 8 MiB more than is kept
    with pytest.raises(TargetError, match=r"it needs 8\.0 MiB, 7\.0 MiB are free"):
        here.between(test, 24 * MiB, Room("", 7 * MiB))


def test_each_worker_names_its_own_files_or_the_shared_one():
    job = parse_jobfile("[r]\nrw=randread\nsize=8m\n[w]\nrw=write\nsize=8m\nfilename=a:b\n")
    own = Files("/d").for_worker(job, "storbench-u1", "h2").render()
    assert "filename_format=storbench-u1-h2." in own
    assert "filename=storbench-u1-h2-a:storbench-u1-h2-b" in own
    shared = Files("/d", shared_file=True).for_worker(job, "storbench-u1", "h2").render()
    assert "h2" not in shared and "filename=storbench-u1-r.data" in shared
    assert Files("/d").for_worker(job, "storbench-u1", None) is job  # its own directory


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/b", "", ".", ".."])
def test_a_file_of_storbench_s_cannot_leave_the_run_s_files(name):
    with pytest.raises(ValueError, match="not a plain file name"):
        run_file_name(name)


def test_a_place_s_file_of_storbench_s_cannot_leave_either(tmp_path):
    target = HereTarget(FilesStorage(str(tmp_path)))
    (tmp_path / "storbench-u1").mkdir()
    with pytest.raises(ValueError, match="not a plain file name"):
        target.put_file("u1", "../escaped", lambda where: "x")
    assert not (tmp_path / "escaped").exists()


def test_the_removal_between_tests_keeps_only_what_is_named(tmp_path):
    """Run in a real shell on a real directory, as a pod runs it: every file and
    directory goes (dot files too, a name with a space or a quote), but the kept ones;
    a kept name that is a way out (`../x`) keeps nothing outside and removes nothing
    there; a directory name with a space and a quote is one directory."""
    scratch = tmp_path / "scratch it's"
    scratch.mkdir()
    outside = tmp_path / "x"
    outside.write_text("mine")
    for name in ("t0.0.0", ".hidden", "..odd", "a b", "it's", "kept 1", "kept'2"):
        (scratch / name).write_text(name)
    (scratch / "sub").mkdir()
    (scratch / "sub" / "f").write_text("f")
    (scratch / "link").symlink_to(outside)
    script = remove_script(str(scratch), {"kept 1", "kept'2", "../x", "nope"})
    subprocess.run(["sh", "-c", script], check=True, timeout=30)
    assert sorted(p.name for p in scratch.iterdir()) == ["kept 1", "kept'2"]
    assert outside.read_text() == "mine"  # the link went, not what it points at
    nothing_kept = remove_script(str(scratch), set())
    subprocess.run(["sh", "-c", nothing_kept], check=True, timeout=30)
    assert list(scratch.iterdir()) == []
