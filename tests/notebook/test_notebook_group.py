"""The widget on a group of rank recordings (``thundervis.api.show(GROUP)``): the picker's overview,
switching rank, the rank comparison and its cross-rank diffs, the skew table, bad input, and
escaping of hostile group, host and target strings. Groups are built in conftest.py."""
from __future__ import annotations

import html
import json
import os

import pytest

pytest.importorskip("anywidget")

import thundervis.api as tv  # noqa: E402
from thundervis.diff import diff_traces  # noqa: E402
from thundervis.diff.render import side_rows  # noqa: E402
from thundervis.notebook_ext.diff_data import unfolded  # noqa: E402
from thundervis.notebook_ext import DataError, show  # noqa: E402
from thundervis.notebook_ext.group_data import NOT_PROFILED  # noqa: E402
from thundervis.notebook_ext.widget import GroupWidget  # noqa: E402
from thundervis.present.units import format_share, format_skew, format_us  # noqa: E402
from thundervis.recording.group import Group, open_group  # noqa: E402

from group_fixtures import RANK_MEDIAN_MS, SLOW_MS  # noqa: E402
from notebook_helpers import HOSTILE_GROUP, HOSTILE_HOST, HOSTILE_TARGET  # noqa: E402
from notebook_helpers import HtmlTags  # noqa: E402


def _opened_ranks(monkeypatch) -> list:
    opened = []
    real = Group.open_rank

    def open_rank(self, rank=None):
        opened.append(rank)
        return real(self, rank)
    monkeypatch.setattr(Group, "open_rank", open_rank)
    return opened


def test_overview_payload_for_the_rank_picker(profiled_group, monkeypatch):
    group, _ = profiled_group
    opened = _opened_ranks(monkeypatch)
    w = tv.show(group)
    assert isinstance(w, GroupWidget) and w.rank == 0
    assert opened == [0], "only the shown rank's recording is opened"
    assert w._group._comparison is None, "the comparison waits for the Ranks tab"
    g = w.group
    json.dumps(g)
    assert g["kind"] == "group" and g["name"] == "job.tvgroup" and g["path"] == os.path.abspath(group)
    assert g["world_size"] == 5 and g["absent"] == [4] and g["absent_text"] == "4"
    assert g["status"] == "failed"  # a rank never recorded
    assert not g["identical"]
    assert [r["rank"] for r in g["ranks"]] == [0, 1, 2, 3]
    assert [r["variant"] for r in g["ranks"]] == ["A", "A", "B", "C"]
    assert [r["file"] for r in g["ranks"]] == ["rank-00000.tvrec", "rank-00001.tvrank", "rank-00002.tvrec",
                                             "rank-00003.tvrec"]
    assert [r["host"] for r in g["ranks"]] == ["node-a", HOSTILE_HOST, "node-b", "node-c"]
    assert all(r["status"] == "ok" and r["error"] is None and r["missing"] == [] for r in g["ranks"])
    assert [(v["label"], v["ranks_text"]) for v in g["variants"]] == [("A", "0-1"), ("B", "2"), ("C", "3")]
    assert w.data["kind"] == "recording" and w.data["path"].endswith("rank-00000.tvrec")
    assert (w.chain, w.tab) == ("forward", "passes")


def test_rank_switch_keeps_the_position(profiled_group, monkeypatch):
    group, _ = profiled_group
    w = show(group, chain="backward", pass_="claim", compare="dce")
    claim, dce = w.pass_index, w.compare_index
    uid = next(w.data["lines"][i][0] for i in
               next(c for c in w.data["graphs"][0]["chains"] if c["kind"] == "backward")["lines"][str(claim)]
               if w.data["lines"][i][0])
    w.selected_uid = uid
    first = w._source.rec
    opened = _opened_ranks(monkeypatch)
    w.rank = 1  # the same variant, packed as a .tvrank: everything stays
    assert opened == [1] and w.rank_error == ""
    assert w.data["path"].endswith("rank-00001.tvrank")
    assert (w.graph, w.chain, w.pass_index, w.compare_index, w.selected_uid) == (0, "backward", claim, dce, uid)
    with pytest.raises(Exception):
        first.run()  # the rank no longer shown was closed
    w.rank = 2  # another variant: same graph, chain and passes, the symbol selection cleared
    assert w.data["path"].endswith("rank-00002.tvrec")
    assert (w.graph, w.chain, w.pass_index, w.compare_index, w.selected_uid) == (0, "backward", claim, dce, "")
    w.rank = 4  # absent: one sentence, and the widget stays on rank 2
    assert w.rank == 2 and "no rank 4" in w.rank_error and "0, 1, 2, 3" in w.rank_error
    assert w.data["path"].endswith("rank-00002.tvrec")
    w.rank = 0
    assert w.rank_error == "" and w.data["path"].endswith("rank-00000.tvrec")
    assert w.request({"what": "diff", "graph": 0, "chain": "backward", "a": dce, "b": claim})["ok"]


