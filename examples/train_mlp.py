"""Train a small MLP classifier on synthetic data for a few steps, compiled with ``torch.compile``.

Plain PyTorch: ``python examples/train_mlp.py`` compiles with torch's default backend (Inductor),
``thundervis run examples/train_mlp.py`` routes the same ``torch.compile(model)`` call through
thundervis, and ``--backend thundervis`` asks for it explicitly. ``--eager`` runs without compiling.
Each step prints one parseable line, ``step N loss X.XXXXXX`` (steps counted from 0).

Tests and benchmarks import :func:`build` and :func:`train` from this file. The training loop and
the command line (its options and compile choice) are ``train_gpt.py``'s, imported from beside this
file (copy the two files together).
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:  # run as a script, this folder is already there; loaded by path, it may not be
    sys.path.insert(0, _HERE)
from train_gpt import compile_fn_for, example_parser, train as train_loop  # noqa: E402

IN_FEATURES, HIDDEN, CLASSES = 16, 64, 4


class MLP(nn.Module):
    """Three linear layers with tanh / ReLU in between and a LayerNorm: logits for ``CLASSES``."""

    def __init__(self, in_features: int = IN_FEATURES, hidden: int = HIDDEN, classes: int = CLASSES):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(x))
        h = self.norm(h)
        h = F.relu(self.fc2(h))
        return self.fc3(h)


def build(seed: int = 0, batches: int = 8, batch_size: int = 32) -> tuple[nn.Module, list]:
    """Return (model, batches): a freshly initialised MLP and a list of (inputs, labels) batches.

    Everything is drawn from ``seed``, so two calls with the same seed give identical models and data.
    Labels come from a fixed random linear "teacher", so the task is learnable.
    """
    torch.manual_seed(seed)
    model = MLP()
    gen = torch.Generator().manual_seed(seed + 1)
    teacher = torch.randn(IN_FEATURES, CLASSES, generator=gen)
    data = []
    for _ in range(batches):
        x = torch.randn(batch_size, IN_FEATURES, generator=gen)
        data.append((x, (x @ teacher).argmax(dim=1)))
    return model, data


def train(model: nn.Module, batches: Sequence, steps: int, compile_fn: Optional[Callable] = None,
          lr: float = 1e-2, log: Optional[Callable[[str], None]] = None) -> list[float]:
    """Train ``model`` for ``steps`` AdamW steps over ``batches`` (cycled) with cross-entropy; return
    the loss per step (the training loop of ``train_gpt.py``).

    ``compile_fn(model)`` returns the callable to run (None: eager). ``log`` receives one
    ``step N loss X`` line per step.
    """
    return train_loop(model, batches, steps, compile_fn, lr=lr, log=log,
                      loss_of=lambda run, x, y: F.cross_entropy(run(x), y))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the command line, train, print one line per step; return the exit code."""
    args = example_parser(__doc__.splitlines()[0], steps=20).parse_args(argv)
    model, batches = build(args.seed)
    train(model, batches, args.steps, compile_fn_for(args.eager, args.backend), log=print)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
