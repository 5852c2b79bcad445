"""One self-contained HTML report: inline CSS, SVG charts and a few lines of script;
no request of any kind (no CDN, font, image or link fetched). Every string that
comes from a user or from fio (labels, tags, job names, job files, environment) is
escaped, so a label such as ``<script>`` is shown, never run."""

from __future__ import annotations

import datetime
import re
from html import escape

from storbench import __version__
from storbench.analysis.chart import Chart
from storbench.analysis.compare import Comparison, sentences
from storbench.analysis.cost import Priced
from storbench.analysis.views import tabulated
from storbench.render import svg
from storbench.render.blocks import chart_sections, compared, html, shown
from storbench.render.table import (
    Table,
    comparison_table,
    cost_table,
    probe_comparison_table,
    probe_comparison_title,
    transposed,
)
from storbench.render.terminal import distinct_warnings, environment_rows, verdict_told
from storbench.result.record import Run

CSS = """
:root { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; }
body { max-width: 1200px; margin: 0 auto; padding: 1rem 1.5rem; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2rem; border-bottom: 1px
solid #ddd; } h3 { margin-bottom: .3rem; } .muted { color: #666; font-size: .9rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; vertical-align: top;
overflow-wrap: break-word; } th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; overflow-wrap: normal; }
.scroll { overflow-x: auto; } .scroll table { max-width: 100%; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
gap: 1rem; } figure { margin: 0; border: 1px solid #e3e3e3; padding: .3rem; }
svg.chart { width: 100%; height: auto; display: block; }
""" + svg.STYLE + """
svg .bar:hover, svg circle:hover { opacity: .75; }
.legend { display: flex; flex-wrap: wrap; gap: .3rem .8rem; font-size: .85rem; }
.legend button { border: 1px solid #ccc; background: #fff; cursor: pointer; padding: .1rem .4rem;
font: inherit; } .legend button.off { opacity: .4; text-decoration: line-through; }
.swatch { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem;
vertical-align: -1px; } .pass { color: #17803d; font-weight: 600; }
.fail { color: #b91c1c; font-weight: 600; } .warn { color: #92400e; }
pre { background: #f7f7f7; padding: .5rem; overflow-x: auto; font-size: .8rem; }
#tip { position: fixed; pointer-events: none; background: #222; color: #fff; padding: .2rem
.45rem; border-radius: 3px; font-size: .8rem; display: none; z-index: 10; }
@media print { body { max-width: none; padding: 0; } .charts { grid-template-columns: 1fr 1fr; }
.scroll { overflow: visible; } table { font-size: .7rem; }
th, td { padding: .15rem .3rem; }
figure, table { break-inside: avoid; } #tip, .legend button.off { display: none; }
details { display: block; } details > pre { white-space: pre-wrap; } }
"""

# Tooltips and legend toggles. No network, no eval, no innerHTML: text only.
SCRIPT = """
(function () {
  var tip = document.getElementById('tip');
  document.addEventListener('mousemove', function (e) {
    var t = e.target.closest ? e.target.closest('[data-tip]') : null;
    if (!t) { tip.style.display = 'none'; return; }
    tip.textContent = t.getAttribute('data-tip');
    tip.style.left = (e.clientX + 12) + 'px'; tip.style.top = (e.clientY + 12) + 'px';
    tip.style.display = 'block';
  });
  document.querySelectorAll('.legend button').forEach(function (b) {
    b.addEventListener('click', function () {
      var chart = document.getElementById(b.getAttribute('data-chart'));
      var g = chart.querySelector('g.series[data-series="' + b.getAttribute('data-series') + '"]');
      if (!g) { return; }
      var off = b.classList.toggle('off');
      g.style.display = off ? 'none' : '';
    });
  });
})();
"""


def render(comp: Comparison, charts: list[Chart], *, title: str = "storbench report",
           priced: list[Priced] | None = None) -> str:
    runs = comp.runs
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Nothing may be fetched: not even a favicon.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"
        " style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        '<link rel="icon" href="data:,">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{len(runs)} run(s) · made {now} by storbench {__version__}</p>',
        "<h2>Runs</h2>", _runs_table(runs),
        "<h2>Comparison</h2>",
    ]
    if tabulated(runs):
        parts.append(_table(_fitting(comparison_table(comp, sep=" "))))
    for heading, table, said in compared(runs):
        parts += [f"<h3>{escape(heading)}</h3>", _table(table)]
        parts += [f"<p>{escape(line)}</p>" for line in said]
    probes = probe_comparison_table(comp)
    if probes is not None:
        parts += [f"<h3>{escape(probe_comparison_title(comp))}</h3>", _table(probes)]
    if priced:
        heading, costs, notes = cost_table(comp, priced)
        parts += [f"<h3>{escape(heading)}</h3>", _table(costs),
                  f'<p class="muted">{escape(notes[0])}</p><ul class="muted">'
                  + "".join(f"<li>{escape(n)}</li>" for n in notes[1:]) + "</ul>"]
    said = sentences(comp)
    if said:
        parts.append("<ul>" + "".join(f"<li>{escape(s)}</li>" for s in said) + "</ul>")
    parts += ["<h2>Verdicts and warnings</h2>", _verdicts(runs)]
    if charts:
        parts.append("<h2>Charts</h2>")
        for section, kinds in (("Throughput and latency", ("bar",)),
                               ("Latency percentiles", ("percentile",)),
                               *((title, (key,)) for key, title in chart_sections().items()),
                               ("Latency histograms", ("histogram",)),
                               ("Against queue depth and numjobs", ("sweep",)),
                               ("Over time", ("line",)),
                               ("History of the series", ("history",)),
                               ("Metadata latency under load", ("run-timeline",))):
            chosen = [c for c in charts if (c.section or c.kind) in kinds]
            if chosen:
                parts.append(f"<h3>{section}</h3><div class=\"charts\">"
                             + "".join(_figure(c) for c in chosen) + "</div>")
    parts.append("<h2>Each run</h2>")
    for run in runs:
        parts.append(_run_details(run))
    parts += ['<div id="tip"></div>', f"<script>{SCRIPT}</script>", "</body></html>"]
    return "\n".join(parts)


