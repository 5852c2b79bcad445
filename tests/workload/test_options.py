"""The option table knows every option of the fio in use: a newer fio with an option
storbench has not classified fails this test (and, until the table says what it is,
storbench refuses the option in job files)."""

from __future__ import annotations

import re
import subprocess

import pytest

from storbench.workload import options
from storbench.workload.guard import check
from storbench.workload.options import ALIASES, COMMAND_ENGINES, ENGINES, TABLE, Kind
from tests.conftest import FIO, needs_fio

pytestmark = needs_fio


def fio(*args: str) -> str:
    return subprocess.run([FIO or "fio", *args], capture_output=True, text=True).stdout


def listed(text: str) -> list[str]:
    """Option names as fio's --cmdhelp=all / --enghelp=ENGINE print them."""
    return [m.group(1) for m in re.finditer(r"^\s*([a-z0-9_-]+)\s*:", text, re.M)]


def test_every_option_of_the_installed_fio_is_classified():
    names = listed(fio("--cmdhelp=all"))
    assert len(names) > 200  # fio 3.33 lists 217
    missing = [n for n in names if n not in TABLE]
    assert missing == [], f"fio options the table lacks: {missing}"


def test_every_alias_of_the_installed_fio_is_known_as_such():
    for name in listed(fio("--cmdhelp=all")):
        alias = re.search(r"^\s*alias: (\S+)", fio(f"--cmdhelp={name}"), re.M)
        if alias:
            assert ALIASES.get(alias.group(1)) == name, (alias.group(1), name)


@pytest.mark.parametrize("engine", sorted({*ENGINES, *COMMAND_ENGINES} - {"dircreate", "dirstat",
                                                                         "dirdelete"}))
def test_every_option_of_an_allowed_engine_is_classified(engine):
    text = fio(f"--enghelp={engine}")
    assert "has no options" in text or listed(text), text  # fio knows the engine
    missing = [n for n in listed(text) if n not in TABLE]
    assert missing == [], f"{engine}: options the table lacks: {missing}"


def test_an_option_missing_from_the_table_is_refused():
    assert "frobnicate" not in TABLE
    why = check("x", "frobnicate", "1", allow_exec=True)
    assert why is not None and "not an fio option storbench knows" in why


def test_paths_commands_and_refusals_are_what_the_docs_say():
    assert {k for k, v in TABLE.items() if v is Kind.PATH} >= {
        "filename", "opendir", "write_iolog", "read_iolog", "mem", "replay_redirect",
        "donorname", "write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log"}
    assert {k for k, v in TABLE.items() if v is Kind.COMMAND} == {
        "exec_prerun", "exec_postrun", "program", "arguments"}
    assert options.kind("iomem") is Kind.PATH and options.kind("readwrite") is Kind.VALUE
    assert options.kind("ioscheduler") is Kind.REFUSED
