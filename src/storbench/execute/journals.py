"""A sync's wait for its file system's journal, in ``run --explain``'s bpftrace program
(execute/layers.py, its ``journal`` layer), per fsync, fdatasync or sync_file_range, from
the kernel's tracepoints (execute/beneath.Place.journal says which):

- ``jbd2`` (ext4, ext3): the journal commit it waited for: the last commit of the file
  system's journal (jbd2:jbd2_start_commit to jbd2:jbd2_end_commit, in jbd2's own
  thread) that ended during the call, from its start or the call's, whichever came
  later. Its writes are jbd2's, not fio's: the ``completion`` after fio's own last I/O
  holds it, or, for a sync that put no I/O of its own on the device (fio's direct writes
  had, before it), the whole call.
- ``xfs`` (a kernel of 5.14 or later): from the sync's first force of the log
  (xfs:xfs_log_force, in fio's thread) to the last write of the log done after it
  (xfs:xlog_iclog_sync_done, in a worker once the I/O completed): the log's work to
  gather what the sync needs logged, and its write, which xfs may issue from the sync's
  own call (its bio then counted in fio's own layers too).
"""

from __future__ import annotations


def probes(journal: str | None, part_dev: int) -> list[str]:
    """The probes that follow ``journal`` on the file system's device (``part_dev``, as
    the kernel encodes it): its commits' or its log's writes' ends, and for xfs a sync's
    force (@xf, per thread: the first in the call, @in its start)."""
    if journal == "jbd2":  # the journal's commits (jbd2's thread): the last one's start, end
        return [f"tracepoint:jbd2:jbd2_start_commit /args->dev == {part_dev}/"
                " { @jc = nsecs; }",
                f"tracepoint:jbd2:jbd2_end_commit /args->dev == {part_dev}/"
                " { @js = @jc; @je = nsecs; }"]
    if journal == "xfs":
        return [f"tracepoint:xfs:xfs_log_force /@in[tid] && args->dev == {part_dev}/"
                " { if (@xf[tid] < @in[tid]) { @xf[tid] = nsecs; } }",
                f"tracepoint:xfs:xlog_iclog_sync_done /args->dev == {part_dev}/"
                " { @je = nsecs; }"]
    return []


def waited(journal: str | None, timed: str) -> str:
    """At a call's return ($i its start, $k its kind: a sync's, or 0), what it waited for
    of the journal put in $j and counted (``timed``: the statement that counts $j)."""
    if journal == "jbd2":  # the commit that ended in it (after its own I/O, if any)
        return ("  if ($k && @je > $i) { $j = @je - @js; if (@js < $i) { $j = @je - $i; }"
                f"  {timed} }}")
    if journal == "xfs":  # the log's write that ended after it forced the log
        return f"  if ($k && @xf[tid] > $i && @je > @xf[tid]) {{ $j = @je - @xf[tid]; {timed} }}"
    return ""


def cleared(journal: str | None) -> str:
    """Its maps, cleared as the program ends (only the histograms are printed)."""
    return {"jbd2": " clear(@jc); clear(@js); clear(@je);",
            "xfs": " clear(@xf); clear(@je);"}.get(journal or "", "")