def test_comparison_payload_variants_and_differing_lines(profiled_group):
    group, _ = profiled_group
    w = show(group, tab="ranks")
    assert w.tab == "ranks"
    r = w.request({"what": "ranks"})
    assert r["ok"], r
    comp = r["data"]
    json.dumps(comp)
    assert comp["kind"] == "ranks" and not comp["identical"] and comp["reference_rank"] == 0
    assert comp["n_ranks"] == 4
    assert [(v["label"], v["ranks"], v["reference"]) for v in comp["variants"]] == \
        [("A", [0, 1], True), ("B", [2], False), ("C", [3], False)]
    assert comp["variants"][0]["differences"] == [] and comp["unreadable"] == []
    sig, shapes = comp["variants"][1], comp["variants"][2]
    assert sig["n_differences"] == len(sig["differences"]) > 0
    assert {d["chain"] for d in sig["differences"]} >= {"forward", "backward"}
    assert w.request({"what": "ranks"})["data"] is comp  # computed once

    # the first differing pass of the forward chain: tanh on the reference, sigmoid on rank 2
    d = next(x for x in sig["differences"] if x["chain"] == "forward" and x["only"] is None)
    assert d["counts"] and d["counts"]["unchanged"] < sum(d["counts"].values())
    r = w.request({"what": "rank_diff", "rank": 2, "graph": d["graph"], "chain": "forward", "index": d["index"]})
    assert r["ok"], r
    diff = r["data"]
    assert diff["printed_diff"] is None and (diff["reference_rank"], diff["rank"]) == (0, 2)
    assert diff["before"].startswith("rank 0 · graph 0 forward") and diff["after"].startswith("rank 2 · graph 0 forward")
    g = open_group(group)
    with g.open_rank(0) as a, g.open_rank(2) as b:
        expected = side_rows(diff_traces(a.pass_trace(0, "forward", d["index"]), b.pass_trace(0, "forward", d["index"])))
    assert [row[0] for row in unfolded(diff["rows"])] == [x.status for x in expected]
    left = [row[1][2] for row in unfolded(diff["rows"]) if row[0] != "unchanged" and row[1]]
    right = [row[2][2] for row in unfolded(diff["rows"]) if row[0] != "unchanged" and row[2]]
    assert any("tanh" in t for t in left) and any("sigmoid" in t for t in right), (left, right)

    # rank 3 differs only in shapes: diff lines read as the printed trace (metadata included), so
    # the diff itself shows where
    d = next(x for x in shapes["differences"] if x["chain"] == "forward")
    assert d["counts"] and d["counts"]["changed"] > 0
    r = w.request({"what": "rank_diff", "rank": "3", "graph": 0, "chain": "forward", "index": d["index"]})
    rows = [row for row in unfolded(r["data"]["rows"]) if row[0] == "changed"]
    assert any("[4, 8]" in row[1][2] and "[6, 8]" in row[2][2] for row in rows)
    assert r["data"]["printed_diff"] is None

    r = w.request({"what": "rank_diff", "rank": 2, "graph": 0, "chain": "forward", "index": 99})
    assert not r["ok"] and "no pass 99" in r["error"]
    assert not w.request({"what": "rank_diff", "rank": "two", "graph": 0, "chain": "forward", "index": 0})["ok"]


