"""Render analysis results as text. ``FORMATS`` is the only registry of export formats."""

from collections.abc import Callable

from storbench.analysis.compare import Comparison
from storbench.render import csv, json, markdown

FORMATS: dict[str, Callable[[Comparison], str]] = {
    "md": markdown.render,
    "csv": csv.render,
    "json": json.render,
}
