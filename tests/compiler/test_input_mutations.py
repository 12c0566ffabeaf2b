"""Inputs AOTAutograd mutates after the forward (BatchNorm's running statistics) while the forward
also saves them for backward (a checkpointed region recomputes from them): training goes on and
matches eager, with the default executors."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids

from checkpoint_block import CheckpointedBlock, train_like_eager


class Failures(CompileObserver):
    def __init__(self):
        self.failures = []

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append((graph, chain, error))


@pytest.mark.parametrize("checkpointed", [True, False])
def test_batchnorm_running_stats_saved_for_backward_train_like_eager(checkpointed):
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    model = CheckpointedBlock(checkpointed)
    # Eager without the checkpoint: a compiled checkpoint updates the statistics once a step, as
    # Inductor does (eager's recompute in backward would update them a second time).
    ref = CheckpointedBlock(False)
    ref.load_state_dict(model.state_dict())
    obs = Failures()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs))
    # before the fix, backward failed: "a variable needed for gradient computation has been modified"
    train_like_eager(compiled, model, ref, [torch.randn(4, 3, 8, 8) for _ in range(3)])
    assert int(model.bn.num_batches_tracked) == int(ref.bn.num_batches_tracked) == 3
    assert obs.failures == []


def test_backward_with_retain_graph_after_the_backward_was_compiled():
    """``backward(retain_graph=True)`` on a later step (a second loss through the same graph, as GAN
    and multi-loss training do): AOTAutograd would refuse it once the backward is compiled if the
    backward claimed the forward's saved tensors as donated buffers; ours writes none of them."""
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                   torch.nn.Linear(16, 3))
    model, ref = make(), make()
    obs = Failures()
    compiled = torch.compile(model, backend=ThundervisCompiler(observer=obs))
    for step in range(2):
        x = torch.randn(4, 8)
        out, expected = compiled(x).square().sum(), ref(x).square().sum()
        if step:  # the backward is compiled by now
            out.backward(retain_graph=True)
            expected.backward(retain_graph=True)
        out.backward()
        expected.backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None
    assert obs.failures == []
