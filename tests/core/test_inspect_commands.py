"""``thundervis ls``, ``show`` and ``lineage`` on recordings."""
from __future__ import annotations

import json
import os

import pytest

from thundervis.recording import SCHEMA_VERSION, lineage_of_uid, open_recording

from core_helpers import line_of, run_cli, write_script
from test_recording_store import _fused_recording


def test_ls_json_structure(recorded, capsys):
    path, script = recorded
    code, out, err = run_cli(capsys, "ls", path, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == SCHEMA_VERSION and doc["run"]["status"] == "ok" and doc["run"]["script"] == script
    assert [g["id"] for g in doc["graphs"]] == [0, 1]
    g0 = doc["graphs"][0]
    assert {"id", "reason", "chains", "fusions"} <= set(g0)
    assert [c["kind"] for c in g0["chains"]] == ["dynamo", "joint", "forward", "backward"]
    with open_recording(path) as rec:
        for chain in g0["chains"]:
            stored = rec.graph(0).chain(chain["kind"]).passes
            assert [(p["index"], p["name"], p["n_symbols"], p["changed"]) for p in chain["passes"]] == \
                [(p.index, p.name, p.n_symbols, p.changed) for p in stored]
            assert all(isinstance(p["ms"], float) and p["ms"] >= 0 for p in chain["passes"])
    assert g0["fusions"] == [] and "size mismatch" in doc["graphs"][1]["reason"]


def test_ls_json_lists_fusions(tmp_path, capsys):
    path = _fused_recording(tmp_path / "k.tvrec")
    code, out, _ = run_cli(capsys, "ls", path, "--json")
    (fusion,) = json.loads(out)["graphs"][0]["fusions"]
    assert (fusion["name"], fusion["executor"], fusion["n_ops"], fusion["sources"]) == \
        ("fw_fusion_0", "triton", 2, ["model.py:3"])
    code, out, _ = run_cli(capsys, "ls", path)
    assert code == 0 and "fusion fw_fusion_0 [triton]" in out


def test_ls_text_lists_chains_and_passes(recorded, capsys):
    code, out, _ = run_cli(capsys, "ls", recorded[0])
    assert code == 0
    assert "status  ok (exit 0)" in out and "graph 1" in out
    assert out.count("codegen") == 4  # forward and backward of two graphs


def test_show_default_index_and_name(recorded, capsys):
    path, _ = recorded
    with open_recording(path) as rec:
        fw = rec.graph(0).chain("forward")
        last = rec.pass_text(0, "forward", fw.passes[-1].index)
        decomposed = rec.pass_text(0, "forward", fw.find_pass("decompose").index)
        bw_cse = rec.pass_text(1, "backward", rec.graph(1).chain("backward").find_pass("cse").index)
    # --signature: the def line and its inputs printed (by default one line, present.signature_fold)
    assert run_cli(capsys, "show", path, "--signature")[1] == last
    assert run_cli(capsys, "show", path, "--signature", "--pass", "decompose")[1] == decomposed
    index = str(fw.find_pass("decompose").index)
    assert run_cli(capsys, "show", path, "--signature", "-p", index)[1] == decomposed
    assert run_cli(capsys, "show", path, "--signature", "-g", "1", "-c", "backward", "-p", "cse")[1] == bw_cse
    code, out, _ = run_cli(capsys, "show", path, "--uids", "-p", "0")
    assert code == 0 and "uid=f0" in out and out.startswith('# graph 0 · forward · after "acquire"')


def test_show_unknown_choices_name_the_valid_ones(recorded, capsys):
    path, _ = recorded
    code, _, err = run_cli(capsys, "show", path, "--pass", "fuse-everything")
    assert code == 2 and "0 acquire" in err and "codegen" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "show", path, "--chain", "sideways")
    assert code == 2 and "forward, backward" in err
    code, _, err = run_cli(capsys, "show", path, "--graph", "7")
    assert code == 2 and "graphs: 0, 1" in err


def test_lineage_of_a_source_line_reaches_forward_and_backward(recorded, capsys):
    path, script = recorded
    line = line_of(script, "LINE_TANH")
    code, out, err = run_cli(capsys, "lineage", path, "--graph", "0", "--source", f"{os.path.basename(script)}:{line}",
                             "--json")
    assert code == 0, err
    (lin,) = json.loads(out)
    chains = {c["chain"]: c for c in lin["chains"]}
    assert {"dynamo", "forward", "backward"} <= set(chains)
    fw, bw = chains["forward"], chains["backward"]
    assert [s["pass_name"] for s in fw["steps"]][0] == "acquire" and fw["steps"][-1]["pass_name"] == "codegen"
    assert any(s["sym"] == "aten.tanh.default" for s in fw["steps"][0]["symbols"])
    assert any(s["sym"] == "aten.tanh_backward.default" for s in bw["steps"][0]["symbols"])
    assert {e["executor"] for e in fw["ends"]} == {"torch"} and bw["ends"]  # the fixture uses torch only
    code, text, _ = run_cli(capsys, "lineage", path, "--source", f"{script}:{line}")
    assert code == 0 and text.count("graph ") >= 2 and "ends in torch" in text  # both graphs


