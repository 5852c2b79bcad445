"""What keeps a job file inside storbench's scratch directory: the names and options
layers (the kernel's confinement of fio is the third: execute/confine.py).

A job file from elsewhere runs with storbench's rights (often root), on this machine or
on every ``--hosts`` server. fio opens files named by options (``filename=``, logs,
iologs, ``mem=mmap:``), by job names (``<directory>/<jobname>.<n>.<n>``), by its
``filename_format``, and it expands ``${VAR}`` from its environment in every value.
So:

1. **Names.** Section names and ``name=``/``wait_for=`` are plain
   (``[A-Za-z0-9._-]``, not ``..``); storbench sets ``filename_format`` itself; ``$`` is
   refused in every value (fio expands ``${VAR}`` from the environment, and hands the
   arithmetic of ``$ncpus``, ``$mb_memory``, ``$pagesize`` to a shell running bc): the
   one ``$`` fio sees is in storbench's own ``filename_format``.
2. **Every option classified** (workload/options.py, from fio's own option list): an
   option storbench has not classified is refused; paths are relative, without ``..``,
   and land in the scratch directory; commands and the exec engine need
   ``--allow-exec``; engines that do no I/O in the target, and options that change the
   machine, are refused.

``check`` judges a user's option (a job file, a suite) with a message that names it;
``check_final`` judges every job file right before fio gets it, storbench's own
additions included, against the places the run may write (a bug of storbench's that
would let a path out is refused there too).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Protocol

from storbench.errors import ConfigError
from storbench.workload import options
from storbench.workload.limits import OWN_CGROUP
from storbench.workload.options import Kind

_PLAIN = re.compile(r"[A-Za-z0-9._-]+")
# the one filename_format storbench writes: a plain prefix, then fio's own tokens
OWN_FORMAT = re.compile(r"(?:[A-Za-z0-9._-]*\.)?\$jobname\.\$jobnum\.\$filenum")
FILENAME_FORMAT = "$jobname.$jobnum.$filenum"
# an s3:// TARGET's objects: the run's prefix (/BUCKET/PREFIX/storbench-UID), then a plain
# name or the job's, then fio's own tokens (target/objects.py)
OBJECT_FORMAT = re.compile(r"(/[A-Za-z0-9._/-]+)/(?:[A-Za-z0-9._-]+|\$jobname)"
                           r"\.\$jobnum\.\$filenum")
OWN_KEY = "${STORBENCH_S3_SECRET}"  # http_s3_key: fio reads the secret from its environment

# Paths fio resolves against its working directory, not directory=: storbench points
# them into the scratch directory (on the target: a --hosts server writes them there).
READ_ONLY = ("read_iolog",)  # path options whose file fio only reads
INTO_SCRATCH = ("write_iolog", "read_iolog", "merge_blktrace_file", "mem", "iomem",
                "opendir", "dp_scheme", "donorname")


def plain(name: str) -> bool:
    """A name fio may put into a file name: letters, digits, '.', '_', '-'; not '..'."""
    return bool(_PLAIN.fullmatch(name)) and ".." not in name


def check_section_name(name: str) -> str | None:
    """None for a plain job name (or ``global``), else why not."""
    if name == "global" or plain(name):
        return None
    return (f"job section [{name}]: a job name must be plain (letters, digits, '.', '_',"
            " '-', no '..'): fio puts it into the names of the files it writes; rename"
            " the section")


def check(section: str, key: str, value: str | None, *, allow_exec: bool) -> str | None:
    """None when a user's option may stay as it is (or is storbench's to replace), else
    why not (a ConfigError's text, naming the option and its value)."""
    where = f"job [{section}] sets {key}" + ("" if value is None else f"={value}")
    found = options.kind(key)
    if found is None:
        return (f"{where}: {key!r} is not an fio option storbench knows; it runs only"
                " options it has classified (workload/options.py), so that no option can"
                " reach outside its scratch directory; leave it out (a misspelling? fio's"
                " names are lower case)")
    if options.canonical(key) in options.HTTP:
        return (f"{where}: {options.what(key)}; leave it out (an s3:// TARGET takes its"
                " endpoint from --endpoint or AWS's configuration)")
    if found is Kind.OWNED and options.canonical(key) == "filename_format":
        return (f"{where}: {options.what(key)}; leave filename_format out (use filename= for"
                " a name of your own)")
    if value is not None and "$" in value:
        return (f"{where}: fio would expand '$' (an environment variable, or $ncpus-style"
                " arithmetic that fio hands to a shell) to something storbench cannot"
                " check; write the value itself")
    if value is None:
        return None
    return _judge(found, key, value, where, allow_exec)


def _judge(found: Kind, key: str, value: str, where: str, allow_exec: bool) -> str | None:
    what = options.what(key)
    if found is Kind.NAME:
        if not plain(value):
            return (f"{where} ({what}): a job name must be plain (letters, digits, '.', '_',"
                    " '-', no '..')")
    elif found is Kind.PATH:
        for part in path_parts(options.canonical(key), value):
            why = outside(part)
            if why is not None:
                return (f"{where} ({what}): {why}; storbench only writes inside its own"
                        " scratch directory: use a relative name")
    elif found is Kind.PATTERN:
        if "'" in value:
            return (f"{where} ({what}): fio reads a pattern in '...' from that file;"
                    " storbench does not let a job file read files: write the pattern"
                    " itself (0x... or \"text\")")
    elif found is Kind.COMMAND:
        if not allow_exec:
            return (f"{where} ({what}): storbench does not run commands from job files;"
                    " pass --allow-exec if you trust this job file")
    elif found is Kind.ENGINE:
        return _engine(value.strip(), where, allow_exec)
    elif found is Kind.REFUSED:
        return f"{where}: {what}; storbench refuses it (leave it out of the job file)"
    return None


def _engine(engine: str, where: str, allow_exec: bool) -> str | None:
    if engine.startswith("external") or "/" in engine:
        return None if allow_exec else (
            f"{where}: an external engine loads code from outside fio; pass --allow-exec"
            " if you trust it")
    if engine in options.COMMAND_ENGINES:
        return None if allow_exec else (
            f"{where}: the exec engine runs a program; pass --allow-exec if you trust this"
            " job file")
    if engine not in options.ENGINES:
        return (f"{where}: storbench runs only engines that do their I/O on files in the"
                f" target ({', '.join(sorted(options.ENGINES))}; exec and external with"
                " --allow-exec); that one does not, or is not known to storbench")
    return None


def path_parts(key: str, value: str) -> list[str]:
    """The paths in an option's value as fio opens them: filename's (and directory's)
    ':' list, '\\:' a colon of the name; mem=mmap:PATH's path."""
    if key in ("mem", "iomem"):
        kind, sep, path = value.partition(":")
        return [path] if sep and kind in ("mmap", "mmaphuge", "mmapshared") else []
    if key in LISTS:
        return [p.replace("\\:", ":") for p in list_names(value)]
    return [value]


def list_names(value: str) -> list[str]:
    """The names of a ':' list as written (a '\\:' stays: a colon of the name)."""
    return [p for p in re.split(r"(?<!\\):", value) if p]


LISTS = ("filename", "opendir", "directory")  # fio reads a ':' list of paths from them


def fio_path(path: str) -> str:
    """A path as one name in filename= or directory= (its ':' escaped: fio would read
    /mnt/a:b as two directories, /mnt/a and b). ConfigError for a path no job file can
    name: a line break would end the option there and begin another (a directory named
    "x\\nexec_prerun=..." would be an option of its own); fio ends a value at ';' or '#'
    (a comment), with no escape."""
    cannot = sorted({c for c in path if c in UNNAMEABLE})
    if cannot:
        shown = ", ".join(dict.fromkeys(  # \n and \r are one thing to say
            "a line break" if c in "\n\r" else "a NUL" if c == "\0" else repr(c)
            for c in cannot))
        raise ConfigError(f"{path!r}: fio's job files cannot name a path with {shown} in"
                          " it; rename it, or give a directory above it")
    return path.replace(":", "\\:")


UNNAMEABLE = "\n\r\0;#"  # fio_path: what no job file can carry in a path


def outside(part: str) -> str | None:
    """Why a path from a job file would reach outside the scratch directory, or None."""
    if "$" in part or "~" in part.split("/")[0]:
        return "fio would expand it (a variable or ~) to a path storbench cannot check"
    if os.path.isabs(part):
        return "an absolute path"
    if ".." in PurePosixPath(part).parts:
        return "a path that leaves the directory (..)"
    return None


class _Section(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def options(self) -> tuple[tuple[str, str | None], ...]: ...


class _JobFile(Protocol):
    @property
    def sections(self) -> tuple[_Section, ...]: ...


def check_final(jobfile: _JobFile, within: Iterable[str], *, allow_exec: bool,
                source: str, reads_from: Iterable[str] = ()) -> None:
    """The job file fio is about to run (parsed from its text), judged once more as a
    whole: every section name plain, every option classified and allowed, the one ``$``
    storbench's own filename_format, every path inside ``within`` (absolute) or relative
    without ``..``; an I/O log fio only reads (read_iolog) may also be in ``reads_from``
    (the run's own work directory, where storbench puts a device replay's log).

    ConfigError otherwise: whatever built the text (a user's file, a suite, storbench's
    own rewriting), fio never gets a job that reaches outside.
    """
    roots = [PurePosixPath(os.path.normpath(r)) for r in within]
    read_roots = roots + [PurePosixPath(os.path.normpath(r)) for r in reads_from]
    for section in jobfile.sections:
        why = check_section_name(section.name)
        for key, value in section.options:
            if why is not None:
                break
            why = _final_option(section.name, key, value,
                                read_roots if options.canonical(key) in READ_ONLY else roots,
                                allow_exec)
        if why is not None:
            raise ConfigError(f"{source}: {why}")


def _final_option(section: str, key: str, value: str | None, roots: list[PurePosixPath],
                  allow_exec: bool) -> str | None:
    name = options.canonical(key)
    where = f"job [{section}] sets {key}" + ("" if value is None else f"={value}")
    if name == "filename_format":
        objects = OBJECT_FORMAT.fullmatch(value or "")
        if objects is not None:
            return None if _inside(objects.group(1), roots) else (
                f"{where}: not inside {', '.join(map(str, roots))}")
        return None if value and OWN_FORMAT.fullmatch(value) else (
            f"{where}: not storbench's own filename_format")
    if name == "cgroup":  # storbench's own, for neighbours --isolate (workload/limits.py)
        return None if OWN_CGROUP.fullmatch(value or "") else (
            f"{where}: not storbench's own cgroup (a user's job file may name none)")
    if name == "cgroup_nodelete":  # storbench removes its cgroup itself
        return None if value == "1" else f"{where}: not storbench's own cgroup_nodelete=1"
    if name in options.HTTP:  # storbench's own, for an s3:// TARGET (target/objects.py)
        if name == "http_s3_key":
            return None if value == OWN_KEY else f"{where}: not storbench's own http_s3_key"
        return None if value is None or "$" not in value else f"{where}: a '$' in it"
    if name == "ioengine" and (value or "").strip() == options.OBJECT_ENGINE:
        return None  # written by storbench alone (a job file's is refused when read)
    if name == "directory":  # every directory of its ':' list
        parts = path_parts(name, value or "")
        return None if parts and all(_inside(p, roots) for p in parts) else (
            f"{where}: not inside {', '.join(map(str, roots))}")
    if name in options.DROPPED:
        return f"{where}: {options.DROPPED[name]}"
    if options.kind(key) is Kind.PATH and value and "$" not in value:
        for part in path_parts(name, value):
            if os.path.isabs(part) and not _inside(part, roots):
                return f"{where}: {part!r} is not inside {', '.join(map(str, roots))}"
            if not os.path.isabs(part) and outside(part) is not None:
                return f"{where}: {outside(part)}"
        return None
    return check(section, key, value, allow_exec=allow_exec)


def _inside(path: str, roots: list[PurePosixPath]) -> bool:
    if ".." in PurePosixPath(path).parts or "$" in path:
        return False
    p = PurePosixPath(os.path.normpath(path))
    return any(p == r or r in p.parents for r in roots)


def check_iolog(log: str | Iterable[str], within: Iterable[str], source: str) -> None:
    """An I/O log fio is about to replay (read_iolog=; its text, or its lines as an
    open file gives them): fio opens, writes and creates every file it names, so each
    must be an absolute path inside ``within`` (a relative one would be taken from fio's
    working directory). ConfigError otherwise; a blktrace (binary) log names no file and
    is not judged here."""
    lines = iter(log.splitlines() if isinstance(log, str) else log)
    first = next(lines, "")
    if not first.startswith("fio version "):
        return
    version3 = first.strip() == "fio version 3 iolog"
    roots = [PurePosixPath(os.path.normpath(r)) for r in within]
    for n, line in enumerate(lines, start=2):
        words = line.split()
        if version3:
            words = words[1:]
        if not words:
            continue
        name = words[0]
        if not os.path.isabs(name) or not _inside(name, roots):
            raise ConfigError(f"{source}, line {n}: {name!r} is not inside"
                              f" {', '.join(map(str, roots))}; fio would open it")
