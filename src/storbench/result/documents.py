"""A document holding several fio runs (a blog post comparing systems, a wiki page of
contributors' results, a ticket) split into its fio invocations.

fio aggregates jobs within one invocation only; two systems' outputs pasted into one
page must never be summed. An invocation starts at fio's banner (``fio-3.33``), a
``Starting N process`` line, a command line (``$ fio --name=...``) or a job header
(``name: (g=0): rw=...``) that comes after a finished result block, or after prose
that follows one. Each is named after what the document says about it: the nearest
heading or line of prose before it, else its command line's ``--name`` or
``--directory``. The options of a command line or a job file shown with it are
recovered for its jobs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from storbench.result.fio_json import results_of
from storbench.result.fio_text import TextFormatError, TextOutput, clean_lines, parse_text
from storbench.result.model import TestResult

_RESULT = re.compile(r"(?:^|\s)[^\s:()\[\]]+\s?: \(groupid=\d+, jobs=\d+\): err=")
_HEADER = re.compile(r"(?:^|\s)[^\s:()\[\]]+\s?: \(g=\d+\): rw=")
_BANNER = re.compile(r"^\s*(?:fio-\d+\.\d+\S*\s*$|Starting \d+ (?:process|thread))")
_COMMAND = re.compile(r"(?:^|[\s$#>%])(?:sudo\s+)?fio\s+(?:-{1,2}[a-z]|\S+\.(?:fio|ini|job))")
_END = re.compile(r"\bRun status group \d+|\bDisk stats \(read/write\)|\bAll clients:")
_FIO_LINE = re.compile(
    r"^\s*(?:\|\s|(?:read|write|trim|READ|WRITE|TRIM)\s?:|(?:slat|clat|lat|sync)\s|"
    r"(?:clat|lat|slat|sync) percentiles|bw \(|iops\s*:|lat \((?:n|u|m)?sec\)|cpu\s*:|"
    r"IO depths|submit\s*:|complete\s*:|issued|latency\s*:|fsync/fdatasync|"
    r"[\w.-]+: ios=|Jobs: \d|\w+: Laying out|fio: |\d+(?:\.\d+)?th=|clat \(|"
    r"\w+: \(g=|\w+\s?: \(groupid=|Run status|Disk stats|All clients)")
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+(?P<md>.+?)\s*#*\s*$|<h[1-6][^>]*>(?P<html>.*?)</h[1-6]>"
                      r"|=+\s*(?P<wiki>.+?)\s*=+\s*$|\*\*(?P<bold>[^*]+)\*\*\s*:?\s*$)")
_JOBFILE = re.compile(r"^\s*(?:\[[^\]]+\]|[a-z_]+\s*=\s*\S.*)\s*$")
_TAG = re.compile(r"<[^>]+>")
_PROSE_MAX = 100  # a longer line of prose is a paragraph, not a name
_NAME_WORDS = 10  # nor one of more words
# prose that speaks of the output, not of what was measured: never a name ("The results
# were as follows.", "output. The contents of that file are shown below.")
_ABOUT_OUTPUT = re.compile(
    r"\b(?:shown|below|above|as follows|the following|(?:its|the|this|job) output|"
    r"results? (?:is|are|was|were)|here (?:is|are)|(?:we|you|I) (?:got|get|see)|"
    r"looks? like|paste|contents? of)\b", re.I)


@dataclass
class Invocation:
    """One fio run inside a document: its lines and what the document says about it."""

    first_line: int  # 1-based, in the cleaned document
    last_line: int
    lines: list[str]
    name: str = ""
    named_from: str = ""  # heading, prose, --name, --directory; "" for the job's name
    options: dict[str, str] = field(default_factory=dict)  # from a command line
    options_shared: bool = False  # the document's one command line, shown elsewhere
    jobfile: dict[str, dict[str, str]] = field(default_factory=dict)  # shown job file

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_NUMBERED = re.compile(r"^\s*\d{1,5}(?:[:|]\s*|\s{2,})(?=\S)")


def _kind(line: str) -> str:
    line = _NUMBERED.sub("", line, count=1)  # a pasted line number (parse_text drops them)
    if not line.strip():
        return "blank"
    if _RESULT.search(line):
        return "result"
    if _HEADER.search(line):
        return "header"
    if _BANNER.search(line):
        return "banner"
    if _END.search(line):
        return "end"
    if _COMMAND.search(line):
        return "command"
    if _FIO_LINE.search(line):
        return "fio"
    if _JOBFILE.match(line):
        return "jobfile"
    return "prose"


def split(lines: list[str]) -> list[Invocation]:
    """The fio invocations in ``lines`` (cleaned: entities decoded, numbers removed)."""
    found: list[Invocation] = []
    current: Invocation | None = None
    results = ended = False
    # what the document says before an invocation's first result: its name, a job file
    context: list[tuple[int, str, str]] = []

    def close() -> None:
        nonlocal current, results, ended, context
        if current is not None and results:
            found.append(current)
        current, results, ended = None, False, False

    for number, line in enumerate(lines, start=1):
        kind = _kind(line)
        if kind == "blank":
            if current is not None:
                current.lines.append(line)
            continue
        if kind in ("prose", "jobfile"):
            if results:
                close()
            context.append((number, kind, line))
            if current is not None:
                current.lines.append(line)
            continue
        starts = kind in ("banner", "command", "header") or (kind == "result" and ended)
        if starts and results:
            close()
        if current is None:
            current = Invocation(number, number, [])
        current.lines.append(line)
        current.last_line = number
        if kind == "command":
            current.options.update(command_options(line))
        if kind == "result" and not results:
            results = True
            _describe(current, context)  # the last words before its results name it
            context = []
        if kind == "end" and results:
            ended = True
    close()
    # one command line shown for several runs ("we ran the same command on each"): it
    # is theirs too, where they show none of their own
    commands = {tuple(sorted(inv.options.items())) for inv in found if inv.options}
    if len(commands) == 1:
        shared = dict(next(iter(commands)))
        for inv in found:
            if not inv.options:
                inv.options, inv.options_shared = dict(shared), True
    return found


def _describe(inv: Invocation, context: list[tuple[int, str, str]]) -> None:
    """Name the invocation from the lines before it; take a job file shown there."""
    jobfile = [text for _, kind, text in context if kind == "jobfile"]
    if jobfile:
        inv.jobfile = _jobfile(jobfile)
    for _, kind, text in reversed(context):
        if kind != "prose":
            continue
        heading = _HEADING.match(text)
        if heading:
            name = next(g for g in heading.groups() if g)
            inv.name, inv.named_from = _clean(name), "heading"
            return
    for _, kind, text in reversed(context):
        words = _clean(text)
        if kind == "prose" and words and len(words) <= _PROSE_MAX and _names(words):
            inv.name, inv.named_from = words.rstrip(":").strip(), "prose"
            return


def _names(words: str) -> bool:
    """A line of prose that can name a run: not the tail of a sentence begun on the line
    before ("output. The contents of ..."), not two sentences, not words about the
    output itself ("shown below", "the results were")."""
    if words[0].islower() and not words.rstrip().endswith(":"):
        return False
    if re.search(r"[.!?] +[A-Z]", words) or len(words.split()) > _NAME_WORDS:
        return False
    if re.match(r"(?:we|i|you|they|then|so|now|next)\s", words, re.I):
        return False  # a story ("We ran the command and ..."), not a name
    return _ABOUT_OUTPUT.search(words) is None


def name_from_command(inv: Invocation) -> None:
    """No heading or prose: the command line's --name, else its --directory."""
    if inv.name or inv.options_shared:
        return
    for key in ("name", "directory", "filename"):
        if inv.options.get(key):
            inv.name, inv.named_from = inv.options[key], f"--{key}"
            return


