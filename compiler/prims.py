"""The prims: the small set of primitive operations every decomposition ends in.

Each prim is named after the ATen operator whose semantics it has (``prims.add`` is ``aten.add``:
broadcasting and type promotion included) and carries that operator as its torch reference
implementation. A bound symbol of a prim records the exact ATen overload in ``BoundSymbol.aten``;
the printed form ``prims.add(t0, t1)`` runs through :data:`prims`, a namespace whose attributes are
the reference implementations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .constants import tensor_constant

aten = torch.ops.aten


@dataclass(frozen=True)
class Prim:
    """A primitive: its name, kind (``unary``, ``binary``, ``reduction`` ...), and ATen packet."""

    name: str
    kind: str
    packet: Callable

    @property
    def doc(self) -> str:
        """What its kind of prim does (:data:`KINDS`)."""
        return KINDS[self.kind]

    @property
    def overloads(self) -> list:
        """The ATen overloads of its packet ([] for a Python function such as ``tensor_constant``)."""
        if not hasattr(self.packet, "overloads"):  # tensor_constant: a Python function, no ATen op
            return []
        return [getattr(self.packet, o) for o in self.packet.overloads()]


# What each kind of prim does; executors decide what to claim by kind. docs/prims.md lists them all.
KINDS: dict[str, str] = {
    "unary": "elementwise function of one tensor (ATen type promotion: ints -> float where ATen does)",
    "binary": "elementwise function of two tensors or a tensor and a number, with broadcasting",
    "ternary": "elementwise select or clamp of up to three operands, with broadcasting",
    "conversion": "a copy with another dtype and/or device (aten._to_copy)",
    "shape": "view, broadcast, permute, slice, concatenate, pad, copy: moves elements, computes nothing",
    "reduction": "reduces dims (sum, mean, max, var, arg-max, any/all), keepdim and dtype as in ATen",
    "matmul": "matrix products: mm and bmm (linear/addmm/matmul/einsum lower to these)",
    "rng": "draws random numbers from the global generator; never merged by CSE",
    "factory": "creates a tensor from sizes and a value (full, arange, empty ...)",
    "indexing": "reads or writes by index tensors (index, index_put, scatter, scatter_add)",
    "constant": "a tensor whose data the trace holds (a constant made inside forward); runs in torch",
}

_UNARY = """abs neg exp exp2 expm1 log log1p log2 log10 sin cos tan asin acos atan sinh cosh tanh
asinh acosh atanh sqrt rsqrt reciprocal sigmoid erf erfc erfinv floor ceil round trunc sign
logical_not bitwise_not isnan lgamma digamma signbit""".split()
_BINARY = """add sub mul div pow maximum minimum remainder fmod atan2 eq ne lt le gt ge logical_and
logical_or logical_xor bitwise_and bitwise_or bitwise_xor copysign nextafter""".split()
_TERNARY = ["where", "clamp"]
_CONVERSION = ["_to_copy"]
_SHAPE = """view _unsafe_view expand permute squeeze unsqueeze slice cat clone alias
select index_select gather constant_pad_nd flip""".split()
_REDUCTION = "sum amax amin prod var argmax argmin any all".split()
_MATMUL = ["mm", "bmm"]
_RNG = ["rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "normal", "normal_functional",
        "uniform", "log_normal", "multinomial"]
_FACTORY = ["full", "iota", "arange", "scalar_tensor", "empty", "empty_strided"]
_INDEXING = ["scatter", "scatter_add", "index_put", "index"]

_NAMES = {"_to_copy": "convert_element_type", "_unsafe_view": "view"}

PRIMS: dict[str, Prim] = {}
_BY_OVERLOAD: dict = {}


def _register(kind: str, names: list[str]) -> None:
    for n in names:
        packet = getattr(aten, n, None) or getattr(torch.ops.prims, n)
        name = _NAMES.get(n, n)
        prim = PRIMS.get(name) or Prim(name, kind, packet)
        PRIMS.setdefault(name, prim)
        for o in packet.overloads():
            ov = getattr(packet, o)
            # out= and in-place overloads are never prims: traces are functional.
            if o.startswith("out") or "_out" in o or n.endswith("_"):
                continue
            _BY_OVERLOAD[ov] = Prim(name, kind, packet)


for _kind, _names in [("unary", _UNARY), ("binary", _BINARY), ("ternary", _TERNARY),
                      ("conversion", _CONVERSION), ("shape", _SHAPE), ("reduction", _REDUCTION),
                      ("matmul", _MATMUL), ("rng", _RNG), ("factory", _FACTORY),
                      ("indexing", _INDEXING)]:
    _register(_kind, _names)
# The one prim that is no ATen operator: tensor data held by the trace (see constants.py).
PRIMS["tensor_constant"] = Prim("tensor_constant", "constant", tensor_constant)
# mean is a reduction prim too: decomposing it to sum/div changes rounding on low precision.
_register("reduction", ["mean"])


def prim_for(overload) -> Prim | None:
    """Return the :class:`Prim` an ATen overload is, or None when it is not a prim."""
    return _BY_OVERLOAD.get(overload)


def is_prim_overload(overload) -> bool:
    """Return True when ``overload`` is one of the prims' ATen overloads."""
    return overload in _BY_OVERLOAD


def prim_overloads() -> set:
    """Return the set of every ATen overload that is a prim."""
    return set(_BY_OVERLOAD)


class _PrimNamespace:
    """Attribute access ``prims.add`` returns the reference implementation of that prim."""

    def __getattr__(self, name: str):
        try:
            return PRIMS[name].packet
        except KeyError:
            raise AttributeError(f"no prim named {name!r}") from None

    def __dir__(self):
        return sorted(PRIMS)


prims = _PrimNamespace()
