"""The widget's Python side: payload, traits, messages, static HTML, thundervis.api.show/diff, the
in-process session recording, and the shipped front end."""
from __future__ import annotations

import importlib.resources
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("anywidget")

import thundervis  # noqa: E402
import thundervis.api as tv  # noqa: E402
from thundervis.compiler.printer import print_lines  # noqa: E402
from thundervis.diff import diff_traces  # noqa: E402
from thundervis.diff.render import side_rows  # noqa: E402
from thundervis.notebook_ext.diff_data import unfolded  # noqa: E402
from thundervis.notebook_ext import DataError, RecordingData, show  # noqa: E402
from thundervis.present.trace_lines import print_options  # noqa: E402
from thundervis.recording import PassRef, open_recording  # noqa: E402

from notebook_helpers import HOSTILE_CODE, HOSTILE_CODE2, HOSTILE_FILE, HOSTILE_MODULE, HtmlTags  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
HOSTILE = (HOSTILE_FILE, HOSTILE_MODULE, HOSTILE_CODE, HOSTILE_CODE2)


def _chain(payload, graph, kind):
    g = next(g for g in payload["graphs"] if g["id"] == graph)
    return next(c for c in g["chains"] if c["kind"] == kind)


def test_import_thundervis_loads_no_widget_toolkit():
    code = ("import sys, thundervis\n"
            "bad = [m for m in ('anywidget', 'ipywidgets', 'thundervis.notebook_ext') if m in sys.modules]\n"
            "assert not bad, bad\n"
            "from thundervis.diff import render\n"
            "assert render.side_rows and thundervis.diff.render is render\n"
            "bad = [m for m in ('anywidget', 'ipywidgets') if m in sys.modules]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_widgets_open_through_the_api_module(hostile):
    import thundervis.api as tv
    from thundervis.notebook_ext.widget import RecordingWidget
    assert tv.diff is tv.show_diff and callable(tv.jit)
    assert isinstance(tv.show(hostile), RecordingWidget) and isinstance(thundervis.show(hostile), RecordingWidget)
    assert not callable(thundervis.diff)  # the diff package, no longer a module with a swapped class


def test_payload_holds_every_pass_diff_and_kernel(hostile):
    w = show(hostile)
    payload = w.data
    json.dumps(payload)  # plain JSON, sent once
    with open_recording(hostile) as rec:
        overview = rec.overview()
        for g in overview.graphs:
            for c in g.chains:
                pc = _chain(payload, g.id, c.kind)
                assert [p["index"] for p in pc["passes"]] == [p.index for p in c.passes]
                for p in c.passes:
                    held = next(x for x in pc["passes"] if x["index"] == p.index)["same_as"]
                    lines = [payload["lines"][i] for i in pc["lines"][str(held if held is not None else p.index)]]
                    # an unchanged pass shows the lines of the pass it is the same as (its header says so)
                    trace = rec.pass_trace(PassRef(g.id, c.kind, held if held is not None else p.index))
                    # the printer's lines, as `thundervis show` prints them and the TUI shows them
                    printed = print_lines(trace, print_options(rec, g.id, c.kind))
                    assert [ln[2] for ln in lines] == [ln.text for ln in printed]
                    assert [(ln[0], ln[1], ln[4]) for ln in lines] == [(ln.uid, ln.depth, ln.kind) for ln in printed]
                for prev, p in zip(c.passes, c.passes[1:]):
                    key = f"{prev.index}:{p.index}"
                    assert (key in pc["diffs"]) == p.changed
                    if p.changed:
                        d = diff_traces(rec.pass_trace(PassRef(g.id, c.kind, prev.index)),
                                        rec.pass_trace(PassRef(g.id, c.kind, p.index)))
                        rows = side_rows(d)
                        got = unfolded(pc["diffs"][key]["rows"])
                        assert [r[0] for r in got] == [r.status for r in rows]
                        assert [r[2][2] if r[2] else None for r in got] == [r.right.text if r.right else None for r in rows]
            assert [k["name"] for k in next(x for x in payload["graphs"] if x["id"] == g.id)["kernels"]] == \
                [k.name for k in g.kernels]
    # not profiled: every time cell reads "-", as in the CLI and the TUI (present.units)
    assert all((k["median"], k["share_text"]) == ("-", "-") for g in payload["graphs"] for k in g["kernels"])
    fwd = _chain(payload, w.graph, "forward")
    assert fwd["diagram"]["svg"].lstrip().startswith(("<?xml", "<svg", "<!DOCTYPE"))
    assert fwd["eager"] is None


def test_pass_times_go_out_as_present_text(hostile):
    # the pass stepper shows present.units.format_ms, like `thundervis show` and the TUI
    from thundervis.present.units import format_ms
    w = show(hostile)
    with open_recording(hostile) as rec:
        for g in rec.overview().graphs:
            for c in g.chains:
                sent = _chain(w.data, g.id, c.kind)["passes"]
                assert [p["ms_text"] for p in sent] == [format_ms(p.duration_ms) for p in c.passes]
                assert all(isinstance(p["ms"], float) for p in sent)
    parser = HtmlTags()  # the static page's pass list too
    parser.feed(w._repr_html_())
    assert "time" in parser.texts and _chain(w.data, w.graph, w.chain)["passes"][0]["ms_text"] in parser.texts
    js = (REPO / "notebook_ext" / "static" / "passes_view.js").read_text()  # the stepper's label and ticks
    assert "${p.ms_text}" in js and "${q.ms_text}" in js and " ms`" not in js and "ms} ms" not in js


def test_payload_says_where_the_view_opens(hostile):
    # present.default_view's graph, chain and pass: the browser falls back to them, never to graphs[0]
    from thundervis.present.default_view import default_graph, default_view, diagram_pass
    payload = show(hostile).data
    with open_recording(hostile) as rec:
        graphs = rec.overview().graphs
        assert payload["default_graph"] == default_graph(graphs).id
        for g in graphs:
            for c in g.chains:
                assert _chain(payload, g.id, c.kind)["default_pass"] == default_view(graphs, g.id, c.kind).pass_index
                # the pass the fusion diagram draws: present.default_view.diagram_pass, sent per chain
                assert _chain(payload, g.id, c.kind)["diagram_pass"] == diagram_pass(c)
                diagram = _chain(payload, g.id, c.kind).get("diagram")
                if diagram and diagram.get("pass") is not None:
                    assert diagram["pass"] == diagram_pass(c)
    js = "\n".join((REPO / "notebook_ext" / "static" / f).read_text()
                   for f in ("recording_view.js", "passes_view.js", "source_view.js"))
    for derived in ("graphs[0]", "chains[0]", "passes.length - 1].index", "passes.length - 1 :"):
        assert derived not in js, derived
    assert "data.default_graph" in js and "g.default_chain" in js and "c.default_pass" in js


def test_initial_selection_and_traits(hostile):
    w = show(hostile)
    fwd = _chain(w.data, w.graph, "forward")
    assert w.chain == "forward" and w.pass_index == fwd["passes"][-1]["index"] and w.compare_index == -1
    names = [p["name"] for p in fwd["passes"]]
    w2 = show(hostile, chain="backward", pass_="fuse", compare=names.index("claim"), tab="fusions")
    assert (w2.chain, w2.tab) == ("backward", "fusions")
    assert w2.pass_index == names.index("fuse") and w2.compare_index == names.index("claim")
    with pytest.raises(DataError, match="passes: 0 acquire"):
        show(hostile, pass_="no-such-pass")
    with pytest.raises(DataError, match="chains:"):
        show(hostile, chain="nonsense")
    state = w.get_state()
    assert {"data", "graph", "chain", "pass_index", "compare_index", "tab", "selected_uid", "selected_kernel"} <= set(state)


def test_requests_answer_diffs_details_and_diagrams(hostile):
    w = show(hostile)
    fwd = _chain(w.data, w.graph, "forward")
    first, last = fwd["passes"][0]["index"], fwd["passes"][-1]["index"]
    sent = []
    w.send = lambda content, buffers=None: sent.append(content)
    w._on_request(w, {"id": 7, "request": {"what": "diff", "graph": w.graph, "chain": "forward", "a": first, "b": last}}, [])
    assert sent[-1]["id"] == 7 and sent[-1]["ok"]
    d = sent[-1]["data"]
    with open_recording(hostile) as rec:
        expected = diff_traces(rec.pass_trace(PassRef(w.graph, "forward", first)),
                               rec.pass_trace(PassRef(w.graph, "forward", last)))
    assert d["counts"] == expected.counts() and (d["a"], d["b"]) == (first, last)

    kernel = next(k for k in w.data["graphs"][0]["kernels"] if k["chain"] == "forward")
    fuse = next(p["index"] for p in fwd["passes"] if p["name"] == "fuse")
    r = w.request({"what": "detail", "graph": w.graph, "chain": "forward", "pass": fuse, "uid": kernel["uid"]})
    assert r["ok"], r
    assert r["data"]["detail"]["ended_in"][0].startswith(kernel["name"] + " [")  # present.symbol_detail rows
    assert r["data"]["detail"]["lineage"]
    member = kernel["members"][0]
    r = w.request({"what": "detail", "graph": w.graph, "chain": "forward", "pass": fuse - 1, "uid": member})
    assert r["ok"] and HOSTILE_MODULE in json.dumps(r["data"]["detail"]["module"])

    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward", "module": HOSTILE_MODULE, "collapse": True})
    assert r["ok"] and r["data"]["svg"] and r["data"]["collapsed"] and r["data"]["modules"] == [HOSTILE_MODULE]
    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward", "module": "nope"})
    assert r["ok"] and r["data"]["svg"] is None and "no symbol" in r["data"]["error"]
    r = w.request({"what": "detail", "graph": w.graph, "chain": "forward", "pass": 0, "uid": "zz999"})
    assert not r["ok"] and "zz999" in r["error"]
    assert not w.request({"what": "bogus", "graph": 0, "chain": "forward"})["ok"]
    assert not w.request({"what": "diff"})["ok"]


def test_static_html_escapes_every_recorded_string(hostile):
    w = show(hostile)
    bundle, _meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    page = bundle["text/html"]
    assert page == w._repr_html_()
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == []
    assert {t for t, _ in parser.tags} <= {"div", "style", "h3", "h4", "p", "table", "tr", "td", "th", "pre",
                                            "span", "details", "summary", "img", "br"}
    imgs = [a for t, a in parser.tags if t == "img"]
    assert imgs and all(a["src"].startswith("data:image/svg+xml;base64,") for a in imgs)
    text = "".join(parser.texts) + " ".join(a.get("title", "") for _, a in parser.tags)
    for s in HOSTILE:  # shown, as text
        assert s in text, s
    for s in HOSTILE:  # never as markup
        assert s not in page, s
    assert "<script>" not in page and "<img src=x" not in page and "<b onmouseover" not in page


def test_diff_widget_two_passes_and_two_recordings(hostile):
    dw = tv.diff((hostile, "forward", "claim"), (hostile, "forward", "fuse"))
    d = dw.data["diff"]
    assert dw.data["kind"] == "passes" and d["counts"]["fused-into"] > 0
    kernel = next(r[2][2] for r in unfolded(d["rows"]) if r[0] == "added" and r[2] and r[2][1] == 0)
    assert "fusion" in kernel
    page = dw._repr_html_()
    assert "tv-diff" in page and "<script>" not in page
    rw = tv.diff(hostile, hostile)
    assert rw.data["kind"] == "runs" and rw.data["comparison"]["differences"] == []
    assert "no fusion differences" in rw._repr_html_()
    with pytest.raises(DataError):
        tv.diff((hostile, "fuse"), hostile)


def test_runs_diff_sends_kernel_times_as_present_text(hostile, monkeypatch):
    # the time column reads like every view's times (present.units.format_us), not a JS formatter
    import thundervis.diff.runs as runs
    from thundervis.present.units import format_us

    def one_change(a, b):
        fusion = [runs.FusionInfo(0, "forward", n, "triton", ("add",), (), (n,), (n,), us)
                  for n, us in (("fw_fusion_0", 12.34), ("fw_fusion_1", 2345.0))]
        change = runs.FusionChange(runs.CHANGED, "forward", 0, 0, fusion[:1], fusion[1:])
        return runs.RunComparison(a.label, b.label, True, [(0, 0, "similar")], [], [], [change], [])
    monkeypatch.setattr(runs, "compare_runs", one_change)
    (d,) = tv.diff(hostile, hostile).data["comparison"]["differences"]
    assert (d["time_a_text"], d["time_b_text"]) == (format_us(12.34), format_us(2345.0)) == ("12.3 µs", "2.35 ms")


def test_show_rejects_what_is_not_a_recording(tmp_path):
    with pytest.raises(DataError, match="cannot show a int"):
        show(42)
    with pytest.raises(DataError, match="does not exist"):
        show(tmp_path / "missing.tvrec")
    bad = tmp_path / "bad.tvrec"
    bad.write_text("not sqlite at all, long enough to have a header " * 4)
    with pytest.raises(DataError, match="not a thundervis recording"):
        show(bad)


def test_show_a_function_compiled_in_this_process():
    import torch

    def f(x, y):
        return torch.relu(x * y + 1.0).sum()

    def g(x):
        return torch.sigmoid(x) * 2.0

    cf = thundervis.jit(f, executors=["torch"])
    cg = thundervis.jit(g, executors=["torch"])
    with pytest.raises(DataError, match="has not run yet"):
        show(cf)
    x = torch.randn(3, 4)
    assert torch.allclose(cf(x, x), f(x, x))
    assert torch.allclose(cg(x), g(x))
    w, w_orig = show(cf), show(f)
    assert w.data["graphs"] == w_orig.data["graphs"] and len(w.data["graphs"]) == 1
    assert "compiled in this kernel" in w.data["title"]
    texts = [w.data["lines"][i][2] for i in _chain(w.data, w.graph, "inference")["lines"]["0"]]
    assert any("relu" in t for t in texts) and not any("sigmoid" in t for t in texts)
    gid = show(cg).data["graphs"][0]["id"]
    assert gid != w.graph


def test_front_end_ships_in_the_package_and_never_writes_markup():
    from thundervis.notebook_ext.widget import FRONT_END_PARTS, RecordingWidget
    static = importlib.resources.files("thundervis.notebook_ext") / "static"
    parts = [(static / name).read_text(encoding="utf-8") for name in FRONT_END_PARTS]
    assert (static / "widget.css").is_file()
    js = "\n".join(parts)
    assert js.count("export default") == 1 and "export default" in parts[-1]
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                   "import(", "fetch(", "http://", "https://", "XMLHttpRequest"):
        assert banned not in js, banned
    for formatting in ("toFixed", "toPrecision", "toLocaleString", "fmtUs", "fmtRoof", "* 100"):
        assert formatting not in js, formatting  # numbers arrive as text made by present.units
    assert str(RecordingWidget._esm) == js  # what anywidget sends is the shipped files
    if shutil.which("node"):  # the joined module parses (node is optional here)
        proc = subprocess.run(["node", "--input-type=module", "--check"], input=js, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'"thundervis\.notebook_ext" = \["static/\*\.js", "static/\*\.css"\]', pyproject)


