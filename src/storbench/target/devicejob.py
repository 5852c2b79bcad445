"""A block device's job files and the words said of it: the job file pointed at the
device (filename=, direct I/O, each job's size the device's or its share of it, a
replay's iolog redirected to it, fio told --readonly for a job file that only reads), and
the line said before fio starts (what it is, what is on it, read or written)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storbench.errors import TargetError
from storbench.result.record import BLANK_DEVICE
from storbench.workload.guard import fio_path
from storbench.workload.jobfile import JobFile, Section
from storbench.workload.sizes import format_bytes_iec, parse_count, parse_size

READS = ("read", "randread")
FILE_OPTIONS = ("directory", "filename", "filename_format", "nrfiles", "opendir", "unlink",
                "unlink_each_loop", "create_on_open", "create_only", "file_service_type")
ALIGN = 2**20  # each job's share of the device starts on a MiB


def only_reads(jobfile: JobFile) -> bool:
    """Every job of it only reads (read/randread): nothing written, nothing trimmed."""
    return all(o.get("rw", o.get("readwrite", "read")) in READS for _, o in jobfile.effective())


def found_on_it(signatures: list[str]) -> list[str]:
    """What was found on a device, as stored and said: its signatures, or blank."""
    return list(signatures) or [BLANK_DEVICE]


def access(writes: bool) -> str:
    return "read and write" if writes else "read only"


def verb(writes: bool) -> str:
    """How the line said before fio starts begins."""
    return "WRITING to" if writes else "Reading (fio --readonly)"


def identity(device: str, facts: dict[str, Any], signatures: list[str], writes: bool) -> str:
    """The line said right before fio starts: the device about to be read or written,
    what it is (model, serial, an NVMe namespace's id, size, a loop device's file) and
    what is on it."""
    what = ", ".join(str(facts[k]) for k in ("model", "serial") if k in facts)
    if "nvme" in facts:  # a controller's serial is shared by all its namespaces
        what += f", namespace {facts['nvme']['namespace_id']}"
    size = format_bytes_iec(int(facts.get("size_bytes") or 0))
    backing = (f", backed by {facts['loop_backing_file']}"
               if "loop_backing_file" in facts else "")
    return (f"{verb(writes)} {device} ({what or facts.get('name', device)}, {size}{backing});"
            f" found on it: {', '.join(found_on_it(signatures))}")


def device_job(jobfile: JobFile, device: str, size_bytes: int | None,
               files: Path | None = None) -> tuple[str, tuple[str, ...]]:
    """The job file's text on ``device`` (on_device), and fio's options for it:
    --readonly for one that only reads (said in the text, which is stored)."""
    text = on_device(jobfile, device, size_bytes, files).render()
    if only_reads(jobfile):
        return (f"; run as: fio --readonly (only reads: fio refuses any write)\n{text}",
                ("--readonly",))
    return text, ()


def on_device(jobfile: JobFile, device: str, size_bytes: int | None,
              files: Path | None = None) -> JobFile:
    """The job file pointed at ``device``: its file options replaced by filename= the
    device, direct I/O, and with ``size_bytes`` (None: the sizes it has, from --size),
    each job's size the device (split among the jobs of a test that has them work side
    by side with offset_increment). A replay's iolog (read_iolog) is read from ``files``
    (the run's work directory, where put_file wrote it) and every file it names is the
    device (replay_redirect)."""
    effective = dict(jobfile.effective())
    sections: list[Section] = []
    for section in jobfile.sections:
        section = section.without(*FILE_OPTIONS)
        iolog = section.get("read_iolog")
        if iolog is not None:
            if files is None:
                raise TargetError("a replay on a device needs the run's work directory")
            section = section.with_option("read_iolog", str(files / Path(iolog).name)) \
                .with_option("replay_redirect", device)
        if not section.is_global:
            section = section.with_option("filename", fio_path(device)) \
                .with_option("direct", "1")
            options = effective.get(section.name, {})
            if size_bytes is not None:
                numjobs = max(1, parse_count(options.get("numjobs")))
                if options.get("offset_increment"):
                    share = size_bytes // numjobs // ALIGN * ALIGN
                    section = section.with_option("size", str(share)).with_option(
                        "offset_increment", str(share))
                else:
                    section = section.with_option("size", str(size_bytes))
        if section.options or not section.is_global:
            sections.append(section)
    return JobFile(tuple(sections))


def reach(options: dict[str, str]) -> int | None:
    """How far into the device a job goes: offset + size (+ its jobs' increments)."""
    size = parse_size(options.get("size", "")) if options.get("size") else None
    if size is None:
        return None
    offset = parse_size(options.get("offset") or "0") or 0
    step = parse_size(options.get("offset_increment") or "0") or 0
    return offset + size + step * (max(1, parse_count(options.get("numjobs"))) - 1)
