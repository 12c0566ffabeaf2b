"""The ``inductor`` executor (opt-in): each fusion region compiled by ``torch.compile`` (Inductor).

A region's Python function is built from the in-memory region: each prim calls the exact ATen
overload it records (reference semantics; closures over resolved callables, no text is executed).
It is compiled once per region with ``torch.compile`` (default backend, Inductor, static shapes) at
its first call, so compilation runs outside our own compile step. On CPU Inductor generates fused
C++ kernels (it needs a C++ compiler: without one ``available()`` says so, and a region whose compile
fails at run time falls back to running its prims eagerly, with a warning); on CUDA it generates
Triton kernels. Not in the default executor order: ``--executors inductor,torch`` asks for it.
"""
from __future__ import annotations

import functools
import shutil
import threading
import types
import warnings
from typing import Callable, Optional

from ..ir import BoundSymbol, Trace, TensorProxy, map_structure
from ..observer import runtime_reporter
from ..printer import PrintOptions, print_trace
from ..prims import PRIMS
from ..resolve import UnknownSymbol, recorded_overload, resolve_symbol
from .base import BuiltKernel, FusionExecutor, KernelBuildError, register_executor

# Prim kinds Inductor gets: everything that computes values in place. Matmuls stay with torch like
# in the other executors (Inductor would call the same extern mm), random numbers stay with torch
# (Inductor's generator differs from eager), indexing stays with torch (data-dependent bounds).
_KINDS = {"unary", "binary", "ternary", "conversion", "shape", "reduction"}
_FACTORIES = {"full", "scalar_tensor"}
_REFUSED = {"matmul": "matmuls stay with torch (cuBLAS / MKL)",
            "rng": "random numbers must come from torch's generator to match eager",
            "indexing": "indexing ops stay with torch",
            "factory": "factories other than full/scalar_tensor stay with torch",
            "constant": "constant data is made by torch (no kernel needed)"}


@functools.lru_cache(maxsize=1)
def _cxx_compiler() -> Optional[str]:
    """Return the C++ compiler Inductor would use for CPU kernels, or None when there is none."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
        return get_cpp_compiler()
    except Exception:
        for cxx in ("g++", "clang++", "c++"):
            if shutil.which(cxx):
                return cxx
    return None


def inductor_unavailable_reason() -> Optional[str]:
    """Return None when Inductor can compile here, else one sentence saying why not."""
    import torch
    try:
        import torch._inductor  # noqa: F401
    except Exception as e:
        return f"torch._inductor does not import ({type(e).__name__})."
    if not torch.cuda.is_available() and _cxx_compiler() is None:
        return "inductor needs a C++ compiler for CPU kernels and none was found (install g++ or set CXX)."
    return None


def _callable(b: BoundSymbol):
    """The reference implementation of one prim: its exact recorded ATen overload."""
    return recorded_overload(b) or resolve_symbol(b.sym)


def region_function(fusion: BoundSymbol) -> Callable:
    """Return ``fn(*inputs) -> tuple of outputs`` running the region's prims one by one.

    Built from the in-memory region: a list of (callable, argument template, output names); the
    loop below is what ``torch.compile`` traces (Dynamo unrolls it into one graph).
    """
    inputs = [p.name for p in dict.fromkeys(p for p in fusion.args if isinstance(p, TensorProxy))]
    steps = []
    for s in fusion.subsymbols:
        outs = s.outputs
        steps.append((_callable(s), s.args, s.kwargs, outs))
    out_names = [p.name for p in fusion.flat_outputs()]

    def read(env, x):
        return map_structure(lambda v: env[v.name] if isinstance(v, TensorProxy) else v, x)

    def bind(env, outs, value):
        if isinstance(outs, TensorProxy):
            env[outs.name] = value
        elif isinstance(outs, (tuple, list)):
            for o, v in zip(outs, value):
                bind(env, o, v)

    def run(*args):
        env = dict(zip(inputs, args))
        for fn, a, k, outs in steps:
            bind(env, outs, fn(*read(env, a), **read(env, k)))
        return tuple(env[n] for n in out_names)

    # A code object of its own per region: Dynamo caches compiled graphs per code object (with a
    # small recompile limit), so regions sharing ``run``'s code would evict each other.
    names = {"co_name": fusion.sym}
    if hasattr(run.__code__, "co_qualname"):  # Python >= 3.11
        names["co_qualname"] = fusion.sym
    code = run.__code__.replace(**names)
    fn = types.FunctionType(code, run.__globals__, fusion.sym, run.__defaults__, run.__closure__)
    return fn


class InductorKernel:
    """A region's launcher: compiles with ``torch.compile`` on its first call, then runs that."""

    def __init__(self, fusion: BoundSymbol):
        self.name = fusion.sym
        self.eager = region_function(fusion)
        self.compiled: Optional[Callable] = None
        self.error: Optional[str] = None
        self._lock = threading.Lock()
        self._report = runtime_reporter()
        self._uid = fusion.uid
        self._sources = sorted({(b.source.file, b.source.line, b.source.code) for b in fusion.subsymbols
                                if b.source is not None and b.source.line})

    def _compile(self) -> Callable:
        import torch
        fn = torch.compile(self.eager, dynamic=False, fullgraph=True)
        return fn

    def __call__(self, *args):
        if self.compiled is None:
            with self._lock:
                if self.compiled is None:
                    try:
                        fn = self._compile()
                        out = fn(*args)
                    except Exception as e:  # e.g. no working C++ compiler: run the prims eagerly
                        self.error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                        warnings.warn(f"inductor could not compile {self.name} ({self.error}); running its "
                                      "prims eagerly instead", RuntimeWarning, stacklevel=2)
                        self._report("kernel_fallback", {
                            "kernel": self.name, "uid": self._uid, "executor": "inductor", "error": self.error,
                            "sources": [{"file": f, "line": n, "code": c} for f, n, c in self._sources]})
                        self.compiled = self.eager
                        return self.eager(*args)
                    self.compiled = fn
                    return out
        return self.compiled(*args)


