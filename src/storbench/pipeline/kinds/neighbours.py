"""Noisy neighbours (`storbench neighbours`): how much another tenant's I/O hurts yours.

The victims are workloads at a fixed rate, open loop: by default 4k random reads at 200
IOPS (fio's ``rate_iops`` with Poisson arrivals) and an etcd-like writer, a 4k write and
its fdatasync 50 times a second, one at a time. They run alone, then beside 1, 2, 4, …
aggressors (by default 1M sequential writes at queue depth 32), each job on its own
file, all in one fio invocation per step, the aggressors in their own reporting group.
Each step says each victim's p50 and p99, how much each grew over alone (×), whether
its rate was kept, and the aggressors' throughput; a step where a victim misses the
objective (``--limit p99<=10ms``) ends the run there. The answer is one sentence per
victim: alone, beside the first aggressor, beside the most.

With ``--isolate LIMITS`` each step beside aggressors is measured again with the
aggressors in a blkio cgroup of their own that holds them to LIMITS (io.max's keys:
``wbps=20M``; execute/isolation.py), the victims where storbench runs: what a limit on
the other tenant buys. Those steps follow the step they repeat (``step-2-isolated``).

Every step is a test of the run (``randread-0``, ``fdatasync-2``, ``aggressors-2``); its
record (result/sections.NEIGHBOURS) keeps each step's figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from storbench.analysis import rates
from storbench.analysis.curve import Objective
from storbench.analysis.neighbours import ISOLATED, meets, said, step_record
from storbench.errors import ConfigError
from storbench.execute import isolation
from storbench.pipeline.measure import Plain, RecordSection, RunContext
from storbench.pipeline.spec import RunSpec
from storbench.result.record import Run, Warning
from storbench.result.sections import NEIGHBOURS, NeighboursSection
from storbench.target.base import Spread, Target, Traceable
from storbench.workload.jobfile import JobFile, parse_jobfile
from storbench.workload.limits import CGROUP_PREFIX, Limits
from storbench.workload.loads import Load, is_named_load, one_job
from storbench.workload.plan import Plan, PlannedTest
from storbench.workload.sizes import fio_seconds

POISSON_DEPTH = 32  # a victim paced by Poisson arrivals: a queue deep enough for bursts


def _builtin(name: str, words: str, options: str, rate: float | None = None) -> Load:
    pairs = tuple((k, v) for k, _, v in (line.partition("=") for line in options.split()))
    return Load(name, words, pairs, rate, dict(pairs).get("ioengine") == "psync")


# Poisson arrivals for the asynchronous; a synchronous writer (one write at a time, as
# etcd's) evenly spaced: fio 3.33 pacing psync by Poisson issued one I/O, or died of SIGFPE
VICTIMS = {v.name: v for v in (
    _builtin("randread", "4k random reads", "rw=randread bs=4k iodepth=32", 200.0),
    _builtin("randwrite", "4k random writes", "rw=randwrite bs=4k iodepth=32", 200.0),
    _builtin("fdatasync", "etcd-like fdatasync'd 4k writes",
             "rw=write bs=4k fdatasync=1 ioengine=psync direct=0", 50.0))}
# how the answer names what each victim waits for
SUBJECTS = {"randread": "your 4k random reads' p99", "randwrite": "your 4k random writes' p99",
            "fdatasync": "your etcd-like writer's fdatasync p99"}
AGGRESSORS = {a.name: a for a in (
    _builtin("seqwrite", "1M sequential writes, qd32", "rw=write bs=1m iodepth=32"),
    _builtin("randwrite", "4k random writes, qd32", "rw=randwrite bs=4k iodepth=32"),
    _builtin("randread", "4k random reads, qd32", "rw=randread bs=4k iodepth=32"),
    _builtin("seqread", "1M sequential reads, qd32", "rw=read bs=1m iodepth=32"))}


@dataclass(frozen=True)
class NeighboursSpec:
    """What `storbench neighbours` asks: the victims and their rate, the aggressor, how
    many at most, each step's time, and the victims' objective."""

    victims: tuple[str, ...] = ("randread", "fdatasync")
    rate_iops: float | None = None  # None: each victim's own (VICTIMS)
    aggressor: str = "seqwrite"
    max_aggressors: int = 4
    step_s: float = 5.0
    size: str = "256m"  # each job's file
    limit: str | None = None  # p99<=10ms
    isolate: str | None = None  # the aggressors' cgroup limits: wbps=20M

    def counts(self) -> list[int]:
        """The aggressor counts measured: 0, 1, 2, 4, … up to the most (which is in)."""
        out, n = [0], 1
        while n < self.max_aggressors:
            out.append(n)
            n *= 2
        return [*out, self.max_aggressors]

    def victim_loads(self) -> dict[str, Load]:
        """Each victim by its name: a built-in, a suite's test or a job file's job."""
        found: dict[str, Load] = {}
        for word in self.victims:
            if is_named_load(word):
                load = one_job(word, "--victim", self.size)
            elif word in VICTIMS:
                load = VICTIMS[word]
            else:
                raise ConfigError(f"--victim {word!r}: one of {', '.join(VICTIMS)}, a"
                                  " suite's test (SUITE:TEST) or a job file with one job")
            if load.name in found:
                raise ConfigError(f"--victim: give each victim once ({load.name!r} twice)")
            if self.rate_iops is None and load.rate is None:
                raise ConfigError(f"--victim {word!r} sets no rate_iops: give its --rate")
            found[load.name] = load
        return found

    def aggressor_load(self) -> Load:
        if is_named_load(self.aggressor):
            return one_job(self.aggressor, "--aggressor", self.size)
        if self.aggressor not in AGGRESSORS:
            raise ConfigError(f"--aggressor {self.aggressor!r}: one of"
                              f" {', '.join(AGGRESSORS)}, a suite's test (SUITE:TEST) or a"
                              " job file with one job")
        return AGGRESSORS[self.aggressor]

    def check(self) -> None:
        if not self.victims:
            raise ConfigError("--victim: give at least one")
        self.victim_loads()
        self.aggressor_load()
        if not 1 <= self.max_aggressors <= 64:
            raise ConfigError(f"--max-aggressors must be 1 to 64, not {self.max_aggressors}")
        if self.rate_iops is not None and not 1 <= self.rate_iops <= 1_000_000:
            raise ConfigError(f"--rate must be 1 to 1,000,000 IOPS, not {self.rate_iops:g}")
        if self.step_s < 1:
            raise ConfigError(f"--step-time must be at least 1 s, not {self.step_s:g}")
        if self.limit is not None:
            Objective.parse(self.limit, "--limit")  # judged: its words, any percentile
        self.limits()  # --isolate's, judged

    def limits(self) -> Limits | None:
        """--isolate's limits (ConfigError for ones that are not io.max's), or None."""
        return Limits.parse(self.isolate) if self.isolate is not None else None

    def pace(self, victim: Load) -> tuple[int, float]:
        """A victim's rate_iops= and the rate fio offers with it (Poisson arrivals:
        fio's whole-microsecond gaps make some rates only; evenly spaced: as written)."""
        want = self.rate_iops if self.rate_iops is not None else victim.rate
        assert want is not None  # check() refused a victim with neither
        return rates.paced(want, not victim.synchronous)

    def plan_tests(self, scratch: Path) -> Plan:
        """One test per step: the victims (and the aggressors beside them), time based,
        each victim on a file of its own."""
        runtime, ramp = fio_seconds(self.step_s), rates.ramp_s(self.step_s)
        victims, aggressor = self.victim_loads(), self.aggressor_load()
        paced = {v: self.pace(load)[0] for v, load in victims.items()}
        words = " and ".join(f"{load.words} at {paced[v]:,} IOPS" for v, load in victims.items())
        limits = self.limits()
        cgroup = isolation.cgroup_name(CGROUP_PREFIX) if limits is not None else None
        tests = []
        for n, isolated in self.schedule():
            at = f"{n}{ISOLATED if isolated else ''}"
            text = (f"[global]\nioengine=libaio\ndirect=1\nsize={self.size}\ntime_based\n"
                    f"runtime={runtime}\nramp_time={fio_seconds(ramp)}\nrandrepeat=0\n")
            for v, load in victims.items():
                text += (f"[{v}-{at}]\n{_paced(load).text()}filename={v}.data\n"
                         f"rate_iops={paced[v]}\n")
            if n:
                text += f"[aggressors-{at}]\nnew_group\n{aggressor.text()}numjobs={n}\n"
            jobfile = parse_jobfile(text, "neighbours").prepared(scratch)
            what = words + (f" beside {n} × {aggressor.words}" if n else ", alone")
            if isolated and cgroup is not None and limits is not None:
                # storbench's own option, after the gate (which refuses cgroups in a
                # user's job file): the aggressors join the cgroup the kind made
                jobfile = replace(jobfile, sections=tuple(
                    sec.with_option("cgroup", cgroup).with_option("cgroup_nodelete", "1")
                    if sec.name == f"aggressors-{at}" else sec for sec in jobfile.sections))
                what += f", held to {limits.words()}"
            tests.append(PlannedTest(f"step-{at}", what, jobfile, self.step_s + ramp,
                                     paced=True))
        named = "+".join(f"{v}@{paced[v]}" for v in victims)
        where = isolation.absolute(cgroup) if cgroup is not None else None
        return Plan("neighbours", tests, workload_name=f"neighbours:{named}:{aggressor.name}",
                    cgroup_dirs=(where,) if where is not None else (),
                    cgroup_files=(isolation.root_tasks(),) if where is not None else ())

    def schedule(self) -> list[tuple[int, bool]]:
        """(aggressors, isolated) in the order measured: each count, and with --isolate
        the same count isolated right after it (alone is never isolated)."""
        return [(n, iso) for n in self.counts()
                for iso in ((False, True) if n and self.isolate is not None else (False,))]


