"""The widget's Source tab and module blocks in a real browser (headless Debian Chromium through
Playwright), on a page that loads the shipped front end with a stand-in model replaying answers
computed in Python (scripts/widget_screenshots.py): recorded HTML stays text, a click on a line opens
its op in the Passes tab, a kernel name opens the Fusions tab, a click on a block box asks for it
expanded. Skipped where chromium or playwright is missing (failed under CI, like the JupyterLab test)."""
from __future__ import annotations

import pathlib
import sys

import pytest

from jupyter_helpers import chromium_page, require_browser
from notebook_helpers import HOSTILE_CODE
from test_notebook_blocks import layered  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from widget_screenshots import request_key, widget_page  # noqa: E402


def _open(page, tmp_path, html: str) -> None:
    path = tmp_path / "widget.html"
    path.write_text(html, encoding="utf-8")
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_timeout(300)
    assert not errors, errors


def _traits(page) -> dict:
    return page.evaluate("({tab: __tv_traits.tab, chain: __tv_traits.chain, selected_uid: __tv_traits.selected_uid,"
                         " selected_kernel: __tv_traits.selected_kernel})")


def test_source_tab_in_the_browser(hostile, tmp_path):
    require_browser()
    from thundervis.notebook_ext import show
    w = show(hostile)
    answer = w.request({"what": "source"})
    assert answer["ok"]
    row = next(x for x in answer["data"]["lines"] if HOSTILE_CODE in x["text"])
    html = widget_page(w, "source", {request_key("source"): answer})
    with chromium_page(1200, 800) as page:
        _open(page, tmp_path, html)
        page.wait_for_selector(".tv-src-ops", timeout=30_000)
        codes = page.locator(".tv-src-code").all_text_contents()
        assert any(HOSTILE_CODE in c for c in codes)  # shown as text ...
        assert page.evaluate("window.__tv_pwned") is None  # ... never run
        assert page.locator(".tv-source script").count() == 0
        page.locator(f'.tv-src-ops[data-line="{row["line"]}"]').click()
        page.wait_for_timeout(300)
        t = _traits(page)
        assert t["tab"] == "passes" and t["selected_uid"] == row["ops"][0]["uid"] and t["chain"] == row["ops"][0]["chain"]
    with chromium_page(1200, 800) as page:
        _open(page, tmp_path, html)
        page.wait_for_selector(".tv-src-kernel", timeout=30_000)
        name = page.locator(".tv-src-kernel").first.text_content().strip()
        page.locator(".tv-src-kernel").first.click()
        page.wait_for_timeout(300)
        t = _traits(page)
        assert t["tab"] == "fusions" and t["selected_kernel"] == name


def test_a_click_on_a_block_box_asks_for_it_expanded(layered, tmp_path):  # noqa: F811
    require_browser()
    from thundervis.notebook_ext import show
    w = show(layered)
    folded = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain})
    blocks = folded["data"]["blocks"]
    opened = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain, "expand": [blocks[1]["path"]]})
    html = widget_page(w, "fusions", {request_key("diagram"): folded,
                                      request_key("diagram", expand=[blocks[1]["path"]]): opened})
    with chromium_page(1200, 800) as page:
        _open(page, tmp_path, html)
        page.wait_for_selector("g.node.tv-block", timeout=30_000)
        assert page.locator("g.node.tv-block").count() == len(blocks)
        page.locator(f'g.node.tv-block[id="{blocks[1]["id"]}"]').click()
        page.wait_for_timeout(500)
        asked = page.evaluate("window.__tv_asked")
        assert asked[-1] == request_key("diagram", expand=[blocks[1]["path"]])
        page.wait_for_selector("g.cluster", timeout=30_000)
        assert page.locator("g.node.tv-block").count() == len(blocks) - 1  # the expanded one is a cluster now