class InductorExecutor(FusionExecutor):
    """Fuses regions of prims and compiles each with ``torch.compile`` (see the module docstring)."""

    name = "inductor"
    language = "python"

    def available(self) -> Optional[str]:
        return inductor_unavailable_reason()

    def prim_problem(self, b: BoundSymbol) -> Optional[str]:
        if b.fusion:
            return None
        if not b.sym.startswith("prims."):
            return f"inductor fuses prims only, not {b.sym}"
        prim = PRIMS.get(b.sym.removeprefix("prims."))
        if prim is None:
            return f"{b.sym} is not a prim"
        if prim.kind not in _KINDS and prim.name not in _FACTORIES:
            return f"inductor: {_REFUSED.get(prim.kind, f'{prim.kind} prims stay with torch')}"
        try:
            _callable(b)
        except UnknownSymbol as e:
            return f"inductor: {e}"
        for p in b.flat_inputs() + b.flat_outputs():
            if p.dtype.startswith("complex"):
                return f"inductor: complex tensor {p.name} stays with torch"
        devices = {p.device.split(":")[0] for p in b.flat_inputs() + b.flat_outputs() if p.shape}
        if len(devices) > 1:
            return f"inductor: {b.sym} mixes devices {sorted(devices)}"
        return None

    def region_problem(self, members: list[BoundSymbol], outputs=None) -> Optional[str]:
        problem = self.first_member_problem(members)
        if problem is not None:
            return problem
        devices = {p.device.split(":")[0] for b in members for p in b.flat_inputs() + b.flat_outputs() if p.shape}
        if len(devices) > 1:
            return f"inductor: a region runs on one device, not {sorted(devices)}"
        return None

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        """Return the region as the Python program Inductor compiles (the kernel's code)."""
        try:
            region_function(fusion)
        except UnknownSymbol as e:
            raise KernelBuildError(f"inductor: {e}") from None
        region = Trace(name=fusion.sym, inputs=tuple(fusion.args), symbols=fusion.subsymbols,
                       outputs=tuple(fusion.outputs), chain=fusion.sym, pass_name="fuse")
        code = print_trace(region, PrintOptions(source=False, header=False))
        return BuiltKernel(code, self.language, "compiled by torch.compile (Inductor) at its first call")

    def callable_for(self, b: BoundSymbol) -> Callable:
        """Return the launcher of fusion ``b`` (a single prim runs as a one-member region)."""
        if not b.fusion:
            return _callable(b)  # a lone claimed prim: Inductor would only add overhead
        return InductorKernel(b)


register_executor("inductor", InductorExecutor)
