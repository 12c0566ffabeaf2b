"""The widget's Numerics tab: the payload's ``numerics`` rows (worst first), the ``bisect`` request,
and the static HTML section, with recorded strings escaped."""
from __future__ import annotations

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
    assert not r["ok"] and "compiled chain" in r["error"]


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
