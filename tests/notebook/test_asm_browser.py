"""The widget's asm panel in Chromium (Playwright, no Jupyter server: asm_page.py draws the panel
with the kernel's replies precomputed by the Python side): a Triton line highlights its
instructions, an instruction shows its symbol and source line, stage buttons ask again, and the
recorded hostile text stays text."""
from __future__ import annotations

import pytest

from asm_page import asm_page
from jupyter_helpers import chromium_page, require_browser
from roofline_fixtures import roofline_recording

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _replies(path):
    from thundervis.notebook_ext import RecordingData
    from thundervis.notebook_ext.widget import _answer
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        data = RecordingData(rec)
        req = {"what": "asm", "graph": 0, "chain": "forward", "kernel": "fw_fusion_0"}
        return {f"{t}|{s}": _answer(data.handle, {**req, "target": t or None, "stage": s})
                for t in ("", "sm_90") for s in ("sass", "ptx", "llir")}


def test_asm_panel_in_a_browser(tmp_path):
    require_browser()
    page_html = asm_page(_replies(roofline_recording(str(tmp_path / "r.tvrec"), build=True)), "fw_fusion_0", ["sm_90"])
    with chromium_page(1500, 900) as page:
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_content(page_html)
        page.wait_for_function("window.__ready === true")
        page.locator(".tv-asm-row").first.wait_for(timeout=10_000)

        def hl():
            return page.eval_on_selector_all(".tv-asm-code .tv-asm-hl", "els => els.map(e => Number(e.dataset.index))")
        info = page.locator(".tv-asm-info")
        assert page.locator(".tv-asm-row").count() == 6 and page.locator(".tv-asm-line").count() == 5
        assert hl() == [1, 2] and "triton line 3: 2 SASS lines · symbol f3 prims.add (2 lines) · model.py:7" in info.inner_text()
        page.locator('.tv-asm-line[data-line="4"]').click()
        assert hl() == [3] and "symbol f4 prims.tanh" in info.inner_text()
        # The symbol picker selects a symbol's first Triton line (and follows the selection).
        assert page.locator(".tv-asm-symbol").input_value() == "f4"
        page.locator(".tv-asm-symbol").select_option("f3")
        assert hl() == [1, 2] and "symbol f3 prims.add" in info.inner_text()
        page.locator('.tv-asm-row[data-index="2"]').click()
        assert info.inner_text() == "SASS line 3: symbol f3 prims.add · model.py:7 · triton line 3"
        assert page.eval_on_selector_all(".tv-asm-src .tv-asm-hl", "els => els.map(e => e.dataset.line)") == ["3"]
        # Hostile recorded text: shown literally, no element made of it, nothing ran.
        row4 = page.locator('.tv-asm-row[data-index="4"]').inner_text()
        assert "[bold red]pwned[/] <script>x()</script>" in row4
        assert page.locator(".tv-asm script").count() == 0
        # Stage buttons ask the kernel again; a stage the build lacks is its one sentence.
        page.locator('.tv-asm-stage[data-stage="ptx"]').click()
        page.wait_for_function("document.querySelectorAll('.tv-asm-row').length === 2")
        assert page.locator(".tv-asm-stage.tv-active").inner_text() == "PTX"
        page.locator('.tv-asm-stage[data-stage="llir"]').click()
        page.wait_for_function("document.querySelector('.tv-asm-info').classList.contains('tv-asm-error')")
        assert "has no llir stage recorded" in info.inner_text() and page.locator(".tv-asm-row").count() == 0
        asked = page.evaluate("window.__asked")
        assert [(a["stage"], a["kernel"], a["target"]) for a in asked] == \
            [("sass", "fw_fusion_0", "sm_90"), ("ptx", "fw_fusion_0", "sm_90"), ("llir", "fw_fusion_0", "sm_90")]
        assert errors == []
