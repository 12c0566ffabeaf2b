"""Lowering one ATen call to prims, using PyTorch's decomposition table traced with make_fx.

A call is traced on fake tensors with every decomposition PyTorch registers, except for the ops
that are prims (so tracing stops there), completed by :mod:`.lowerings` (``torch.ops.prims``
operators that PyTorch's decompositions emit, and ATen ops it leaves above the prims). The result is cached per
operator and argument metadata as a :class:`Template` and instantiated for each symbol.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch._decomp
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import make_fx

from . import faults
from .decomposition_check import output_mismatch, outputs_to_restride
from .decomposition_check import timed as check_timed
from .lowerings import ATEN_LOWERINGS, TORCH_PRIM_LOWERINGS, Refused, add_same_named_prims
from .nn_lowerings import NN_LOWERINGS
from .ir import BoundSymbol, Minter, TensorProxy, flatten, map_structure
from .prims import is_prim_overload, prim_for, prim_overloads
from .random_whole import REASON as RANDOM_REASON
from .random_whole import RANDOM_WHOLE, is_random_whole
from .resolve import UnknownSymbol, resolve_overload
from .values import UnsupportedValue, constant, contiguous_strides, dtype_name, proxy_for, torch_dtype

aten = torch.ops.aten
tprims = torch.ops.prims


add_same_named_prims(is_prim_overload)


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict:
    """Return PyTorch's decomposition table without the prims, plus our lowerings (see
    :mod:`.lowerings`), which win over PyTorch's where both exist."""
    keep = prim_overloads() | RANDOM_WHOLE  # random ops stay whole: eager's draws (random_whole)
    table = {op: fn for op, fn in torch._decomp.decomposition_table.items() if op not in keep}
    table.update(TORCH_PRIM_LOWERINGS)
    table.update({op: fn for op, fn in (ATEN_LOWERINGS | NN_LOWERINGS).items() if op not in keep})
    return table


def _faulty_gelu(a, approximate: str = "none"):
    """gelu with 0.5005 for 0.5: the ``gelu_constant`` test fault (:mod:`.faults`)."""
    if approximate == "tanh":
        inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        return 0.5005 * a * (1 + torch.tanh(inner))
    return a * 0.5005 * (1 + torch.erf(a * 0.7071067811865476))


def _table_with_faults() -> dict:
    """:func:`decomposition_table`, with the test faults :mod:`.faults` turns on (normally none)."""
    if not faults.active("gelu_constant"):
        return decomposition_table()
    return {**decomposition_table(), aten.gelu.default: _faulty_gelu}


class NotLowered(Exception):
    """The op has no complete lowering to prims; the message says why."""


@dataclass(frozen=True)
class _Node:
    target: Any  # OpOverload
    args: tuple  # with ("in", i) / ("node", j) references
    kwargs: dict
    meta: Any  # FakeTensor or tuple of them


@dataclass(frozen=True)
class Template:
    """A traced lowering: prim nodes over numbered inputs, and where each output comes from."""

    nodes: tuple[_Node, ...]
    outputs: tuple  # per flat output: ("in", i) | ("node", j, k) | ("const", v)


_fake_mode = None


def _fake():
    global _fake_mode
    if _fake_mode is None:
        _fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    return _fake_mode


def _key_of(v, names: dict):
    """Cache key of an argument structure. ``names`` numbers proxies by first appearance, so
    ``xlogy(a, a)`` and ``xlogy(a, b)`` (one traced input versus two) never share a template."""
    if isinstance(v, TensorProxy):
        return ("T", names.setdefault(v.name, len(names)), v.shape, v.dtype, v.device, v.strides)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_key_of(x, names) for x in v)
    if isinstance(v, dict):
        return ("K",) + tuple((k, _key_of(x, names)) for k, x in sorted(v.items()))
    if isinstance(v, slice):
        return ("S", v.start, v.stop, v.step)
    return ("C", type(v).__name__, repr(v))


_TEMPLATES: dict = {}


def _trace_template(op, args, kwargs) -> Template:
    """Return the :class:`Template` of ``op`` on arguments like ``args``/``kwargs``: its decomposition
    traced on fake tensors of their metadata; raise :class:`NotLowered` saying why it has none."""
    return _template_of(_decomposition_graph(op, args, kwargs))


