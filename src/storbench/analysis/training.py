"""The AI-training profiles' judge: how many accelerators a storage feeds at MLPerf
Storage's utilisation threshold, from the profile's reads (workload/training.py).

An accelerator computes a batch in ``computation_time`` while its loader reads the next
(DLIO overlaps the two), so it stays busy a share AU = min(1, T / (batch × sample /
computation_time)) of the time when the storage gives its loader T bytes a second. It
keeps the threshold (90%, cosmoflow 70%) while it gets at least ``need`` = AU × batch ×
sample / computation_time a second; N accelerators need N × that. So: accelerators fed =
⌊T / need⌋, with T the throughput of 16 readers (``read_many``: several loaders), and
one accelerator's utilisation from one loader's throughput (``read``). This is an upper
bound: the accelerators' compute, the loaders' CPU (decoding samples) and the network
between hosts can each limit it first. ``low`` takes a little less than the share of
the profile's throughput DLIO's own loader reached at worst on the same volumes; DLIO
found the same number of accelerators as the estimate on each of 18 capped volumes'
figures; on sshfs, whose client stack shares the CPU with DLIO's decoding, 5 of 6 and
the sixth one fewer (bench/training.py, docs/training.md).
"""

from __future__ import annotations

import math

from storbench.analysis.apps import Answer, Figure, Judge, measured, median_of
from storbench.result.model import TestResult
from storbench.workload.training import ACCELERATORS, MANY, MODELS, Model

# DLIO 2.0's own loader read 0.92–1.10 of the profile's throughput on the same capped
# volumes (bench/training.py, docs/training.md, 2026-12-02): the low end of the
# estimates takes a little less than its worst
LOADER = 0.85


def _size(n: float) -> str:
    """Decimal, as MLPerf gives them: '147 MB', '2.83 MB', '115 kB', '2.86 GB'."""
    for unit, base in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= base:
            v = n / base
            return f"{v:,.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def _rate(bps: float) -> str:
    return f"{_size(bps)}/s"


def _fed(t: float, need: float) -> int:
    return math.floor(t / need + 1e-9)


def judge(m: Model, results: dict[str, list[TestResult]]) -> Answer | None:
    one = median_of(results, "read", "read.bw")
    many = median_of(results, "read_many", "read.bw")
    if not one:
        return None
    # without read_many (it failed), one loader's throughput: what one host's one
    # accelerator reads at least, and said so
    readers = f"read_many: {_rate(many)} with {MANY} readers" if many else (
        f"read: {_rate(one)} from one loader (read_many not measured)")
    many = many or one
    figures: list[Figure] = []
    for acc in ACCELERATORS:
        need = m.need(acc)
        name = "accelerators" if acc == ACCELERATORS[0] else f"accelerators_{acc}"
        fed = _fed(many, need)
        figures.append(Figure(
            name, f"{acc.upper()}s fed at AU ≥ {m.au:.0%}", fed, _fed(many * LOADER, need), fed,
            "accelerators", f"{readers}; each {acc.upper()} needs {_rate(need)}"))
    full = m.batch * m.sample_bytes / m.compute_s[ACCELERATORS[0]]
    au = min(1.0, one / full)
    figures += [
        Figure("au", f"one {ACCELERATORS[0].upper()}'s utilisation (AU)", 100 * au,
               100 * min(1.0, one * LOADER / full), 100 * au, "%",
               f"read: {_rate(one)} from one loader ({m.read_threads} threads); busy all the"
               f" time at {_rate(full)}"),
        measured("mbps", "storage-side throughput", many / 1e6, "MB/s", readers),
        Figure("samples", "samples/s", many / m.sample_bytes, many * LOADER / m.sample_bytes,
               many / m.sample_bytes, "samples/s",
               f"{readers}; {_size(m.sample_bytes)} samples"),
    ]
    for test, op, what in (("checkpoint_write", "write", "a checkpoint written and fsynced"),
                           ("checkpoint_read", "read", "a checkpoint read back")):
        bw = median_of(results, test, f"{op}.bw")
        if bw:
            figures.append(measured(test, f"{what}, seconds per GB", 1e9 / bw, "s/GB",
                                    f"{test} {op} bandwidth"))
    h100, a100 = figures[0].value, figures[1].value
    verdict = (f"{m.name} here: feeds {h100:.0f} H100{'' if h100 == 1 else 's'} and"
               f" {a100:.0f} A100{'' if a100 == 1 else 's'} at AU ≥ {m.au:.0%}"
               f" ({_rate(many)} read; each H100 needs {_rate(m.need('h100'))})")
    if h100 < 1:
        verdict += f"; one H100 would be busy {au:.0%} of the time"
    notes = ["an upper bound: the accelerators' compute, the data loaders' CPU (decoding"
             " samples) and the network between hosts can each limit it first"]
    return Answer(m.name, f"MLPerf Storage {m.name} (DLIO 2.0)", figures, verdict, True, notes)


def _judge_of(m: Model) -> Judge:
    return lambda results: judge(m, results)


JUDGES = {name: _judge_of(m) for name, m in MODELS.items()}


def _answers_of(m: Model) -> tuple[tuple[str, str, str], ...]:
    """What ``judge`` answers for ``m``: (name, label, unit) (apps.ANSWERS)."""
    return (*((("accelerators" if acc == ACCELERATORS[0] else f"accelerators_{acc}"),
               f"{acc.upper()}s fed at AU ≥ {m.au:.0%}", "accelerators")
              for acc in ACCELERATORS),
            ("au", f"one {ACCELERATORS[0].upper()}'s utilisation (AU)", "%"),
            ("mbps", "storage-side throughput", "MB/s"),
            ("samples", "samples/s", "samples/s"),
            ("checkpoint_write", "a checkpoint written and fsynced, seconds per GB", "s/GB"),
            ("checkpoint_read", "a checkpoint read back, seconds per GB", "s/GB"))


ANSWERS = {name: _answers_of(m) for name, m in MODELS.items()}
