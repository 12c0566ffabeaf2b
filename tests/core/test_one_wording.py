"""One fact, one wording: for real runs (default executors, no CUDA: the fast CPU path; Triton
with one kernel made to fail at run time) and for a synthetic group, ``show``/``ls --json``, the TUI's data
and the widget's data say the same thing, fact by fact: kernel names, what ran each kernel
("ran on cpu via torch", device and path), why a kernel fell back, the trace lines' notes, the
default view and the first rank of a group. Each front end is read through its own data layer."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys

import pytest

from core_helpers import run_cli, write_script
from fallback_fixtures import fail_first_launch

pytest.importorskip("textual")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FELL = "launch refused for the wording test"


@pytest.fixture(scope="module", params=["default executors", "a kernel fell back"])
def example_run(request, tmp_path_factory):
    """A run of a small model: with the default executors (no CUDA: every fusion runs on the fast
    CPU path, ``ran on cpu via torch``), or with Triton whose first launch is made to fail (its
    region runs in torch: a ``kernel_fallback`` event). Returns (recording path, the kernel that
    fell back or None)."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("wording")
    script = write_script(folder, "train_wording.py", """
        with torch.no_grad():  # an inference chain: the facts compared are the same for every chain
            for _ in range(2):
                model(torch.randn(4, 8))
    """)
    fell_back = request.param == "a kernel fell back"
    with pytest.MonkeyPatch.context() as mp:
        failed = fail_first_launch(mp, FELL) if fell_back else []
        result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(str(folder), "w.tvrec")),
                            executors=["triton", "torch"] if fell_back else None)
    assert result.exit_code == 0, result
    assert bool(failed) == fell_back
    return result.path, (failed[0] if failed else None)


def _front_ends(path):
    """Return (ls --json document, TUI RecordingData, widget payload) of the recording at ``path``."""
    from thundervis.commands.ls import summary_dict
    from thundervis.notebook_ext.data import RecordingData as WidgetData
    from thundervis.recording import open_recording
    from thundervis.tui.data import open_data
    with open_recording(path) as rec:
        ls = json.loads(json.dumps(summary_dict(rec)))
    with open_recording(path) as rec:
        payload = WidgetData(rec).payload(with_diagrams=False)
    return ls, open_data(path), payload


def test_kernels_ran_on_and_fallbacks_read_the_same_everywhere(example_run):
    path, failed = example_run
    ls, tui, payload = _front_ends(path)
    try:
        cli = {(f["name"], f["ran_on"]["text"] if f["ran_on"] else "", f["ran_in_torch"] or "", f["label"],
                f["sources_cell"]) for g in ls["graphs"] for f in g["fusions"]}
        tui_rows = {(k.name, k.ran_on, k.fallback or "", k.label, k.sources_cell) for k in tui.overview().kernels}
        widget = {(k["name"], k["ran_on"], k["fallback"] or "", k["label"], k["sources_cell"])
                  for g in payload["graphs"] for k in g["kernels"]}
        # how the run ended (present.run_status): ls's status line, the TUI's and the widget's header
        assert ls["run_status"] == tui.overview().run_status.as_json() == payload["run_status"]
        assert ls["run_status"]["text"] == "ok (exit 0)" and ls["run_status"]["no_graph"] == ""
    finally:
        tui.close()
    assert cli and cli == tui_rows == widget
    ran_on = {r[1] for r in cli}
    if failed is None:  # device and path, worded once (present.status.ran_on_text)
        assert ran_on == {"ran on cpu via torch"}
    else:  # the launch that was made to fail: its reason, the same in every view
        (reason,) = {r[2] for r in cli if r[0] == failed}
        assert FELL in reason
        (mark,) = {k["fallback_text"] for g in payload["graphs"] for k in g["kernels"] if k["name"] == failed}
        assert mark == f"ran in torch at run time: {reason}"


def test_trace_notes_are_shows(example_run, capsys):
    """Every line ``show`` prints with a note (``ran on cpu via torch``, ``ran in torch at run
    time: ...``) is a line of the TUI's and of the widget's trace, word for word."""
    from thundervis.present.default_view import default_view
    path, failed = example_run
    ls, tui, payload = _front_ends(path)
    try:
        dv = default_view(tui.overview().graphs)
        tui_lines = [ln.text for ln in tui.trace_lines(dv.graph, dv.chain, dv.pass_index)]
    finally:
        tui.close()
    code, out, _ = run_cli(capsys, "show", path, "--plain", "--graph", dv.graph, "--chain", dv.chain)
    assert code == 0
    noted = [ln for ln in out.splitlines() if "ran on " in ln or "ran in torch at run time" in ln]
    if failed is None:
        assert any("ran on cpu via torch" in ln for ln in noted)
    else:
        assert any(f"{failed}(" in ln and "ran in torch at run time: " in ln and FELL in ln for ln in noted)
    assert noted == [ln for ln in tui_lines if ln in noted]  # the TUI's lines, in show's order
    g = next(g for g in payload["graphs"] if g["id"] == dv.graph)
    c = next(c for c in g["chains"] if c["kind"] == dv.chain)
    shown = next(q for q in c["passes"] if q["index"] == dv.pass_index)
    held = shown["same_as"] if shown["same_as"] is not None else shown["index"]  # an unchanged pass: sent once
    rows = [payload["lines"][i] for i in c["lines"][str(held)]]
    widget_lines = [r[2] for r in rows]
    assert noted == [ln for ln in widget_lines if ln in noted]


