"""NDJSON (`export --format ndjson`): one JSON object per line for each run, test,
direction, host and figure, in base units with the unit named, for a bulk load into
OpenSearch or Elasticsearch (see docs/teams.md) or any log pipeline.

A record: ``@timestamp`` (the run's end, ISO 8601), ``run_uid``, ``label``, ``suite``,
``target_kind``, ``target``, ``storage_class``, ``test``, ``direction``, ``host``,
``metric`` (iops, bandwidth, latency_p50, latency_p99, latency_p99.9, latency_mean,
latency_max; and warning, with ``kind``: a warning of the run's test, value 1),
``unit`` (IOPS, bytes/s, s; "" for a warning) and ``value``. Absent labels are absent
keys; a figure that was not measured is no record.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from storbench.render.samples import end_seconds, samples
from storbench.result.record import Run

if TYPE_CHECKING:
    from storbench.analysis.compare import Comparison

_NAMES = {"iops": ("iops", "IOPS"), "bandwidth_bytes_per_second": ("bandwidth", "bytes/s"),
          "latency_mean_seconds": ("latency_mean", "s"),
          "latency_max_seconds": ("latency_max", "s"), "warning": ("warning", "")}
_QUANTILES = {"0.5": "latency_p50", "0.99": "latency_p99", "0.999": "latency_p99.9"}


def records(run: Run) -> list[dict[str, Any]]:
    stamp = datetime.fromtimestamp(end_seconds(run), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for s in samples(run):
        if s.suffix:  # a summary's sum and count: Prometheus's own way to a mean
            continue
        if s.family in ("run_info", "run_end_timestamp_seconds"):
            continue
        labels = dict(s.labels)
        if s.family == "latency_seconds":
            name, unit = _QUANTILES[labels.pop("quantile")], "s"
        else:
            name, unit = _NAMES[s.family]
        out.append({"@timestamp": stamp, **labels, "metric": name, "unit": unit,
                    "value": s.value})
    return out


def render(comp: Comparison) -> str:
    return "".join(json.dumps(r, allow_nan=False) + "\n"
                   for run in comp.runs for r in records(run))
