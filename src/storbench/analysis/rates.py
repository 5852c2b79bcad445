"""Rates a test asked fio for (rate_iops=, rate=) against what it achieved.

A test that asked for a rate and fell behind measured a saturated system: its
latency is the latency of a queue that grew, not the latency at the requested
rate. The result says so wherever it appears (a warning, the table, the verdict
line). The latency curve (storbench curve) judges its steps the same way.

With ``rate_process=poisson`` fio draws each gap between I/Os at random, so the
number of I/Os in a run of T seconds at rate r is itself random (Poisson, mean rT,
standard deviation sqrt(rT)): 300 IOPS for 3 s gives 900 ± 30 I/Os, and a storage
that kept up can fall 5% short by chance one time in 15. Such a run is judged
saturated only when it fell short by more than three standard deviations too.

fio also times each Poisson gap in whole microseconds: the mean gap is
``1,000,000 // iops`` µs (an integer), and each gap drawn from it is cut to whole µs
(fio's ``usec_for_io``). At 5,000 IOPS a job that makes 5,013; at 171,618 it makes
221,000 (measured: 220,856); above 1,000,000 it sets no pace at all.
``poisson_offered`` gives the rate fio will really offer, and a test that ran faster
than it asked (by more than chance) is said to have, as one that fell behind is: its
latency is that at the rate it ran, not the requested one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from storbench.result.model import DIRECTIONS, TestResult
from storbench.workload.sizes import parse_size

KEPT = 0.95  # achieved / requested at or above this: the rate was kept
CHANCE_SIGMAS = 3.0  # Poisson arrivals: a shortfall within this many deviations is chance


UNLIKE_ASKED = 0.02  # fio's pace this far from the requested rate: said


RAMP_S = 1.0  # before each step of a curve or a neighbours run: caches and queues fill


def ramp_s(step_s: float) -> float:
    """The ramp before a paced step of ``step_s`` seconds: RAMP_S, or half the step when
    the step is no longer. fio 3.33 ends a rate-limited job whose runtime is no longer
    than its ramp_time inside the ramp, often (io_u.c rate_ddir: a job waiting for its
    next I/O stops at runtime counted from its start, before a completion has told it
    the ramp is over): its I/Os are then the ramp's, and not one is timed. Of 1 s steps
    with a 1 s ramp, 5-8 in 10 at 50-1,000 IOPS (Poisson) on tmpfs and a third at 5,000
    on a loop device; with a 0.5 s ramp, none of 240."""
    return RAMP_S if step_s > RAMP_S else step_s / 2


def _share(expected_ios: float, poisson: bool) -> float:
    """How far from the requested rate (as a share of it) is still the rate kept."""
    if poisson and expected_ios > 0:
        return min(KEPT, 1.0 - CHANCE_SIGMAS / math.sqrt(expected_ios))
    return KEPT


def kept(requested: float, achieved: float, expected_ios: float, poisson: bool) -> bool:
    """Whether fio kept a ``requested`` rate (any unit), ``expected_ios`` being the
    number of I/Os that rate asks for over the run."""
    return achieved >= _share(expected_ios, poisson) * requested


def exceeded(requested: float, achieved: float, expected_ios: float, poisson: bool) -> bool:
    """Whether fio ran faster than a ``requested`` rate, by more than 5% and chance."""
    return achieved > (2.0 - _share(expected_ios, poisson)) * requested


def poisson_offered(iops: float) -> float:
    """The mean rate fio's ``rate_process=poisson`` offers for ``rate_iops=iops`` (one
    job, one direction): gaps of ``floor((1e6 // iops) × Exp(1))`` µs, whose mean is
    1 / (e^(1/m) − 1) µs for m = 1e6 // iops; ``inf`` where fio sets no pace."""
    whole = int(iops)
    if whole <= 0:
        return 0.0
    m = 1_000_000 // whole
    return math.inf if m == 0 else 1e6 * math.expm1(1.0 / m)


def poisson_pace(want: float) -> tuple[int, float]:
    """The ``rate_iops`` whose Poisson arrivals fio offers nearest ``want`` IOPS (one
    job, one direction), and that rate: fio's mean gap is a whole number of µs, so
    only some rates exist (170,000 a job: 153,567 or 181,360); (0, 0.0) for none."""
    if want < 1:
        return 0, 0.0
    exact = 1.0 / math.log1p(want / 1e6)  # the mean gap m, in µs, that would give it
    candidates = {round(want)} | {1_000_000 // m for m in (math.floor(exact), math.ceil(exact))
                                  if m >= 1}
    return min(((iops, poisson_offered(iops)) for iops in candidates if iops >= 1),
               key=lambda c: (abs(math.log(c[1] / want)), c[0]))


def paced(want: float, poisson: bool) -> tuple[int, float]:
    """The ``rate_iops`` for about ``want`` IOPS (one job, one direction) and the rate fio
    offers with it: Poisson arrivals (``poisson_pace``), or evenly spaced (as written,
    a whole number; at least 1). fio 3.33 pacing fdatasync'd psync writes by Poisson
    issued one I/O a job (5,000 IOPS asked: 1 I/O, with or without a ramp; evenly
    spaced, 5,001): a synchronous engine's jobs are spaced evenly."""
    if poisson:
        return poisson_pace(want)
    whole = max(1, round(want))
    return whole, float(whole)


@dataclass(frozen=True)
class Rate:
    direction: str
    requested: float  # IOPS, or bytes/s when ``unit`` is "B/s"
    achieved: float
    unit: str  # "IOPS" or "B/s"
    expected_ios: float = 0.0  # I/Os the requested rate asks for over the run
    poisson: bool = False
    jobs: int = 1  # fio jobs in the result, each asked requested / jobs

    @property
    def per_job(self) -> float:
        """The rate as the job file asks it: fio's rate options are per job."""
        return self.requested / self.jobs

    @property
    def offered(self) -> float:
        """The rate fio issues for the requested one: its Poisson pace in IOPS
        (poisson_offered, per job), else the requested rate."""
        if self.poisson and self.unit == "IOPS":
            return poisson_offered(self.per_job) * self.jobs
        return self.requested

    @property
    def unlike_asked(self) -> bool:
        """Whether fio's pace is more than 2% off the requested rate."""
        return abs(self.offered / self.requested - 1.0) > UNLIKE_ASKED

    @property
    def kept(self) -> bool:
        """Whether the storage kept up with the pace fio set (none: with the rate)."""
        if math.isinf(self.offered):
            return kept(self.requested, self.achieved, self.expected_ios, self.poisson)
        return kept(self.offered, self.achieved, self.expected_ios * self.offered
                    / self.requested, self.poisson)

    @property
    def beyond_pace(self) -> bool:
        """Whether the test ran faster than fio's own pace, by more than chance."""
        if math.isinf(self.offered):
            return False
        return exceeded(self.offered, self.achieved,
                        self.expected_ios * self.offered / self.requested, self.poisson)

    @property
    def exceeded(self) -> bool:
        """Whether it kept up and ran faster than asked: at fio's pace, or beyond it."""
        return self.kept and ((self.unlike_asked and self.offered > self.requested)
                              or self.beyond_pace)


def requested(r: TestResult) -> list[Rate]:
    """Each direction's requested rate (fio: one value for all, or 'read,write,trim')."""
    out = []
    for key, unit in (("rate_iops", "IOPS"), ("rate", "B/s")):
        text = r.options.get(key)
        if not text:
            continue
        parts = [p.strip() for p in text.split(",")]
        for i, name in enumerate(DIRECTIONS):
            value = parts[i] if i < len(parts) else (parts[-1] if len(parts) == 1 else "")
            d = r.direction(name)
            if not value or d is None:
                continue
            want = float(value) if unit == "IOPS" else parse_size(value)
            if not want:
                continue
            got = d.iops if unit == "IOPS" else d.bw_bytes_per_s
            jobs = max(r.jobs, 1)  # each job is asked the rate: d sums them
            ios = float(want) * jobs * d.runtime_ms / 1000
            if unit != "IOPS":
                ios = ios * d.total_ios / d.io_bytes if d.io_bytes else 0.0
            out.append(Rate(name, float(want) * jobs, got, unit, ios,
                            r.options.get("rate_process") == "poisson", jobs))
    return out


def amount(value: float) -> str:
    """A rate as the messages write it: 150, 2,000,000, 0.5 (never 2e+06)."""
    return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:,.3g}"


def shortfalls(r: TestResult) -> list[Rate]:
    return [rate for rate in requested(r) if not rate.kept]


def excesses(r: TestResult) -> list[Rate]:
    return [rate for rate in requested(r) if rate.exceeded]


def off_rate(r: TestResult) -> list[Rate]:
    """The rates fio did not run at: fell behind, or ran faster."""
    return [rate for rate in requested(r) if not rate.kept or rate.exceeded]
