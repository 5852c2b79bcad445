"""AI-training profiles as suites: fio jobs shaped like the reads of MLPerf Storage's
training workloads as DLIO (its benchmark) issues them, and a checkpoint.

Each model's suite reads a data set shaped like the model's: one file per sample (unet3d,
cosmoflow) or TFRecords of 1,251 samples (resnet50), file sizes spread like the
sample sizes (uniform with the same mean and deviation), each file read from
start to end in 252 KiB (npz) or 256 KiB (TFRecord) buffered reads by the data loader's
read threads, pass after pass for 20 s, its cached pages dropped before each pass (fio's
``invalidate``), so every byte comes from the storage. ``read`` is one accelerator's
data loader; ``read_many`` 16 readers, as several accelerators' loaders on one host.
The judge (analysis/training.py) turns their throughput into accelerators fed at
MLPerf's utilisation threshold; bench/training.py checks it against DLIO itself
(docs/training.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from storbench.workload.jobfile import Option
from storbench.workload.suite import Suite, TestSpec


@dataclass(frozen=True)
class Model:
    """One MLPerf Storage training workload, as DLIO 2.0's configurations give it
    (dlio_benchmark/configs/workload/MODEL_{a100,h100}.yaml)."""

    name: str
    sample_bytes: float  # record_length: a sample's mean size
    sample_stdev: float  # record_length_stdev
    samples_per_file: int
    batch: int  # batch_size
    compute_s: dict[str, float]  # computation_time a batch, by accelerator
    au: float  # metric.au: the utilisation an accelerator must keep
    read_threads: int  # reader.read_threads: one accelerator's loader
    format: str  # npz, tfrecord
    files: int  # files each read thread takes in `read` (the data set's size)

    @property
    def file_bytes(self) -> float:
        return self.sample_bytes * self.samples_per_file

    def need(self, accelerator: str) -> float:
        """Bytes a second one accelerator reads at exactly the utilisation threshold:
        its batch every computation_time / au seconds."""
        return self.au * self.batch * self.sample_bytes / self.compute_s[accelerator]

    def filesize(self) -> str:
        """fio's filesize: the file sizes' spread as a uniform range with the samples'
        mean and deviation (half-width √3 σ), or the one size."""
        mean, spread = self.file_bytes, math.sqrt(3) * self.sample_stdev * self.samples_per_file
        if spread < 4096:
            return f"{round(mean / 4096) * 4}k"
        return f"{math.floor((mean - spread) / 4096) * 4}k-{math.ceil((mean + spread) / 4096) * 4}k"


ACCELERATORS = ("h100", "a100")
MODELS = {m.name: m for m in (
    Model("unet3d", 146600628, 68341808, 1, 7, {"a100": 0.636, "h100": 0.323}, 0.90, 4,
          "npz", 2),
    Model("resnet50", 114660.07, 0, 1251, 400, {"a100": 0.435, "h100": 0.224}, 0.90, 8,
          "tfrecord", 1),
    Model("cosmoflow", 2828486, 71311, 1, 1, {"a100": 0.00551, "h100": 0.00350}, 0.70, 4,
          "tfrecord", 96),
)}
MANY = 16  # readers of `read_many`: several accelerators' loaders on one host
READ_S = "20"  # each read test reads for this long, pass after pass over its data set
CHECKPOINT = "256m"  # each of 4 ranks' share of a 1 GiB checkpoint


def _o(**options: str | None) -> tuple[Option, ...]:
    return tuple(options.items())


def _suite(m: Model) -> Suite:
    bs = "252k" if m.format == "npz" else "256k"
    # time based: pass after pass over the data set for READ_S (fio drops each file's
    # cached pages again as it opens it for the next pass: every byte from the storage,
    # checked against a loop device's own read count), so fast storage is read for as
    # long as slow, and readers with smaller files do not stop early
    reads = dict(rw="read", bs=bs, direct="0", invalidate="1", filesize=m.filesize(),
                 file_service_type="sequential", time_based=None, runtime=READ_S)
    # as many files in read_many as in read (at least one a reader): the same data set
    many_files = max(1, math.ceil(m.read_threads * m.files / MANY))
    return Suite(
        name=m.name,
        description=f"MLPerf Storage {m.name} training reads (DLIO's shape) and a checkpoint:"
                    " accelerators this storage feeds",
        study=f"MLPerf Storage / DLIO 2.0 workload {m.name}_h100 and {m.name}_a100"
              f" ({m.format}, batch {m.batch}, {m.read_threads} read threads, AU"
              f" {m.au:.0%})",
        defaults=_o(ioengine="psync", randrepeat="0"),
        tests=(
            TestSpec("read", f"one accelerator's loader: {m.read_threads} threads, each reading"
                             f" {m.files} {m.format} file(s) whole in {bs} buffered reads",
                     _o(**reads, numjobs=str(m.read_threads), nrfiles=str(m.files)),
                     ("read.bw", "read.clat_p99")),
            TestSpec("read_many", f"{MANY} readers (several accelerators' loaders), each"
                                  f" reading {many_files} file(s) whole",
                     _o(**reads, numjobs=str(MANY), nrfiles=str(many_files)),
                     ("read.bw", "read.clat_p99")),
            TestSpec("checkpoint_write", "a 1 GiB checkpoint: 4 ranks each write 256 MiB in"
                                         " 1 MiB buffered writes, then fsync",
                     _o(rw="write", bs="1m", direct="0", size=CHECKPOINT, numjobs="4",
                        end_fsync="1"),
                     ("write.bw",), brief="one checkpoint written and made durable"),
            TestSpec("checkpoint_read", "the checkpoint read back: 4 ranks, 1 MiB reads, the"
                                        " page cache dropped first",
                     _o(rw="read", bs="1m", direct="0", invalidate="1", size=CHECKPOINT,
                        numjobs="4"),
                     ("read.bw",), brief="one checkpoint read back once"),
        ),
        origins={
            "filesize": f"DLIO {m.name}: record_length {m.sample_bytes:,.0f} bytes ±"
                        f" {m.sample_stdev:,.0f}, {m.samples_per_file} sample(s) a file (a"
                        " uniform range with that mean and deviation)",
            "bs": f"DLIO's {m.format} reader reads each file front to back in {bs} reads"
                  " (strace of DLIO 2.0)",
            "direct": "DLIO reads through the page cache",
            "invalidate": "each file's cached pages dropped before each pass over it: every"
                          " byte from the storage, as with MLPerf's data set of 5× the RAM",
            "numjobs": f"DLIO {m.name}: reader.read_threads = {m.read_threads} an accelerator;"
                       f" read_many: {MANY}, several accelerators' loaders",
            "file_service_type": "each reader takes one file at a time, whole (DLIO"
                                 " shuffles the order; separate files either way)",
            "runtime": f"each read test reads for {READ_S} s, pass after pass (time based)",
            "end_fsync": "MLPerf Storage 2.0's checkpoint: written, then made durable",
            "size": "the checkpoint: 1 GiB over 4 ranks (MLPerf Storage 2.0's are larger;"
                    " the figure is given in seconds per GB)",
        },
    )


TRAINING: tuple[Suite, ...] = tuple(_suite(m) for m in MODELS.values())
