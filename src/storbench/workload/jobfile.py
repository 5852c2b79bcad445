"""fio job files: parse, adjust for a scratch directory, render back to text.

A job file is kept as an ordered list of sections exactly as fio reads them
(``[global]`` sections included), so that what fio runs is what the user wrote,
plus the few options storbench must set (the directory, size/runtime overrides).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from storbench.errors import ConfigError
from storbench.workload import guard
from storbench.workload.files import JOB_FILE_LIMIT, read_text
from storbench.workload.options import DROPPED
from storbench.workload.sizes import fio_seconds, parse_count, parse_size

Option = tuple[str, str | None]


@dataclass(frozen=True)
class Section:
    """One ``[name]`` section: a job, or ``global`` defaults for the jobs after it."""

    name: str
    options: tuple[Option, ...] = ()
    # the included file it came from (None: the job file itself): what is refused in it is
    # never quoted, for it may be any file (`include ~/.my.cnf`: [client] password=...)
    origin: str | None = field(default=None, compare=False)

    @property
    def is_global(self) -> bool:
        return self.name == "global"

    def get(self, key: str) -> str | None:
        """The last value of option ``key`` ("" for a bare flag), or None if absent."""
        found: str | None = None
        for k, v in self.options:
            if k.lower() == key:
                found = "" if v is None else v
        return found

    def has(self, key: str) -> bool:
        return any(k.lower() == key for k, _ in self.options)

    def without(self, *keys: str) -> Section:
        kept = tuple((k, v) for k, v in self.options if k.lower() not in keys)
        return replace(self, options=kept)

    def with_option(self, key: str, value: str | None) -> Section:
        return replace(self, options=(*self.without(key).options, (key, value)))


SEQUENTIAL = ("read", "write", "rw", "readwrite", "trim", "trimwrite")


@dataclass(frozen=True)
class JobFile:
    """An ordered list of sections: what one fio invocation runs."""

    sections: tuple[Section, ...] = field(default_factory=tuple)

    def render(self) -> str:
        lines: list[str] = []
        for section in self.sections:
            lines.append(f"[{section.name}]")
            lines.extend(k if v is None else f"{k}={v}" for k, v in section.options)
            lines.append("")
        return "\n".join(lines)

    def jobs(self) -> list[Section]:
        return [s for s in self.sections if not s.is_global]

    def effective(self) -> Iterator[tuple[str, dict[str, str]]]:
        """Each job's name and options as fio sees them (globals before it, then its own)."""
        defaults: dict[str, str] = {}
        for section in self.sections:
            values = {k.lower(): ("" if v is None else v) for k, v in section.options}
            if section.is_global:
                defaults.update(values)
            else:
                yield section.name, {**defaults, **values}

    def dropped(self) -> str | None:
        """What ``prepared`` leaves out of this job file and why, in one line (None:
        nothing): option and section names only (a value may be anything, and an included
        file is never quoted)."""
        left = [f"{k} in {f'[{s.name}]' if s.origin is None else f'a section of {s.origin}'}"
                f" ({DROPPED[k]})"
                for s in self.sections for k in (key.lower() for key, _ in s.options)
                if k in DROPPED]
        return ", ".join(dict.fromkeys(left)) or None

    def prepared(
        self, directory: Path, *, size: str | None = None, runtime: float | None = None,
        ramp: float | None = None, allow_exec: bool = False,
    ) -> JobFile:
        """This job file pointed at ``directory``, with the user's overrides applied.

        Every section name must be plain and every option is judged by
        workload/guard.py (ConfigError naming the option otherwise: an option storbench
        has not classified, a '$', a path that would reach outside ``directory``, a
        command without ``allow_exec``); paths fio would take from its working directory
        are put into ``directory``; fio's files are named by storbench's own
        ``filename_format``.
        """
        sections: list[Section] = [Section("global", (
            ("directory", guard.fio_path(str(directory))),
            ("filename_format", guard.FILENAME_FORMAT)))]
        for n, section in enumerate(self.sections, start=1):
            reason = guard.check_section_name(section.name)
            for key, value in section.options:
                if reason is None:
                    reason = guard.check(section.name, key, value, allow_exec=allow_exec)
            if reason is not None and section.origin is not None:
                raise ConfigError(
                    f"{section.origin} (included): a section it holds (the job file's"
                    f" section {n}, counting included ones) sets an option or has a name"
                    " storbench refuses; an included file's text is never shown (it may be"
                    " any file): put what it should hold into the job file itself to see why")
            if reason is not None:
                raise ConfigError(reason)
            new = section.without("directory", *DROPPED)
            for key in guard.INTO_SCRATCH:
                value = new.get(key)
                if value is not None:
                    new = new.with_option(key, _into(directory, key, value))
            if new.is_global and not new.options:
                continue
            if not section.is_global:
                if size is not None:
                    new = new.with_option("size", size)
                if runtime is not None:
                    new = new.with_option("runtime", fio_seconds(runtime))
                if ramp is not None:
                    new = new.with_option("ramp_time", fio_seconds(ramp))
            sections.append(new)
        return JobFile(tuple(sections))

    def with_series_logs(self, prefix: str) -> tuple[JobFile, dict[str, str]]:
        """Each job also logs per-second IOPS, bandwidth and latency (fio's logs with
        log_avg_msec=1000) under its own prefix; returns the job file and
        {job name: log prefix}. fio writes the logs in its working directory."""
        sections: list[Section] = []
        prefixes: dict[str, str] = {}
        for i, section in enumerate(self.sections):
            if not section.is_global:
                name = f"{prefix}j{i}"
                prefixes.setdefault(section.name, name)
                for key in ("write_iops_log", "write_bw_log", "write_lat_log"):
                    section = section.with_option(key, prefixes[section.name])
                section = section.with_option("log_avg_msec", "1000")
            sections.append(section)
        return JobFile(tuple(sections)), prefixes

    def with_steady_state(self, criterion: str, window_s: float, max_s: float) -> JobFile:
        """Each job stops once fio's steady-state criterion holds over ``window_s``,
        after ``max_s`` at the latest (time_based).

        A job with numjobs > 1 also gets group_reporting, so that fio judges the
        jobs' aggregate and stops them together: judged one by one, the first to
        stop would leave its share of the storage to the others, inflating theirs;
        and new_group, so that its group is its own (where the job file did not
        group its jobs itself).
        A sequential job is judged on its bandwidth (its IOPS are few and coarse: 125
        a second at 125 MiB/s in 1 MiB blocks); and there is no ramp: the criterion
        is what says when the start-up is over, and fio's figures are those of the
        whole time the job ran.
        """
        effective = dict(self.effective())
        sections = []
        for section in self.sections:
            section = section.without("ramp_time")
            if not section.is_global:
                options = effective.get(section.name, {})
                rw = options.get("rw", options.get("readwrite", "read"))
                own = criterion.replace("iops", "bw", 1) if rw in SEQUENTIAL else criterion
                settings: list[tuple[str, str | None]] = [
                    ("steadystate", own), ("ss_dur", fio_seconds(window_s)),
                    ("time_based", None), ("runtime", fio_seconds(max_s))]
                if parse_count(options.get("numjobs")) > 1 and "group_reporting" not in options:
                    # its own group too: fio joins a group_reporting job to the entry of
                    # the job before it in its group ([a] [b] numjobs=2: "a", 3 jobs)
                    settings += [("group_reporting", None), ("new_group", None)]
                for key, value in settings:
                    section = section.with_option(key, value)
            sections.append(section)
        return JobFile(tuple(sections))

    def as_round(self, seconds: float) -> JobFile:
        """Each job time based for ``seconds``, no ramp: one round of a steady-state
        test (the rounds before steady state are the ramp)."""
        sections = []
        for section in self.sections:
            section = section.without("ramp_time")
            if not section.is_global:
                section = section.with_option("time_based", None).with_option(
                    "runtime", fio_seconds(seconds))
            sections.append(section)
        return JobFile(tuple(sections))

    def for_host(self, prefix: str, host_label: str, *, shared: bool) -> JobFile:
        """This (prepared) job file for one of several fio servers sharing a directory.

        Files are named ``<prefix>-<host_label>-...`` so that hosts do not collide,
        or ``<prefix>-...`` for all hosts with ``shared``; fio deletes a host's own files
        when its job ends (unlink=1): storbench cannot remove files on a remote host
        itself. The one shared file no host's fio removes (unlink=0: the first to end
        would unlink it under a host that had not opened it yet); its place does, once
        every host ended the test (target/sharedlayout.remove).
        A ``filename=`` of a [global] section moves into each job, renamed: fio adds
        the files of every filename= it reads, so a global one left in place would be
        one file every host shares beside its own.
        """
        effective = dict(self.effective())
        own = prefix if shared else f"{prefix}-{host_label}"
        sections = []
        for section in self.sections:
            if section.is_global:
                section = section.without("filename", "filename_format")
                if not section.options:
                    continue
            else:
                filename = effective.get(section.name, {}).get("filename")
                if filename:
                    section = section.with_option(
                        "filename", ":".join(f"{own}-{p}" for p in filename.split(":")))
                elif shared:
                    section = section.with_option("filename", f"{own}-{section.name}.data")
                else:
                    section = section.with_option(
                        "filename_format", f"{own}.{guard.FILENAME_FORMAT}")
                # no "<client address>." before the name: storbench names each host's files
                section = section.with_option("unlink", "0" if shared else "1").with_option(
                    "unique_filename", "0")
            sections.append(section)
        return JobFile(tuple(sections))

    def estimated_bytes(self) -> int | None:
        """Bytes the job files take on disk, or None when fio's options don't say."""
        per_file: dict[str, int] = {}
        unnamed = 0
        for _, opts in self.effective():
            numjobs = parse_count(opts.get("numjobs"))
            size = job_bytes(opts)
            if size is None:
                return None
            filename = opts.get("filename")
            if filename:
                offset_inc = parse_size(opts.get("offset_increment") or "0") or 0
                offset = parse_size(opts.get("offset") or "0") or 0
                end = offset + offset_inc * (numjobs - 1) + size
                for part in filename.split(":"):
                    per_file[part] = max(per_file.get(part, 0), end)
            else:
                unnamed += size * numjobs
        return unnamed + sum(per_file.values())

    def reported(self) -> list[tuple[str, int]] | None:
        """Each entry of fio's report, in its order, as fio makes them: the name of its
        first job (fio's name of it) and how many jobs it holds. A section is numjobs
        jobs; a job with stonewall or new_group begins a group once the one before it
        has jobs (init.c; not its clones); group_reporting jobs one after another in a
        group are one entry, each other job one of its own (stat.c); a job with stats=0
        none. fio's JSON names neither group_reporting nor how many jobs an entry holds
        (`[a] numjobs=2 [b] numjobs=2` under group_reporting is one entry, "a", of 4
        jobs). None where an option is not a number fio reads."""
        def flag(opts: dict[str, str], *keys: str, default: int = 0) -> int:
            value = next((opts[k].strip() for k in keys if k in opts), None)
            if value is None:
                return default
            if not value:
                return 1  # a bare flag
            return int(value, 16) if value.lower().startswith("0x") else int(value)

        entries: list[tuple[str, int]] = []
        group = in_group = 0
        last: int | None = None  # the group of the job before (one with stats)
        try:
            for name, opts in self.effective():
                grouped = bool(flag(opts, "group_reporting"))
                for clone in range(max(parse_count(opts.get("numjobs")), 1)):
                    if clone == 0 and in_group and (flag(opts, "stonewall", "wait_for_previous")
                                                    or flag(opts, "new_group")):
                        group, in_group = group + 1, 0
                    in_group += 1
                    if not flag(opts, "stats", default=1):
                        continue
                    if grouped and last == group:
                        entries[-1] = (entries[-1][0], entries[-1][1] + 1)
                    else:
                        # (fio names a section's first job by its name=, its clones
                        # by the section)
                        entries.append((opts.get("name") or name if clone == 0 else name, 1))
                    last = group
        except ValueError:
            return None
        return entries

    def named_files(self) -> set[str]:
        """File names set explicitly with ``filename=`` (shared between invocations)."""
        return {
            part
            for _, opts in self.effective()
            for part in (opts.get("filename") or "").split(":")
            if part
        }


