"""The Fusions table's executor cell keeps present's wording (``triton · ran on cpu via torch``,
one wording for every view) and breaks only at its `` · ``: a row is one or two lines at the
widget's usual width, not four (docs/notebook-blocks.png)."""
from __future__ import annotations

import pathlib
import sys

import pytest

pytest.importorskip("anywidget")

from thundervis.notebook_ext import show  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_front_end_splits_the_tag_only_at_its_separator():
    js = (REPO / "notebook_ext" / "static" / "fusions_view.js").read_text(encoding="utf-8")
    css = (REPO / "notebook_ext" / "static" / "widget.css").read_text(encoding="utf-8")
    assert 'split(" · ")' in js and "tv-executor" in js
    assert ".tv-executor span { white-space: nowrap; }" in css


@pytest.mark.browser
@pytest.mark.slow
def test_executor_cells_are_two_lines_at_most_in_the_browser(hostile, tmp_path):
    from jupyter_helpers import file_page, require_browser
    require_browser()
    sys.path.insert(0, str(REPO / "scripts"))
    from widget_screenshots import request_key, widget_page
    w = show(hostile)
    tags = {k["name"]: k.get("tag") or k["executor"] for g in w.data["graphs"] for k in g["kernels"]
            if k["chain"] == w.chain}
    assert any(" · " in t for t in tags.values()), tags  # a tag with a second part to lay out
    diagram = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain})
    page_path = tmp_path / "widget.html"
    page_path.write_text(widget_page(w, "fusions", {request_key("diagram"): diagram}), encoding="utf-8")
    with file_page(page_path, 1400, 620) as (page, errors):
        page.locator(".tv-kernel-row").first.wait_for(timeout=30_000)
        cells = page.evaluate("""() => [...document.querySelectorAll('.tv-kernel-row')].map((tr) => {
            const td = tr.querySelector('.tv-executor');
            const range = document.createRange();
            range.selectNodeContents(td);  // the lines its text takes (the cell is as tall as its row)
            const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
            return [tr.dataset.kernel, td.textContent, tops.size];
        })""")
        assert cells and not errors, errors
        for name, text, lines in cells:
            assert text == tags[name]  # present's words, unchanged
            assert 1 <= lines <= 2, (name, text, lines)
