"""A conv + BatchNorm block for the compiler's tests, its conv and BatchNorm optionally under
activation checkpointing: an input AOTAutograd mutates after the forward (the running statistics)
that a checkpointed forward saves for backward, and floats Dynamo may pass as 0-d tensors
(BatchNorm's eps and momentum, a dropout's p, here 0 so that results stay deterministic)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class CheckpointedBlock(torch.nn.Module):
    def __init__(self, checkpointed: bool = True):
        super().__init__()
        self.checkpointed = checkpointed
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.drop = torch.nn.Dropout(0.0)
        self.fc = torch.nn.Linear(8, 4)

    def inner(self, x):
        return F.relu(self.bn(self.conv(x)))

    def forward(self, x):
        h = checkpoint(self.inner, x, use_reentrant=False) if self.checkpointed else self.inner(x)
        return self.fc(self.drop(h.mean((2, 3))))


def train_like_eager(compiled, model: torch.nn.Module, ref: torch.nn.Module, inputs) -> None:
    """Run one training step per input through ``compiled`` (a compiled ``model``) and through
    ``ref`` (eager, same weights), asserting after each that the losses, every gradient and the
    BatchNorm running statistics agree; gradients are cleared between steps."""
    for x in inputs:
        loss, expected = compiled(x).square().mean(), ref(x).square().mean()
        loss.backward()
        expected.backward()
        torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
            p.grad = q.grad = None
        torch.testing.assert_close(model.bn.running_mean, ref.bn.running_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(model.bn.running_var, ref.bn.running_var, rtol=1e-5, atol=1e-6)
