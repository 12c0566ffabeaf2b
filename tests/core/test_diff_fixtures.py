"""Shared fixtures of the diff and dot tests: a small model compiled through the real pipeline with
two small CPU fusion executors (so the ``fuse`` pass runs without Triton or CUDA), and the traces of
every pass, collected by an observer. Other test modules import from here; compiles are cached.
"""
from __future__ import annotations

import functools

import pytest
import torch

from thundervis.compiler.backend import jit, reset_graph_ids
from thundervis.compiler.executors.base import BuiltKernel, FusionExecutor, register_executor
from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.ir import BoundSymbol, Trace
from thundervis.compiler.observer import CompileObserver
from thundervis.compiler.prims import PRIMS


class PointwiseFuser(FusionExecutor):
    """Fuses unary/binary/ternary prims; kernels run the members with the reference interpreter."""

    name = "pwfuse"
    max_members = None

    def can_run(self, b: BoundSymbol) -> bool:
        if not b.sym.startswith("prims."):
            return False
        prim = PRIMS.get(b.sym[len("prims."):])
        return prim is not None and prim.kind in ("unary", "binary", "ternary")

    def region_problem(self, members):
        if self.max_members is not None and len(members) > self.max_members:
            return f"a kernel holds at most {self.max_members} ops"
        return None

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        return BuiltKernel("# " + ", ".join(s.sym for s in fusion.subsymbols), "python")

    def callable_for(self, b: BoundSymbol):
        region = Trace(name=b.sym, inputs=tuple(b.args), symbols=b.subsymbols, outputs=tuple(b.outputs))
        return lambda *args: run_trace(region, args)


class SmallPointwiseFuser(PointwiseFuser):
    """Like :class:`PointwiseFuser` but at most 3 ops per kernel (so its fusions split)."""

    name = "pwfuse3"
    max_members = 3


register_executor("pwfuse", PointwiseFuser)
register_executor("pwfuse3", SmallPointwiseFuser)


class Collect(CompileObserver):
    """Keeps every pass's trace and every kernel record."""

    def __init__(self):
        self.passes: list[tuple[int, str, int, str, Trace]] = []
        self.kernels: list[tuple[int, str, dict]] = []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.passes.append((graph, chain, index, name, trace))

    def kernels_built(self, graph, chain, kernels):
        self.kernels.extend((graph, chain, k) for k in kernels)

    def chain(self, chain: str, graph: int = 0) -> list[Trace]:
        """Return the traces of one chain in pass order."""
        return [t for g, c, i, n, t in sorted(self.passes, key=lambda p: p[2]) if c == chain and g == graph]


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.ln(self.fc1(x)))
        a = h * 2 + h * 2  # the repeated product is what CSE merges
        return torch.tanh(self.fc2(a)).sum()


@functools.lru_cache(maxsize=None)
def compiled(executors: tuple = ("pwfuse",), remat=None) -> Collect:
    """Compile and run one training step of :class:`Block` with ``executors`` and the ``remat``
    policy (None: the default, ``auto``); return the observer."""
    torch.manual_seed(0)
    obs = Collect()
    reset_graph_ids()
    fn = jit(Block(), executors=list(executors), observer=obs, remat=remat)
    fn(torch.randn(4, 16)).backward()
    return obs


def pass_pair(chain: str, before: str, after: str, executors: tuple = ("pwfuse",),
              remat=None) -> tuple[Trace, Trace]:
    """Return the traces after passes ``before`` and ``after`` of ``chain`` (``remat``: see
    :func:`compiled`)."""
    traces = {t.pass_name: t for t in compiled(executors, remat).chain(chain)}
    return traces[before], traces[after]


def test_fixture_compiles_with_fusions():
    obs = compiled()
    final = obs.chain("forward")[-1]
    names = [b.sym for b in final.symbols if b.fusion]
    assert names, "the pointwise fuser made no fusion"
    names = [t.pass_name for t in obs.chain("forward")]
    kinds = ["acquire", "decompose", "cse", "dce", "claim", "fuse", "liveness", "codegen"]
    assert [n for n in names if n in kinds] == kinds


def test_small_fuser_splits_regions():
    big = [b for b in compiled(("pwfuse",)).chain("forward")[-1].symbols if b.fusion]
    small = [b for b in compiled(("pwfuse3",)).chain("forward")[-1].symbols if b.fusion]
    assert max(len(b.subsymbols) for b in big) > 3
    assert max(len(b.subsymbols) for b in small) <= 3
    assert len(small) > len(big)


@pytest.fixture(scope="module")
def collected():
    return compiled()
