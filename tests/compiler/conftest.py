"""Shared fixtures for the compiler tests: a recording observer, a capture of each chain's FX graph
and first-call inputs, and the two examples trained once per session, compiled and eager."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
import torch

import thundervis.compiler.backend as backend_mod
from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.backend import reset_graph_ids

MLP_STEPS = 5
GPT_STEPS = 3


class Recorder(CompileObserver):
    """Keeps every pass trace and every failure it is told about."""

    def __init__(self):
        self.passes = []  # (graph, chain, index, name, trace, changed)
        self.failures = []  # (graph, chain, error)

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
        self.passes.append((graph, chain, index, name, trace, changed))

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append((graph, chain, error))

    def traces(self, chain: str, graph: int | None = None) -> dict:
        """Return {pass name: trace} of ``chain`` (of ``graph``, default the first graph seen)."""
        graphs = [g for g, c, *_ in self.passes if c == chain]
        if not graphs:
            return {}
        graph = graphs[0] if graph is None else graph
        return {name: t for g, c, _, name, t, _ in self.passes if g == graph and c == chain}

    def all_traces(self) -> list:
        """Return every recorded trace."""
        return [t for *_, t, _ in self.passes]


def _clone(args):
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]


@dataclass
class Capture:
    """Per (graph, chain): the FX GraphModule it was acquired from and its first call's inputs."""

    modules: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)

    def case(self, chain: str):
        """Return (gm, inputs) of ``chain`` in the first graph that has it."""
        key = min(k for k in self.inputs if k[1] == chain)
        return self.modules[key], self.inputs[key]


@contextlib.contextmanager
def capture_chains():
    """Patch the backend so compiled chains remember their FX graph and first-call inputs."""
    cap = Capture()
    real_acquire, real_compile = backend_mod.fx_to_trace, backend_mod.compile_chain

    def acquire(gm, *, chain, graph, **kw):
        cap.modules[(graph, chain)] = gm
        return real_acquire(gm, chain=chain, graph=graph, **kw)

    def compile_chain(trace, *args, **kwargs):
        final, fn = real_compile(trace, *args, **kwargs)
        key = (trace.graph, trace.chain)

        def run(args):
            if key not in cap.inputs:
                cap.inputs[key] = _clone(args)
            return fn(args)
        run._boxed_call = True
        return final, run

    backend_mod.fx_to_trace, backend_mod.compile_chain = acquire, compile_chain
    try:
        yield cap
    finally:
        backend_mod.fx_to_trace, backend_mod.compile_chain = real_acquire, real_compile


@dataclass
class CompiledRun:
    """One example trained eagerly and compiled with the torch executor (same seed)."""

    eager_losses: list
    losses: list
    recorder: Recorder
    capture: Capture


def compiled_run(module, steps: int, debug: bool = True, **train_kwargs) -> CompiledRun:
    """Train ``module``'s example eagerly then compiled; return both losses and what was recorded."""
    eager = module.train(*module.build(0), steps, **train_kwargs)
    torch._dynamo.reset()
    reset_graph_ids()
    rec = Recorder()
    with capture_chains() as cap:
        compiler = ThundervisCompiler(executors=["torch"], debug=debug, observer=rec)
        losses = module.train(*module.build(0), steps, lambda m: torch.compile(m, backend=compiler),
                              **train_kwargs)
    torch._dynamo.reset()
    return CompiledRun(eager, losses, rec, cap)


@pytest.fixture(scope="session")
def mlp_run(example):
    return compiled_run(example("train_mlp"), MLP_STEPS)


@pytest.fixture(scope="session")
def gpt_run(example):
    return compiled_run(example("train_gpt"), GPT_STEPS)


@pytest.fixture(scope="session")
def recorder_cls():
    """The :class:`Recorder` observer class."""
    return Recorder