def _decomposition_graph(op, args, kwargs):
    """Trace ``op``'s decomposition (our table, faults included) with ``make_fx`` on fake tensors of
    the arguments' metadata, one per distinct proxy; return the FX graph module."""
    proxies = [p for p in flatten((args, tuple(kwargs.values()))) if isinstance(p, TensorProxy)]
    mode = _fake()
    with mode:
        fakes = [torch.empty_strided(p.shape, p.strides or contiguous_strides(p.shape), dtype=torch_dtype(p.dtype),
                                     device=p.device) for p in proxies]
    by_name = {}

    def fn(*tensors):
        vals = dict(zip(by_name, tensors))
        a = map_structure(lambda v: vals[v.name] if isinstance(v, TensorProxy) else v, args)
        k = map_structure(lambda v: vals[v.name] if isinstance(v, TensorProxy) else v, kwargs)
        return op(*a, **k)

    uniq = []
    for p, f in zip(proxies, fakes):
        if p.name not in by_name:
            by_name[p.name] = len(uniq)
            uniq.append(f)
    try:
        gm = make_fx(fn, decomposition_table=_table_with_faults(), tracing_mode="real")(*uniq)
    except Refused as e:  # a lowering that does not take these arguments, and says why
        raise NotLowered(str(e)) from None
    except Exception as e:  # data-dependent ops, missing fake kernels ...
        raise NotLowered(f"tracing its decomposition failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from None
    return gm


def _template_of(gm) -> Template:
    """Return the template of a traced decomposition: its prim calls, each argument an input, an
    earlier node's output or a constant; raise :class:`NotLowered` for a call that is not a prim."""
    ref: dict = {}
    nodes: list[_Node] = []
    placeholder = 0
    out_spec = None
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            ref[n] = ("in", placeholder)
            placeholder += 1
        elif n.op == "call_function":
            if n.target is __import__("operator").getitem:
                src = ref[n.args[0]]
                ref[n] = ("node", src[1], n.args[1])
                continue
            if not isinstance(n.target, torch._ops.OpOverload) or not is_prim_overload(n.target):
                name = f"{n.target}"
                raise NotLowered(f"its decomposition uses {name}, which has no lowering to prims")

            def conv(x):
                if isinstance(x, torch.fx.Node):
                    return ref[x]
                try:
                    return ("const", constant(x))
                except UnsupportedValue as e:
                    raise NotLowered(str(e)) from None
            a = map_structure(conv, tuple(n.args))
            k = map_structure(conv, dict(n.kwargs))
            ref[n] = ("node", len(nodes), None)
            nodes.append(_Node(n.target, a, k, n.meta.get("val")))
        elif n.op == "output":
            out_spec = n.args[0]
    flat_out = []
    for o in flatten(out_spec if isinstance(out_spec, (tuple, list)) else (out_spec,)):
        if isinstance(o, torch.fx.Node):
            flat_out.append(ref[o])
        else:
            flat_out.append(("const", o))
    return Template(tuple(nodes), tuple(flat_out))


def template_for(op, args, kwargs) -> Template:
    """Return the (cached) lowering template of ``op`` applied to ``args``/``kwargs``."""
    names: dict = {}
    key = (str(op), _key_of(args, names), _key_of(kwargs, names), faults.active_faults())
    t = _TEMPLATES.get(key)
    if t is None:
        try:
            # The fw/bw compilers run inside AOTAutograd's fake mode; trace in our own.
            with unset_fake_temporarily():
                t = _trace_template(op, args, kwargs)
        except NotLowered as e:
            t = e
        _TEMPLATES[key] = t
    if isinstance(t, NotLowered):
        raise t
    return t


def _computed(template: Template, inputs: list[TensorProxy], src) -> Optional[tuple]:
    """Return (shape, dtype, device, strides) of what template output ``src`` computes, or None
    when it is not a tensor."""
    if src[0] == "in":
        p = inputs[src[1]]
        return (p.shape, p.dtype, p.device, p.strides)
    if src[0] == "node":
        meta = template.nodes[src[1]].meta
        if src[2] is not None:
            meta = meta[src[2]] if isinstance(meta, (tuple, list)) and src[2] < len(meta) else None
        if isinstance(meta, torch.Tensor):
            try:
                strides = tuple(int(s) for s in meta.stride())
            except Exception:
                strides = None
            return (tuple(meta.shape), dtype_name(meta.dtype), str(meta.device), strides)
        return None
    return None


def _restrided(v: TensorProxy, out: TensorProxy, parent: BoundSymbol, minter: Minter) -> list[BoundSymbol]:
    """Return prims copying ``v`` into ``out``'s dense layout: permute to its memory order, a
    contiguous clone, permute back (``out``'s strides are dense, see decomposition_check)."""
    perm = sorted(range(len(out.shape)), key=lambda d: (-out.strides[d], d))
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    src_strides = v.strides or contiguous_strides(v.shape)
    a = TensorProxy(minter.name(), tuple(v.shape[p] for p in perm), v.dtype, v.device,
                    tuple(src_strides[p] for p in perm))
    c = TensorProxy(minter.name(), a.shape, v.dtype, v.device, contiguous_strides(a.shape))

    def sym(name, args, kwargs, outputs, aten_name):
        return BoundSymbol(sym=f"prims.{name}", args=args, kwargs=kwargs, outputs=outputs, uid=minter.uid(),
                           origin=(parent.uid,), source=parent.source, seq_nr=parent.seq_nr, aten=aten_name)
    return [sym("permute", (v, perm), {}, a, "aten.permute.default"),
            sym("clone", (a,), {"memory_format": torch.contiguous_format}, c, "aten.clone.default"),
            sym("permute", (c, inv), {}, out, "aten.permute.default")]


def _checked_template(b: BoundSymbol) -> tuple:
    """Return ``(template, inputs, outputs, restride)`` for ``b``: its op's template, ``b``'s
    distinct tensor inputs and flat outputs, and the indices of the outputs whose values are right in
    another layout (they end with a copy into the recorded one); raise NotLowered when the op has no
    template or the template computes other outputs than ``b`` recorded."""
    try:
        op = resolve_overload(b.sym)
    except UnknownSymbol as e:
        raise NotLowered(str(e)) from None
    if is_random_whole(op):
        raise NotLowered(RANDOM_REASON)
    template = template_for(op, b.args, b.kwargs)
    inputs: list[TensorProxy] = []
    seen = set()
    for p in flatten((b.args, tuple(b.kwargs.values()))):
        if isinstance(p, TensorProxy) and p.name not in seen:
            seen.add(p.name)
            inputs.append(p)
    flat_outs = list(flatten(b.outputs if isinstance(b.outputs, (tuple, list)) else (b.outputs,)))
    with check_timed():
        computed = [_computed(template, inputs, src) for src in template.outputs]
        problem = output_mismatch(flat_outs, computed, strides=False)
        restride = {i for i in outputs_to_restride(flat_outs, computed) if template.outputs[i][0] != "const"}
    if problem is not None:
        raise NotLowered(problem)
    return template, inputs, flat_outs, restride


def lower_symbol(b: BoundSymbol, minter: Minter) -> list[BoundSymbol]:
    """Return prim symbols computing ``b``'s outputs (named as ``b``'s outputs); raise NotLowered."""
    template, inputs, flat_outs, restride = _checked_template(b)
    # Output proxies of the parent are produced directly by the node that computes them.
    wanted: dict = {}
    for i, (o, src) in enumerate(zip(flat_outs, template.outputs)):
        if isinstance(o, TensorProxy) and src[0] == "node" and (src[1], src[2]) not in wanted and i not in restride:
            wanted[(src[1], src[2])] = o
    node_out: list = []
    subs: list[BoundSymbol] = []

    def value(r):
        if r[0] == "in":
            return inputs[r[1]]
        if r[0] == "node":
            out = node_out[r[1]]
            return out if r[2] is None else out[r[2]]
        return r[1]

    def arg(x):
        if isinstance(x, tuple) and len(x) in (2, 3) and x and x[0] in ("in", "node", "const"):
            return value(x)
        if isinstance(x, (tuple, list)):
            return type(x)(arg(y) for y in x)
        if isinstance(x, dict):
            return {k: arg(v) for k, v in x.items()}
        return x

    for j, n in enumerate(template.nodes):
        if isinstance(n.meta, (tuple, list)):
            out = tuple(wanted.get((j, k)) or proxy_for(minter.name(), m) if isinstance(m, torch.Tensor) else None
                        for k, m in enumerate(n.meta))
        else:
            out = wanted.get((j, None)) or proxy_for(minter.name(), n.meta)
        node_out.append(out)
        prim = prim_for(n.target)
        subs.append(BoundSymbol(
            sym=f"prims.{prim.name}", args=arg(n.args), kwargs=arg(n.kwargs), outputs=out,
            uid=minter.uid(), origin=(b.uid,), source=b.source, seq_nr=b.seq_nr,
            aten=f"{n.target.namespace}.{n.target._opname}.{n.target._overloadname}",
        ))
    for i in sorted(restride):
        subs.extend(_restrided(value(template.outputs[i]), flat_outs[i], b, minter))
    # Outputs that are inputs, constants or repeated need an explicit alias so every parent output
    # proxy is defined by a subsymbol.
    defined = {p.name for s in subs for p in s.flat_outputs()}
    for o, src in zip(flat_outs, template.outputs):
        if isinstance(o, TensorProxy) and o.name not in defined:
            v = value(src) if src[0] != "const" else None
            if not isinstance(v, TensorProxy):
                raise NotLowered("its decomposition returns a constant where a tensor is expected")
            subs.append(BoundSymbol(sym="prims.alias", args=(v,), kwargs={}, outputs=o, uid=minter.uid(),
                                    origin=(b.uid,), source=b.source, seq_nr=b.seq_nr, aten="aten.alias.default"))
            defined.add(o.name)
    return subs
