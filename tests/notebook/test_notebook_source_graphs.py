"""The Source tab's graph picker: a run whose script breaks into two graphs; the payload
(``present.source_view.SourceFile.graph_options``) offers every graph with its op count from the
file, a graph's answer holds only that graph's ops, and in the browser (the stand-in page of
scripts/widget_screenshots.py) picking a graph asks for that graph's lines."""
from __future__ import annotations

import pathlib
import sys

import pytest

pytest.importorskip("anywidget")

REPO = pathlib.Path(__file__).resolve().parents[2]

TWO_GRAPHS = """import torch


def step(x):
    y = torch.tanh(x) * 2.0
    torch._dynamo.graph_break()
    z = torch.sin(y) + 1.0
    return z * z


compiled = torch.compile(step)
compiled(torch.randn(8, 16))
"""


@pytest.fixture(scope="module")
def two_graphs(tmp_path_factory):
    """Return the path of a recording of TWO_GRAPHS (graph 0 before the break, graph 1 after)."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("two_graphs")
    script = folder / "two_graphs.py"
    script.write_text(TWO_GRAPHS)
    result = run_target(script=str(script), module=None, args=[], out=check_output(str(folder / "two.tvrec")))
    assert result.exit_code == 0, result
    return result.path


def _op_graphs(view) -> set:
    return {op["graph"] for row in view["lines"] for op in row["ops"]}


def test_source_answer_offers_every_graph_with_its_op_count(two_graphs):
    from thundervis.notebook_ext import show
    w = show(two_graphs)
    every = w.request({"what": "source"})
    assert every["ok"], every
    options = every["data"]["graph_options"]
    assert [o["graph"] for o in options] == [None, 0, 1]
    counts = [int(o["label"].split(" · ")[1].split()[0]) for o in options]
    assert counts[1] > 0 and counts[2] > 0 and counts[0] == counts[1] + counts[2]
    assert options[0]["label"].startswith("all graphs · ") and options[2]["label"].startswith("graph 1 · ")
    assert _op_graphs(every["data"]) == {0, 1}
    one = w.request({"what": "source", "file": every["data"]["file"], "graph_filter": 1})
    assert one["ok"] and one["data"]["graph"] == 1
    assert _op_graphs(one["data"]) == {1}
    assert one["data"]["graph_options"] == options  # the picker keeps every choice
    assert sum(len(row["ops"]) for row in one["data"]["lines"]) == counts[2]
    bad = w.request({"what": "source", "graph_filter": 7})
    assert not bad["ok"] and "7" in bad["error"]


def test_front_end_sends_the_picked_graph():
    from thundervis.notebook_ext.widget import front_end
    js = front_end()
    part = js[js.index("function sourceTab("):]
    part = part[:part.index("\n}\n")]
    assert 'class: "tv-source-graph"' in part and "graph_filter: graph" in part
    assert "view.graph_options" in part and "text: o.label" in part  # labels from present/, as text


def _need_browser() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    sys.path.insert(0, str(REPO / "tests" / "notebook"))
    from jupyter_helpers import require_browser
    require_browser()


@pytest.mark.browser
@pytest.mark.slow
def test_picking_a_graph_in_the_browser(two_graphs, tmp_path):
    _need_browser()
    from jupyter_helpers import file_page
    from widget_screenshots import request_key, widget_page
    from thundervis.notebook_ext import show
    w = show(two_graphs)
    every = w.request({"what": "source"})
    file = every["data"]["file"]
    one = w.request({"what": "source", "file": file, "graph_filter": 1})
    html = widget_page(w, "source", {request_key("source"): every, request_key("source", file=file, graph=1): one})
    path = tmp_path / "widget.html"
    path.write_text(html, encoding="utf-8")
    with file_page(path, 1200, 800) as (page, errors):
        page.wait_for_selector(".tv-src-ops", timeout=30_000)
        labels = page.locator(".tv-source-graph option").all_text_contents()
        assert labels == [o["label"] for o in every["data"]["graph_options"]]
        page.locator(".tv-source-graph").select_option("1")
        page.wait_for_timeout(500)
        assert page.evaluate("window.__tv_asked")[-1] == request_key("source", file=file, graph=1)
        assert page.locator(".tv-source-graph").input_value() == "1"
        assert page.locator(".tv-source-summary").text_content() == one["data"]["summary"]
        assert not errors, errors


@pytest.mark.browser
@pytest.mark.slow
def test_the_view_opens_where_present_default_view_says(two_graphs, tmp_path):
    """With no valid graph, chain or pass picked the page shows present.default_view's graph,
    chain and pass (the payload's ``default_graph``, ``default_chain``, ``default_pass``), and
    picking another graph opens its default chain at its default pass."""
    _need_browser()
    from jupyter_helpers import file_page
    from widget_screenshots import widget_page
    from thundervis.notebook_ext import show
    w = show(two_graphs)
    data = w.data
    graph = {g["id"]: g for g in data["graphs"]}
    opened = graph[data["default_graph"]]
    chain = next(c for c in opened["chains"] if c["kind"] == opened["default_chain"])
    shown = next(p for p in chain["passes"] if p["index"] == chain["default_pass"])
    w.graph, w.chain, w.pass_index = 99, "no such chain", 999
    path = tmp_path / "widget.html"
    path.write_text(widget_page(w, "passes", {}), encoding="utf-8")
    with file_page(path, 1200, 800) as (page, errors):
        label = page.locator(".tv-pass-label")
        label.wait_for(timeout=30_000)
        assert label.text_content().startswith(f"pass {shown['index']} · {shown['name']} · {shown['ms_text']} · ")
        other = graph[1]
        page.locator(".tv-graph").select_option("1")
        page.wait_for_timeout(300)
        traits = page.evaluate("({graph: __tv_traits.graph, chain: __tv_traits.chain,"
                               " pass_index: __tv_traits.pass_index})")
        want = next(c for c in other["chains"] if c["kind"] == other["default_chain"])
        assert traits == {"graph": 1, "chain": want["kind"], "pass_index": want["default_pass"]}
        assert not errors, errors
