"""The widget and the static page mark a kernel that fell back to torch at run time (the TUI's
``⚠ fell back``): the Fusions payload carries present's status and reason, the shipped front end
shows them as text with the reason on hover, and the trace lines' fallback mark comes from
``present.status.symbol_status``, not from a rule of the browser."""
from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("anywidget")

from notebook_helpers import FELL_BACK_ERROR, HtmlTags  # noqa: E402

from thundervis.notebook_ext import show  # noqa: E402
from thundervis.present.status import TORCH_OP, symbol_status  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_fusions_payload_carries_the_fell_back_status_and_reason(fell_back):
    path, failed = fell_back
    w = show(path)
    kernels = [k for g in w.data["graphs"] for k in g["kernels"]]
    (k,) = [k for k in kernels if k["name"] == failed]
    assert k["status"] == "fell back" and FELL_BACK_ERROR in k["fallback"]
    assert all((k["status"], k["fallback"]) == ("compiled", None) for k in kernels if k["name"] != failed)


def test_static_page_marks_the_kernel_that_fell_back(fell_back):
    path, failed = fell_back
    w = show(path)
    chain = next(k["chain"] for g in w.data["graphs"] for k in g["kernels"] if k["name"] == failed)
    page = show(path, chain=chain)._repr_html_()
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == [] and all(a.get("class") == "tv-diagram" for t, a in parser.tags if t == "img")
    marks = [a for t, a in parser.tags if t == "span" and a.get("class") == "tv-fellback"]
    assert len(marks) == 1 and FELL_BACK_ERROR in marks[0]["title"]  # the reason, as an escaped attribute
    assert "⚠ fell back" in parser.texts


def test_trace_lines_send_the_symbol_status(hostile):
    payload = show(hostile).data
    infos = payload["infos"]
    assert all(i["status"] == symbol_status(i["executor"], i["note"]) for i in infos)
    assert any(i["status"] == TORCH_OP for i in infos) and any(i["status"] is None for i in infos)


def test_front_end_reads_the_status_from_python():
    static = REPO / "notebook_ext" / "static"
    rec, fusions = (static / "passes_view.js").read_text(), (static / "fusions_view.js").read_text()  # the trace, the table
    assert 'executor === "torch"' not in rec and "inf.status" in rec
    assert "k.fallback ?" in fusions and "title: k.fallback" in fusions and "${k.status}" in fusions


@pytest.mark.browser
@pytest.mark.slow
def test_fusions_table_marks_it_in_the_browser(fell_back, tmp_path):
    """In Chromium (the stand-in page of scripts/widget_screenshots.py): the fell-back kernel's row
    reads ``⚠ fell back`` with the reason as its tooltip, and the hostile reason never runs."""
    import sys
    from jupyter_helpers import file_page, require_browser
    require_browser()
    sys.path.insert(0, str(REPO / "scripts"))
    from widget_screenshots import request_key, widget_page
    path, failed = fell_back
    w = show(path)
    w.chain = next(k["chain"] for g in w.data["graphs"] for k in g["kernels"] if k["name"] == failed)
    diagram = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain})
    page_path = tmp_path / "widget.html"
    page_path.write_text(widget_page(w, "fusions", {request_key("diagram"): diagram}), encoding="utf-8")
    with file_page(page_path, 1400, 900) as (page, errors):
        row = page.locator(f'.tv-kernel-row[data-kernel="{failed}"]')
        row.wait_for(timeout=30_000)
        mark = row.locator(".tv-fellback")
        assert mark.text_content().strip() == "⚠ fell back" and FELL_BACK_ERROR in mark.get_attribute("title")
        assert page.locator(".tv-kernel-row .tv-fellback").count() == 1
        row.click()
        assert FELL_BACK_ERROR in page.locator(".tv-kernel-detail .tv-fellback").text_content()
        assert page.evaluate("window.__tv_pwned") is None and not errors, errors