def test_lineage_of_a_uid_links_backward_by_seq_nr(recorded, capsys):
    path, _ = recorded
    with open_recording(path) as rec:
        tanh = next(s for s in rec.symbols(0, "forward", 0) if s.sym == "aten.tanh.default")
        lin = lineage_of_uid(rec, 0, tanh.uid)
    chains = {c.chain: c for c in lin.chains}
    assert chains["forward"].link == "the symbol"
    assert chains["forward"].steps[0].symbols[0].uid == tanh.uid
    assert chains["backward"].link.startswith("seq_nr")
    assert any(s.sym == "aten.tanh_backward.default" for s in chains["backward"].steps[0].symbols)
    code, out, _ = run_cli(capsys, "lineage", path, "--uid", tanh.uid)
    assert code == 0 and f"uid {tanh.uid}" in out and "backward  (via seq_nr" in out


def test_lineage_ends_in_the_kernel(tmp_path, capsys):
    path = _fused_recording(tmp_path / "k.tvrec")
    with open_recording(path) as rec:
        lin = lineage_of_uid(rec, 0, "f0")
    fw = next(c for c in lin.chains if c.chain == "forward")
    assert [st.pass_name for st in fw.steps] == ["acquire", "fuse"]
    assert [s.uid for s in fw.steps[1].symbols] == ["f2"]
    (end,) = fw.ends
    assert end.executor == "triton" and end.kernel.name == "fw_fusion_0"
    assert [s.uid for s in next(c for c in lin.chains if c.chain == "backward").steps[0].symbols] == ["b0"]
    code, out, _ = run_cli(capsys, "lineage", path, "--source", "model.py:3")
    assert code == 0 and "kernel fw_fusion_0 (2 ops)" in out


def test_lineage_bad_queries_exit_2(recorded, capsys):
    path, script = recorded
    for argv, fragment in [(["--uid", "f9999"], "no symbol with uid"),
                           (["--source", "train_small.py:1"], "no symbol"),
                           (["--source", "nonsense"], "FILE:LINE"),
                           ([], "exactly one of")]:
        code, _, err = run_cli(capsys, "lineage", path, *argv)
        assert code == 2 and fragment in err and err.count("\n") == 1, (argv, err)


def test_real_fusion_kernels_are_listed_and_ended_in(tmp_path, capsys):
    """With the default executors, whatever kernels the fusion executors build are in ``ls --json``
    and a fused source line's lineage ends in them."""
    from thundervis.compiler.pipeline import default_executor_names
    if default_executor_names("cpu") == ["torch"]:
        pytest.skip("no fusion executor is available here")
    script = write_script(tmp_path, "fused.py", """
        model(torch.randn(4, 8)).backward()
    """)
    out = tmp_path / "f.tvrec"
    assert run_cli(capsys, "run", "--no-view", "-o", out, script)[0] == 0
    with open_recording(str(out)) as rec:
        kernels = rec.kernels()
    if not kernels:
        pytest.skip("the fusion executors built no kernel for this model")
    doc = json.loads(run_cli(capsys, "ls", out, "--json")[1])
    listed = [(f["name"], f["executor"], f["n_ops"]) for g in doc["graphs"] for f in g["fusions"]]
    assert listed == [(k.name, k.executor, len(k.ops)) for k in kernels]
    line = line_of(script, "LINE_LOSS")
    lin = json.loads(run_cli(capsys, "lineage", out, "--source", f"fused.py:{line}", "--json")[1])
    ends = [e for c in lin[0]["chains"] for e in c["ends"]]
    assert any(e["kernel"] and e["kernel"]["name"] in {k.name for k in kernels} for e in ends)


def test_damaged_trace_in_a_readable_file_is_one_sentence(tmp_path, recorded, capsys):
    import shutil
    import sqlite3
    path = str(tmp_path / "damaged.tvrec")
    shutil.copyfile(recorded[0], path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE passes SET trace_json = '{\"format\": 1, \"symbols\": 7' WHERE idx = 0")
    conn.commit()
    conn.close()
    code, _, err = run_cli(capsys, "show", path, "-p", "0", "--uids")
    assert code == 2 and "damaged trace" in err and err.count("\n") == 1
