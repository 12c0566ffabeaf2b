"""Random ops draw eager's numbers: with the same seed, dropout through the default executors keeps
exactly the elements eager keeps, in the forward output and in the gradient (compiler/random_whole)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="eager's CPU draws: the CPU path")


class Notes(CompileObserver):
    """Keeps the final trace of each chain."""

    def __init__(self):
        self.final = {}

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.final[chain] = trace


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x):
        return F.dropout(self.drop(torch.tanh(self.fc(x))), p=0.5, training=self.training) * 3


def _run(model, x, seed):
    torch.manual_seed(seed)
    model.zero_grad()
    out = model(x)
    (out * torch.arange(out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    return out.detach(), x.grad.detach().clone(), model.fc.weight.grad.detach().clone()


def test_dropout_masks_match_eager_with_the_same_seed():
    torch._dynamo.reset()
    reset_graph_ids()
    torch.manual_seed(0)
    eager = Block().train()
    compiled_model = Block().train()
    compiled_model.load_state_dict(eager.state_dict())
    notes = Notes()
    compiled = torch.compile(compiled_model, backend=ThundervisCompiler(observer=notes))
    # Past the CPU path's first calls (where it measures and may swap a region's runner).
    for step in range(24):
        x1 = torch.randn(8, 16, generator=torch.Generator().manual_seed(step)).requires_grad_()
        x2 = x1.detach().clone().requires_grad_()
        out_e, gx_e, gw_e = _run(eager, x1, seed=100 + step)
        out_c, gx_c, gw_c = _run(compiled, x2, seed=100 + step)
        assert torch.equal(out_e != 0, out_c != 0), f"step {step}: kept {int((out_c != 0).sum())}, eager {int((out_e != 0).sum())}"
        torch.testing.assert_close(out_c, out_e)
        assert torch.equal(gx_e != 0, gx_c != 0), f"step {step}: gradient mask differs"
        torch.testing.assert_close(gx_c, gx_e)
        torch.testing.assert_close(gw_c, gw_e)
    # The draws are eager's because the op runs whole, and the trace says why.
    fw = notes.final["forward"]
    drops = [b for b in fw.symbols if "native_dropout" in (b.aten or b.sym)]
    assert len(drops) == 2 and all("eager's" in (b.note or "") for b in drops), [(b.sym, b.note) for b in fw.symbols]
    assert not any("rand_like" in b.sym for b in fw.symbols)


def test_bernoulli_matches_eager_with_the_same_seed():
    torch._dynamo.reset()
    reset_graph_ids()

    def f(x):
        return torch.bernoulli(torch.sigmoid(x)) * x

    compiled = torch.compile(f, backend=ThundervisCompiler())
    x = torch.randn(64, 32)
    for seed in range(3):
        torch.manual_seed(seed)
        want = f(x)
        torch.manual_seed(seed)
        assert torch.equal(compiled(x), want)


RANDOM_OPS = {
    "rrelu": lambda x: F.rrelu(x, training=True) * 2,
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, True) + 1,
    "dropout2d": lambda x: F.dropout2d(x.view(4, 8, 2, 2), 0.4, True).view(8, 16) * 1,
    "rand_like": lambda x: torch.rand_like(x) * x,
    "randn": lambda x: torch.randn(x.shape) + x,
    "normal": lambda x: torch.normal(x, 1.0) * 2,
    "multinomial": lambda x: torch.multinomial(x.abs() + 0.1, 3).float() + 1,
}


@pytest.mark.parametrize("name", sorted(RANDOM_OPS))
def test_other_random_ops_match_eager_with_the_same_seed(name):
    torch._dynamo.reset()
    reset_graph_ids()
    f = RANDOM_OPS[name]
    compiled = torch.compile(f, backend=ThundervisCompiler())
    x = torch.randn(8, 16)
    for seed in (0, 1):
        torch.manual_seed(seed)
        want = f(x)
        torch.manual_seed(seed)
        assert torch.equal(compiled(x), want), f"{name}, seed {seed}"
