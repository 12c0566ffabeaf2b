"""Tensor constants made inside ``forward`` (``torch.tensor([])``, small tables, index tensors, masks).

AOTAutograd leaves such a tensor in the graph as a ``get_attr`` node. It becomes one symbol:

- uniform (every element equal, non-empty): ``aten.full`` / ``aten.scalar_tensor`` (a factory that
  fusion executors can run);
- otherwise, with at most :data:`MAX_RECORDED_ELEMENTS` elements of a real or bool dtype: the
  trace constant ``prims.tensor_constant(values, shape, dtype=..., device=...)``, whose data is a
  flat list of Python numbers in the trace itself (plain JSON in recordings, never pickled; floats
  round-trip exactly through ``repr``);
- anything else (bigger, complex, quantized ...): the same symbol with ``values=None`` and a
  ``held=KEY`` argument naming the live tensor this process keeps (:func:`hold`). Only the torch
  executor runs it, in the process that compiled it; a trace reloaded from a recording says the data
  was not recorded instead of running.

Either way the graph compiles: a constant never sends a chain to eager.
"""
from __future__ import annotations

import itertools
import threading
from typing import Optional

import torch

# ~20 bytes of JSON per element, stored once per recorded pass: 1024 elements stay well under 1 MB.
MAX_RECORDED_ELEMENTS = 1024
SYMBOL = "prims.tensor_constant"

_RECORDABLE = {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool, torch.uint8,
               torch.int8, torch.int16, torch.int32, torch.int64}

_held: dict[str, torch.Tensor] = {}
_held_ids = itertools.count()
_lock = threading.Lock()


class ConstantNotRecorded(RuntimeError):
    """A held constant's data is not in this process (the trace came from a recording)."""


def recordable(value: torch.Tensor) -> Optional[str]:
    """Return None when ``value``'s data can be written into a trace, else why not (one phrase)."""
    if value.dtype not in _RECORDABLE:
        return f"dtype {str(value.dtype).removeprefix('torch.')} is not recorded as data"
    if value.numel() > MAX_RECORDED_ELEMENTS:
        return f"{value.numel()} elements exceed the {MAX_RECORDED_ELEMENTS} recorded as data"
    return None


def values_of(value: torch.Tensor) -> list:
    """Return the elements of a recordable tensor as a flat row-major list of Python numbers."""
    return value.detach().cpu().contiguous().reshape(-1).tolist()


def hold(value: torch.Tensor, label: str) -> str:
    """Keep ``value`` (a real, detached tensor) for this process and return the key a ``held=``
    argument names it by."""
    with _lock:
        key = f"{label}#{next(_held_ids)}"
        _held[key] = value
    return key


def held_tensor(key: str) -> torch.Tensor:
    """Return the tensor :func:`hold` kept under ``key``; raise :class:`ConstantNotRecorded`."""
    try:
        return _held[key]
    except (KeyError, TypeError):
        raise ConstantNotRecorded(
            f"the data of tensor constant {key!r} was not recorded (too big or of an unrecorded dtype); "
            f"it exists only in the process that compiled it") from None


def tensor_constant(values, shape, *, dtype: torch.dtype, device, held: Optional[str] = None) -> torch.Tensor:
    """Return a new tensor of ``shape`` and ``dtype`` on ``device`` holding ``values`` (a flat list),
    or a copy of the held tensor ``held`` when ``values`` is None. The reference implementation of
    ``prims.tensor_constant``; every call returns a fresh tensor (callers may write into it)."""
    shape = [int(s) for s in shape]
    if values is None:
        t = held_tensor(held)
        if list(t.shape) != shape or t.dtype != dtype:
            raise ConstantNotRecorded(f"held constant {held!r} is {list(t.shape)} {t.dtype}, not {shape} {dtype}")
        return t.to(device=device, copy=True)
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, (bool, int, float)) for v in values):
        raise ValueError("tensor_constant values must be a flat list of numbers")
    n = 1
    for s in shape:
        n *= s
    if len(values) != n:
        raise ValueError(f"tensor_constant has {len(values)} values for shape {shape}")
    return torch.tensor(list(values), dtype=dtype, device=device).reshape(shape)


def constant_problem(args: tuple, kwargs: dict) -> Optional[str]:
    """Return why a recorded ``prims.tensor_constant(values, shape, dtype=, device=)`` may not be
    rebuilt and run (malformed arguments, or data that was not recorded), or None when it may."""
    if len(args) != 2 or set(kwargs) - {"dtype", "device", "held"} or "dtype" not in kwargs:
        return "tensor_constant takes (values, shape, dtype=, device=)"
    values, shape = args
    if not isinstance(shape, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                       for s in shape):
        return "tensor_constant shape is not a list of sizes"
    if not isinstance(kwargs["dtype"], torch.dtype) or kwargs["dtype"] not in _RECORDABLE:
        return "tensor_constant dtype is not one whose data is recorded"
    if not isinstance(kwargs.get("device", "cpu"), (str, torch.device)):
        return "tensor_constant device is not a device"
    if values is None:
        return "the data of this tensor constant was not recorded (too big or of an unrecorded dtype)"
    n = 1
    for s in shape:
        n *= s
    if not isinstance(values, (list, tuple)) or len(values) != n \
            or not all(isinstance(v, (bool, int, float)) for v in values):
        return f"tensor_constant values are not {n} numbers"
    return None
