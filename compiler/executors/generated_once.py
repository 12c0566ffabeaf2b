"""Kernel source generated once per distinct region (repeated layers fold here).

The 32 or 80 decoder layers of a Llama make regions that differ only in their value names. The
generated Triton module of such a region is the same text but for the comment that lists the
region's ops (``#   t5 = prims.add(t3, t4)``): the kernel body names parameters and tile variables
by position, never by value name. So the module is generated once per structural key
(:func:`.region_verdicts.region_key`: ops, values named by first appearance, shapes, dtypes,
strides, device kind, the phase limit) with a placeholder line where the op listing goes, and each
region fills the placeholder with its own listing. The listing is renamed through the IR (each
listed symbol's proxies get the names of this region's values), never by editing text.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Callable

from ..ir import BoundSymbol, TensorProxy, map_structure
from ..printer import call_text, comment_text

# The line of a generated module that the region's op listing replaces; nothing else in a module
# can read so (generated lines are code, and the listing itself goes through comment_text).
REGION_OPS = "#   <thundervis: the region's ops>"

_LIMIT = 4096  # templates kept; a template is one module's text (a few KB)
_memo: dict = {}
_lock = threading.Lock()
stats = {"asked": 0, "generated": 0}


def value_names(members: list[BoundSymbol], outputs: list[TensorProxy]) -> list[str]:
    """Return the region's value names in first-appearance order (the order region_key numbers them)."""
    names: dict[str, None] = {}

    def see(v):
        if isinstance(v, TensorProxy):
            names.setdefault(v.name, None)
        return v

    def walk(b: BoundSymbol):
        map_structure(see, b.args)
        map_structure(see, b.kwargs)
        map_structure(see, b.outputs)
        for s in b.subsymbols:
            walk(s)
    for b in members:
        walk(b)
    for p in outputs:
        see(p)
    return list(names)


def _renamer(mapping: dict[str, str]) -> Callable:
    """Return a function renaming proxies by ``mapping``; a name the plan derived from a region
    value (``t5_moved``, ``t5_kept``: the value's name, an underscore, a suffix) follows its base."""
    def rename_name(name: str) -> str:
        if name in mapping:
            return mapping[name]
        cut = name.rfind("_")
        while cut > 0:
            base = name[:cut]
            if base in mapping:
                return mapping[base] + name[cut:]
            cut = name.rfind("_", 0, cut)
        return name

    def rename(v):
        if isinstance(v, TensorProxy):
            new = rename_name(v.name)
            return v if new == v.name else dataclasses.replace(v, name=new)
        return v
    return rename


def listing(listed: tuple, mapping: dict[str, str]) -> str:
    """Return the op listing comment of a module: one ``#   <call>`` line per listed symbol, its
    values renamed by ``mapping`` (template name -> this region's name)."""
    rename = _renamer(mapping)
    lines = []
    for b in listed:
        if mapping:
            b = b.replace(args=map_structure(rename, b.args), kwargs=map_structure(rename, b.kwargs),
                          outputs=map_structure(rename, b.outputs))
        lines.append(f"#   {comment_text(call_text(b))}")
    return "\n".join(lines)


def fill(ks, listed: tuple, mapping: dict[str, str]):
    """Return the KernelSource ``ks`` (a template) with its op listing in place of :data:`REGION_OPS`."""
    return dataclasses.replace(ks, source=ks.source.replace(REGION_OPS, listing(listed, mapping), 1), listed=())


def generated_once(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str, phase_limit: int,
                   make: Callable):
    """Return the KernelSource of a region: ``make()`` (which returns a template, its listing as
    :data:`REGION_OPS` and the listed symbols in ``listed``) once per region key, filled with this
    region's own listing. Unfusable from ``make`` propagates and is not kept."""
    from .. import faults
    from .region_verdicts import region_key
    if faults.active_faults():  # a test fault changes the generated code: never share it
        ks = make()
        return fill(ks, ks.listed, {})
    key = ("generate", region_key(members, outputs, device_kind, phase_limit))
    names = value_names(members, outputs)
    with _lock:
        stats["asked"] += 1
        hit = _memo.get(key)
    if hit is None:
        hit = (make(), names)
        with _lock:
            stats["generated"] += 1
            if len(_memo) >= _LIMIT:
                _memo.clear()
            _memo[key] = hit
    template, first = hit
    mapping = {a: b for a, b in zip(first, names) if a != b}
    return fill(template, template.listed, mapping)
