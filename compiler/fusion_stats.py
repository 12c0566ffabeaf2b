"""Fusion quality measurements: how much of a program runs inside fusion kernels.

:class:`FusionStats` is a compile observer that keeps the trace after the ``fuse`` pass(es) of each
chain and the kernel records; :func:`fused_share` counts, in one trace, the non-matmul prims that
run inside fusions. Tests and ``benchmarks/fusion_quality.py`` share these.
"""
from __future__ import annotations

from .ir import BoundSymbol, KernelRecord, Trace
from .observer import CompileObserver
from .prims import PRIMS


def _is_matmul(b: BoundSymbol) -> bool:
    if b.sym.startswith("prims."):
        prim = PRIMS.get(b.sym.removeprefix("prims."))
        if prim is not None and prim.kind == "matmul":
            return True
    return (b.aten or b.sym).startswith(("aten.mm.", "aten.bmm.", "aten.addmm.", "aten.baddbmm."))


def is_fusion(b: BoundSymbol) -> bool:
    """Return True when ``b`` is a fusion symbol (a kernel over member prims): the flag ``fuse`` sets."""
    return b.fusion


def fused_share(trace: Trace) -> tuple[int, int]:
    """Return (non-matmul prims inside fusions, all non-matmul prims) of a trace after fusion.

    A symbol outside fusions counts by its non-matmul prim subsymbols when it was decomposed, else
    as one (unless it is a matmul); ``del`` symbols do not count.
    """
    fused = total = 0
    for b in trace.symbols:
        if b.sym == "del":
            continue
        if is_fusion(b):
            n = sum(1 for s in b.subsymbols if not _is_matmul(s))
            fused += n
            total += n
        elif b.subsymbols and not _is_matmul(b):
            total += sum(1 for s in b.subsymbols if not _is_matmul(s))
        elif not _is_matmul(b):
            total += 1
    return fused, total


class FusionStats(CompileObserver):
    """Observer keeping, per (graph, chain), the trace after the last fusion pass and all kernels."""

    FUSION_PASSES = ("fuse",)

    def __init__(self):
        self.traces: dict[tuple[int, str], Trace] = {}
        self.kernels: list[KernelRecord] = []
        self.failures: list[tuple] = []

    def pass_done(self, graph, chain, index, name, trace, duration_s, changed) -> None:
        if name in self.FUSION_PASSES or (name == "claim" and (graph, chain) not in self.traces):
            self.traces[(graph, chain)] = trace

    def kernels_built(self, graph, chain, kernels) -> None:
        self.kernels.extend(kernels)

    def chain_failed(self, graph, chain, error, tb) -> None:
        self.failures.append((graph, chain, error, tb))

    def share(self) -> tuple[int, int]:
        """Return (fused, total) non-matmul prims summed over every recorded chain."""
        fused = total = 0
        for t in self.traces.values():
            f, n = fused_share(t)
            fused += f
            total += n
        return fused, total

    def unfused(self) -> dict[str, int]:
        """Return {symbol name: count} of the non-matmul symbols left outside fusions."""
        out: dict[str, int] = {}
        for t in self.traces.values():
            for b in t.symbols:
                if b.sym != "del" and not is_fusion(b) and not _is_matmul(b):
                    out[b.sym] = out.get(b.sym, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))
