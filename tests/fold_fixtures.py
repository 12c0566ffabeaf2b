"""A recording of a model of repeated identical layers (their kernels fold), for the fold tests of
the core, the TUI and the widget."""
from __future__ import annotations

import os

LAYERS = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class Widen(nn.Module):
    def __init__(self, d, e):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, e)

    def forward(self, x):
        return torch.tanh(self.fc(self.norm(x)))


class Model(nn.Module):
    def __init__(self, n, d=16, widths=None):
        super().__init__()
        self.layers = nn.ModuleList(Block(d) for _ in range(n)) if widths is None else \
            nn.ModuleList(Widen(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()


model = torch.compile(Model(LAYERS_N, widths=WIDTHS), backend="thundervis")
model(torch.randn(4, 16)).backward()
"""


_RECORDED: dict = {}  # (layers, widths) -> the first recording this process made of them


def record_layers(folder, layers: int, widths: tuple = None) -> str:
    """Record a training step of ``layers`` equal blocks (default executors) into ``folder``; return
    its path. ``widths``: instead, one block per step from each width to the next (no two equal).
    A model this process recorded before is copied, not run again (the fold tests of the core, the
    TUI and the widget all read the 6-layer one); each caller gets its own file."""
    import shutil
    from thundervis.runner import check_output, run_target
    name = f"layers{layers}" + ("_" + "_".join(map(str, widths)) if widths else "")
    out = check_output(os.path.join(str(folder), f"{name}.tvrec"))
    first = _RECORDED.get((layers, widths))
    if first is not None and os.path.exists(first):
        shutil.copyfile(first, out)
        return out
    script = os.path.join(str(folder), f"{name}.py")
    with open(script, "w") as f:
        f.write(LAYERS.replace("LAYERS_N", str(layers)).replace("WIDTHS", repr(list(widths)) if widths else "None"))
    result = run_target(script=script, module=None, args=[], out=out)
    assert result.exit_code == 0, result
    _RECORDED[(layers, widths)] = result.path
    return result.path


def write_layer_trace_recording(path: str, layers: int = 6, odd: int = -1) -> str:
    """Write a synthetic recording (fixed durations, no paths or times on screen: snapshot tests)
    of a forward chain of ``layers`` equal blocks ``model.layers.N`` (a matmul, an add, a tanh
    each) between an embedding and a head, through two passes; return ``path``. Layer ``odd``
    (none by default) differs from the others in its tanh's shape only."""
    from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
    from thundervis.recording import RecordingObserver

    def t(name, shape=(8, 64)):
        return TensorProxy(name, shape, "float32", "cpu", (shape[1], 1))

    x, syms, n = t("x"), [], 0
    weights = [t(f"w{i}", (64, 64)) for i in range(layers)]

    def op(sym, args, module, code, line, shape=(8, 64)):
        nonlocal n
        out = t(f"t{n}", shape)
        syms.append(BoundSymbol(sym, args, {}, out, f"f{n}", source=SourceInfo("model.py", line, code, module),
                                seq_nr=n, aten=sym))
        n += 1
        return out

    h = op("aten.mul.Tensor", (x, 2.0), "model.embed", "h = self.embed(x)", 20)
    for i in range(layers):
        y = op("aten.mm.default", (h, weights[i]), f"model.layers.{i}.fc", "y = self.fc(h)", 11)
        y = op("aten.add.Tensor", (y, h), f"model.layers.{i}", "y = y + h", 12)
        h = op("aten.tanh.default", (y,), f"model.layers.{i}", "return torch.tanh(y)", 13,
               (8, 32) if i == odd else (8, 64))
    out = op("aten.sum.default", (h,), "model.head", "return self.head(h).sum()", 22)
    trace = Trace(name="forward", inputs=(x, *weights), symbols=tuple(syms), outputs=(out,), chain="forward",
                  next_uid=n, next_name=n)
    obs = RecordingObserver(path)
    try:
        obs.start_run(script="model.py", module=None, argv=["model.py"], cwd="/work", executors=["torch"])
        obs.graph_started(0, {"n_inputs": 1 + layers, "n_nodes": len(syms), "reason": "first call"})
        obs.pass_done(0, "forward", 0, "acquire", trace.replace(pass_name="acquire"), 0.0012, True)
        obs.pass_done(0, "forward", 1, "dce", trace.replace(pass_name="dce"), 0.0003, False)
        obs.graph_finished(0, 0.5)
        obs.finish_run("ok", 0, None)
    finally:
        obs.close()
    return path


def write_layer_diff_recording(path: str, layers: int = 6) -> str:
    """Write a synthetic recording (fixed durations: snapshot tests) of a forward chain of
    ``layers`` equal blocks ``model.layers.N`` (a matmul, an add, a tanh each) between an embedding
    and a head, through ``acquire`` and ``claim``, which claims every layer's tanh for triton (the
    same change in each layer: a pass diff whose layers fold); return ``path``."""
    from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace
    from thundervis.recording import RecordingObserver

    def t(name, shape=(8, 64)):
        return TensorProxy(name, shape, "float32", "cpu", (shape[1], 1))

    def trace(claimed: bool, name: str):
        x, syms = t("x"), []
        weights = [t(f"w{i}", (64, 64)) for i in range(layers)]

        def op(sym, args, module, code, line, executor=None):
            n = len(syms)
            out = t(f"t{n}")
            syms.append(BoundSymbol(sym, args, {}, out, f"f{n}", source=SourceInfo("model.py", line, code, module),
                                    seq_nr=n, aten=sym, executor=executor))
            return out
        h = op("aten.mul.Tensor", (x, 2.0), "model.embed", "h = self.embed(x)", 20)
        for i in range(layers):
            y = op("aten.mm.default", (h, weights[i]), f"model.layers.{i}.fc", "y = self.fc(h)", 11)
            y = op("aten.add.Tensor", (y, h), f"model.layers.{i}", "y = y + h", 12)
            h = op("aten.tanh.default", (y,), f"model.layers.{i}", "return torch.tanh(y)", 13,
                   "triton" if claimed else None)
        out = op("aten.sum.default", (h,), "model.head", "return self.head(h).sum()", 22)
        return Trace(name="forward", inputs=(x, *weights), symbols=tuple(syms), outputs=(out,), chain="forward",
                     next_uid=len(syms), next_name=len(syms), pass_name=name)

    obs = RecordingObserver(path)
    try:
        obs.start_run(script="model.py", module=None, argv=["model.py"], cwd="/work", executors=["torch"])
        obs.graph_started(0, {"n_inputs": 1 + layers, "n_nodes": 2 + 3 * layers, "reason": "first call"})
        obs.pass_done(0, "forward", 0, "acquire", trace(False, "acquire"), 0.0012, True)
        obs.pass_done(0, "forward", 1, "claim", trace(True, "claim"), 0.0003, True)
        obs.graph_finished(0, 0.5)
        obs.finish_run("ok", 0, None)
    finally:
        obs.close()
    return path
