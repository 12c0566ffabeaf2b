"""The widget's Numerics tab: the payload's ``numerics`` rows (worst first), the ``bisect`` request,
and the static HTML section; the Fusions table's verdict column (payload, static page, Chromium);
recorded strings escaped everywhere."""
from __future__ import annotations

import pathlib
import shutil
import sqlite3

import pytest

pytest.importorskip("anywidget")

from thundervis.notebook_ext import show  # noqa: E402

from notebook_helpers import HtmlTags  # noqa: E402

SCRIPT = """\
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        return torch.tanh(self.ln(self.fc(x)))


model = torch.compile(M())
for _ in range(2):
    model(torch.randn(4, 8)).sum().backward()
"""
EVIL = "<img src=x onerror=alert(1)>"
EVIL_DETAIL = "<img src=x onerror=window.__tv_pwned=1>"
REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> str:
    """A real run with --check-numerics --capture-inputs, plus one extra row under a hostile name."""
    from thundervis.cli import main
    folder = tmp_path_factory.mktemp("widget_numerics")
    (folder / "m.py").write_text(SCRIPT)
    rec = str(folder / "m.tvrec")
    assert main(["run", "--no-view", "--executors", "triton", "--check-numerics", "--capture-inputs",
                 "--out", rec, str(folder / "m.py")]) == 0
    evil = str(folder / "evil.tvrec")
    shutil.copy(rec, evil)
    shutil.copytree(rec + ".inputs", evil + ".inputs")  # the captured inputs live next to a recording
    with sqlite3.connect(evil) as c:
        c.execute("INSERT INTO kernel_numerics(graph_id, chain, kernel, calls, max_rel_error, verdict, detail)"
                  " VALUES (0, 'forward', ?, 1, 0.5, 'flagged', ?)", (EVIL, EVIL))
    c.close()
    return evil


def test_payload_lists_kernels_by_verdict_and_bisect_answers(checked):
    w = show(checked)
    num = w.data["numerics"]
    assert num["flagged"] == 1 and num["rows"][0]["kernel"] == EVIL and num["rows"][0]["verdict"] == "flagged"
    assert {r["verdict"] for r in num["rows"][1:]} == {"ok"} and num["checked"] == len(num["rows"])
    assert num["header"].endswith("· 1 flagged")
    r = w.request({"what": "bisect", "graph": 0, "chain": "forward"})
    assert r["ok"], r
    assert r["data"]["lines"][-1] == "no divergence" and "captured inputs" in r["data"]["lines"][0]
    r = w.request({"what": "bisect", "graph": 0, "chain": "joint"})
    assert not r["ok"] and r["error"].endswith("compiled chain (forward, backward, inference), not 'joint'.")


def test_static_html_numerics_section_is_escaped(checked):
    page = show(checked)._repr_html_()
    assert EVIL not in page
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == []
    text = "".join(parser.texts)
    assert "numerics · " in text and EVIL in text and "flagged" in text


def test_front_end_has_the_numerics_tab():
    from thundervis.notebook_ext.widget import FRONT_END_PARTS, front_end
    assert "numerics_view.js" in FRONT_END_PARTS
    js = front_end()
    assert "function numericsTab" in js and 'what: "bisect"' in js


@pytest.fixture(scope="module")
def one_flagged(checked, tmp_path_factory) -> tuple:
    """Return (path, kernel): the checked recording with its first forward kernel's check made
    ``flagged``, its detail hostile HTML."""
    folder = tmp_path_factory.mktemp("widget_flagged")
    path = str(folder / "flagged.tvrec")
    shutil.copy(checked, path)
    with sqlite3.connect(path) as c:
        (kernel,) = c.execute("SELECT kernel FROM kernel_numerics WHERE chain = 'forward' AND kernel != ?"
                              " ORDER BY kernel LIMIT 1", (EVIL,)).fetchone()
        c.execute("UPDATE kernel_numerics SET verdict = 'flagged', ratio = 99.0, detail = ? WHERE kernel = ?",
                  (EVIL_DETAIL, kernel))
    c.close()
    return path, kernel


def test_fusions_payload_carries_each_kernels_verdict_cell(one_flagged, hostile):
    """Every kernel of a checked run carries present.numerics.verdict_cell of its row (the TUI's
    wording); a run that was not checked carries none, so its table has no verdict column."""
    from thundervis.present.numerics import numerics_summary, verdict_cell
    from thundervis.recording import open_recording
    path, flagged = one_flagged
    kernels = [k for g in show(path).data["graphs"] for k in g["kernels"]]
    with open_recording(path) as rec:
        summary = numerics_summary(rec)
    assert kernels and all(k["numerics"] == verdict_cell(summary.verdict_of(k["graph"], k["chain"], k["name"]))
                           for k in kernels)
    (bad,) = [k for k in kernels if k["numerics"]["verdict"] == "flagged"]
    assert bad["name"] == flagged and bad["numerics"]["text"] == "✗ flagged"
    assert "ratio 99.0x" in bad["numerics"]["title"] and bad["numerics"]["title"].endswith(EVIL_DETAIL)
    assert {k["numerics"]["text"] for k in kernels if k is not bad} == {"✓ ok"}
    assert all(k["numerics"] is None for g in show(hostile).data["graphs"] for k in g["kernels"])


