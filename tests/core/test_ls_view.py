"""``ls`` is one present value (present.ls_view.LsView): ``ls --json`` is its plain form, the text
``ls`` lays out that same value, and the value cannot be changed once built."""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import pytest

from thundervis.commands.ls import view_text
from thundervis.present.ls_view import LsView, frozen, ls_view, plain
from thundervis.recording import open_recording

from core_helpers import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ls_json_and_text_are_the_present_value(recorded, capsys):
    path, _ = recorded
    code, out, _ = run_cli(capsys, "ls", path, "--json")
    assert code == 0
    with open_recording(path) as rec:
        view = ls_view(rec)
    assert isinstance(view, LsView)
    assert json.loads(out) == json.loads(json.dumps(view.as_json()))  # the JSON is the value's plain form
    assert [g["id"] for g in json.loads(out)["graphs"]] == [g.graph.id for g in view.graphs]
    code, text, _ = run_cli(capsys, "ls", path)
    assert code == 0 and text == view_text(view)
    code, brief, _ = run_cli(capsys, "ls", path, "--brief")
    assert brief == view_text(view, passes=False) and len(brief) < len(text)


def test_the_value_is_read_only(recorded):
    path, _ = recorded
    with open_recording(path) as rec:
        view = ls_view(rec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.eager_head = "changed"
    chain = view.graphs[0].chains[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        chain.timed = "1 ms"
    assert isinstance(chain.saved, tuple) and isinstance(view.fallbacks, tuple)
    assert view.memory_peak is not None  # the ledger is recorded: a read-only mapping
    with pytest.raises(TypeError):
        view.memory_peak["line"] = "changed"
    doc = view.as_json()
    doc["memory_peak"]["line"] = "changed"  # the plain form is a copy: the value stays
    assert view.as_json()["memory_peak"]["line"] == view.memory_peak["line"] != "changed"

def test_frozen_and_plain_round_trip():
    doc = {"a": [1, {"b": [2, 3]}], "c": None, "d": "text"}
    f = frozen(doc)
    assert isinstance(f["a"], tuple) and plain(f) == doc
    with pytest.raises(TypeError):
        f["a"][1]["b"] = ()


def test_a_rank_of_a_group_says_which_rank(tmp_path, capsys):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from _synthetic_group import write_group
    group = write_group(str(tmp_path), variants=(0, 1), pack=False)
    code, out, _ = run_cli(capsys, "ls", group, "--rank", "1", "--json")
    assert code == 0
    assert json.loads(out)["rank"] == {"rank": 1, "world_size": 2, "local_rank": 1, "node_rank": 0}
    code, text, _ = run_cli(capsys, "ls", group, "--rank", "1")
    assert "rank    1 of 2 · local rank 1 · node 0" in text.splitlines()


def _group(tmp_path, variants=(0, 1, 0), damaged=()):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from _synthetic_group import write_group
    group = write_group(str(tmp_path), variants=variants, pack=False)
    for rank in damaged:
        name = next(n for n in sorted(os.listdir(group)) if n.startswith(f"rank-{rank:05d}"))
        with open(os.path.join(group, name), "wb") as f:
            f.write(b"not a recording")
    return group


def test_ls_group_json_and_text_are_the_present_value(tmp_path, capsys):
    from thundervis.commands.ls_group import view_text as group_text
    from thundervis.present.group_ls_view import group_ls_view
    from thundervis.recording import open_group
    group = _group(tmp_path)
    view = group_ls_view(open_group(group).overview())
    code, out, _ = run_cli(capsys, "ls", group, "--json")
    assert code == 0 and json.loads(out) == json.loads(json.dumps(view.as_json()))
    code, text, _ = run_cli(capsys, "ls", group)
    assert code == 0 and text == group_text(view)
    doc = json.loads(out)
    assert doc["first_rank"] == 0 and sorted(doc["variant_labels"].values()) == ["A", "B"]
    # rank 2 compiled rank 0's traces: ls points to rank 0, the lowest of its variant (present.variants)
    assert [(r["variant"], r["same_as"]) for r in doc["ranks"]] == [("A", None), ("B", None), ("A", 0)]
    assert text.splitlines()[-3].endswith(f"A {doc['ranks'][0]['fingerprint']} (= rank 0)")


def test_ls_group_names_the_first_readable_rank_or_none(tmp_path, capsys):
    group = _group(tmp_path / "one", variants=(0, 0, 0), damaged=(0,))
    code, out, _ = run_cli(capsys, "ls", group, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["first_rank"] == 1  # present.ranks: the lowest rank that can be read
    assert [r["variant"] for r in doc["ranks"]] == [None, None, None]  # one variant: no labels
    group = _group(tmp_path / "none", variants=(0, 0), damaged=(0, 1))
    code, out, _ = run_cli(capsys, "ls", group, "--json")
    assert code == 0 and json.loads(out)["first_rank"] is None
    code, text, _ = run_cli(capsys, "ls", group)
    assert code == 0 and text.count("unreadable: ") == 2


class _Terminal:
    """stdout that says it is a terminal (the run ends in the viewer, else in ls's text)."""

    def __init__(self, stream):
        self._stream = stream

    def isatty(self):
        return True

    def __getattr__(self, name):
        return getattr(self._stream, name)


def test_run_without_a_viewer_ends_in_the_text_of_the_view_its_summary_read(tmp_path, capsys, monkeypatch):
    from thundervis.cli import main
    from thundervis.commands import run as run_cmd
    monkeypatch.setattr(run_cmd, "open_viewer", lambda path: False)  # no TUI here: ls's text instead
    monkeypatch.setattr(sys, "stdout", _Terminal(sys.stdout))
    script = tmp_path / "train.py"
    script.write_text("import torch\nf = torch.compile(lambda x: (x * 2).sin())\nf(torch.randn(8))\n")
    path = str(tmp_path / "r.tvrec")
    assert main(["run", "--executors", "torch", "--out", path, str(script)]) == 0
    out = capsys.readouterr().out
    with open_recording(path) as rec:
        text = view_text(ls_view(rec), passes=False)
    assert out.endswith(text) and text.startswith("run     ") and "graph 0  compiled" in text