def _figure(c: Chart) -> str:
    entries = svg.legend(c)
    legend = ""
    if c.kind == "bar" and entries:  # the axis says 1..n: which run each is
        legend = '<div class="legend keys">' + "".join(
            f'<span><span class="swatch" style="background:{colour}"></span>'
            f"{escape(text)}</span>" for colour, text in entries) + "</div>"
    elif entries:  # buttons: a click hides or shows the line
        legend = '<div class="legend">' + "".join(
            f'<button type="button" data-chart="{escape(c.id)}" data-series="{i}">'
            f'<span class="swatch" style="background:{colour}"></span>'
            f"{escape(text)}</button>" for i, (colour, text) in enumerate(entries)) + "</div>"
    return f"<figure>{svg.render(c)}{legend}</figure>"


_BREAK_AFTER = re.compile(r"([/_:=-]+|[,.](?!\d))(?=[^\s/_,:=.-])")  # not in 12,345 or 1.5
_LONG = 20  # a word this long without any of those breaks where it must, every _LONG/2


def breakable(text: str) -> str:
    """A cell's text, escaped, breakable only between words and after / - _ , : = .
    (throttled-300/ 0iops, never thrott/ led), and inside a very long word: a table
    fits its page without cutting "published" in two."""
    out = []
    for word in re.split(r"(\s+)", text):
        parts = _BREAK_AFTER.sub("\\1\0", word).split("\0")
        out.append("<wbr>".join(
            "<wbr>".join(escape(p[i:i + _LONG // 2]) for i in range(0, len(p), _LONG // 2))
            if len(p) > _LONG else escape(p) for p in parts))
    return "".join(out)


WIDE = 10  # columns beyond which a comparison of fewer runs is turned (a row per figure)


def _fitting(t: Table) -> Table:
    """A comparison with many figures and fewer runs, turned: it fits the page with
    every word whole (21 columns of 4 runs did not, without breaking 'publi/shed')."""
    return transposed(t) if len(t.headers) > WIDE and len(t.rows) < len(t.headers) else t


def _table(t: Table) -> str:
    head = "".join(f"<th>{breakable(h)}</th>" for h in t.headers)
    rows = "".join(
        "<tr>" + "".join(f'<td class=num>{escape(cell)}</td>' if right else
                         f"<td>{breakable(cell)}</td>"
                         for cell, right in zip(row, t.align_right, strict=False)) + "</tr>"
        for row in t.rows)
    return f'<div class="scroll"><table><tr>{head}</tr>{rows}</table></div>'


def _runs_table(runs: list[Run]) -> str:
    rows = [["published" if r.origin == "published" else f"#{r.id}", r.label or "", r.suite,
             r.target,
             "figures from its study (not run here)" if r.origin == "published" else r.status,
             "" if r.origin == "published" else r.created_at,
             " ".join(f"{k}={v}" for k, v in r.tags.items())]
            for r in runs]
    return _table(Table(["run", "label", "suite", "target", "status", "created", "tags"],
                        rows, [False] * 7))


def _verdicts(runs: list[Run]) -> str:
    items = []
    for run in runs:
        name = escape(run.label or f"#{run.id}")
        for v in run.judged:
            word = ('<span class="pass">PASS</span>' if v.passed
                    else '<span class="fail">FAIL</span>')
            source = f" ({escape(v.source)})" if v.source else ""
            items.append(f"<li>{name}: {word} {escape(v.assertion)}: {escape(verdict_told(v))}"
                         f"{source}</li>")
        for w, count in distinct_warnings(run):
            times = f" (×{count})" if count > 1 else ""
            items.append(f'<li>{name}: <span class="warn">warning ({escape(w.kind)})</span>:'
                         f" {escape(w.message)}{times}</li>")
        if run.error:
            items.append(f'<li>{name}: <span class="fail">{escape(run.status)}</span>:'
                         f" {escape(run.error)}</li>")
    return "<ul>" + "".join(items) + "</ul>" if items else "<p>No verdicts or warnings.</p>"


def _run_details(run: Run) -> str:
    name = run.label or f"#{run.id}"
    env_rows = [[k, v] for k, v in environment_rows(run.environment)]
    jobs = "".join(
        f"<details><summary>fio job file {i.ordinal + 1}</summary>"
        f"<pre>{escape(i.job_text)}</pre></details>"
        for i in run.invocations if i.job_text)
    kinds = html(shown(run), _table)
    return (f"<h3>{escape(name)} <span class=\"muted\">{escape(run.suite)} on"
            f" {escape(run.target)}</span></h3>" + kinds
            + _table(Table(["environment", "value"], env_rows, [False, False])) + jobs)
