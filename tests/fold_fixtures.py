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


class Model(nn.Module):
    def __init__(self, n, d=16):
        super().__init__()
        self.layers = nn.ModuleList(Block(d) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x.sum()


model = torch.compile(Model(LAYERS_N), backend="thundervis")
model(torch.randn(4, 16)).backward()
"""


def record_layers(folder, layers: int) -> str:
    """Record a training step of ``layers`` equal blocks (default executors) into ``folder``; return its path."""
    from thundervis.runner import check_output, run_target
    script = os.path.join(str(folder), f"layers{layers}.py")
    with open(script, "w") as f:
        f.write(LAYERS.replace("LAYERS_N", str(layers)))
    out = check_output(os.path.join(str(folder), f"layers{layers}.tvrec"))
    result = run_target(script=script, module=None, args=[], out=out)
    assert result.exit_code == 0, result
    return result.path
