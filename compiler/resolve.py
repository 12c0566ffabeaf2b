"""Map symbol names to the Python callables that implement them (reference semantics).

Names come from traces, and traces may come from a recording on disk, so resolution never evaluates
text: it looks names up in fixed namespaces (ATen/prims overloads, the prims table, and an allowlist
of torch/operator callables that Dynamo graphs use).
"""
from __future__ import annotations

import operator

import torch

from .prims import PRIMS


class UnknownSymbol(Exception):
    """A symbol name that resolves to nothing this process may run."""


def resolve_overload(name: str):
    """Return the OpOverload for ``aten.add.Tensor`` / ``prims.var.default`` (or a custom operator
    namespace's ``ns.op.overload``), or raise UnknownSymbol."""
    parts = name.split(".")
    if len(parts) != 3 or not all(p.isidentifier() and not p.startswith("__") for p in parts):
        raise UnknownSymbol(f"{name!r} is not an ATen overload name")
    try:
        ns = getattr(torch.ops, parts[0])
        if not isinstance(ns, torch._ops._OpNamespace):  # torch.ops.load_library and the like
            raise AttributeError(parts[0])
        packet = getattr(ns, parts[1])
        ov = getattr(packet, parts[2])
    except (AttributeError, RuntimeError):
        raise UnknownSymbol(f"no ATen overload named {name!r}") from None
    if not isinstance(ov, torch._ops.OpOverload):
        raise UnknownSymbol(f"{name!r} is not an operator overload")
    return ov


# Dynamo-level graphs call torch functions, Tensor methods and operators. Only names under these
# roots resolve, and never anything that touches files, processes or serialization.
_DYNAMO_ROOTS = {"torch": torch, "operator": operator, "_operator": operator}
_FORBIDDEN = ("load", "save", "hub", "serialization", "package", "jit", "compile", "utils",
              "_C._set", "distributed", "multiprocessing", "cuda.memory", "backends", "_dynamo")


def _resolve_dynamo(name: str):
    root, _, rest = name.partition(".")
    if name.startswith("Tensor."):
        return _tensor_method(name[len("Tensor."):])
    if root not in _DYNAMO_ROOTS or not rest:
        raise UnknownSymbol(f"{name!r} is not a callable this viewer may run")
    if any(part in rest.split(".") or rest.startswith(part) for part in _FORBIDDEN):
        raise UnknownSymbol(f"{name!r} is not a callable this viewer may run")
    obj = _DYNAMO_ROOTS[root]
    for attr in rest.split("."):
        if attr.startswith("__"):
            raise UnknownSymbol(f"{name!r} is not a callable this viewer may run")
        obj = getattr(obj, attr, None)
        if obj is None:
            raise UnknownSymbol(f"no callable named {name!r}")
    if not callable(obj):
        raise UnknownSymbol(f"{name!r} is not callable")
    return obj


def _tensor_method(method: str):
    if method.startswith("_") or not hasattr(torch.Tensor, method):
        raise UnknownSymbol(f"Tensor.{method} is not a tensor method")

    def call(self, *args, **kwargs):
        return getattr(self, method)(*args, **kwargs)

    return call


def resolve_symbol(name: str):
    """Return the reference callable for a symbol name; raise :class:`UnknownSymbol`."""
    if name.startswith("prims."):
        prim = PRIMS.get(name[len("prims."):])
        if prim is None:
            raise UnknownSymbol(f"no prim named {name!r}")
        return prim.packet
    if name.count(".") == 2 and name.split(".")[0] not in (*_DYNAMO_ROOTS, "Tensor"):
        return resolve_overload(name)  # aten.X.overload, or a custom operator ns.X.overload
    return _resolve_dynamo(name)


def is_operator_name(name: str) -> bool:
    """Return True when ``name`` names a registered operator overload (``aten.add.Tensor``,
    ``myns.my_op.default``)."""
    try:
        resolve_overload(name)
        return True
    except UnknownSymbol:
        return False
