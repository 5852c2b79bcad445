"""An S3 bucket as a target's storage: ``s3://BUCKET[/PREFIX]``, measured by fio's http
engine in S3 mode (each I/O one whole object: a write a PUT, a read a GET, a trim a
DELETE), so that its latency percentiles are fio's, as for files.

Keys: the run works only under ``PREFIX/storbench-<run id>/`` (``ObjectStorage.root``):
fio's names are made there (the final guard, pipeline/gate.py, holds them to it as it
holds a directory's files to the scratch directory); a marker object there says whose
run it is; everything under it is deleted as the run ends, however it ends, and by a
later run on this machine when the run that made it is gone (its work directory's lock
is free: execute/workdir.py's rule). No other key is read, written or deleted. A bucket
is created only with --create-bucket.

The secret key never reaches a file: fio reads it from its environment
(``http_s3_key=${STORBENCH_S3_SECRET}``, the one ``$`` the guard lets through there) and
what fio echoes of it in its output is hidden before anything is stored or shown
(execute/s3.hide).

fio's http engine reads a missing object as zeros (a 404 is not an error to it), so
before a test that reads or deletes, every object it names is looked for, and the test
is refused when one is missing.

Places: this machine (``ObjectTarget``) and --hosts over SSH (target/hosts.py: fio's
client here expands the job file's ${STORBENCH_S3_SECRET} from its own environment and
sends the job over the SSH session; each host's fio must have the http engine, which its
session says before anything runs). With
several workers, each one's objects are under a directory of its own in the run's prefix
(``h0/``, ``h1/``): the same job's keys on two hosts are two objects. And pods (--pods:
target/kubernetes/storageclass.py, no volume; each pod's keys under ``p0/``, ``p1/``; the
key in their environment from a Secret of the run's).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storbench.errors import ConfigError, TargetError
from storbench.execute import FioBinary
from storbench.execute.base import FioJob
from storbench.execute.probe import ObjectProbe
from storbench.execute.s3 import Endpoint, link_to
from storbench.execute.workdir import MARKER, PREFIX, Leftover, held, run_workdir
from storbench.result.environment import Environment
from storbench.target.base import Deadline, Placed
from storbench.target.here import HereTarget
from storbench.target.hostlist import loopback
from storbench.target.objectnames import ONE_OBJECT, Bucket, ObjectJob, expected_keys
from storbench.target.storage import Access, NoDevice, Place, Worker
from storbench.workload.jobfile import JobFile, Section
from storbench.workload.plan import Plan, PlannedTest

SECRET_VAR = "STORBENCH_S3_SECRET"  # fio's environment: the secret key, never a file
OWN_KEY_VALUE = "${" + SECRET_VAR + "}"
RUN_MARKER = ".storbench-run"  # under the run's prefix: whose run it is
HURRY_S = 3.0  # to delete the run's objects after a signal (storbench ends within 5 s)
REMOVE_S = 600.0  # otherwise
FIO_HTTP_BUILD = ("Debian's and Ubuntu's fio are built without it: build fio with libcurl"
                  " and openssl (storbench's scripts/build-fio-http does, from the fio 3.33"
                  " sources of Debian's archive)")
FIO_HTTP_HINT = FIO_HTTP_BUILD + " and give it with --fio PATH or STORBENCH_FIO"


def fio_has_http(fio: FioBinary) -> str | None:
    """None when this fio has the http engine, else what it said."""
    proc = subprocess.run([fio.path, "--enghelp=http"], capture_output=True, text=True,
                          timeout=30)
    if proc.returncode == 0 and "http_s3_key" in proc.stdout:
        return None
    said = (proc.stderr or proc.stdout).strip().splitlines()
    return said[-1] if said else f"exit status {proc.returncode}"


@dataclass
class ObjectStorage(NoDevice):
    """Objects under a bucket's prefix (target/storage.Storage), through fio's http engine."""

    bucket: Bucket
    endpoint: Endpoint
    create_bucket: bool = False
    kind = "S3 bucket"
    in_files = False
    engine = "http"  # target/storage.Outside
    engine_hint = FIO_HTTP_BUILD + "."
    # create_only: fio loads the engine, parses its options and moves nothing
    engine_check = ("[storbench-engine-check]\nioengine=http\nhttp_mode=s3\n"
                    "http_host=127.0.0.1\nfilename=/storbench-engine-check\nrw=read\n"
                    "size=4k\ncreate_only=1\n")
    path: str = field(default="", init=False)  # as given: s3://BUCKET[/PREFIX]
    uid: str = field(default="", init=False)
    marked: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.path = self.bucket.url

    @property
    def name(self) -> str:
        return self.bucket.url

    @property
    def loopback(self) -> str | None:
        """The endpoint, if it is on a loopback address (target/storage.Outside)."""
        host = urllib.parse.urlsplit(self.endpoint.url).hostname
        return self.endpoint.url if host and loopback(host) else None

    @property
    def short_name(self) -> str:
        return self.bucket.url

    def root(self, uid: str) -> str:
        """The run's keys, as fio's http engine names them: /BUCKET/PREFIX/storbench-UID."""
        return "/" + "/".join([self.bucket.name, self.bucket.key(f"{PREFIX}{uid}")])

    def run_prefix(self, uid: str) -> str:
        return self.bucket.key(f"{PREFIX}{uid}") + "/"

    def worker_prefix(self, uid: str, worker: Worker) -> str:
        """Where a worker's objects are: the run's prefix, and the worker's own directory
        in it where several work at once (each host its own keys)."""
        return self.run_prefix(uid) + (f"{worker.tag}/" if worker.tag else "")

    # -- before ----------------------------------------------------------------------

    def settings(self, place: Place) -> dict[str, Any]:
        return {"endpoint": self.endpoint.url, "region": self.endpoint.region}

    def restrict(self, plan: Plan) -> Plan:
        return plan

    def needed(self, plan: Plan, sharing: int) -> tuple[int, str, int]:
        most, name = plan.largest()
        return most, name, 1

    def preflight(self, place: Place) -> None:
        pass  # the endpoint is reached once the run starts (check)

    def approve(self, plan: Plan, place: Place) -> None:
        """Each job PUTs, GETs or DELETEs; one that GETs or DELETEs objects has a job
        before it (in its test or an earlier one) that PUT them: the same filename= and
        bs=, as many jobs and as large a size (between() counts the objects themselves)."""
        put: dict[tuple[str, int], tuple[int, int]] = {}  # (name, bs) -> (jobs, bytes)
        for test in plan.tests:
            # PUTs in this test that may stop before every object is there: a GET after
            # them in the same fio run would read the missing ones as zeros, unseen
            cut: dict[tuple[str, int], str] = {}
            for job, opts in test.jobfile.effective():
                it = ObjectJob.of(job, opts)
                if it.rw not in ONE_OBJECT:
                    raise ConfigError(
                        f"test {test.name!r} (job [{job}]) has rw={it.rw}: on an S3 bucket"
                        " each job writes (PUT), reads (GET) or trims (DELETE) whole objects,"
                        " one kind per job (rw=write, read or trim), or GETs and PUTs again"
                        " objects a job before it PUT (rw=randrw with rwmixread)")
                key = (it.name, it.bs)
                if not it.reads:
                    put[key] = (it.jobs, it.size)
                    limits = [f"{k}={opts[k]}" for k in ("runtime", "number_ios", "io_size",
                                                        "io_limit") if opts.get(k)]
                    if limits:
                        cut[key] = f"job [{job}] may stop before it PUT them all ({limits[0]})"
                    else:
                        cut.pop(key, None)
                elif key in cut:
                    raise ConfigError(
                        f"test {test.name!r}: job [{job}] reads or deletes the objects that"
                        f" {cut[key]}, in the same fio run, where a missing object would be"
                        " read as zeros unseen: PUT them in a test of their own before it"
                        " (storbench then checks that every one is there), or leave out what"
                        " limits the PUT")
                elif key not in put or put[key][0] < it.jobs or put[key][1] < it.size:
                    raise ConfigError(
                        f"test {test.name!r} (job [{job}]) reads or deletes objects no job"
                        f" before it PUT (filename={it.name}, bs={opts.get('bs', '4k')},"
                        f" {it.jobs} job(s), size={opts.get('size', '?')}): fio's http engine"
                        " would read each missing object as zeros. On an S3 bucket, PUT"
                        " them first: the s3 suite, or a job file whose write job comes"
                        " first (docs/objects.md)")

    def check(self, plan: Plan, place: Place) -> None:
        exists = self.endpoint.bucket_exists(self.bucket.name)
        if not exists and not self.create_bucket:
            raise TargetError(f"bucket {self.bucket.name!r} does not exist at"
                              f" {self.endpoint.url}: create it, or pass --create-bucket")
        if not exists:
            self.endpoint.create_bucket(self.bucket.name)

    def ready(self, plan: Plan, place: Place, note: Callable[[str], None]) -> None:
        """The run's marker, before fio puts anything under the run's prefix."""
        self.endpoint.put(self.bucket.name, self.run_prefix(self.uid) + RUN_MARKER,
                          json.dumps({"uid": self.uid, "host": socket.gethostname(),
                                      "pid": os.getpid(),
                                      "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime())}).encode())
        self.marked = True
        note(f"objects go under {self.bucket.name}/{self.run_prefix(self.uid)} at"
             f" {self.endpoint.url}; all of them are deleted as the run ends")

    def scratch(self, place: Place, uid: str) -> str:
        self.uid = uid
        return self.root(uid)

    # -- the job -----------------------------------------------------------------------

    def job(self, jobfile: JobFile, place: Place, worker: Worker, name: str,
            uid: str) -> FioJob:
        """The job file on the bucket: fio's http engine in S3 mode at the endpoint; each
        job's objects named ``FILENAME.JOBNUM.FILENUM_OFFSET_LENGTH`` under the run's
        prefix (each clone of a job its own keys; a test that reads the objects another
        wrote names the same filename=)."""
        creds = self.endpoint.credentials
        http: list[tuple[str, str | None]] = [
            ("ioengine", "http"), ("http_mode", "s3"),
            ("https", "on" if self.endpoint.https else "off"),
            ("http_host", self.endpoint.host), ("http_s3_region", self.endpoint.region)]
        if creds is not None:
            http += [("http_s3_keyid", creds.key_id), ("http_s3_key", OWN_KEY_VALUE)]
        root = self.root(uid) + (f"/{worker.tag}" if worker.tag else "")
        sections = [Section("global", tuple(http))]
        for section in jobfile.sections:
            kept = section.without("directory", "filename", "filename_format", "ioengine",
                                   "direct", "iodepth")
            if section.is_global and not kept.options:
                continue
            else:
                base = section.get("filename") or "$jobname"
                kept = kept.with_option("filename_format", f"{root}/{base}.$jobnum.$filenum")
            sections.append(kept)
        # fio's environment (fio's client's, where hosts run it: it expands the job
        # file's ${VARS} before it sends the file to the servers)
        env = tuple(self.environment().items())
        return FioJob(worker.key, name, JobFile(tuple(sections)).render(), env=env)

    def environment(self) -> dict[str, str]:
        creds = self.endpoint.credentials
        return {SECRET_VAR: creds.secret.value} if creds is not None else {}

    def facts(self, place: Place, worker: Worker | None) -> dict[str, Any]:
        """The endpoint and bucket; from this machine (fio here), the link it is reached
        through (execute/s3.link_to: a GET rate beyond it is a cache's)."""
        host = urllib.parse.urlsplit(self.endpoint.url).hostname or ""
        link = link_to(host) if not place.every and host else {}
        return {"endpoint": self.endpoint.url, "region": self.endpoint.region,
                "bucket": self.bucket.name, "prefix": self.bucket.prefix,
                "https": self.endpoint.https, **({"link": link} if link else {})}

    def between(self, place: Place, test: PlannedTest, keep: set[str],
                deadline: Deadline | None, uid: str) -> None:
        """Before a test that reads or deletes: every object it names is there (fio's
        http engine reads a missing one as zeros, and deletes it without a word)."""
        wanted = {k for w in place.workers()
                  for k in expected_keys(test, self.worker_prefix(uid, w))}
        if not wanted:
            return
        there = set()
        for key in self.endpoint.listing(self.bucket.name, self.run_prefix(uid)):
            there.add(key)
            if len(there) % 1000 == 0:  # a page: tens of ms, seconds on a slow server
                place.stop_point()
        missing = sorted(wanted - there)
        if missing:
            raise TargetError(
                f"test {test.name!r} reads or deletes {len(wanted)} objects and"
                f" {len(missing)} are not there (e.g. {missing[0]!r}): fio's http engine"
                " would count each as a GET of zeros or a DELETE done. A test that reads"
                " objects needs a test before it that PUTs them under the same filename=,"
                " size= and bs=, in one pass (not cut short by runtime= or --runtime)")

    def access(self, place: Place, uid: str, plan: Plan) -> Access:
        return Access()  # fio writes nothing on this machine but its logs

    # -- what an object store does not do --------------------------------------------

    def check_put(self, place: Place) -> None:
        raise ConfigError("--replay applies to files and block devices, not to an S3 bucket")

    def put_file(self, place: Place, uid: str, name: str, text: Placed) -> None:
        self.check_put(place)

    def check_precondition(self) -> None:
        raise ConfigError("--precondition applies to block devices, not to an S3 bucket")

    # -- after -----------------------------------------------------------------------

    def own_probe(self) -> ObjectProbe:
        """HEAD, LIST and a GET's first byte beside the load (target/base.ProbesItself),
        from this machine."""
        return ObjectProbe(self.endpoint, self.bucket.name, self.run_prefix(self.uid))

    def end(self, hurry: bool) -> None:
        """Delete what the run put (target/storage.Outside), once."""
        if self.marked:
            try:
                self.remove(self.run_prefix(self.uid), hurry)
            except TargetError as exc:
                raise TargetError(f"could not delete the run's objects under"
                                  f" {self.run_prefix(self.uid)}: {exc}; the next run"
                                  " on this bucket from this machine deletes them") from None
            self.marked = False

    def remove_leftover(self, leftover: Leftover) -> None:
        self.remove(str(leftover.path) + "/", hurry=False)

    def remove(self, prefix: str, hurry: bool) -> int:
        """Delete every key under ``prefix`` (one of the run's), a thousand a request, the
        marker last (what is left without it is no run's to remove); how many. In a
        ``hurry`` (after a signal) for HURRY_S at most: TargetError for what is left."""
        budget = HURRY_S if hurry else REMOVE_S
        ends = time.monotonic() + budget
        marker = prefix + RUN_MARKER
        keys = []
        for key in self.endpoint.listing(self.bucket.name, prefix):
            if key.startswith(prefix) and key != marker:  # (a listing is by prefix)
                keys.append(key)
                if len(keys) % 1000 == 0 and time.monotonic() > ends:  # a page each
                    raise TargetError(f"over {len(keys)} objects were not deleted within"
                                      f" {budget:g} s (they were still being listed)")
        for start in range(0, len(keys), 1000):
            if time.monotonic() > ends:
                raise TargetError(f"{len(keys) - start} of {len(keys)} objects were not"
                                  f" deleted within {budget:g} s")
            self.endpoint.delete_many(self.bucket.name, keys[start:start + 1000])
        self.endpoint.delete(self.bucket.name, marker)
        return len(keys) + 1

    def leftovers(self) -> list[Leftover]:
        """Run prefixes of runs on this machine that are gone (their work directory's
        lock is free, or the directory is gone) and left keys behind."""
        found: list[Leftover] = []
        if not self.endpoint.bucket_exists(self.bucket.name):
            return found  # check() says so (or makes it, with --create-bucket)
        parent = self.bucket.key() + "/" if self.bucket.prefix else ""
        for sub in self.endpoint.listing(self.bucket.name, parent + PREFIX, "/"):
            uid = sub[len(parent + PREFIX):].rstrip("/")
            if not sub.endswith("/") or not re.fullmatch(r"[0-9a-f]{12}", uid):
                continue
            body = self.endpoint.get(self.bucket.name, sub + RUN_MARKER)
            try:
                mark = json.loads(body or b"{}")
            except ValueError:
                continue
            if mark.get("uid") != uid or mark.get("host") != socket.gethostname():
                continue  # another machine's run: not judged from here
            if held(run_workdir(uid) / MARKER):
                continue  # its run lives
            found.append(Leftover(Path(sub), uid, str(mark.get("started", ""))))
        return found


@dataclass
class ObjectTarget(HereTarget):
    """An S3 bucket, measured from this machine."""

    storage: ObjectStorage

    def check(self, plan: Plan, fio: FioBinary | None, workdir: Path) -> None:
        if fio is not None:
            why = fio_has_http(fio)
            if why is not None:
                raise TargetError(f"{fio.path} ({fio.version_text}) has no http engine, which"
                                  f" an S3 bucket needs ({why}). {FIO_HTTP_HINT}")
        super().check(plan, fio, workdir)

    def own_probe(self) -> ObjectProbe:
        return self.storage.own_probe()

    def traced_path(self) -> Path:
        raise ConfigError("--explain follows fio's I/O through this machine's block layer;"
                          " an S3 bucket's goes over the network")

    def describe(self, fio: FioBinary | None) -> Environment:
        found = super().describe(fio)
        return {**found, "target": {"kind": self.kind, **self.storage.facts(self, None)}}

    def cleanup(self, hurry: bool = False) -> None:
        self.storage.end(hurry)

    def leftovers(self) -> list[Leftover]:
        return self.storage.leftovers()

    def remove_leftover(self, leftover: Leftover) -> None:
        self.storage.remove_leftover(leftover)
