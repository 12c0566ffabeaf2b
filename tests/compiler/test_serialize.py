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
    """A small model compiled with the default executors (Triton kernels generated; without CUDA
    the regions run the fast CPU path): every pass of its chains, fuse included."""
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


def test_encoder_writes_the_documented_format():
    """The one trace encoder against the format written out by hand (tagged values, optional fields
    only when set, proxies in first-use order)."""
    import json

    import torch

    from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
    from thundervis.compiler.serialize import TraceEncoder, trace_from_json, trace_to_dict, trace_to_json

    x, t0 = TensorProxy("x", (2, 3), "float32", "cpu", (3, 1)), TensorProxy("t0", (2,), "float32", "cpu", None)
    sub = BoundSymbol("prims.sum", (x, [1]), {}, t0, "f2", origin=("f1",))
    b = BoundSymbol("aten.sum", (x,), {"dtype": torch.float16, "s": slice(1, None, 2), "e": ..., "f": float("inf"),
                                       "d": torch.device("cpu"), "k": {"a": (1,)}}, (t0, None), "f1",
                    origin=("d1",), seq_nr=4, source=SourceInfo("m.py", 3, "y = x.sum(1)", "m", "forward"),
                    executor="torch", subsymbols=(sub,))
    trace = Trace("forward", (x,), (b,), (t0, 2.5), chain="forward", graph=1, pass_name="p", next_uid=3,
                  next_name=1, meta={"duration_ms": 0.5, "skip": [1]})
    want = {
        "format": 2, "name": "forward", "chain": "forward", "graph": 1, "pass": "p", "next_uid": 3, "next_name": 1,
        "proxies": [{"name": "x", "shape": [2, 3], "dtype": "float32", "device": "cpu", "strides": [3, 1]},
                    {"name": "t0", "shape": [2], "dtype": "float32", "device": "cpu", "strides": None}],
        "inputs": ["x"],
        "symbols": [{
            "sym": "aten.sum", "uid": "f1", "args": {"T": [{"P": "x"}]},
            "kwargs": {"K": {"dtype": {"D": "float16"}, "s": {"S": [1, None, 2]}, "e": {"E": 1},
                             "f": {"F": "inf"}, "d": {"V": "cpu"}, "k": {"K": {"a": {"T": [1]}}}}},
            "outputs": {"T": [{"P": "t0"}, None]}, "origin": ["d1"],
            "source": {"file": "m.py", "line": 3, "code": "y = x.sum(1)", "module": "m", "function": "forward"},
            "seq_nr": 4, "executor": "torch",
            "subsymbols": [{"sym": "prims.sum", "uid": "f2", "args": {"T": [{"P": "x"}, {"L": [1]}]},
                            "kwargs": {"K": {}}, "outputs": {"P": "t0"}, "origin": ["f1"]}]}],
        "outputs": {"T": [{"P": "t0"}, 2.5]},
        "meta": {"duration_ms": 0.5},
    }
    text = trace_to_json(trace)
    assert json.loads(text) == want == trace_to_dict(trace)
    assert trace_to_json(trace_from_json(text)) == text
    enc = TraceEncoder()  # memoised: the same text again, and for a pass that kept the symbol
    assert enc.to_json(trace) == text == enc.to_json(trace)
    assert json.loads(enc.to_json(trace.replace(pass_name="q")))["symbols"] == want["symbols"]