def placed(jobfile: JobFile, workers: int) -> tuple[tuple[int, JobFile], ...]:
    """A step's jobs over ``workers`` (hosts, pods): the victims on the first, the
    aggressors spread over the others as evenly as they go (5 over 2: 3 and 2)."""
    glob = tuple(s for s in jobfile.sections if s.is_global)
    theirs = next((s for s in jobfile.sections if s.name.startswith("aggressors-")), None)
    out = [(0, replace(jobfile, sections=(*glob, *(
        s for s in jobfile.sections if not s.is_global and s is not theirs))))]
    if theirs is None:
        return tuple(out)
    n, others = int(theirs.get("numjobs") or 1), workers - 1
    for i in range(others):
        share = n // others + (1 if i < n % others else 0)
        if share:
            out.append((i + 1, replace(jobfile, sections=(
                *glob, theirs.with_option("numjobs", str(share))))))
    return tuple(out)


def _worker_labels(target: Target) -> list[str]:
    """How each worker fio runs at is named (a host, a pod; [] where there is one)."""
    if not isinstance(target, Spread):
        return []
    return [w.label or w.key or "this machine" for w in target.workers()]


def _paced(load: Load) -> Load:
    """A victim open loop: evenly spaced when synchronous, else Poisson arrivals with a
    queue deep enough for their bursts (the depth bounds what is outstanding; it adds no
    load)."""
    if load.synchronous:
        return replace(load, options=(*load.options, ("rate_process", "linear")))
    depth = dict(load.options).get("iodepth", "1")
    deep = max(int(depth) if depth.isdigit() else 1, POISSON_DEPTH)
    return replace(load, options=(*(o for o in load.options if o[0] != "iodepth"),
                                  ("iodepth", str(deep)), ("rate_process", "poisson")))


