"""Conversion of torch values (FakeTensors, dtypes, devices, constants) into IR values."""
from __future__ import annotations

import math
import re

import torch

from .ir import TensorProxy

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def dtype_name(dtype: torch.dtype) -> str:
    """Return ``float32`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


# Every dtype, layout and memory format torch defines, by name: fixed tables built once from torch's
# own namespace, so a name read from a recording is looked up, never resolved on torch.
DTYPES: dict[str, torch.dtype] = {dtype_name(v): v for v in vars(torch).values() if isinstance(v, torch.dtype)}
LAYOUTS: dict[str, torch.layout] = {str(v).removeprefix("torch."): v for v in vars(torch).values()
                                    if isinstance(v, torch.layout)}
MEMORY_FORMATS: dict[str, torch.memory_format] = {str(v).removeprefix("torch."): v for v in vars(torch).values()
                                                  if isinstance(v, torch.memory_format)}
# A device as torch prints it: a known type and an optional small index.
DEVICE = re.compile(r"(cpu|cuda|meta|mps|xpu|hpu|mtia|privateuseone)(:[0-9]{1,4})?")


def torch_dtype(name: str) -> torch.dtype:
    """Return the torch dtype named ``name`` (``float32``); raise ValueError for anything else."""
    d = DTYPES.get(name) if isinstance(name, str) else None
    if d is None:
        raise ValueError(f"{str(name)[:40]!r} is not a torch dtype")
    return d


def proxy_for(name: str, t: torch.Tensor) -> TensorProxy:
    """Return a proxy called ``name`` with the metadata of tensor ``t`` (real, meta or fake)."""
    try:
        strides = tuple(int(s) for s in t.stride())
    except Exception:  # sparse or otherwise strideless tensors
        strides = None
    return TensorProxy(name, tuple(int(s) for s in t.shape), dtype_name(t.dtype), str(t.device), strides)


def contiguous_strides(shape) -> tuple[int, ...]:
    """Return the row-major strides of a tensor of ``shape``."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def is_valid_name(name: str) -> bool:
    """Return True when ``name`` is a plain Python identifier (proxy names must be)."""
    return bool(_IDENT.match(name)) and name not in ("None", "True", "False")


class UnsupportedValue(Exception):
    """A value (symbolic int, opaque object ...) that the IR cannot represent."""


def constant(value):
    """Return ``value`` as an IR constant, or raise :class:`UnsupportedValue`."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(constant(v) for v in value)
    if isinstance(value, slice):
        return slice(constant(value.start), constant(value.stop), constant(value.step))
    if value is Ellipsis:
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise UnsupportedValue(f"symbolic value {value} (dynamic shapes are not supported yet)")
    raise UnsupportedValue(f"value of type {type(value).__name__}")


def format_constant(value) -> str:
    """Return Python source that evaluates to the constant ``value``."""
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if isinstance(value, torch.dtype):
        return f"torch.{dtype_name(value)}"
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, tuple):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, slice):
        return f"slice({format_value(value.start)}, {format_value(value.stop)}, {format_value(value.step)})"
    if value is Ellipsis:
        return "..."
    return repr(value)


def format_value(value) -> str:
    """Return Python source for an argument: a proxy's name or a constant."""
    if isinstance(value, TensorProxy):
        return value.name
    return format_constant(value)
