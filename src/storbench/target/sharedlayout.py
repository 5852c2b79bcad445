"""`run --hosts … --shared-file` (and `--storage-class … --clients N --shared-file`): each
test's one file laid out from the first host (pod) alone, before every one starts the test.

fio lays out a file it finds missing or short by unlinking it and writing it anew. Hosts
that start one test at once each did so with the shared file: each unlinked another's
while that one still wrote it, so the file system held it two or more times over (ENOSPC
on a volume it fits in once), and a host that opened the name between two layouts worked
on a file the others no longer saw: the figure was not one shared file's, as the run
says. Laid out first, the file is found whole by every host, and none lays it out again.

Nor does any host's fio remove it (unlink=0): the host that ended the test first unlinked
it under a host that had not opened it yet (ENOENT there, or a file of its own). The
place removes it from the first host once every host ended the test (``remove``: fio's
create_only=1, unlink=1, which unlinks the whole file it finds and writes nothing).
"""

from __future__ import annotations

from storbench.errors import FioError, TargetError
from storbench.execute.base import Executor, FioJob, fio_message
from storbench.result.fio_json import job_entries, load_fio_json
from storbench.target.base import Deadline
from storbench.workload.jobfile import JobFile

RUN_ONCE = ("exec_prerun", "exec_postrun")  # a job's commands run with the test, not here
# a layout's samples are not the test's: no logs of it (create_only would write them empty)
LOGS = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")


REMOVE_S = 60.0  # to remove a test's shared file once every host ended it


def layout_job(jobfile: JobFile, unlink: str = "0") -> JobFile:
    """``jobfile`` (one host's) that only lays out its files (fio's create_only=1) and
    keeps them (unlink=0: the place removes them after the test), or with ``unlink`` "1"
    removes them (a whole file found is not written again)."""
    sections = []
    for section in jobfile.sections:
        section = section.without(*RUN_ONCE, *LOGS)
        if not section.is_global:
            section = section.with_option("create_only", "1").with_option("unlink", unlink)
        sections.append(section)
    return JobFile(tuple(sections))


def remove(executor: Executor, host: str, jobfile: JobFile) -> None:
    """Remove ``jobfile``'s files (a test's shared file, laid out by ``lay_out``) from
    ``host``; TargetError with fio's message if that failed."""
    done = executor.run([FioJob(host, "remove.fio", layout_job(jobfile, "1").render())],
                        None, REMOVE_S)
    if done.returncode != 0 or done.lost or done.timed_out or _job_errors(done.raw_json):
        said = (f"it did not end within {REMOVE_S:.0f} s" if done.timed_out
                else fio_message(f"{done.stderr}\n{done.raw_json}"))
        raise TargetError(f"--shared-file: removing a test's file from {host} failed: {said};"
                          " it stays in the path on the hosts: remove the run's files there"
                          " (storbench-<run id>-…) by hand")


def lay_out(executor: Executor, host: str, name: str, jobfile: JobFile,
            deadline: Deadline | None, hint: str, every: str = "host") -> None:
    """Lay out ``jobfile``'s files from ``host`` within the test's ``deadline``; FioError
    with fio's message if it failed, then ``hint`` (what to do). ``every``: what the
    test runs on (host, pod)."""
    done = executor.run([FioJob(host, "layout.fio", layout_job(jobfile).render())],
                        None, deadline.seconds if deadline is not None else None)
    failed = done.returncode != 0 or done.lost or done.timed_out or _job_errors(done.raw_json)
    if failed:
        said = (f"it did not end within {deadline.seconds:.0f} s ({deadline.why})"
                if done.timed_out and deadline is not None else
                fio_message(f"{done.stderr}\n{done.raw_json}"))
        raise FioError(f"--shared-file: laying out the files of test {name!r} from {host}"
                       f" (before every {every} starts it) failed: {said}; {hint}",
                       returncode=done.returncode, stderr=done.stderr)


def _job_errors(raw: str) -> bool:
    """Does fio's client output report a job's error (its JSON's "error")? An output
    with no JSON is judged by fio's exit status and message alone."""
    try:
        return any(j.get("error") for j in job_entries(load_fio_json(raw)))
    except FioError:
        return False
