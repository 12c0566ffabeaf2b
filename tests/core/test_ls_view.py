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
