"""JSON round trip on real traces of both examples (every chain, every pass), and malformed JSON
rejected with :class:`TraceFormatError`."""
from __future__ import annotations

import json

import pytest

from thundervis.compiler.serialize import TraceFormatError, trace_from_json, trace_to_dict, trace_to_json


def _scalar_meta(trace):
    return {k: v for k, v in trace.meta.items() if isinstance(v, (int, float, str, bool))}


@pytest.mark.parametrize("run_name", ["mlp_run", "gpt_run"])
def test_round_trip_every_recorded_trace(request, run_name):
    run = request.getfixturevalue(run_name)
    traces = run.recorder.all_traces()
    chains = {t.chain for t in traces}
    assert {"dynamo", "joint", "forward", "backward"} <= chains
    for t in traces:
        text = trace_to_json(t)
        back = trace_from_json(text)
        assert back.replace(meta={}) == t.replace(meta={}), f"{t.chain}/{t.pass_name}"
        assert back.meta == _scalar_meta(t)
        assert trace_to_json(back) == text  # stable: serializing again gives the same text


@pytest.fixture(scope="module")
def sample(mlp_run) -> dict:
    """A small real trace as a dict: the forward chain after decompose (it has subsymbols)."""
    return trace_to_dict(mlp_run.recorder.traces("forward")["decompose"])


def _broken(d: dict, path: list, value):
    d = json.loads(json.dumps(d))
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return json.dumps(d)


def _first_symbol_with_subsymbols(d):
    return next(i for i, s in enumerate(d["symbols"]) if s.get("subsymbols"))


@pytest.mark.parametrize("case", [
    "bad value tag", "unknown proxy dtype", "unknown dtype constant", "dangling proxy ref",
    "dangling ref in subsymbol", "non-identifier proxy name", "code as proxy name", "bool in shape",
    "wrong format version", "input not a proxy", "symbol without uid", "bad origin", "outputs not a tuple",
    "not json", "not an object", "code as symbol name", "newline in symbol name", "code as uid",
    "fusion flag not a bool", "fusion without members", "fx name of a non-input", "code as fx name",
])
def test_malformed_json_is_rejected(sample, case):
    d = sample
    sub = _first_symbol_with_subsymbols(d)
    text = {
        "bad value tag": lambda: _broken(d, ["symbols", 0, "args"], {"Z": [1]}),
        "unknown proxy dtype": lambda: _broken(d, ["proxies", 0, "dtype"], "float99"),
        "unknown dtype constant": lambda: _broken(d, ["symbols", 0, "kwargs"], {"K": {"dtype": {"D": "os.system"}}}),
        "dangling proxy ref": lambda: _broken(d, ["symbols", 0, "args"], {"T": [{"P": "nowhere"}]}),
        "dangling ref in subsymbol": lambda: _broken(d, ["symbols", sub, "subsymbols", 0, "args"], {"T": [{"P": "t999"}]}),
        "non-identifier proxy name": lambda: _broken(d, ["proxies", 0, "name"], "not a name"),
        "code as proxy name": lambda: _broken(d, ["proxies", 0, "name"], "__import__('os').system('x')"),
        "bool in shape": lambda: _broken(d, ["proxies", 0, "shape"], [True, 2]),
        "wrong format version": lambda: _broken(d, ["format"], 999),
        "input not a proxy": lambda: _broken(d, ["inputs"], ["ghost"]),
        "symbol without uid": lambda: _broken(d, ["symbols", 0, "uid"], None),
        "bad origin": lambda: _broken(d, ["symbols", 0, "origin"], "f0"),
        "outputs not a tuple": lambda: _broken(d, ["outputs"], {"L": []}),
        "code as symbol name": lambda: _broken(d, ["symbols", 0, "sym"], "triton_fusion_0(fd):\n    import os\ndef x"),
        "newline in symbol name": lambda: _broken(d, ["symbols", 0, "sym"], "prims.add\n"),
        "code as uid": lambda: _broken(d, ["symbols", 0, "uid"], "f0; import os"),
        "fusion flag not a bool": lambda: _broken(d, ["symbols", sub, "fusion"], "yes"),
        "fusion without members": lambda: _broken(
            d, ["symbols", next(i for i, s in enumerate(d["symbols"]) if not s.get("subsymbols")), "fusion"], True),
        "fx name of a non-input": lambda: _broken(d, ["fx_names"], {"t0": "primals_1"}),
        "code as fx name": lambda: _broken(d, ["fx_names"], {d["inputs"][0]: "x; import os"}),
        "not json": lambda: "{not json",
        "not an object": lambda: "[1, 2, 3]",
    }[case]()
    with pytest.raises(TraceFormatError):
        trace_from_json(text)


def test_malformed_error_is_a_sentence_not_a_traceback_dump(sample):
    with pytest.raises(TraceFormatError) as exc:
        trace_from_json(_broken(sample, ["symbols", 0, "args"], {"T": [{"P": "nowhere"}]}))
    assert "nowhere" in str(exc.value) and "\n" not in str(exc.value)


@pytest.fixture(scope="module")
def fused_run(recorder_cls):
    """A small model compiled with the default executors (Triton under its interpreter): every
    pass of its chains, fuse included."""
    import torch
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    torch._dynamo.reset()
    reset_graph_ids()
    rec = recorder_cls()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=rec))
    compiled(torch.randn(4, 8)).sum().backward()
    torch._dynamo.reset()
    assert not rec.failures, rec.failures
    return rec


def test_fusion_flag_and_fx_names_round_trip(fused_run):
    fused = fused_run.traces("forward")["fuse"]
    fusions = [b for b in fused.symbols if b.fusion]
    assert fusions and all(b.subsymbols and b.executor for b in fusions)
    back = trace_from_json(trace_to_json(fused))
    assert [b.sym for b in back.symbols if b.fusion] == [b.sym for b in fusions]
    assert back.fx_names == fused.fx_names and fused.fx_names  # readable inputs keep their FX names
    assert set(fused.fx_names) <= {p.name for p in fused.inputs}


def _as_format_1(d: dict) -> dict:
    """What an older recording holds: format 1, no fusion flags, no fx_names."""
    d = json.loads(json.dumps(d))
    d["format"] = 1
    d.pop("fx_names", None)

    def strip(s):
        s.pop("fusion", None)
        for sub in s.get("subsymbols", []):
            strip(sub)
    for s in d["symbols"]:
        strip(s)
    return d


def test_older_traces_get_their_fusion_flags_from_the_kernel_records(fused_run):
    fused = fused_run.traces("forward")["fuse"]
    names = [b.sym for b in fused.symbols if b.fusion]
    old = json.dumps(_as_format_1(trace_to_dict(fused)))
    # from the chain's recorded kernel names (what the reader passes) ...
    assert [b.sym for b in trace_from_json(old, names).symbols if b.fusion] == names
    assert [b.sym for b in trace_from_json(old, lambda: names[:1]).symbols if b.fusion] == names[:1]
    # ... or, without them, by shape: decomposed ATen ops have subsymbols too but are not fusions
    assert [b.sym for b in trace_from_json(old).symbols if b.fusion] == names
    decomposed = trace_from_json(json.dumps(_as_format_1(trace_to_dict(fused_run.traces("forward")["decompose"]))))
    assert any(b.subsymbols for b in decomposed.symbols) and not any(b.fusion for b in decomposed.walk())
