"""Persistent reductions: the reductions of a :class:`.triton_codegen.Part` whose whole row fits
its ``[BM, BN]`` tile (sum, mean, var, amax/amin, any/all, argmax/argmin: the first index of the
extreme, NaN first, as torch), and the extremes' helpers that looped reductions
(:mod:`.triton_loop`) share.
"""
from __future__ import annotations

from .. import faults
from ..ir import BoundSymbol, TensorProxy
from ..values import torch_dtype
from . import triton_ops as ops
from .triton_region import Tile, bind


class PersistentReductions:
    """Mixin of :class:`.triton_codegen.Part`: emits one reduction over a row held whole in the tile
    (a looped part hands the row's chunk to :mod:`.triton_loop` instead)."""

    def reduction(self, b: BoundSymbol, name: str, out: TensorProxy, level: str) -> None:
        a = bind(b)
        x = a["self"]
        C = ops.compute_dtype(out.dtype)
        e, dt = self.value(x, "full", x.shape)
        # an index reduction compares its input's values (its int64 result is only the index)
        xv = self.emit(self.cast(e, dt, ops.compute_dtype(x.dtype) if name in ops.INDEX_REDUCTIONS else C))
        if self.looped:
            self._reduce_chunk(xv)
            return
        N = self.N
        mask = self.mask("full")
        if name in ops.INDEX_REDUCTIONS:
            Cx = ops.compute_dtype(x.dtype)
            best, first = self.first_extreme(name, xv, Cx, mask)
            r = first
            if Cx in ops.FLOATS:  # NaN is the extreme: the first NaN's index
                nan = self.emit(f"tl.min(tl.where({mask} & ({xv} != {xv}), {self.p}n, {N}), axis=1, keep_dims=True)")
                r = self.emit(f"tl.where({nan} < {N}, {nan}, {r})")
            r = self.emit(f"{r}.to(tl.int64)")
            C = "int64"
        elif name in ("sum", "mean"):
            r = self.emit(f"tl.sum(tl.where({mask}, {xv}, 0), axis=1, keep_dims=True)")
            if faults.active("triton_sum_init"):  # a test fault: the sum starts at 1.0
                r = self.emit(f"{r} + 1.0")
            if name == "mean":
                r = self.emit(f"{r} / {float(N)!r}")
        elif name in ops.TRUTH_REDUCTIONS:
            red, fill = ops.TRUTH_REDUCTIONS[name]
            xi = self.emit(f"{self.cast(xv, C, 'bool')}.to(tl.int32)")  # reduced as int32, not int1
            r = self.emit(f"tl.{red}(tl.where({mask}, {xi}, {fill}), axis=1, keep_dims=True) != 0")
            C = "bool"
        elif name in ("amax", "amin"):
            fn = "tl.max" if name == "amax" else "tl.min"
            fill = self.extreme_fill(name, C)
            r = self.emit(f"{fn}(tl.where({mask}, {xv}, {fill}), axis=1, keep_dims=True)")
            if C in ops.FLOATS:  # propagate NaN like torch
                nan = self.emit(f"tl.max(tl.where({mask} & ({xv} != {xv}), 1, 0), axis=1, keep_dims=True)")
                r = self.emit(f"tl.where({nan} > 0, float('nan'), {r})")
        else:  # var
            corr = a.get("correction")
            if "unbiased" in a:  # var.dim / var.default
                corr = 1 if a["unbiased"] else 0
            corr = 1 if corr is None else corr
            mean = self.emit(f"tl.sum(tl.where({mask}, {xv}, 0), axis=1, keep_dims=True) / {float(N)!r}")
            d = self.emit(f"tl.where({mask}, {xv} - {mean}, 0.0)")
            r = self.emit(f"tl.sum({d} * {d}, axis=1, keep_dims=True) / {float(max(N - corr, 0))!r}")
        if C != out.dtype:
            r = self.emit(self.cast(r, C, out.dtype))
        self.env[out.name] = Tile(r, level, "row", out.dtype)

    def first_extreme(self, name: str, xv: str, C: str, mask: str) -> tuple[str, str]:
        """Emit the row's max (argmax) or min (argmin) of ``xv`` (dtype ``C``) over ``mask``, NaN
        left out, and the first index ``n`` holding it (``N`` where none does: a row of NaN);
        return their names (``[BM, 1]`` each)."""
        red = ops.INDEX_REDUCTIONS[name]
        fill = self.extreme_fill("amax" if red == "max" else "amin", C)
        clean = f"tl.where({mask} & ({xv} == {xv}), {xv}, {fill})" if C in ops.FLOATS else f"tl.where({mask}, {xv}, {fill})"
        best = self.emit(f"tl.{red}({clean}, axis=1, keep_dims=True)")
        first = self.emit(f"tl.min(tl.where({mask} & ({xv} == {best}), {self.p}n, {self.N}), axis=1, keep_dims=True)")
        return best, first

    @staticmethod
    def extreme_fill(name: str, C: str) -> str:
        """Return the neutral start of ``amax`` (the lowest value of dtype ``C``) or ``amin`` (the highest)."""
        if C in ops.FLOATS:
            return "float('-inf')" if name == "amax" else "float('inf')"
        if C == "bool":
            return "0" if name == "amax" else "1"
        import torch
        info = torch.iinfo(torch_dtype(C))
        return str(info.min if name == "amax" else info.max)