def test_skew_table_from_profiled_ranks(profiled_group):
    group, (graph, chain, name) = profiled_group
    comp = show(group).request({"what": "ranks"})["data"]
    assert comp["skew_note"] is None and comp["n_skews"] == len(comp["skew"]) > 1
    skews = [k["skew"] for k in comp["skew"]]
    assert skews == sorted(skews, reverse=True)
    top = comp["skew"][0]
    assert (top["graph"], top["chain"], top["name"]) == (graph, chain, name)
    assert (top["slowest_rank"], top["fastest_rank"]) == (1, 0)
    assert top["slowest_us"] == pytest.approx(SLOW_MS * 1000) and top["fastest_us"] == pytest.approx(RANK_MEDIAN_MS[0] * 1000)
    assert top["skew"] == pytest.approx(SLOW_MS / RANK_MEDIAN_MS[0])
    for k in comp["skew"][1:]:  # every other kernel: the synthetic per-rank medians
        assert (k["slowest_rank"], k["fastest_rank"]) == (1, 0)
        assert k["skew"] == pytest.approx(RANK_MEDIAN_MS[1] / RANK_MEDIAN_MS[0])
        assert k["n_ranks"] >= 2 and k["slowest_us"] >= k["median_us"] >= k["fastest_us"]
    for k in comp["skew"]:  # the cells as present.units writes them (the CLI and the TUI too)
        assert k["skew_text"] == format_skew(k["skew"]) and k["median_text"] == format_us(k["median_us"])
        assert (k["slowest_text"], k["fastest_text"]) == (format_us(k["slowest_us"]), format_us(k["fastest_us"]))
    assert top["skew_text"] == "10.00x" and top["slowest_text"] == "100.0 µs"


def test_source_shares_go_out_as_present_text(profiled_group):
    """The Source tab's time shares arrive as present.units.format_share text."""
    rank0 = os.path.join(os.path.dirname(profiled_group[0]), "rank0.tvrec")
    lines = show(rank0).request({"what": "source"})["data"]["lines"]
    shared = [row for row in lines if row["share"] is not None]
    assert shared and all(row["share_text"] == format_share(row["share"]) for row in shared)
    assert all(row["share_text"] == "" for row in lines if row["share"] is None)


def test_unprofiled_group_says_how_and_escapes_hostile_strings(hostile_group):
    w = show(hostile_group, rank=1)
    assert w.rank == 1 and w.group["identical"] and w.group["status"] == "ok"
    assert w.group["name"] == HOSTILE_GROUP and w.group["target"] == f"train.py {HOSTILE_TARGET}"
    assert w.group["ranks"][1]["host"] == HOSTILE_HOST
    comp = w.request({"what": "ranks"})["data"]
    assert comp["identical"] and comp["skew"] == [] and comp["skew_note"] == NOT_PROFILED
    assert "--profile" in NOT_PROFILED
    page = w._repr_html_()
    parser = HtmlTags()
    parser.feed(page)
    assert parser.handlers == []
    text = "".join(parser.texts)
    assert HOSTILE_GROUP in text and "shows rank 1 only" in text and "traces identical on every rank" in text
    assert HOSTILE_GROUP not in page and html.escape(HOSTILE_GROUP) in page
    assert "<img src=x" not in page and "<script>" not in page


def test_bad_input_is_one_sentence(profiled_group, hostile, tmp_path):
    group, _ = profiled_group
    (tmp_path / "empty.tvgroup").mkdir()
    with pytest.raises(DataError, match="without rank recordings"):
        show(tmp_path / "empty.tvgroup")
    with pytest.raises(DataError, match=r"has no rank 7 \(recorded ranks: 0, 1, 2, 3\)"):
        show(group, rank=7)
    with pytest.raises(DataError, match="rank= applies to a group folder"):
        show(hostile, rank=1)
    with pytest.raises(DataError, match="ranks tab is for a group folder"):
        show(hostile, tab="ranks")
    with pytest.raises(DataError, match="no pass 'nope'"):
        show(group, pass_="nope")
    assert show(open_group(group), rank=3).data["path"].endswith("rank-00003.tvrec")


def test_a_rank_that_cannot_be_shown_leaves_the_widget_where_it_was(profiled_group, tmp_path):
    import shutil
    from thundervis.recording.group_store import STORE_NAME
    group = str(tmp_path / "copy.tvgroup")
    shutil.copytree(profiled_group[0], group)
    w = show(group, rank=0)
    (tmp_path / "copy.tvgroup" / "rank-00003.tvrec").write_bytes(b"garbage, not a recording " * 40)
    w.rank = 3
    assert w.rank == 0 and "rank-00003.tvrec" in w.rank_error and w.data["path"].endswith("rank-00000.tvrec")
    os.remove(os.path.join(group, STORE_NAME))  # the traces every rank shares
    w.rank = 2
    assert w.rank == 0 and STORE_NAME in w.rank_error and "whole group folder" in w.rank_error
    assert w.data["path"].endswith("rank-00000.tvrec")
