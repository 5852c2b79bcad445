"""Issue #26, item 6: one clear line, never a traceback, never a secret, never an escape
sequence obeyed. Each case is caused for real through the `storbench` command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.conftest import needs_fio, run_cli

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"
EVIL = "evil\x1b]0;pwned\x07\x1b[2J\x1b[31mRED\u202e"


@pytest.mark.parametrize("flags, needle", [
    (["--runtime", "nan"], "'nan' is not a finite number"),
    (["--runtime", "inf"], "'inf' is not a finite number"),
    (["--threshold", "-inf"], "'-inf' is not a finite number"),
    (["--repeat", "abc"], "'abc' is not a valid integer"),
    (["--frobnicate"], "No such option '--frobnicate'"),
])
def test_a_bad_flag_is_one_line_and_exit_2(flags, needle, tmp_path, store_path):
    proc = run_cli("run", str(tmp_path), *flags, db=store_path)
    assert_one_line_error(proc, 2, needle, "see `storbench run --help`")
    assert "Usage:" not in proc.stderr and "Try '" not in proc.stderr


def test_a_baseline_that_is_not_there_is_a_usage_error(store_path):
    run_cli("import", str(DATA / "randread.json"), "--label", "a", db=store_path)
    for ref in ("nonexistent", "999"):
        proc = run_cli("check", "last", "--baseline", ref, db=store_path)
        assert_one_line_error(proc, 2, f"--baseline {ref}")


def test_job_files_that_include_themselves_or_never_end(tmp_path, store_path):
    one, two = tmp_path / "one.fio", tmp_path / "two.fio"
    one.write_text("[a]\nrw=read\nsize=1m\ninclude two.fio\n")
    two.write_text("include one.fio\n")
    proc = run_cli("run", str(tmp_path), "--job", str(one), db=store_path)
    assert_one_line_error(proc, 2, "includes itself")
    for name in ("/dev/zero", "/dev/stdin", str(tmp_path)):
        proc = run_cli("run", str(tmp_path), "--job", name, db=store_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    big = tmp_path / "big.fio"
    big.write_text("[a]\n" + "# padding\n" * 200_000)
    proc = run_cli("run", str(tmp_path), "--job", str(big), db=store_path)
    assert_one_line_error(proc, 2, "larger than 1 MiB")
    proc = run_cli("import", "/dev/zero", db=store_path)
    assert_one_line_error(proc, 2, "'/dev/zero' is not a regular file")


def test_an_included_file_is_never_quoted(tmp_path, store_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$y$j9T$SECRET-HASH:19000:0:99999:7:::\n")
    job = tmp_path / "inc.fio"
    job.write_text(f"[a]\nrw=read\ninclude {secret}\n")
    proc = run_cli("run", str(tmp_path), "--job", str(job), db=store_path)
    assert_one_line_error(proc, 2, f"{secret}:1")
    assert "SECRET-HASH" not in proc.stderr + proc.stdout

    # an INI file parses as sections: its options were quoted by the option check
    # ("job [client] sets password=..."): a CI log of a job file that includes ~/.my.cnf,
    # ~/.pypirc or ~/.aws/credentials showed the password
    for text in ("[client]\npassword=SECRET-PW\n",  # an option storbench does not know
                 "[x]\nfilename=/SECRET-PW\n",  # one it knows, with a value it refuses
                 "[SECRET-PW$x]\nrw=read\n"):  # a name it refuses
        secret.write_text(text)
        proc = run_cli("run", str(tmp_path), "--job", str(job), db=store_path)
        assert_one_line_error(proc, 2, f"{secret} (included): a section it holds (the job"
                                       " file's section 2")
        assert "SECRET-PW" not in proc.stderr + proc.stdout
    assert run_cli("list", "--json", db=store_path).stdout.strip() == "[]"


def test_a_password_is_never_shown(tmp_path):
    from tests.testbed import free_port

    port = free_port()
    for url in (f"postgresql://bench@127.0.0.1:{port}/s?password=s3cretpw&sslmode=disable",
                f"postgresql://bench:s3cretpw@127.0.0.1:{port}/s",
                f"postgresql://bench:s3cret%40pw@127.0.0.1:{port}/s"):
        proc = run_cli("list", db=url)  # type: ignore[arg-type]  # nobody listens
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert "s3cret" not in proc.stderr + proc.stdout, proc.stderr
        assert "***" in proc.stderr
        assert not Path("postgresql:").exists()  # never taken for a SQLite file's path


@pytest.mark.parametrize(("args", "said"), [
    # ssh takes no password in an address: it was quoted back whole in the refusal
    (["run", "/srv", "--hosts", "ssh://root:s3cretpw@127.0.0.1:1"],
     "'ssh://root:***@127.0.0.1:1': an SSH address takes no password"),
    (["run", "/srv", "--hosts", "root:s3cretpw@127.0.0.1"],
     "'root:***@127.0.0.1': an SSH address takes no password"),
    (["run", "ssh://root:s3cretpw@127.0.0.1/srv"], "TARGET 'ssh://root:***@127.0.0.1/srv'"),
    # any error that quotes a URL a user typed (here: as a run's name)
    (["show", "http://bench:s3cretpw@example.com"], "'http://bench:***@example.com' is"),
    (["push", "1", "--pushgateway", "bench:s3cretpw@127.0.0.1"], "'bench:***@127.0.0.1'"),
])
def test_a_password_typed_in_an_address_is_never_said(args, said, store_path):
    assert run_cli("import", str(DATA / "randread.json"), db=store_path).returncode == 0
    proc = run_cli(*args, db=store_path)
    assert_one_line_error(proc, proc.returncode, said)
    assert proc.returncode in (1, 2) and "s3cret" not in proc.stderr + proc.stdout


def test_only_the_password_of_an_address_is_hidden():
    from storbench.errors import without_passwords

    assert without_passwords("'https://u:p@h:1/x', postgresql://u:p%40w@h/db") == \
        "'https://u:***@h:1/x', postgresql://u:***@h/db"
    kept = ("give http://USER:PASSWORD@HOST:PORT; 'ssh://u@[::1]:22', 'h1:8766',"
            " 'sock:/run/a@b', 'a@b:c', filename=/x:y@z")
    assert without_passwords(kept) == kept


def test_the_socket_form_shows_its_host_not_none():
    from storbench.store.postgres import shown

    assert shown("postgresql://u:pw@/db?host=/run/postgresql") == \
        "postgresql://u:***@/db?host=/run/postgresql"
    assert shown("postgresql:///db?host=/tmp&password=x") == "postgresql:///db?host=/tmp&password=***"


def test_escape_sequences_from_the_database_are_shown_not_obeyed(tmp_path, store_path):
    doc = json.loads((DATA / "randread.json").read_text())
    doc["jobs"][0]["jobname"] = f"job{EVIL}"
    source = tmp_path / "evil.json"
    source.write_text(json.dumps(doc))
    refused = run_cli("import", str(source), "--label", EVIL, db=store_path)
    assert_one_line_error(refused, 2, "a label must be printable text")  # shown, not obeyed
    assert "\x1b" not in refused.stderr and "\u202e" not in refused.stderr
    imported = run_cli("import", str(source), "--label", "evil", "--tag", f"k={EVIL}",
                       db=store_path)
    assert imported.returncode == 0, imported.stderr
    # a label such as a database written by another tool (or an older storbench) holds
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE runs SET label = ?", (EVIL,))
    outputs = [imported.stderr,
               run_cli("list", db=store_path).stdout,
               run_cli("show", "last", db=store_path).stdout,
               run_cli("compare", "last", db=store_path).stdout,
               run_cli("export", "last", "--format", "md", db=store_path).stdout,
               run_cli("export", "last", "--format", "csv", db=store_path).stdout]
    for said in outputs:
        assert "\x1b" not in said and "\x07" not in said and "\u202e" not in said, repr(said)
    assert "evil\\x1b]0;pwned" in outputs[1] and "\\u202e" in outputs[1]
    assert "job" in outputs[2] and "\\x1b[2J" in outputs[2]


def test_a_spreadsheet_never_runs_a_label(store_path):
    import csv
    import io

    for label in ('=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)"):
        run_cli("import", str(DATA / "randread.json"), "--label", label, db=store_path)
    with sqlite3.connect(store_path) as db:  # a target as another tool may have stored it
        db.execute("DROP TRIGGER runs_final")
        db.execute("UPDATE runs SET target = '=cmd|'' /C calc''!A0' WHERE id = 1")
    text = run_cli("export", "1", "2", "3", "4", "--format", "csv", db=store_path).stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["label"] for row in rows] == [
        "'=HYPERLINK(\"http://x\",\"y\")", "'+1+1", "'-2+3", "'@SUM(A1)"]
    assert rows[0]["target"] == "'=cmd|' /C calc'!A0" and rows[1]["target"].startswith("/")


def test_an_ssh_user_cannot_be_an_ssh_option(tmp_path, store_path):
    marker = tmp_path / "ran"
    for host in (f"ssh://-oProxyCommand=touch {marker}@127.0.0.1",
                 f"ssh://-oProxyCommand=touch%20{marker}@h", "ssh://-h"):
        proc = run_cli("run", str(tmp_path), "--hosts", host, db=store_path)
        assert_one_line_error(proc, 2, "is not ssh://[USER@]HOST[:PORT]")
    assert not marker.exists()


@needs_fio
def test_ssh_is_told_where_its_options_end():
    from storbench.execute.ssh import SshHost, ssh_argv

    argv = ssh_argv(SshHost("h", "u", 22), None)
    assert argv[-2:] == ["--", "u@h"]
