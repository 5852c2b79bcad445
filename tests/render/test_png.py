"""PNG charts: the report's SVG charts drawn by resvg, with their legend below."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from storbench.analysis.charts import Chart, Line
from storbench.errors import StorbenchError
from storbench.render import png, svg


def lines_chart(names: list[str]) -> Chart:
    return Chart(id="t", kind="timeline", title="a title", y_kind="iops", x_label="time [s]",
                 lines=[Line(name=n, xs=[1.0, 2.0, 3.0], ys=[10.0, 20.0 + i, 15.0],
                             marked=[False] * 3) for i, n in enumerate(names)])


def test_the_legend_grows_the_page_by_its_rows_and_long_names_are_shortened() -> None:
    short = png.standalone(lines_chart(["a", "b"]))
    assert f'height="{svg.H + png.ROW_PX + 10}"' in short  # two short names: one row
    names = [f"volume-{i:02d}-{'x' * 150}" for i in range(3)]
    many = png.standalone(lines_chart(names))
    assert f'height="{svg.H + 3 * png.ROW_PX + 10}"' in many  # one column: a row each
    assert many.count("…</text>") == 3 and f">{names[0]}</text>" not in many


def test_a_machine_without_any_font_is_told_so(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    # a stand-in: this machine has fonts, so the folders searched are made empty
    monkeypatch.setattr(png, "FONT_DIRS", (str(tmp_path),))
    with pytest.raises(StorbenchError, match="fonts-dejavu-core"):
        png.find_fonts()


def test_the_chart_is_drawn_with_its_text(tmp_path: Path) -> None:
    path = png.write(lines_chart(["only"]), tmp_path, png.find_fonts())
    img = Image.open(io.BytesIO(path.read_bytes())).convert("L")
    assert img.size == (svg.W, svg.H + png.ROW_PX + 10)
    title = img.crop((250, 0, 510, 28))
    assert sum(title.histogram()[:128]) > 100  # the title's letters, dark on white