def job_bytes(opts: dict[str, str]) -> int | None:
    """What one clone of a job's files hold: its size, else filesize × nrfiles (None
    when its options don't say)."""
    size = parse_size(opts["size"]) if "size" in opts else None
    if size is None and "filesize" in opts:
        # a range (fio picks each file's size in it): the largest, for the space it may take
        filesize = parse_size(opts["filesize"].rpartition("-")[2])
        size = None if filesize is None else filesize * parse_count(opts.get("nrfiles"))
    return size


def _into(directory: Path, key: str, value: str) -> str:
    """A relative path of ``key`` (checked by the guard) inside ``directory``."""
    if key in ("mem", "iomem"):
        kind, sep, path = value.partition(":")
        return f"{kind}:{directory / path}" if sep and path else value
    if key in guard.LISTS:  # each name of the ':' list (escapes kept), the directory's ':' too
        return ":".join(f"{guard.fio_path(str(directory))}/{part}"
                        for part in guard.list_names(value))
    return str(directory / value)


def parse_jobfile(text: str, source: str = "<job file>", base: Path | None = None) -> JobFile:
    """Parse fio's job file syntax. ``include FILE`` is resolved relative to ``base``
    (at most MAX_INCLUDE_DEPTH deep, never a file that includes itself). Errors name
    the file and line; the content of an included file is never quoted."""
    sections = _parse_sections(text, source, base, (), quote=True)
    if not any(not s.is_global for s in sections):
        raise ConfigError(f"{source}: no job section found (a job file needs a [name] section)")
    return JobFile(tuple(sections))


