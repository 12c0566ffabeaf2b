"""Communication ops in compiled graphs (functional collectives, as FSDP2 / DTensor / funcol trace
them): claimed by torch, never merged or dropped, never fused across; results match eager.

Runs a one-rank gloo group in this process (a FileStore in tmp_path): the collectives are real
calls, the graph is what a multi-rank job compiles."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from thundervis.compiler.collectives import is_communication, is_wait
from thundervis.compiler.observer import CompileObserver


class _Keep(CompileObserver):
    def __init__(self):
        self.passes = {}

    def pass_done(self, graph, chain, index, name, trace, seconds, changed):
        self.passes[(graph, chain, name)] = trace


@pytest.fixture
def one_rank(tmp_path):
    if dist.is_initialized():
        pytest.skip("a process group is already initialized")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_names():
    assert is_communication("_c10d_functional.all_reduce.default")
    assert is_communication("_c10d_functional.wait_tensor.default") and is_wait("_c10d_functional.wait_tensor.default")
    assert not is_communication("aten.add.Tensor") and not is_communication("prims.add")
    assert not is_wait("_c10d_functional.all_reduce.default")


def _compile(fn, executors):
    import torch._dynamo
    from thundervis.compiler.backend import jit, reset_graph_ids
    torch._dynamo.reset()
    reset_graph_ids()
    obs = _Keep()
    return jit(fn, observer=obs, executors=executors), obs


@pytest.mark.parametrize("executors", [["triton"], ["inductor"]])
def test_collectives_stay_in_order_and_are_never_fused_across(one_rank, executors):
    import torch.distributed._functional_collectives as funcol
    from thundervis.compiler.executors import get_executor
    if get_executor(executors[0]).available():
        pytest.skip(get_executor(executors[0]).available())

    def f(x, y):
        a = torch.sin(x) * 2
        r = funcol.all_reduce(a, "sum", one_rank)
        r2 = funcol.all_reduce(a, "sum", one_rank)  # the same collective twice: both stay
        b = torch.cos(y) + 1  # independent of the collectives: fusable with sin(x) * 2 but after them
        return r + r2, b

    x, y = torch.randn(16), torch.randn(16)
    g, obs = _compile(f, executors)
    out = g(x, y)
    ref = f(x, y)
    torch.testing.assert_close(out, ref)
    final = [t for (gr, ch, name), t in obs.passes.items() if name == "codegen" and ch in ("forward", "inference")][0]
    syms = [b for b in final.symbols if b.sym != "del"]
    comm = [i for i, b in enumerate(syms) if is_communication(b.sym)]
    assert len([i for i in comm if "all_reduce" in syms[i].sym]) == 2, [b.sym for b in syms]
    assert all(syms[i].executor == "torch" and "communication" in (syms[i].note or "") for i in comm)
    for i, b in enumerate(syms):
        if not b.fusion:
            continue
        members = {s.sym for s in b.subsymbols}
        assert not ({"prims.sin", "prims.cos"} <= members), f"fused across a collective: {b.sym} {members}"
        if "prims.cos" in members:
            assert i > comm[0], "the op after the collectives moved before them"
        if "prims.sin" in members:
            assert i < comm[0]
    fuse = [t for (gr, ch, name), t in obs.passes.items() if name == "fuse"][0]
    notes = " ".join(b.note or "" for b in fuse.symbols)
    assert "communication" in notes


def test_backward_collectives_and_gradients_match_eager(one_rank):
    import torch.distributed._functional_collectives as funcol

    def f(x, w):
        h = torch.tanh(x @ w)
        h = funcol.all_reduce(h, "sum", one_rank)
        return (torch.sin(h) + 1).sum()

    x = torch.randn(4, 8)
    w1 = torch.randn(8, 8, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    g, obs = _compile(f, None)
    loss = g(x, w1)
    loss.backward()
    ref = f(x, w2)
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(w1.grad, w2.grad)
    for chain in ("forward", "backward"):
        final = [t for (gr, ch, name), t in obs.passes.items() if name == "codegen" and ch == chain][0]
        kinds = [b.sym.split(".")[1] for b in final.symbols if is_communication(b.sym)]
        assert kinds == ["all_reduce", "wait_tensor"], (chain, kinds)


def test_ddp_compiled_autograd_traces_gradient_all_reduces(one_rank):
    """DDP with the python reducer under compiled autograd: the backward graph takes a list of
    tensors first (flattened by the backend) and holds DDP's gradient all-reduces."""
    import torch._dynamo
    import torch._dynamo.compiled_autograd as ca
    from torch.nn.parallel import DistributedDataParallel as DDP
    saved = torch._dynamo.config.optimize_ddp
    torch._dynamo.config.optimize_ddp = "python_reducer"
    try:
        torch.manual_seed(0)
        layers = [torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)]
        m = DDP(torch.nn.Sequential(*layers))
        ref = torch.nn.Sequential(*[torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)])
        ref.load_state_dict(m.module.state_dict())
        x = torch.randn(4, 8)
        g, obs = _compile(m, ["torch"])
        from thundervis.compiler.backend import jit
        with ca._enable(lambda gm: jit(gm, observer=obs, executors=["torch"])):
            g(x).sum().backward()
        ref(x).sum().backward()
        for p, q in zip(m.module.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
        comm = [b.sym for (gr, ch, name), t in obs.passes.items() if name == "codegen"
                for b in t.symbols if is_communication(b.sym)]
        assert comm.count("_c10d_functional.all_reduce.default") == 4, comm  # one per parameter
    finally:
        torch._dynamo.config.optimize_ddp = saved
