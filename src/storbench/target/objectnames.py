"""The names of an S3 bucket's objects as storbench and fio's http engine make them: the
bucket and the prefix a TARGET names (``s3://BUCKET[/PREFIX]``), and the objects each
job of a test PUTs, GETs or DELETEs (target/objects.py uses them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from storbench.errors import ConfigError
from storbench.workload.plan import PlannedTest
from storbench.workload.sizes import parse_size

# S3's bucket names (the general-purpose rules), and a prefix of plain key parts
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX_PART = re.compile(r"[A-Za-z0-9._-]+")
READS = ("read", "randread")
DELETES = ("trim", "randtrim")
MIXED = ("rw", "readwrite", "randrw")  # GETs and PUTs (rwmixread) of objects already there
ONE_OBJECT = ("write", "randwrite", *READS, *DELETES, *MIXED)


@dataclass(frozen=True)
class Bucket:
    name: str
    prefix: str  # "" or "a/b" (no slashes at its ends)

    @classmethod
    def parse(cls, word: str) -> Bucket:
        rest = word[len("s3://"):]
        name, _, prefix = rest.partition("/")
        prefix = prefix.strip("/")
        if not _BUCKET.fullmatch(name) or ".." in name:
            raise ConfigError(f"TARGET {word!r}: s3://BUCKET[/PREFIX] names a bucket (3-63"
                              " lower-case letters, digits, '.', '-')")
        if prefix and not all(_PREFIX_PART.fullmatch(p) and p not in (".", "..")
                              for p in prefix.split("/")):
            raise ConfigError(f"TARGET {word!r}: a PREFIX is plain key parts (letters, digits,"
                              " '.', '_', '-') between '/'")
        return cls(name, prefix)

    @property
    def url(self) -> str:
        return f"s3://{self.name}" + (f"/{self.prefix}" if self.prefix else "")

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)


@dataclass(frozen=True)
class ObjectJob:
    """A job of a test on a bucket, as its objects go: what it does to them, and which
    (fio's http engine names them NAME.JOBNUM.0_OFFSET_LENGTH: size / bs a clone)."""

    name: str  # filename=, else the job's name
    rw: str
    bs: int
    size: int  # bytes of objects per clone
    jobs: int  # numjobs

    @classmethod
    def of(cls, job: str, opts: dict[str, str]) -> ObjectJob:
        return cls(opts.get("filename") or opts.get("name") or job,
                   opts.get("rw", opts.get("readwrite", "read")),
                   parse_size(opts.get("bs", "4k")) or 4096,
                   parse_size(opts.get("size", "0")) or 0, int(opts.get("numjobs", "1")))

    @property
    def reads(self) -> bool:
        """It GETs or DELETEs objects (which must be there), rather than only PUTs them
        (a mix GETs them and PUTs them again)."""
        return self.rw in (*READS, *DELETES, *MIXED)

    def keys(self, run_prefix: str) -> set[str]:
        """Its objects' keys under ``run_prefix`` (the worker's: see worker_prefix)."""
        return {f"{run_prefix}{self.name}.{jobnum}.0_{o}_{self.bs}"
                for jobnum in range(self.jobs) for o in range(0, self.size - self.bs + 1,
                                                              self.bs)}


def expected_keys(test: PlannedTest, run_prefix: str) -> set[str]:
    """The keys of the objects the test's reading and deleting jobs name that no job
    before them in the test writes (relative to the bucket), as fio's http engine makes
    them: NAME.JOBNUM.0_OFFSET_LENGTH."""
    needed: set[str] = set()
    written: set[str] = set()
    for job, opts in test.jobfile.effective():
        it = ObjectJob.of(job, opts)
        keys = it.keys(run_prefix)
        if it.reads:
            needed |= keys - written
        if it.rw in DELETES:
            written -= keys
        elif not it.reads:
            written |= keys
    return needed