MAX_INCLUDE_DEPTH = 8


def _parse_sections(text: str, source: str, base: Path | None, within: tuple[str, ...],
                    *, quote: bool) -> list[Section]:
    """``within``: the files that include this one (outermost first); ``quote``: whether
    a line may be shown in an error (the user's own file, not one it includes)."""
    sections: list[Section] = []
    current: list[Option] | None = None
    name = ""
    origin = None if quote else source
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        shown = f" {line!r}" if quote else ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("include "):
            included = _include(line, source, lineno, base, within)
            if current is not None:
                sections.append(Section(name, tuple(current), origin))
                current = None
            sections.extend(included)
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise ConfigError(f"{source}:{lineno}: malformed section header{shown}")
            if current is not None:
                sections.append(Section(name, tuple(current), origin))
            name, current = line[1:-1].strip(), []
            continue
        if current is None:
            raise ConfigError(f"{source}:{lineno}: option{shown} before any [section]")
        key, sep, value = line.partition("=")
        current.append((key.strip(), value.strip() if sep else None))
    if current is not None:
        sections.append(Section(name, tuple(current), origin))
    return sections


def _include(line: str, source: str, lineno: int, base: Path | None,
             within: tuple[str, ...]) -> list[Section]:
    path = Path(line.split(None, 1)[1].strip())
    if base is not None and not path.is_absolute():
        path = base / path
    key = os.path.abspath(path)
    chain = (*within, os.path.abspath(source))
    if key in chain:
        raise ConfigError(f"{source}:{lineno}: {str(path)!r} includes itself (through"
                          f" {' -> '.join(chain)}); remove the include")
    if len(chain) > MAX_INCLUDE_DEPTH:
        raise ConfigError(f"{source}:{lineno}: includes nested more than"
                          f" {MAX_INCLUDE_DEPTH} deep")
    text = read_text(path, "included file", JOB_FILE_LIMIT)
    return _parse_sections(text, str(path), path.parent, chain, quote=False)
