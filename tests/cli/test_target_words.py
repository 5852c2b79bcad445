"""TARGET words read by a table (cli/targets.SCHEMES): k8s://CLASS and
ssh://HOST[,HOST...]/PATH are the same runs as their flags; anything else is a path."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from storbench.cli.targets import TargetFlags, read_targets
from storbench.errors import ConfigError
from tests.cli.test_cli import assert_one_line_error
from tests.conftest import needs_fio, run_cli


def flags(*words: str, **more: object) -> TargetFlags:
    return replace(TargetFlags((), None, None, False, None, (), {}, None, False, None,
                               words=words), **more)


def test_each_word_becomes_what_its_flags_would_say():
    f = read_targets(flags("/mnt/a", "rel/b"))
    assert f.given == (Path("/mnt/a"), Path("rel/b")) and f.hosts_text is None
    f = read_targets(flags("k8s://gp3", "k8s://efs.sc"))
    assert f.storage_classes == ("gp3", "efs.sc") and f.given == ()
    f = read_targets(flags("ssh://root@db1:2222,db2,[::1]:22/data/x"))
    assert f.hosts_text == "ssh://root@db1:2222,ssh://db2,ssh://[::1]:22"
    assert f.given == (Path("/data/x"),)
    f = read_targets(flags("ssh://db1/dev/nvme1n1"))
    assert f.given == (Path("/dev/nvme1n1"),)  # a device on the hosts, as --hosts says


@pytest.mark.parametrize("word, said", [
    ("http://x/y", "a scheme storbench does not know"),
    ("gs://bucket", "a scheme storbench does not know"),
    ("k8s://../etc", "names a StorageClass"),
    ("k8s://Fast", "names a StorageClass"),
    ("k8s://", "names a StorageClass"),
    ("ssh://db1", "needs the hosts and the absolute path"),
    ("ssh:///data", "needs the hosts and the absolute path"),
    # what would be an ssh option, a shell word or another user's name is no host
    ("ssh://-oProxyCommand=id/x", "is not ssh://"),
    ("ssh://db1;id/x", "is not ssh://"),
    ("ssh://$(id)@db1/x", "is not ssh://"),
    ("ssh://db1,,db2/x", "is not ssh://"),
    # Path("") is ".": an unset variable ("$DIR") would have measured where it was started
    ("", "is empty (an unset variable?)"),
    (" ", "is empty (an unset variable?)"),
])
def test_a_word_that_names_nothing_it_can_reach_is_refused(word, said):
    with pytest.raises(ConfigError, match=re.escape(said)):
        read_targets(flags(word))


def test_hosts_are_named_once():
    with pytest.raises(ConfigError, match="leave out --hosts"):
        read_targets(flags("ssh://db1/x", hosts_text="ssh://db2"))


def test_k8s_word_makes_the_same_dry_run_as_the_flag(tmp_path):
    """The manifests of `run k8s://CLASS --dry-run` are those of --storage-class CLASS
    (names aside: each run has its own id); nothing is created (no cluster is asked)."""
    word = run_cli("run", "k8s://local-hostpath", "--suite", "quick", "--dry-run",
                   db=tmp_path / "r.db")
    flag = run_cli("run", "--storage-class", "local-hostpath", "--suite", "quick",
                   "--dry-run", db=tmp_path / "r.db")
    assert word.returncode == 0 and flag.returncode == 0, word.stderr + flag.stderr

    def plain(text: str) -> str:
        # the run's id, in names and labels; YAML quotes an id of digits only (a label
        # '123456789012', not the number), as about 1 in 280 ids are: a flake until
        # 2026-12-05
        return re.sub(r"'?\b[0-9a-f]{12}\b'?", "ID", text)

    assert plain(word.stdout) == plain(flag.stdout) and "storageClassName: local-hostpath" \
        in word.stdout


def test_a_bad_word_is_one_line_of_error(tmp_path):
    proc = run_cli("run", "ftp://x/y", db=tmp_path / "r.db")
    assert_one_line_error(proc, proc.returncode, "a scheme storbench does not know")


SMALL = "[w]\nrw=randwrite\nbs=4k\nsize=1m\nio_size=256k\n"


@needs_fio
def test_a_path_relative_to_where_storbench_starts(tmpfs, tmp_path):
    """`storbench run .` and `run data`: the directory where storbench was started (fio
    starts in the run's work directory: its scratch directory and its confinement were
    given relative to the wrong one, and every such run failed with exit 126, "cannot
    confine fio", until this was mended)."""
    job = tmp_path / "w.fio"
    job.write_text(SMALL)
    data = tmpfs / "data"
    data.mkdir()
    db = tmp_path / "r.db"
    for where, word in ((data, "."), (tmpfs, "data"), (data / "..", "data/")):
        proc = run_cli("run", word, "--job", str(job), db=db, cwd=where)
        assert proc.returncode == 0, (word, proc.stderr)
        assert "Run #" in proc.stdout and "completed" in proc.stdout, proc.stdout
        assert list(data.iterdir()) == [] and sorted(p.name for p in tmpfs.iterdir()) \
            == ["data"], "the scratch directory went where it should and is gone"
    runs = [r["target"] for r in json.loads(run_cli("list", "--json", db=db).stdout)]
    assert runs == [str(data)] * 3, runs
    proc = run_cli("run", "", "--job", str(job), db=db, cwd=data)
    assert_one_line_error(proc, 2, "TARGET '' is empty")
    assert list(data.iterdir()) == []
    # a directory whose name has a ':' (fio reads /a:b as /a and b; escaped for it)
    colon = tmpfs / "x:y"
    colon.mkdir()
    (tmpfs / "x").mkdir()  # what fio would have taken as the first directory
    proc = run_cli("run", str(colon), "--job", str(job), db=db)
    assert proc.returncode == 0, proc.stderr
    assert list(colon.iterdir()) == [] and list((tmpfs / "x").iterdir()) == []
    # on hosts a relative path is relative to each fio server's own directory: refused
    proc = run_cli("run", "data", "--hosts", "127.0.0.9:1", "--job", str(job), db=db)
    assert_one_line_error(proc, 2, "TARGET is the absolute path on the hosts: 'data'")
