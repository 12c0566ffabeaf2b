"""The ``torch`` executor: runs any symbol as its ATen (or torch) call. Always available."""
from __future__ import annotations

from typing import Callable

from ..ir import BoundSymbol
from ..resolve import UnknownSymbol, is_operator_name, resolve_overload, resolve_symbol
from .base import Executor, register_executor


class TorchExecutor(Executor):
    """Runs every ATen and prim symbol by calling the exact ATen overload it records."""

    name = "torch"

    def can_run(self, b: BoundSymbol) -> bool:
        return b.sym.startswith(("aten.", "prims.")) or is_operator_name(b.sym)  # custom ops too

    def callable_for(self, b: BoundSymbol) -> Callable:
        if b.aten:
            try:
                return resolve_overload(b.aten)
            except UnknownSymbol:
                pass
        return resolve_symbol(b.sym)


register_executor("torch", TorchExecutor)
