"""JSON: the full model in base units, with a schema version. The contract for other tools."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from storbench.render.strict import finite
from storbench.result.record import Run, Verdict
from storbench.result.sections import PROBE

if TYPE_CHECKING:  # types only: `show` and `list` need not load the comparison
    from storbench.analysis.compare import Comparison
    from storbench.analysis.cost import Priced

SCHEMA = "storbench.export/1"


def run_dict(run: Run, *, raw: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": run.id,
        "uid": run.uid,
        "label": run.label,
        "tags": run.tags,
        "series": run.series,
        "suite": run.suite,
        "target": run.target,
        "status": run.status,
        "error": run.error,
        "origin": run.origin,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "storbench_version": run.storbench_version,
        "fio_version": run.fio_version,
        "settings": run.settings,
        "environment": run.environment,
        "repeats": run.repeats,
        "tests": [{**t.result.to_dict(), "repeat": t.repeat} for t in run.tests if not t.host],
        "per_host": [{"host": t.host, "repeat": t.repeat, **t.result.to_dict()}
                     for t in run.tests if t.host],
        "verdicts": [outcome_dict(v) for v in run.judged],
        "regressions": [c.to_dict() for c in run.regressions],
        "warnings": [w.to_dict() for w in run.warnings],
        "data": run.data,
        "job_files": [i.job_text for i in run.invocations],
    }
    if raw:
        d["fio_output"] = [i.raw_json for i in run.invocations]
    return d


def outcome_dict(v: Verdict) -> dict[str, Any]:
    return {"assertion": v.assertion, "metric": v.metric, "measured": v.measured,
            "limit": v.limit, "passed": v.passed, "note": v.note, "source": v.source}


def render(comp: Comparison) -> str:
    from storbench.render.blocks import json_blocks  # the kinds' views: not for `list`

    doc = {
        "schema": SCHEMA,
        "units": {"iops": "IOPS", "bw": "bytes/s", "latency": "ns"},
        "runs": [run_dict(r) for r in comp.runs],
        "comparison": {
            "baseline": comp.runs[comp.baseline].id if comp.baseline is not None else None,
            "columns": [
                {"test": c.test, "metric": c.metric.key, "kind": c.metric.kind,
                 "higher_is_better": c.metric.higher_is_better}
                for c in comp.columns
            ],
            "rows": [
                {"run": run.id, "values": [c.value for c in row],
                 "ci95": [c.estimate.ci95 if c.estimate else None for c in row],
                 "repeats": [c.estimate.n if c.estimate else 0 for c in row],
                 "ratios": [c.ratio.value if c.ratio else None for c in row],
                 "ratio_ci95": [c.ratio.ci95 if c.ratio else None for c in row],
                 "as_printed": [c.printed.text if c.printed else None for c in row],
                 "caveats": [list(c.caveats) for c in row],
                 "run_caveats": comp.caveats[k], "verdicts": comp.outcomes[k]}
                for k, (run, row) in enumerate(zip(comp.runs, comp.cells, strict=True))
            ],
            # per run: {op: {idle|load: {n, p50_ns, p99_ns, max_ns}}}, or null
            "metadata_probe": [PROBE.of(run) for run in comp.runs],
        },
        # each kind's section of the runs holding it (curves, apps, lifecycle, ...), with
        # what --assert may name of it (analysis/views)
        **json_blocks(comp.runs),
    }
    return json.dumps(finite(doc), indent=2, allow_nan=False) + "\n"



def cost_dict(comp: Comparison, p: Priced) -> dict[str, Any]:
    run = comp.runs[p.run]
    return {"run": run.id or None, "label": run.label, "sheet": vars(p.sheet),
            "capacity_bytes": p.capacity_bytes, "provisioned_iops": p.provisioned_iops,
            "provisioned_mbps": p.provisioned_mbps, "usd_per_month": p.monthly,
            "best_iops": p.iops, "best_iops_column": p.iops_column,
            "best_bw_bytes_per_s": p.bw_bytes_per_s, "best_bw_column": p.bw_column,
            "per_1000_iops": p.per_kiops, "per_mbps": p.per_mbps,
            "caveats": list(p.caveats), "best_iops_caveats": list(p.iops_caveats),
            "best_bw_caveats": list(p.bw_caveats),
            # an achieved figure above the sheet's most, priced at that most
            "limits": list(p.limits),
            # an object store's requests at the rates measured: $ an hour of each load
            "requests": [vars(r) for r in p.requests]}
