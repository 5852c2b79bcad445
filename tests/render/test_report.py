"""`storbench report`: the HTML file opened in a real headless Chromium from a file://
URL, PNG charts, wiki tables, and labels that try to inject HTML or script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, Browser
from tests.conftest import needs_fio, run_cli

pytestmark = needs_fio

DATA = Path(__file__).resolve().parent.parent / "data" / "fio"
INJECT = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
SHORT = ("--size", "32m", "--runtime", "3")


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three runs of different targets (tmpfs, the disk, an etcd run) with per-second
    series; one carries injection payloads in its label, a tag and a job name."""
    from tests.conftest import mount_tmpfs, umount

    base = tmp_path_factory.mktemp("report")
    db = base / "results.db"
    ram = base / "ram"
    mount_tmpfs(ram, "256m")
    disk = base / "disk"
    disk.mkdir()
    job = base / "evil.fio"
    job.write_text("[evil]\nrw=randread\nbs=4k\nsize=16m\ntime_based\nruntime=3\n")
    try:
        for args in ((str(ram), *SHORT, "--label", "tmpfs"),
                     (str(disk), "--job", str(job), "--label", INJECT, "--tag",
                      f"note={INJECT}"),
                     (str(disk), "--suite", "etcd", "--size", "4m", "--label", "etcd-disk")):
            proc = run_cli("run", *args, db=db)
            assert proc.returncode in (0, 3), proc.stderr
    finally:
        umount(ram)
    # a job name that tries to inject HTML comes in through fio output from elsewhere
    # (storbench's own job names are plain): run 4
    doc = json.loads((DATA / "randread.json").read_text())
    doc["jobs"][0]["jobname"] = "evil<b>name</b>"
    (base / "evil.json").write_text(json.dumps(doc))
    proc = run_cli("import", str(base / "evil.json"), "--label", "imported", db=db)
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"
                    " (scripts/install-testbed installs it)")