@pytest.mark.slow
def test_wheel_contains_the_front_end(tmp_path):
    pytest.importorskip("setuptools")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import zipfile
    wheel = next(tmp_path.glob("thundervis-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    from thundervis.notebook_ext.widget import FRONT_END_PARTS
    for part in FRONT_END_PARTS:
        assert f"thundervis/notebook_ext/static/{part}" in names
    assert "thundervis/notebook_ext/static/widget.css" in names


def test_chains_that_ran_eagerly_are_marked(hostile, tmp_path):
    from thundervis.recording import RecordingObserver
    with open_recording(hostile) as rec:
        trace = rec.pass_trace(PassRef(0, "forward", 0))
    path = tmp_path / "eager.tvrec"
    obs = RecordingObserver(str(path))
    obs.start_run(script=str(tmp_path / "train.py"), module=None, argv=[], cwd=str(tmp_path))
    obs.graph_started(0, {"n_inputs": 3, "n_nodes": 4, "reason": None})
    obs.pass_done(0, "forward", 0, "acquire", trace, 0.001, True)
    obs.chain_failed(0, "forward", f"compiler error: {HOSTILE_CODE}", "Traceback ...")
    obs.graph_finished(0, 0.01)
    obs.finish_run("ok", 0)
    obs.close()
    w = show(path)
    fwd = _chain(w.data, 0, "forward")
    assert fwd["eager"] == f"compiler error: {HOSTILE_CODE}"
    page = w._repr_html_()
    assert "ran eagerly" in page and HOSTILE_CODE not in page
    assert "compiler error: &lt;script&gt;" in page


def test_big_graphs_start_collapsed(hostile, monkeypatch):
    from thundervis.notebook_ext import data
    w = show(hostile)
    assert not _chain(w.data, w.graph, "forward")["diagram"]["collapsed"]
    assert "cluster_" in _chain(w.data, w.graph, "forward")["diagram"]["svg"]
    monkeypatch.setattr(data, "COLLAPSE_ABOVE", 1)
    d = _chain(show(hostile).data, w.graph, "forward")["diagram"]
    assert d["collapsed"] and "cluster_" not in d["svg"]
    r = w.request({"what": "diagram", "graph": w.graph, "chain": "forward", "collapse": False})
    assert r["ok"] and "cluster_" in r["data"]["svg"]


def test_big_chains_are_sent_when_opened(hostile, monkeypatch):
    from thundervis.notebook_ext import data
    full = show(hostile).data
    monkeypatch.setattr(data, "INLINE_SYMBOLS", 0)
    w = show(hostile)
    assert not _chain(w.data, w.graph, "forward")["lazy"]  # the first view is always there
    lazy = _chain(w.data, w.graph, "backward")
    assert lazy["lazy"] and lazy["lines"] is None and lazy["passes"] == _chain(full, w.graph, "backward")["passes"]
    r = w.request({"what": "chain", "graph": w.graph, "chain": "backward"})
    assert r["ok"]
    eager = _chain(full, w.graph, "backward")
    for key, rows in r["data"]["lines"].items():
        assert [ln[:3] for ln in rows] == [full["lines"][i][:3] for i in eager["lines"][key]]
        infos = [ln[3] for ln in rows]
        assert infos == [full["infos"][full["lines"][i][3]] if full["lines"][i][3] is not None else None
                         for i in eager["lines"][key]]
    assert set(r["data"]["diffs"]) == set(eager["diffs"])
    assert "<" in w._repr_html_()  # the static page still renders