def test_static_kernel_table_has_the_verdict_column_escaped(one_flagged):
    path, flagged = one_flagged
    page = show(path, chain="forward")._repr_html_()
    assert EVIL_DETAIL not in page
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == []
    assert "numerics" in parser.texts and "✗ flagged" in parser.texts and "✓ ok" in parser.texts
    titles = [a["title"] for t, a in parser.tags if t == "td" and "title" in a]
    assert any(t.endswith(EVIL_DETAIL) for t in titles)  # the detail, as an escaped attribute


@pytest.mark.browser
@pytest.mark.slow
def test_fusions_and_numerics_tabs_in_the_browser(one_flagged, tmp_path):
    """In Chromium (the stand-in page of scripts/widget_screenshots.py): the Fusions table's second
    column is the verdict, the flagged kernel's cell reads ``✗ flagged`` with its errors on hover
    and its detail names them; the Numerics tab lists every checked kernel, the flagged one first,
    a row shows its chain's bisect and opens its kernel in the Fusions tab (selected there). The
    hostile detail never runs."""
    import sys
    from jupyter_helpers import file_page, require_browser
    require_browser()
    sys.path.insert(0, str(REPO / "scripts"))
    from widget_screenshots import request_key, widget_page
    path, flagged = one_flagged
    w = show(path, chain="forward")
    n_rows = len(w.data["numerics"]["rows"])
    diagram = w.request({"what": "diagram", "graph": w.graph, "chain": w.chain})
    fusions, numerics = tmp_path / "fusions.html", tmp_path / "numerics.html"
    fusions.write_text(widget_page(w, "fusions", {request_key("diagram"): diagram}), encoding="utf-8")
    bisect = w.request({"what": "bisect", "graph": 0, "chain": "forward"})
    numerics.write_text(widget_page(w, "numerics", {request_key("diagram"): diagram, request_key("bisect"): bisect}),
                        encoding="utf-8")
    with file_page(fusions, 1400, 900) as (page, errors):
        row = page.locator(f'.tv-kernel-row[data-kernel="{flagged}"]')
        row.wait_for(timeout=30_000)
        heads = [t.strip() for t in page.locator(".tv-kernels th").all_text_contents()]
        assert heads[:3] == ["kernel", "numerics", "executor"], heads
        cell = row.locator("td.tv-verdict")
        assert cell.text_content() == "✗ flagged" and "tv-num-flagged" in cell.get_attribute("class")
        assert "ratio 99.0x" in cell.get_attribute("title") and EVIL_DETAIL in cell.get_attribute("title")
        assert page.locator("td.tv-verdict.tv-num-flagged").count() == 1
        assert page.locator("td.tv-verdict.tv-num-ok").count() == page.locator(".tv-kernel-row").count() - 1
        row.click()
        detail = page.locator(".tv-kernel-detail .tv-kernel-numerics").text_content()
        assert "✗ flagged · max rel" in detail and EVIL_DETAIL in detail
        page.goto(numerics.as_uri())
        page.locator(".tv-num-row").first.wait_for(timeout=30_000)
        assert page.locator(".tv-num-row").count() == n_rows
        assert page.locator(".tv-num-row").first.get_attribute("class").split()[1] == "tv-num-flagged"
        # a check row the recording has no kernel for (the hostile one) offers nothing to open
        page.locator(".tv-num-row", has_text=EVIL).click()
        assert page.locator(".tv-num-bisect").count() == 1 and page.locator(".tv-num-open").count() == 0
        # the flagged kernel's row: its chain's bisect (answered), then open it in the Fusions tab
        page.locator(".tv-num-row", has_text=flagged).first.click()
        page.locator(".tv-num-lines").wait_for(timeout=30_000)
        assert page.locator(".tv-num-lines").text_content().endswith("no divergence")
        page.locator(".tv-num-open").click()
        picked = page.evaluate("({tab: __tv_traits.tab, chain: __tv_traits.chain, kernel: __tv_traits.selected_kernel})")
        assert picked == {"tab": "fusions", "chain": "forward", "kernel": flagged}, picked
        page.locator(f'.tv-kernel-row.tv-selected[data-kernel="{flagged}"]').wait_for(timeout=30_000)
        assert page.evaluate("window.__tv_pwned") is None and not errors, errors
