"""Start-up: each command loads its own module and what it needs, nothing more (how
fast that is, bench/startup.py measures)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from storbench.cli import cli, load_all
from storbench.cli.common import COMMANDS
from tests.conftest import needs_fio, run_cli


def loaded_after(argv: list[str], store_path) -> set[str]:
    """The storbench and third-party top-level modules loaded by running ``argv``."""
    code = ("import sys, atexit\n"
            "atexit.register(lambda: print(sorted(m for m in sys.modules"
            " if m.startswith('storbench.') or '.' not in m), file=sys.stderr))\n"
            "sys.argv = ['storbench', *sys.argv[1:]]\n"
            "from storbench.__main__ import main\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          env={"STORBENCH_DB": str(store_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return set(eval(proc.stderr.strip().splitlines()[-1]))


def test_help_lines_of_unloaded_commands_are_the_commands_own():
    """`storbench --help` lists commands without loading them, from common.COMMANDS:
    each line there must be the command's own first sentence, from the module named."""
    load_all()
    for name, (module, line) in COMMANDS.items():
        cmd = cli.commands[name]
        assert cmd.callback is not None
        assert cmd.callback.__module__ == f"storbench.cli.{module}", name
        assert line == cmd.get_short_help_str(1000), name
    assert set(cli.commands) == set(COMMANDS)


@pytest.mark.parametrize("argv, unwanted", [
    (["--help"], {"storbench.cli.history", "storbench.cli.run", "storbench.store",
                  "storbench.render.terminal"}),
    (["list"], {"storbench.cli.run", "storbench.cli.compare", "storbench.analysis.compare",
                "storbench.analysis.references", "storbench.pipeline.loop",
                "storbench.execute.local", "yaml", "kubernetes", "resvg_py",
                "storbench.analysis.summary", "storbench.result.model",
                "storbench.result.fio_json"}),
    (["compare", "1"], {"storbench.cli.run", "storbench.pipeline.loop", "yaml", "kubernetes",
                        "resvg_py", "storbench.execute.local"}),
    # a run on a directory: the Kubernetes client (~0.3 s) is for runs on a class only
    pytest.param(["run", "{tmp}", "--job", "{tmp}/read.fio"],
                 {"kubernetes", "yaml", "storbench.execute.kubernetes",
                  "storbench.target.kubernetes.classsubject", "storbench.cli.lifecycle"},
                 marks=needs_fio),
])
def test_a_command_loads_only_what_it_needs(argv, unwanted, store_path, fio_json_text, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    (tmp_path / "read.fio").write_text("[r]\nrw=read\nsize=1m\n")
    src = tmp_path / "run.json"
    src.write_text(fio_json_text)
    load = subprocess.run([sys.executable, "-m", "storbench", "import", str(src)],
                          env={"STORBENCH_DB": str(store_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert load.returncode == 0, load.stderr
    loaded = loaded_after(argv, store_path)
    assert "click" in loaded and "storbench.cli.common" in loaded  # the probe works
    if argv[0] == "run":
        assert "storbench.pipeline.kinds.lifecycle" in loaded  # the kinds' registry was read
    assert loaded & unwanted == set()


def test_an_unknown_command_says_so(store_path):
    # in a process of its own: invoking `cli` here would cache its help option on the
    # shared group and change the generated reference (tests/test_docs.py)
    proc = run_cli("lsit", db=store_path)
    assert proc.returncode == 2 and "No such command 'lsit'" in proc.stderr


@pytest.mark.parametrize("child", ["storbench.execute.scratchops",
                                   "storbench.execute.proctree"])
def test_the_children_of_a_run_load_only_their_own_module(child):
    """A run starts execute/scratchops.py twice a test or more and proctree.py once per
    fio run (each as a file: `python -I`); imported, the package loaded every executor
    (~45 ms a child on a busy machine); its names now load on first use. The scratch
    operations load nothing of storbench's but their own module, nor typing or
    dataclasses (~100 ms a child when they came with execute/workdir.py, ~40 without)."""
    code = (f"import sys, {child}; print(sorted(m for m in sys.modules if 'storbench' in m"
            " or m in ('typing', 'dataclasses')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    loaded = set(eval(proc.stdout))
    assert child in loaded
    assert not loaded & {"storbench.execute.base", "storbench.execute.local",
                         "storbench.execute.fio", "storbench.execute.signals"}, loaded
    if child == "storbench.execute.scratchops":
        assert loaded == {"storbench", "storbench.execute", child}, loaded
    from storbench.execute import LocalExecutor, SignalGuard  # still there, when asked

    assert LocalExecutor.__module__ == "storbench.execute.local" and SignalGuard


def test_the_collector_waits_only_while_the_modules_load(store_path):
    """__main__ pauses Python's cycle collector while the CLI's modules load and leaves
    what they define out of its passes (gc.freeze); the command itself runs with it on."""
    code = ("import gc, sys\n"
            "import storbench.cli\n"
            "seen = []\n"
            "storbench.cli.main = lambda: seen.append((gc.isenabled(), gc.get_freeze_count()))\n"
            "sys.argv = ['storbench', 'list']\n"
            "import atexit\natexit.register(lambda: print(seen))\n"
            "from storbench.__main__ import main\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"STORBENCH_DB": str(store_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    ((enabled, frozen),) = eval(proc.stdout)
    assert enabled and frozen > 1000


def test_storbench_ends_as_sys_exit_would_without_the_teardown(store_path):
    """__main__ ends the process without the interpreter's teardown (os._exit: 100,000
    runs' rows are not freed one by one), having done what the teardown does that
    matters: atexit's handlers run, standard output whole (more than a pipe holds), the
    command's exit status; a thread still running is joined, as Python joins it."""
    code = ("import atexit, sys, threading, time\n"
            "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
            "if sys.argv[1] == 'thread':\n"
            "    def late():\n"
            "        time.sleep(0.3)\n"
            "        print('thread ended', file=sys.stderr)\n"
            "    threading.Thread(target=late).start()\n"
            "sys.argv = ['storbench', *sys.argv[2:]]\n"
            "from storbench.__main__ import main\nmain()\n"
            "print('main returned', file=sys.stderr)\n")

    def ended(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              text=True, env={"STORBENCH_DB": str(store_path),
                                              "PATH": "/usr/bin:/bin"})

    listed = ended("alone", "reference", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout) > 4096 and json.loads(listed.stdout)  # (a pipe's page: 4 KiB)
    assert listed.stderr == "atexit ran\n"  # and main never returned
    wrong = ended("alone", "nosuch")
    assert wrong.returncode == 2 and wrong.stderr.endswith("atexit ran\n"), wrong.stderr
    joined = ended("thread", "--version")
    assert joined.returncode == 0 and "storbench" in joined.stdout
    assert joined.stderr == "thread ended\natexit ran\n", joined.stderr
