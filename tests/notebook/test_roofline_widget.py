"""The widget's roofline columns: each kernel of the payload carries its roofline row (from
thundervis.present.roofline), % of roofline only for GPU-measured times, and the static page shows
them as escaped text."""
from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

from roofline_fixtures import FUSION, roofline_recording  # noqa: E402

from thundervis.gpus import GPUS  # noqa: E402
from thundervis.notebook_ext import RecordingData, show  # noqa: E402
from thundervis.present.units import format_pct, format_roofline_us, format_share, format_us  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402

from notebook_helpers import HtmlTags  # noqa: E402


@pytest.mark.parametrize("clock", ["device", "host"])
def test_payload_kernels_carry_their_roofline(tmp_path, clock):
    path = roofline_recording(str(tmp_path / "r.tvrec"), clock, fusion_us=5.0)
    with open_recording(path) as rec:
        payload = RecordingData(rec).payload(with_diagrams=False)
    (k,) = payload["graphs"][0]["kernels"]
    r = k["roofline"]
    roof = (FUSION[1] + FUSION[2]) / GPUS["h100"].hbm_bytes_per_s * 1e6
    assert r["roofline_us"] == pytest.approx(roof) and r["flops"] == FUSION[0] and r["target"] == "sm_90"
    assert r["bytes_read"] == FUSION[1] and r["bound"] == "memory" and r["measured_us"] == 5.0
    assert (r["pct_of_roofline"] is not None) == (clock == "device")
    # the table's cells: present.units text, as `thundervis ls` and the TUI write them
    assert k["roofline_text"] == format_roofline_us(r["roofline_us"])
    assert k["pct_of_roofline_text"] == (format_pct(r["pct_of_roofline"]) if clock == "device" else "-")
    assert k["median"] == format_us(5.0) and k["share_text"] == format_share(k["timing"]["share"])
    assert payload["roofline_target"].startswith("sm_90 H100 SXM")
    # its chain's wall time per call against its kernels, the text ls prints (present.chain_times)
    assert k["chain_time"].startswith(f"{format_us(2 * (5.0 + 8.0))} a call (wall, median of 2 untimed calls")


def test_static_page_shows_the_roofline_columns(tmp_path):
    path = roofline_recording(str(tmp_path / "r.tvrec"), "device", fusion_us=5.0)
    page = show(path, chain="forward")._repr_html_()
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == []
    roof = (FUSION[1] + FUSION[2]) / GPUS["h100"].hbm_bytes_per_s * 1e6
    assert "roofline µs" in parser.texts and "% roof" in parser.texts
    assert f"{roof:.3g}" in parser.texts and f"{roof / 5.0 * 100:.0f}%" in parser.texts
    # the median cell names its chain's wall time per call on hover, as text
    assert any(a.get("title", "").startswith("forward chain: ") and "a call (wall" in a["title"]
               for t, a in parser.tags if t == "td")


def test_static_page_names_the_target_like_ls(tmp_path):
    """The static page's kernel table reads ``triton sm_90`` (present.status.kernel_tag)."""
    path = roofline_recording(str(tmp_path / "r.tvrec"), build=True)
    parser = HtmlTags()
    parser.feed(show(path, chain="forward")._repr_html_())
    assert "triton sm_90" in parser.texts


@pytest.mark.browser
@pytest.mark.slow
def test_fusions_view_says_the_chains_wall_time_in_the_browser(tmp_path):
    """In Chromium (the stand-in page of scripts/widget_screenshots.py): above the kernel table, the
    chain's wall time per call against its kernels (present.chain_times), and on the median's hover."""
    import pathlib
    import sys
    from jupyter_helpers import file_page, require_browser
    require_browser()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
    from widget_screenshots import request_key, widget_page
    path = roofline_recording(str(tmp_path / "r.tvrec"), "host", fusion_us=5.0)
    w = show(path)
    w.chain = "forward"
    diagram = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain})
    page_path = tmp_path / "widget.html"
    page_path.write_text(widget_page(w, "fusions", {request_key("diagram"): diagram}), encoding="utf-8")
    expected = f"forward chain: {format_us(2 * (5.0 + 8.0))} a call (wall, median of 2 untimed calls)"
    with file_page(page_path, 1400, 900) as (page, errors):
        line = page.locator(".tv-chain-time")
        line.wait_for(timeout=30_000)
        assert line.text_content().startswith(expected + " · kernels and torch ops ")
        median = page.locator(".tv-kernel-row td").nth(3)
        assert median.text_content() == format_us(5.0) and median.get_attribute("title").startswith(expected)
        assert not errors, errors