def _clean(text: str) -> str:
    return " ".join(_TAG.sub("", text).replace("`", "").strip(" #*=-").split())


def command_options(line: str) -> dict[str, str]:
    """fio's --key=value (or --key value, --flag) options of a command line."""
    at = re.search(r"(?:^|[\s$#>%])(?:sudo\s+)?fio\s", line)
    rest = line[at.end():] if at else line
    try:
        words = shlex.split(rest)
    except ValueError:
        words = rest.split()
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--") and len(w) > 2:
            key, sep, value = w[2:].partition("=")
            if not sep and i + 1 < len(words) and not words[i + 1].startswith("-") and key in (
                    "name", "directory", "filename", "size", "bs", "rw", "readwrite"):
                value, i = words[i + 1], i + 1
            out[key.replace("-", "_")] = value
        i += 1
    if "readwrite" in out and "rw" not in out:
        out["rw"] = out.pop("readwrite")
    return out


def _jobfile(lines: list[str]) -> dict[str, dict[str, str]]:
    """[section] key=value lines shown in the document: {section: options}."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in lines:
        text = line.strip()
        if text.startswith("[") and text.endswith("]"):
            current = sections.setdefault(text[1:-1].strip(), {})
        elif current is not None and "=" in text:
            key, _, value = text.partition("=")
            current[key.strip()] = value.strip()
    return sections


# -- from invocations to results --------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """One invocation's results, named as the document names it."""

    name: str  # "" when the document holds one invocation (its jobs keep their names)
    named_from: str
    first_line: int
    last_line: int
    text: str
    fio_version: str
    results: list[TestResult]


