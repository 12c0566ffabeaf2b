"""The widget's asm panel, Python side: payload kernels list their build targets, the ``asm``
request answers a stage's rows with line provenance (text kept as data), bad requests are one
sentence, and the front end ships the panel."""
from __future__ import annotations

import pytest

pytest.importorskip("anywidget")

from roofline_fixtures import SASS, SASS_LINES, TRITON_SOURCE, roofline_recording  # noqa: E402

from thundervis.notebook_ext import RecordingData  # noqa: E402
from thundervis.notebook_ext.widget import _answer, front_end  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402


def test_payload_lists_build_targets_and_asm_answers_rows(tmp_path):
    path = roofline_recording(str(tmp_path / "r.tvrec"), build=True)
    with open_recording(path) as rec:
        data = RecordingData(rec)
        (k,) = data.payload(with_diagrams=False)["graphs"][0]["kernels"]
        assert k["asm_targets"] == ["sm_90"]
        assert (k["tag"], k["label"]) == ("triton sm_90", "fw_fusion_0 [triton sm_90]")  # present.status.kernel_label
        d = data.handle({"what": "asm", "graph": 0, "chain": "forward", "kernel": "fw_fusion_0"})
        assert (d["kernel"], d["target"], d["stage"], d["targets"]) == ("fw_fusion_0", "sm_90", "sass", ["sm_90"])
        assert d["stages"] == ["ttir", "ttgir", "llir", "ptx", "sass"] and d["truncated"] == 0
        assert d["build"] == {"registers": 32, "spills": 0, "shared_bytes": 0, "occupancy": 1.0,
                              "summary_text": "32 regs · 0 spills · no smem · occupancy 100% · grid 16"}  # like ls
        assert d["source"] == TRITON_SOURCE.splitlines() and d["line_uids"] == {"3": "f3", "4": "f4"}
        assert [r[1] for r in d["rows"]] == SASS_LINES
        assert d["rows"][2][2:] == ["f3", "prims.add", "model.py:7"] and d["rows"][3][2:] == ["f4", "prims.tanh", "model.py:8"]
        assert d["rows"][0][2:] == [None, None, None]
        assert d["members"]["f4"] == {"sym": "prims.tanh", "where": "model.py:8"}
        # Recorded text is data: markup kept literally, control characters made visible.
        assert "[bold red]pwned[/] <script>x()</script>" in d["rows"][4][0] and "\x1b" not in d["rows"][4][0]
        assert len(d["rows"]) == len(SASS)
        ptx = data.handle({"what": "asm", "graph": 0, "chain": "forward", "kernel": "fw_fusion_0", "stage": "ptx",
                           "target": "sm_90"})
        assert [r[1] for r in ptx["rows"]] == [3, 3]
        for bad, msg in (({"stage": "llir"}, "has no llir stage recorded"), ({"target": "sm_80"}, "has no sm_80 build"),
                         ({"kernel": "nope"}, "nope"), ({"stage": "<b>"}, "unknown stage")):
            req = {"what": "asm", "graph": 0, "chain": "forward", "kernel": "fw_fusion_0", **bad}
            r = _answer(data.handle, req)
            assert not r["ok"] and msg in r["error"] and "Traceback" not in r["error"] and "traceback" not in r


def test_a_run_without_targets_has_no_asm(tmp_path):
    path = roofline_recording(str(tmp_path / "r.tvrec"))
    with open_recording(path) as rec:
        data = RecordingData(rec)
        (k,) = data.payload(with_diagrams=False)["graphs"][0]["kernels"]
        assert k["asm_targets"] == []
        r = _answer(data.handle, {"what": "asm", "graph": 0, "chain": "forward", "kernel": "fw_fusion_0"})
        assert not r["ok"] and "was not compiled for any GPU target" in r["error"]


def test_the_front_end_draws_asm_text_as_text():
    js = front_end()
    start = js.index("function asmPanel(")
    panel = js[start:js.index("\nfunction ", start + 10) if "\nfunction " in js[start + 10:] else len(js)]
    assert 'asmPanel(ask, model.get("graph"), c.kind, k.name, k.asm_targets)' in js
    assert "innerHTML" not in panel and "insertAdjacentHTML" not in panel
    assert '{ text: row[0] }' in panel and '{ text: t }' in panel and "setText(info, " in panel
    assert "textContent" not in panel  # the info line's text goes through visible() (issue 41)