def test_default_view_is_one_choice(example_run, capsys):
    """``show`` without options, the TUI's first view and the widget's first view open the same
    graph, chain and pass (present.default_view)."""
    from thundervis.present.selection import select
    from thundervis.recording import open_recording
    from thundervis.tui.view_state import ViewState, settle
    path, _ = example_run
    ls, tui, payload = _front_ends(path)
    try:
        state = settle(ViewState(), tui.overview())
    finally:
        tui.close()
    with open_recording(path) as rec:
        chosen = select(rec.graphs())  # what show, dot and diff resolve no options to
        g, c, p = chosen.graph, chosen.chain, chosen.pass_
    widget_graph = next(x for x in payload["graphs"] if x["id"] == payload["default_graph"])
    widget_chain = next(x for x in widget_graph["chains"] if x["kind"] == widget_graph["default_chain"])
    assert (g.id, c.kind, p.index) == (state.graph, state.chain, state.index) == \
        (widget_graph["id"], widget_chain["kind"], widget_chain["default_pass"])


def test_which_pass_rules_are_one_choice(example_run):
    """The passes the TUI opens (a source line's ops, a live run followed to its last pass) and the
    one the widget's diagram draws and its Source tab jumps to come from present.default_view, per
    chain: the TUI's navigation and the widget's payload agree."""
    from thundervis.present.default_view import diagram_pass, search_target
    from thundervis.tui.navigation import following
    from thundervis.tui.view_state import ViewState
    path, _ = example_run
    _, tui, payload = _front_ends(path)
    try:
        ov = tui.overview()
    finally:
        tui.close()
    chains = [(g, c) for g in ov.graphs for c in g.chains if c.passes]
    assert chains
    for g, c in chains:
        widget = next(x for x in next(y for y in payload["graphs"] if y["id"] == g.id)["chains"]
                      if x["kind"] == c.kind)
        ops_at = search_target(ov.graphs, g.id, c.kind)  # the TUI's show_ops: a source line's ops
        assert widget["diagram_pass"] == diagram_pass(c) == ops_at.pass_index == widget["default_pass"]
        # a live run: a view on the last pass before the chain grew follows it to the new last pass
        before = dataclasses.replace(c, passes=c.passes[:-1]) if len(c.passes) > 1 else None
        if before is not None:
            on_last = ViewState(graph=g.id, chain=c.kind, index=before.passes[-1].index)
            assert following(on_last, before, ov).index == diagram_pass(c)


@pytest.fixture()
def group_without_rank_0(tmp_path):
    """A synthetic group of 3 ranks whose rank 0 file is damaged: the first rank is 1 everywhere."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from _synthetic_group import write_group
    group = write_group(str(tmp_path), variants=(0, 1, 0), pack=False)
    rank0 = next(os.path.join(group, n) for n in sorted(os.listdir(group)) if n.startswith("rank-00000"))
    with open(rank0, "wb") as f:
        f.write(b"not a recording")
    return group


def test_first_rank_is_one_choice(group_without_rank_0, capsys):
    from thundervis.commands.ls import readable
    from thundervis.notebook_ext.group_data import GroupData as WidgetGroup
    from thundervis.present.ranks import first_rank
    from thundervis.recording import open_group
    from thundervis.tui.group_data import open_group_data
    group = group_without_rank_0
    tui = open_group_data(group)
    try:
        tui_rank, data = tui.start()
        tui_path = data.path
    finally:
        tui.close()
    widget_rank = WidgetGroup(open_group(group)).first_rank()
    with readable(group) as rec:  # show, ls, dot on a group folder without --rank
        cli_path = rec.path
    assert tui_rank == widget_rank == first_rank(open_group(group).overview()) == 1
    assert os.path.samefile(cli_path, tui_path)
    code, out, _ = run_cli(capsys, "show", group, "--plain")
    code1, out1, _ = run_cli(capsys, "show", group, "--rank", "1", "--plain")
    assert code == code1 == 0 and out == out1


def test_a_group_with_no_readable_rank_is_one_sentence(group_without_rank_0, capsys):
    for name in os.listdir(group_without_rank_0):
        if name.startswith("rank-"):
            with open(os.path.join(group_without_rank_0, name), "wb") as f:
                f.write(b"not a recording")
    code, out, err = run_cli(capsys, "show", group_without_rank_0)
    assert code == 2 and "Traceback" not in err and "can be read (rank 0" in err
    shutil.rmtree(group_without_rank_0)


def test_lineage_words_a_fallback_as_the_trace_does(example_run, capsys):
    """``thundervis lineage`` of the line whose kernel fell back says it in the trace note's words."""
    path, failed = example_run
    if failed is None:
        pytest.skip("no kernel fell back in this run")
    from thundervis.present.kernel_rows import kernel_table
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        (row,) = [r for r in kernel_table(rec) if r.name == failed]
    line = next(s for s in row.source_lines)  # file.py:LINE of a line the kernel covers
    code, out, _ = run_cli(capsys, "lineage", path, "--source", line)
    assert code == 0 and row.fallback_text.startswith("ran in torch at run time: ") and row.fallback_text in out
