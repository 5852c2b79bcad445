"""InfluxDB line protocol (`export --format influx`): one line per run, test,
direction and host, the figures as fields in base units, the run's end as an explicit
timestamp in nanoseconds.

Measurement ``storbench``: tags from samples.run_labels plus test, direction, host;
fields iops, bandwidth_bytes_per_second, latency_p50_seconds, latency_p99_seconds,
latency_p999_seconds, latency_mean_seconds, latency_max_seconds (each only when
measured). Measurement ``storbench_run``: one line per run, its status and versions as
string fields. Line protocol has no way to write a line feed in a tag: it becomes a
space.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storbench.render.samples import end_seconds, samples
from storbench.result.record import Run

if TYPE_CHECKING:
    from storbench.analysis.compare import Comparison

_QUANTILE_FIELD = {"0.5": "latency_p50_seconds", "0.99": "latency_p99_seconds",
                   "0.999": "latency_p999_seconds"}


def _key(text: str) -> str:
    """A measurement, tag key, tag value or field key: commas, equals signs and spaces
    escaped with a backslash (a backslash itself is literal there); line breaks become
    spaces."""
    text = text.replace("\r", " ").replace("\n", " ")
    for c in ",= ":
        text = text.replace(c, "\\" + c)
    return text


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _line(measurement: str, tags: dict[str, str], fields: dict[str, str], ns: int) -> str:
    tag_text = "".join(f",{_key(k)}={_key(v)}" for k, v in sorted(tags.items()) if v)
    field_text = ",".join(f"{_key(k)}={v}" for k, v in fields.items())
    return f"{measurement}{tag_text} {field_text} {ns}"


def lines(run: Run) -> list[str]:
    ns = end_seconds(run) * 1_000_000_000
    out: list[str] = []
    figures: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for s in samples(run):
        if s.suffix:  # a summary's sum and count: Prometheus's own way to a mean
            continue
        if s.family == "run_info":
            info = {k: v for k, v in s.labels.items()
                    if k in ("status", "storbench_version", "fio_version")}
            tags = {k: v for k, v in s.labels.items() if k not in info}
            out.append(_line("storbench_run", tags,
                             {k: _string(v) for k, v in info.items()}, ns))
            continue
        if s.family == "run_end_timestamp_seconds":
            continue
        labels = {k: v for k, v in s.labels.items() if k != "quantile"}
        field = (_QUANTILE_FIELD[s.labels["quantile"]] if s.family == "latency_seconds"
                 else s.family)
        figures.setdefault(tuple(labels.items()), {})[field] = repr(float(s.value))
    out += [_line("storbench", dict(labels), fields, ns) for labels, fields in figures.items()]
    return out


def render(comp: Comparison) -> str:
    return "".join(line + "\n" for run in comp.runs for line in lines(run))
