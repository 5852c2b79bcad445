"""``FORMATS``: the only registry of export formats (`storbench export --format`), and
``LAYOUTS``, the wiki tables' layouts. Light: a format's module is loaded when it is
used, so that `compare` and `--help` do not load every renderer to list their names."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storbench.analysis.compare import Comparison

Render = Callable[["Comparison"], str]

# format -> (module in storbench.render, function)
_WHERE = {
    "md": ("markdown", "render"),
    "csv": ("csv", "render"),
    "json": ("json", "render"),
    "wiki": ("layouts", "render_markdown"),  # one Markdown table per metric (--layout)
    "html-table": ("layouts", "render_html"),  # the same, as HTML tables
    "openmetrics": ("openmetrics", "render"),  # Prometheus: samples at each run's end
    "influx": ("influx", "render"),  # InfluxDB line protocol
    "ndjson": ("ndjson", "render"),  # one record per figure, for OpenSearch/Elasticsearch
}
LAYOUTS = ("wide", "per-metric", "read-write", "rows")


class _Formats(Mapping[str, Render]):
    def __getitem__(self, name: str) -> Render:
        module, function = _WHERE[name]
        render: Render = getattr(import_module(f"storbench.render.{module}"), function)
        return render

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)


FORMATS: Mapping[str, Render] = _Formats()
