"""``FORMATS``: the only registry of export formats (`storbench export --format`)."""

from collections.abc import Callable

from storbench.analysis.compare import Comparison
from storbench.render import csv, influx, json, layouts, markdown, ndjson, openmetrics

FORMATS: dict[str, Callable[[Comparison], str]] = {
    "md": markdown.render,
    "csv": csv.render,
    "json": json.render,
    "wiki": layouts.render_markdown,  # one Markdown table per metric (--layout: others)
    "html-table": layouts.render_html,  # the same, as HTML tables
    "openmetrics": openmetrics.render,  # Prometheus: samples at each run's end
    "influx": influx.render,  # InfluxDB line protocol
    "ndjson": ndjson.render,  # one record per figure, for OpenSearch/Elasticsearch
}
