"""Division, remainder and fmod as eager computes them, for :class:`.triton_codegen.Part`.

Triton's integer ``//`` and ``%`` truncate (C, LLVM ``sdiv``/``srem``) where torch's floor division
and ``remainder`` follow the divisor's sign; its float ``/`` is the GPU's 2-ulp ``div.full.f32``
where an integer result needs an exactly rounded quotient; and core ``triton.language`` has no
exact float ``fmod``. These methods write each op from ops that are exact, so the kernel gives
eager's numbers bit for bit, special values (zeros, infinities, NaN) included.
"""
from __future__ import annotations

import math

from . import triton_ops as ops


class ArithmeticOps:
    """Mixed into :class:`.triton_codegen.Part` (uses its ``emit``)."""

    def tensor_operands(self, x: str, y: str) -> tuple[str, str]:
        """Emit the operands ``x`` and ``y`` (expressions) as tensors: a literal (a number, a
        constant) takes the other's shape (``tl.zeros_like``), so that comparisons and ``&`` of
        both give tensors (a Python number's ``y < 0`` is a bool)."""
        x_literal, y_literal = ops.LITERAL.fullmatch(x) is not None, ops.LITERAL.fullmatch(y) is not None
        x, y = self.emit(x), self.emit(y)
        if x_literal and not y_literal:
            x = self.emit(f"(tl.zeros_like({y}) + {x})")
        elif y_literal and not x_literal:
            y = self.emit(f"(tl.zeros_like({x}) + {y})")
        return x, y

    def rounded_division(self, x: str, y: str, mode: str, dtype: str) -> str:
        """Return ``torch.div(x, y, rounding_mode=mode)`` in compute dtype ``dtype`` (``x`` and ``y``:
        emitted tensors), as eager computes it. Integers divide exactly: Triton's ``//`` and ``%``
        truncate (C, LLVM ``sdiv``/``srem``), so ``floor`` steps the quotient down where the
        remainder's sign differs from the divisor's. Floats: ``trunc`` truncates ``x / y``, as torch
        does; ``floor`` follows torch's ``div_floor_floating`` step by step (``1.0 // 0.1`` is 9, where
        ``floor(1.0 / 0.1)`` is 10), with its ``fmod(x, y)`` computed exactly (:meth:`float_fmod`),
        and its special cases: ``y == 0`` gives ``x / y``, an infinite ``x`` NaN, an infinite ``y``
        0 or -1."""
        if dtype not in ops.FLOATS and dtype != "float64":
            if mode == "trunc" or dtype == "uint8":
                return f"({x} // {y})"
            q, r = self.emit(f"({x} // {y})"), self.emit(f"({x} % {y})")
            return f"tl.where(({r} != 0) & (({r} < 0) != ({y} < 0)), {q} - 1, {q})"
        # IEEE division (tl.math.div_rn), not `/`: on NVIDIA GPUs `/` is div.full.f32 (2 ulp), whose
        # 5.9999995 for an exact 6.0 would truncate or floor to 5
        d = self.emit(f"tl.math.div_rn({x}, {y})")
        if mode == "trunc":
            return ops.UNARY["trunc"](d)
        inf, nan = ops.literal(math.inf, dtype), ops.literal(math.nan, dtype)
        m = self.float_fmod(x, y)
        div = self.emit(f"tl.math.div_rn({x} - {m}, {y})")
        div = self.emit(f"tl.where(({m} != 0) & (({y} < 0) != ({m} < 0)), {div} - 1.0, {div})")
        fd = self.emit(f"tl.floor({div})")
        fd = self.emit(f"tl.where({div} - {fd} > 0.5, {fd} + 1.0, tl.where({div} == 0, {d} * 0.0, {fd}))")
        fd = self.emit(f"tl.where((tl.abs({d}) == {inf}) & (tl.abs({x}) != {inf}), {d}, {fd})")  # overflow
        fd = self.emit(f"tl.where((tl.abs({x}) == {inf}) & ({y} != 0), {nan}, {fd})")
        by_inf = f"tl.where(({x} != 0) & (({x} < 0) != ({y} < 0)), -1.0, {d})"
        fd = self.emit(f"tl.where((tl.abs({y}) == {inf}) & (tl.abs({x}) < {inf}), {by_inf}, {fd})")
        return f"tl.where({y} == 0, {d}, {fd})"

    def remainder(self, name: str, x: str, y: str, dtype: str) -> str:
        """Return ``torch.fmod`` (``name`` ``fmod``: the sign of ``x``) or ``torch.remainder`` (the
        sign of ``y``) of emitted tensors ``x`` and ``y`` in compute dtype ``dtype``, as eager
        computes them. Integers: Triton's ``%`` is C's (LLVM ``srem``), so ``remainder`` adds ``y``
        where the signs differ. Floats: the exact :meth:`float_fmod`, NaN for an infinite ``x``,
        ``y == 0`` or a NaN, ``x`` itself for an infinite ``y``; ``remainder`` then adds ``y`` where
        the signs differ, rounded as torch rounds it."""
        if dtype not in ops.FLOATS and dtype != "float64":
            r = self.emit(f"({x} % {y})")
            if name == "fmod" or dtype == "uint8":
                return r
            return f"tl.where(({r} != 0) & (({r} < 0) != ({y} < 0)), {r} + {y}, {r})"
        inf, nan = ops.literal(math.inf, dtype), ops.literal(math.nan, dtype)
        m = self.float_fmod(x, y)
        m = self.emit(f"tl.where((tl.abs({x}) == {inf}) | ({y} == 0) | ({x} != {x}) | ({y} != {y}), {nan}, "
                      f"tl.where((tl.abs({y}) == {inf}), {x}, {m}))")
        if name == "fmod":
            return m
        return f"tl.where(({m} != 0) & (({y} < 0) != ({m} < 0)), {m} + {y}, {m})"

    def float_fmod(self, x: str, y: str) -> str:
        """Emit C's ``fmod(x, y)`` of finite floats, ``y != 0``, exactly (CUDA's ``::fmod``, without
        libdevice), and return its name. Twelve steps take ``x`` down modulo ``y * 2**(24k)``, k = 11
        .. 0 (exact products; an infinite one is skipped): each subtracts ``trunc(x / Y) * Y`` by an
        fma whose exact result fits the significand (the quotient is below 2**24 after the step
        before), so the float32 quotients of any size (up to 2**277) reduce exactly; then the sign
        is made ``x``'s (a sum that is exact: fmod's result is representable) and a zero takes
        ``x``'s sign. Torch's CPU fmod gives NaN where ``x / y`` overflows; this gives the value."""
        trunc = ops.UNARY["trunc"]
        inf = ops.literal(math.inf, "float32")
        scaled = [y]
        for _ in range(11):
            scaled.append(self.emit(f"{scaled[-1]} * 16777216.0"))
        m = x
        for Y in reversed(scaled):
            t = self.emit(trunc(self.emit(f"tl.math.div_rn({m}, {Y})")))
            m = self.emit(f"tl.where(tl.abs({Y}) < {inf}, tl.fma(-{t}, {Y}, {m}), {m})")
        m = self.emit(f"tl.where(({m} != 0) & (({m} < 0) != ({x} < 0)), "
                      f"{m} + tl.where({x} < 0, -tl.abs({y}), tl.abs({y})), {m})")
        return self.emit(f"tl.where({m} == 0, {x} * 0.0, {m})")
