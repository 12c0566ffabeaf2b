"""The ``torch`` executor: runs any symbol as its ATen (or torch) call. Always available.

Host overhead matters here: a small model's compiled step is a few hundred op calls. Calling an
``OpOverload`` object costs a Python frame (``OpOverload.__call__`` only forwards to ``_op``) plus
the JIT's boxed argument conversion, about twice what the ``torch.*`` binding of the same op costs.
So the executor binds, in order of preference: the ``torch`` binding for overloads whose schema
leaves that binding exactly one overload to pick (table below), else the overload's own ``_op``
(exactly what ``OpOverload.__call__`` runs), else the resolved symbol.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..ir import BoundSymbol
from ..resolve import UnknownSymbol, is_operator_name, resolve_overload, resolve_symbol
from .base import Executor, register_executor

_VF = torch._C._VariableFunctions
# ATen overload -> the torch binding that dispatches to exactly that overload for every argument
# list the overload's schema accepts (no Scalar-vs-Tensor or Dimname alternatives reachable).
FAST_BINDINGS: dict[str, Callable] = {
    "aten.view.default": torch._C.TensorBase.view,
    "aten.t.default": _VF.t,
    "aten.transpose.int": _VF.transpose,
    "aten.mm.default": _VF.mm,
    "aten.bmm.default": _VF.bmm,
    "aten.addmm.default": _VF.addmm,
    "aten.clone.default": _VF.clone,
    "aten.detach.default": _VF.detach,
    "aten.native_layer_norm.default": _VF.native_layer_norm,
    "aten._softmax.default": _VF._softmax,
    "aten.embedding.default": _VF.embedding,
    "aten.bitwise_not.default": _VF.bitwise_not,
    "aten.sum.dim_IntList": _VF.sum,
}


def fast_callable(overload_name: str, overload) -> Callable:
    """Return the cheapest callable with exactly ``overload``'s semantics (see the module doc)."""
    fast = FAST_BINDINGS.get(overload_name)
    if fast is not None:
        return fast
    return getattr(overload, "_op", overload)


class TorchExecutor(Executor):
    """Runs every ATen and prim symbol by calling the exact ATen overload it records."""

    name = "torch"

    def can_run(self, b: BoundSymbol) -> bool:
        return b.sym.startswith(("aten.", "prims.")) or is_operator_name(b.sym)  # custom ops too

    def callable_for(self, b: BoundSymbol) -> Callable:
        if b.aten:
            try:
                return fast_callable(b.aten, resolve_overload(b.aten))
            except UnknownSymbol:
                pass
        return resolve_symbol(b.sym)


register_executor("torch", TorchExecutor)