@dataclass(frozen=True)
class Document:
    parts: list[Part]
    left_out: list[dict[str, Any]]  # {"lines": [first, last], "why": ...}: not imported


def parse_document(text: str) -> Document:
    """Each fio invocation of a text document, parsed on its own (never summed with
    another's); TextFormatError when none can be read."""
    lines = clean_lines(text)
    invocations = split(lines)
    if len(invocations) <= 1:
        out = parse_text(text)
        if invocations:
            _apply_options(out, invocations[0])
        _, results = results_of({"fio version": out.fio_version, "jobs": out.jobs})
        first = invocations[0].first_line if invocations else 1
        last = invocations[0].last_line if invocations else len(lines)
        return Document([Part("", "", first, last, text, out.fio_version, results)], [])
    parts: list[Part] = []
    left_out: list[dict[str, Any]] = []
    document_version = next((m.group(0) for m in map(_VERSION_IN.search, lines) if m), "")
    for inv in invocations:
        try:
            out = parse_text(inv.text)
        except TextFormatError as exc:
            left_out.append({"lines": [inv.first_line, inv.last_line],
                             "why": f"line {inv.first_line + exc.line - 1}: {exc}"})
            continue
        _apply_options(out, inv)
        name_from_command(inv)
        version = out.fio_version or document_version
        _, results = results_of({"fio version": version, "jobs": out.jobs})
        parts.append(Part(inv.name, inv.named_from, inv.first_line, inv.last_line, inv.text,
                          version, results))
    if not parts:
        raise TextFormatError("none of the fio runs in the document can be read: "
                              + "; ".join(str(x["why"]) for x in left_out), 1)
    return Document(_unique(parts), left_out)


_VERSION_IN = re.compile(r"\bfio-\d+\.\d+[\w.+-]*")


def _apply_options(out: TextOutput, inv: Invocation) -> None:
    """Options the document shows for these jobs: a job file's [global] and [job]
    sections, then the command line, then what fio's own header line says."""
    skip = {"output", "output_format", "eta", "eta_newline", "minimal", "debug"}
    for job in out.jobs:
        name = str(job.get("jobname", ""))
        # a command line's options are this job's only when it names this job (or none)
        mine = inv.options.get("name") in (None, name)
        merged = {**inv.jobfile.get("global", {}), **inv.jobfile.get(name, {}),
                  **{k: v for k, v in inv.options.items() if mine and k not in skip},
                  **job.get("job options", {})}
        job["job options"] = merged


def _unique(parts: list[Part]) -> list[Part]:
    """Every part named (its job's name when the document says nothing), no name twice:
    NAME, NAME#2, NAME#3."""
    seen: dict[str, int] = {}
    out = []
    for p in parts:
        base = p.name or next((r.name for r in p.results), "fio")
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}#{seen[base]}"
        out.append(Part(name, p.named_from or "job name", p.first_line, p.last_line, p.text,
                        p.fio_version, p.results))
    return out