@dataclass
class NeighboursKind(Plain):
    """``storbench neighbours``: the victims alone, then beside more and more aggressors."""

    kind: ClassVar[str] = "neighbours"
    section: ClassVar[RecordSection] = NEIGHBOURS
    fixed_schedule: ClassVar[bool] = True
    spec: NeighboursSpec
    steps: list[dict[str, Any]] = field(default_factory=list)
    loads: dict[str, Load] = field(default_factory=dict)  # the victims, as check() read them
    aggressor: Load | None = None
    device: isolation.Device | None = None  # beneath the target, with --isolate
    cgroup: isolation.Cgroup | None = None  # the aggressors', while it exists
    workers: list[str] = field(default_factory=list)  # where fio runs: hosts, pods (labels)

    @classmethod
    def from_spec(cls, spec: RunSpec) -> NeighboursKind | None:
        return cls(spec.kind_spec) if isinstance(spec.kind_spec, NeighboursSpec) else None

    def check(self) -> None:
        """The spec judged, and its loads read once (a job file may change or go while the
        run measures: what the record names is what was read)."""
        self.spec.check()
        self.loads = self.spec.victim_loads()
        self.aggressor = self.spec.aggressor_load()

    def check_target(self, target: Target) -> None:
        """Where it runs: at several workers (--hosts), the victims on the first and the
        aggressors on the others. --isolate: a storage on this machine with a block
        device beneath it that a blkio cgroup can limit (execute/isolation.check),
        before anything is made."""
        self.workers = _worker_labels(target)
        if self.spec.limits() is None:
            return
        if not isinstance(target, Traceable):
            raise ConfigError(f"--isolate applies to a directory or a device on this machine,"
                              f" not {target.name} (its aggressors' cgroup would be made"
                              " here, where they do not run)")
        self.device = isolation.check(target.traced_path())

    def settings(self) -> dict[str, Any]:
        s = self.spec
        return {"neighbours": {"victims": list(s.victims), "rate_iops": s.rate_iops,
                               "aggressor": s.aggressor, "max_aggressors": s.max_aggressors,
                               "step_s": s.step_s, "size": s.size, "limit": s.limit,
                               "isolate": s.isolate}}

    def warnings(self, run: Run) -> list[Warning]:
        target = run.environment.get("target") or {}
        if target.get("fs_type") not in ("tmpfs", "ramfs"):
            return []
        return [Warning("no-device-queue", "", f"on {target['fs_type']}: RAM has no device"
                        " queue to share; what the aggressors take from the victims here is"
                        " CPU and memory, not a device's time", {})]

    def cleanup(self, hurry: bool) -> None:
        if self.cgroup is not None and self.cgroup.remove(0.5 if hurry else 5.0):
            self.cgroup = None

    def plan(self, plan: Plan) -> Plan:
        plan = replace(plan, repeat=1)
        if len(self.workers) < 2:
            return plan
        return replace(plan, tests=[replace(t, placed=placed(t.jobfile, len(self.workers)))
                                    for t in plan.tests])

    def measure(self, ctx: RunContext) -> None:
        limits = self.spec.limits()
        if limits is None or not ctx.planned.plan.cgroup_dirs:
            self._steps(ctx)
            return
        assert self.device is not None  # check_target found it
        self.cgroup = isolation.Cgroup(ctx.planned.plan.cgroup_dirs[0], limits.values,
                                       self.device, limits.text).make()
        try:
            self._steps(ctx)
        finally:
            if self.cgroup.remove():
                self.cgroup = None
            else:  # cleanup() tries once more
                ctx.note(f"the aggressors' cgroup {self.cgroup.path} still holds processes"
                         " (a fio stuck in the kernel): left; rmdir it once they end")

    def _steps(self, ctx: RunContext) -> None:
        loads = self.loads
        self.workers = _worker_labels(ctx.target)  # named again: a pod's name is the run's
        offered = {v: self.spec.pace(load)[1] for v, load in loads.items()}
        limit = Objective.parse(self.spec.limit, "--limit") if self.spec.limit else None
        alone: dict[str, Any] | None = None
        stop_after: int | None = None
        for step in ctx.planned.steps:
            n = int(step.test.name.split("-")[1])
            isolated = step.test.name.endswith(ISOLATED)
            if stop_after is not None and n > stop_after:
                break
            results = ctx.run_step(step, {f"{v}.data" for v in self.spec.victims})
            record = step_record(n, results, offered, alone, isolated, limit)
            self.steps.append(record)
            alone = alone or record
            missed = [v for v, r in record["victims"].items()
                      if limit is not None and not meets(r, limit)]
            for v, r in record["victims"].items():
                r["missed"] = v in missed
            if missed and n and not isolated:
                stop_after = n  # its isolated step still: what the limit buys there
                ctx.note(f"{' and '.join(loads[v].words for v in missed)} missed"
                         f" {self.spec.limit} beside {n} aggressor{'s' if n > 1 else ''}:"
                         " no more aggressors")
                if self.spec.isolate is None:
                    break

    def record(self) -> NeighboursSection | None:
        if not self.steps:
            return None
        loads = self.loads
        held = self.isolation() if self.spec.isolate else None
        out: NeighboursSection = {
            "victims": {v: {"words": load.words,
                            "rate_iops": self.steps[0]["victims"][v]["requested_iops"]}
                        for v, load in loads.items()},
            "aggressor": self.aggressor.words if self.aggressor else "",
            "limit": self.spec.limit,
            "steps": self.steps,
            "said": said(self.steps, {v: SUBJECTS[v] if VICTIMS.get(v) is load
                                      else f"the p99 of {load.words}"
                                      for v, load in loads.items()}, self.spec.limit, held)}
        if held is not None:
            out["isolation"] = held
        if len(self.workers) > 1:
            out["places"] = {"victims": self.workers[0], "aggressors": self.workers[1:]}
        return out

    def isolation(self) -> dict[str, Any]:
        """--isolate's record: the limits as given and in words, where they were set,
        and why the device ignores one (a weight without bfq), if it does."""
        limits = self.spec.limits()
        assert limits is not None and self.device is not None
        return {"limits": limits.text, "words": limits.words(),
                "cgroup": "cgroup v1 blkio", "device": self.device.words,
                "scheduler": self.device.scheduler,
                "ignored": isolation.ignored(limits.keys, self.device)}