def test_report_opens_offline_in_chromium(three_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = run_cli("report", "1", "2", "3", "4", "-o", str(out), db=three_runs)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "window.__pwned" not in html.replace("window.__pwned=", "")  # sanity
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    expected = html.count('<svg class="chart"')
    kinds = {k: html.count(f'id="{k}-') for k in ("bar", "latency", "percentiles", "timeline")}
    assert all(kinds.values()), kinds  # every kind of chart is there
    browser = Browser()
    try:
        browser.open(out.as_uri())
        drawn = browser.evaluate("""Array.from(document.querySelectorAll('svg.chart')).filter(
            s => s.getBoundingClientRect().width > 200 &&
                 s.querySelectorAll('rect.bar, path.line').length > 0).length""")
        assert drawn == expected
        assert browser.evaluate("window.__pwned === undefined") is True
        labels = browser.evaluate("document.body.innerText")
        assert "<script>window.__pwned=2</script>" in labels  # shown as text
        assert "evil<b>name</b>" in labels
        # tooltips and legend toggles work
        tip = browser.evaluate("""(function () {
            var bar = document.querySelector('rect.bar'), r = bar.getBoundingClientRect();
            bar.dispatchEvent(new MouseEvent('mousemove', {bubbles: true,
                clientX: r.x + 2, clientY: r.y + 2}));
            return document.getElementById('tip').textContent; })()""")
        assert "IOPS" in tip or "/s" in tip
        hidden = browser.evaluate("""(function () {
            var b = document.querySelector('.legend button'); b.click();
            var chart = document.getElementById(b.getAttribute('data-chart'));
            return chart.querySelector('g.series[data-series="0"]').style.display; })()""")
        assert hidden == "none"
        # every table fits the page at 1280 px, and on paper (A4 at 96 dpi), none clipped
        for media, width in (("screen", 1280), ("print", 794)):
            browser.call("Emulation.setEmulatedMedia", media=media)
            browser.call("Emulation.setDeviceMetricsOverride", width=width, height=1000,
                         deviceScaleFactor=1, mobile=False)
            clipped = browser.evaluate("""JSON.stringify(Array.from(
                document.querySelectorAll('table')).filter(t =>
                    t.parentElement.scrollWidth > t.parentElement.clientWidth + 1 ||
                    t.getBoundingClientRect().right > document.documentElement.clientWidth + 1
                ).map(t => t.rows[0].innerText.slice(0, 60)))""")
            assert clipped == "[]", (media, clipped)
            assert browser.evaluate("document.documentElement.scrollWidth <= "
                                    "document.documentElement.clientWidth + 1"), media
        browser.call("Emulation.clearDeviceMetricsOverride")
        browser.call("Emulation.setEmulatedMedia", media="")
        browser.screenshot(tmp_path / "report.png")
        assert browser.errors() == []
        remote = [u for u in browser.requests() if not u.startswith(("file:", "data:"))]
        assert remote == []  # no request of any kind
    finally:
        browser.close()
    shot = tmp_path / "report.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


def test_png_charts(three_runs: Path, tmp_path: Path) -> None:
    from PIL import Image

    pngs = tmp_path / "png"
    proc = run_cli("report", "1", "2", "3", "-o", str(tmp_path / "r.html"), "--png", str(pngs),
                   db=three_runs)
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r.html").read_text()
    files = sorted(pngs.glob("*.png"))
    assert len(files) == html.count('<svg class="chart"')
    for f in files:
        img = Image.open(f).convert("L")
        # 760 x 330, and taller by a legend of runs or lines below the chart
        assert img.width == 760 and img.height >= 330, f
        ink = sum(img.histogram()[:230]) / (img.width * img.height)  # non-white pixels
        assert ink > 0.01, f  # not blank
        assert_nothing_cut(img, f)
    # the PNGs are the report's own charts: every title and tick of the SVG is drawn
    # (text needs a font: a PNG without one would show lines and bars alone)
    title = Image.open(files[0]).convert("L").crop((200, 0, 560, 28))
    assert sum(title.histogram()[:128]) > 200


def assert_nothing_cut(img, name) -> None:
    """No label runs off the image: its outermost 2 pixels are white all round."""
    w, h = img.size
    border = [img.crop(box) for box in ((0, 0, w, 2), (0, h - 2, w, h), (0, 0, 2, h),
                                        (w - 2, 0, w, h))]
    assert all(b.getextrema()[0] > 247 for b in border), name


LONG_LABELS = [f"gp3-us-east-1{'abc'[i % 3]}-volume-{i:02d}" for i in range(20)]


@pytest.fixture(scope="module")
def twenty_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 runs with long labels: recorded real fio json+ output, imported 20 times."""
    db = tmp_path_factory.mktemp("twenty") / "results.db"
    recorded = Path(__file__).resolve().parents[1] / "data" / "fio" / "randread.json"
    for label in LONG_LABELS:
        proc = run_cli("import", str(recorded), "--label", label, db=db)
        assert proc.returncode == 0, proc.stderr
    return db


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_twenty_runs_axis_labels_neither_overlap_nor_are_cut(twenty_runs: Path,
                                                             tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = run_cli("report", *[str(i) for i in range(1, 21)], "-o", str(out), db=twenty_runs)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert all(label in html for label in LONG_LABELS)  # each name in a legend
    browser = Browser()
    try:
        browser.open(out.as_uri())
        problems = browser.evaluate("""JSON.stringify(Array.from(
            document.querySelectorAll('svg.chart')).flatMap(function (svg) {
              var box = svg.getBoundingClientRect(), out = [];
              var texts = Array.from(svg.querySelectorAll('text')).map(t =>
                  [t.textContent, t.getBoundingClientRect()]).filter(t => t[1].width > 0);
              texts.forEach(function (a, i) {
                var r = a[1];
                if (r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
                    r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
                  out.push(svg.id + ': cut: ' + a[0]);
                texts.slice(i + 1).forEach(function (b) {
                  var q = b[1];
                  if (r.left < q.right - 0.5 && q.left < r.right - 0.5 &&
                      r.top < q.bottom - 0.5 && q.top < r.bottom - 0.5)
                    out.push(svg.id + ': ' + a[0] + ' overlaps ' + b[0]);
                });
              });
              return out; }))""")
        assert problems == "[]", problems
        checked = browser.evaluate("document.querySelectorAll('svg.chart text').length")
        assert checked > 100
        keys = browser.evaluate("document.querySelectorAll('.legend.keys span').length")
        assert keys >= 20 * 2  # a key and its swatch per run, per bar chart
        assert browser.errors() == []
    finally:
        browser.close()


def test_twenty_runs_as_png_keep_their_labels_whole(twenty_runs: Path, tmp_path: Path) -> None:
    from PIL import Image

    pngs = tmp_path / "png"
    proc = run_cli("report", *[str(i) for i in range(1, 21)], "-o", str(tmp_path / "r.html"),
                   "--png", str(pngs), db=twenty_runs)
    assert proc.returncode == 0, proc.stderr
    files = sorted(pngs.glob("*.png"))
    assert any(f.name.startswith("bar-") for f in files)
    for f in files:
        img = Image.open(f).convert("L")
        assert_nothing_cut(img, f)
        if f.name.startswith("bar-"):
            assert img.height > 330  # the legend of keys below the bars


def test_wiki_tables_one_per_metric(three_runs: Path) -> None:
    md = run_cli("export", "1", "2", "--format", "wiki", db=three_runs).stdout
    sections = [s for s in md.split("### ") if s.strip()]
    assert len(sections) >= 4
    for s in sections:
        title = s.splitlines()[0]
        assert f"| run | label | {title} |" in s  # runs as rows, the unit in the header
    assert "| #1 | tmpfs |" in md and "randread read IOPS" in md
    assert "[µs]" in md or "[ms]" in md
    assert "<script>" not in md and "&lt;script&gt;" in md  # inert in wikis that take HTML
    html = run_cli("export", "1", "2", "--format", "html-table", db=three_runs).stdout
    assert html.count("<table>") == len(sections) and "<script>" not in html


def test_report_bad_input(three_runs: Path, tmp_path: Path) -> None:
    many = run_cli("report", *[str(i) for i in range(1, 23)], db=three_runs)
    assert many.returncode == 2 and "at most 20 runs" in many.stderr
    missing = run_cli("report", "99", "-o", str(tmp_path / "x.html"), db=three_runs)
    assert missing.returncode == 2 and "run 99 does not exist" in missing.stderr
    nowhere = run_cli("report", "1", "-o", str(tmp_path / "no" / "dir" / "x.html"),
                      db=three_runs)
    assert nowhere.returncode == 2 and "cannot write" in nowhere.stderr


def test_one_unit_per_figure_in_table_and_chart(three_runs: Path) -> None:
    """A figure's unit in the comparison table is the unit of its chart's axis."""
    from storbench.analysis import charts
    from storbench.cli.compare import comparison as _comparison
    from storbench.render import units
    from storbench.render.table import comparison_table
    from storbench.store import Store

    comp = _comparison(Store(three_runs), ("1", "2", "3"), None)
    table = comparison_table(comp)
    unit_in_header = {h.rsplit(" [", 1)[0]: h.rsplit(" [", 1)[1].rstrip("]")
                      for h in table.headers if h.endswith("]")}
    checked = 0
    for chart in charts.build(comp):
        shown = units.for_display(chart)
        if chart.kind != "bar" or chart.y_kind == "iops":
            continue
        if chart.id.startswith("latency-"):  # p50 bars, p99 marks: the p99 column's unit
            test, direction = chart.title.split(" ")[:2]
            title = f"{test} {'sync p99' if direction == 'sync' else direction + ' clat p99'}"
        else:
            title = chart.title
        if title in unit_in_header:
            assert shown.y_label.endswith(unit_in_header[title]) or (
                shown.y_label == f"latency [{unit_in_header[title]}]"), (chart.id, title)
            checked += 1
    assert checked >= 3


def test_a_queue_depth_sweep_charts_iops_and_latency_and_histograms(tmp_path: Path,
                                                                     tmpfs: Path) -> None:
    """bench-fio's sweep (queue depth x numjobs, json+), imported: IOPS and p99 against
    queue depth and against numjobs, and each run's latency histogram from its bins."""
    from storbench.analysis import charts
    from storbench.cli.compare import comparison
    from storbench.store import Store
    from tests.pipeline.test_import_folders import bench_fio

    top = tmp_path / "sweep"
    for qd in (1, 4, 16):
        for jobs in (1, 2):
            bench_fio(top, tmpfs, "randread", qd, jobs, runtime=1, fmt="json+")
    db = tmp_path / "results.db"
    assert run_cli("import", str(top), "--label-from", "filename", db=db).returncode == 0
    store = Store(db)
    runs = [store.get_run(i) for i in range(1, 7)]
    comp = comparison(store, tuple(str(i) for i in range(1, 7)), None)
    built = {c.id: c for c in charts.build(comp)}
    iops = built["sweep-randread-4k-read-queue-iops"]
    assert iops.x_ticks == [1.0, 4.0, 16.0] and iops.log_x
    assert [ln.name for ln in iops.lines] == ["numjobs 1", "numjobs 2"]
    for run in runs:  # each point is its run's own figure
        r = run.tests[0].result
        qd, jobs = int(r.options["iodepth"]), int(r.options["numjobs"])
        assert r.read is not None
        assert iops.lines[jobs - 1].ys[[1, 4, 16].index(qd)] == r.read.iops
    p99 = built["sweep-randread-4k-read-queue-latency"]
    assert p99.log_y and all(y is not None and y > 0 for ln in p99.lines for y in ln.ys)
    by_jobs = built["sweep-randread-4k-read-numjobs-iops"]
    assert by_jobs.x_ticks == [1.0, 2.0] and len(by_jobs.lines) == 3
    hist = built["histogram-iotest-read"]
    assert len(hist.lines) == 6 and hist.log_x and hist.x_kind == "latency"
    for ln in hist.lines:
        assert sum(y or 0 for y in ln.ys) == pytest.approx(100.0)
    out = tmp_path / "r.html"
    proc = run_cli("report", *[str(i) for i in range(1, 7)], "-o", str(out), "--png",
                   str(tmp_path / "png"), db=db)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert 'id="sweep-randread-4k-read-queue-iops"' in html and 'id="histogram-iotest-read"' in html
    assert (tmp_path / "png" / "sweep-randread-4k-read-queue-iops.png").exists()
    assert (tmp_path / "png" / "histogram-iotest-read.png").exists()


def test_a_published_row_is_not_said_completed(tmp_path, store_path):
    """A published reference in the report's runs table: figures from a study, never a
    run 'completed' here at the time the report was made."""
    from tests.conftest import run_cli

    source = Path(__file__).resolve().parent.parent / "data" / "fio" / "randread.json"
    assert run_cli("import", str(source), "--as", "randrw75", "-l", "mine",
                   db=store_path).returncode == 0
    out = tmp_path / "r.html"
    proc = run_cli("report", "mine", "-R", "efs", "-o", str(out), db=store_path)
    assert proc.returncode == 0, proc.stderr
    runs = out.read_text().split("<h2>Runs</h2>", 1)[1].split("<h2>", 1)[0]
    rows = runs.split("<tr>")[2:]
    published = [r for r in rows if ">published<" in r]
    assert published and all("completed" not in r for r in published), runs
    assert all("figures from its study (not run here)" in r for r in published)
    assert any("completed" in r for r in rows if ">published<" not in r)


def test_cells_break_between_words_and_after_separators_only() -> None:
    """'publi/shed' and 'throttled-300/0iops' cut at '0/iops' were seen: a cell breaks
    only at spaces and after / - _ : = (and , . before a letter), and a very long word
    every ten characters, so a table still fits its page."""
    from storbench.render.report import breakable

    assert breakable("published") == "published"
    assert breakable("throttled-300/0iops") == "throttled-<wbr>300/<wbr>0iops"
    assert breakable("12,345 IOPS (1.5×)") == "12,345 IOPS (1.5×)"  # numbers stay whole
    assert breakable("<b>a&b</b>") == "&lt;b&gt;a&amp;b&lt;/<wbr>b&gt;"  # still escaped
    assert breakable("x" * 25) == "<wbr>".join(["x" * 10, "x" * 10, "x" * 5])


@needs_fio
def test_a_timeline_of_runs_apart_by_orders_of_magnitude_is_logarithmic(tmp_path: Path,
                                                                        tmpfs: Path) -> None:
    """One run at 100 IOPS beside one at tens of thousands: on one linear axis the slow
    one lies flat on zero (a burst hidden under another's page-cache spike); the axis is
    logarithmic. Two runs alike keep a linear one."""
    from storbench.analysis import charts
    from storbench.cli.compare import comparison
    from storbench.store import Store

    db = tmp_path / "results.db"
    for label, rate in (("fast", ""), ("fast2", ""), ("slow", "rate_iops=100\n")):
        job = tmp_path / f"{label}.fio"
        job.write_text("[reads]\nrw=randread\nbs=4k\nsize=16m\nioengine=psync\ntime_based\n"
                       f"runtime=3\n{rate}")
        proc = run_cli("run", str(tmpfs), "--job", str(job), "-l", label, db=db)
        assert proc.returncode == 0, proc.stderr

    def timeline(*refs: str) -> charts.Chart:
        built = {c.id: c for c in charts.build(comparison(Store(db), refs, None))}
        return built["timeline-reads-read-iops"]

    apart = timeline("fast", "slow")
    assert apart.log_y and len(apart.lines) == 2
    assert not timeline("fast", "fast2").log_y
