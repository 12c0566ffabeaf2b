"""Acquisition: turn an FX graph (from Dynamo or AOTAutograd) into a :class:`Trace`.

Proxy names: placeholders get the readable names the caller passes (``blocks_0_attn_qkv_weight``
for ``primals_7``, see :mod:`input_names`; the FX name is kept in ``Trace.fx_names``) or keep their
FX names, every other value becomes ``t0``, ``t1`` ... in graph order, so names are deterministic. ``operator.getitem`` on
multi-output ops is folded into the producing symbol's tuple of outputs.
"""
from __future__ import annotations

import operator
import re
from typing import Any, Mapping, Optional

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .constants import SYMBOL as CONSTANT_SYMBOL, hold, recordable, values_of
from .input_names import assign_input_names
from .ir import CHAIN_PREFIX, BoundSymbol, SourceInfo, Trace, TensorProxy, map_structure
from .registry import register_live
from .source import source_of
from .values import UnsupportedValue, constant, contiguous_strides, dtype_name, is_valid_name, proxy_for


class UnsupportedGraph(Exception):
    """The graph holds something the IR cannot represent; the graph runs eagerly instead."""


def symbol_name(target) -> str:
    """Return the symbol name for an FX call target (``aten.add.Tensor``, ``torch.tanh`` ...), always
    a dotted identifier (other characters become ``_``) because names end up in generated code."""
    name = _raw_symbol_name(target)
    parts = [re.sub(r"\W", "_", p) or "_" for p in name.split(".")]
    return ".".join(p if not p[0].isdigit() else f"_{p}" for p in parts)


def _raw_symbol_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.__name__}"
    if isinstance(target, str):  # call_method
        return f"Tensor.{target}"
    try:
        return torch.fx.node._get_qualified_name(target)
    except Exception:
        return getattr(target, "__qualname__", None) or repr(target)


def _method_caller(method: str):
    """Return ``fn(self, *args, **kwargs)`` calling the tensor method ``method`` (FX call_method)."""
    def call(self, *args, **kwargs):
        return getattr(self, method)(*args, **kwargs)
    call.__name__ = method
    return call


def _val(node: torch.fx.Node):
    v = node.meta.get("val", node.meta.get("example_value"))
    return v


def _constant_tensor(gm: torch.fx.GraphModule, node: torch.fx.Node, name: str, uid: str,
                     symbols: list, call_site: Optional[SourceInfo] = None) -> TensorProxy:
    """Append the symbol that makes the tensor constant ``node`` names and return its proxy: a
    factory call for a uniform constant, else ``prims.tensor_constant`` with the data in the trace,
    or holding the tensor when its data cannot be recorded (see :mod:`constants`)."""
    value = getattr(gm, node.target, None)
    if not isinstance(value, torch.Tensor):
        ops = sorted({symbol_name(u.target) for u in node.users if u.op == "call_function"})
        if ops and (isinstance(value, torch.nn.Module) or callable(value)):
            # A subgraph handed to a higher-order op (torch.cond's branches, while_loop's body, ...)
            raise UnsupportedGraph(f"{', '.join(ops)} takes a subgraph ({node.target}): control flow and other "
                                   f"higher-order ops with subgraphs are not compiled")
        raise UnsupportedGraph(f"get_attr node {node.target!r} is a {type(value).__name__}, not a tensor")
    shape = tuple(int(s) for s in value.shape)
    out = TensorProxy(name, shape, dtype_name(value.dtype), str(value.device), contiguous_strides(shape))
    kwargs = {"dtype": value.dtype, "device": value.device}
    with unset_fake_temporarily():  # the chain compilers run inside AOTAutograd's fake mode
        value = value.detach()
        plain = not (value.is_sparse or value.is_quantized or value.is_complex() or value.is_meta)
        why_not = recordable(value) if plain else "not a dense real tensor"
        fill = None
        if plain and value.numel() > 0:
            flat = value.reshape(-1)
            if bool((flat == flat[0]).all() or (flat != flat).all()):
                fill = flat[0].item()
        values = values_of(value) if why_not is None and fill is None else None
    note = f"tensor constant {node.target}"
    if fill is not None:
        sym, args = (("aten.scalar_tensor.default", (fill,)) if not shape
                     else ("aten.full.default", (list(shape), fill)))
        aten = sym
        note += ": uniform, made by a factory"
    elif values is not None:
        sym, args, aten = CONSTANT_SYMBOL, (values, list(shape)), None
        note += f": its {len(values)} values are in the trace; torch makes it"
    else:
        sym, args, aten = CONSTANT_SYMBOL, (None, list(shape)), None
        kwargs["held"] = hold(value, str(node.target))
        note += f": data not recorded ({why_not}); only the torch executor of this process can make it"
    symbols.append(BoundSymbol(sym=sym, args=args, kwargs=kwargs, outputs=out, uid=uid,
                               source=source_of(node.meta, call_site), aten=aten, note=note))
    return out


def fx_to_trace(gm: torch.fx.GraphModule, *, chain: str, graph: int, name: str | None = None,
                aten_only: bool = True, input_names: Optional[Mapping[str, str]] = None,
                call_site: Optional[SourceInfo] = None) -> Trace:
    """Convert ``gm`` into a Trace of chain ``chain`` for compiled graph number ``graph``.

    ``call_site``: the user line that called the compiled code (:func:`source.call_site`), the
    source of nodes whose FX stack trace names no frame at all.

    With ``aten_only`` every call must be an ATen/prims overload (AOTAutograd graphs); otherwise any
    callable is recorded by its qualified name (Dynamo graphs). ``input_names``: {placeholder name:
    readable name} (made valid and unique here). Raises :class:`UnsupportedGraph`.
    """
    prefix = CHAIN_PREFIX.get(chain, "x")
    fx_input_names = [n.name if is_valid_name(n.name) else f"in{i}"
                      for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")]
    final_names = assign_input_names(fx_input_names, input_names or {})
    env: dict[torch.fx.Node, Any] = {}
    inputs: list[TensorProxy] = []
    symbols: list[BoundSymbol] = []
    counter = 0
    uid = 0

    def fresh(v) -> Any:
        nonlocal counter
        if isinstance(v, torch.Tensor):
            p = proxy_for(f"t{counter}", v)
            counter += 1
            return p
        if isinstance(v, (tuple, list)):
            return tuple(fresh(x) for x in v)
        if v is None:
            return None
        return constant(v)

    def arg(a):
        def leaf(x):
            if isinstance(x, torch.fx.Node):
                if x not in env:
                    raise UnsupportedGraph(f"node {x.name} is used before it is defined")
                return env[x]
            return constant(x)
        return map_structure(leaf, a)

    try:
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                v = _val(node)
                if not isinstance(v, torch.Tensor):
                    raise UnsupportedGraph(
                        f"input {node.name} is a {type(v).__name__}, not a tensor (the trace IR takes tensor inputs; dynamic-shape graphs are compiled per shape before this)")
                p = proxy_for(final_names[fx_input_names[len(inputs)]], v)
                env[node] = p
                inputs.append(p)
            elif node.op == "get_attr":
                env[node] = _constant_tensor(gm, node, f"t{counter}", f"{prefix}{uid}", symbols, call_site)
                counter += 1
                uid += 1
            elif node.op in ("call_function", "call_method", "call_module"):
                if node.op == "call_module":
                    raise UnsupportedGraph(f"call_module {node.target!r}")
                target = node.target
                if target is operator.getitem and isinstance(env.get(node.args[0]), tuple):
                    env[node] = env[node.args[0]][node.args[1]]
                    continue
                if aten_only and not isinstance(target, torch._ops.OpOverload):
                    raise UnsupportedGraph(f"call of {symbol_name(target)} in an ATen graph")
                args = tuple(arg(a) for a in node.args)
                kwargs = {k: arg(v) for k, v in node.kwargs.items()}
                out = fresh(_val(node))
                env[node] = out
                meta = node.meta
                aten = meta.get("original_aten")
                sym = symbol_name(target)
                # The registry resolves this name (live, in this process only) to what the graph called.
                register_live(sym, target if not isinstance(target, str) else _method_caller(target))
                if aten is not None and isinstance(aten, torch._ops.OpOverload):
                    register_live(symbol_name(aten), aten)
                symbols.append(BoundSymbol(
                    sym=sym, args=args, kwargs=kwargs, outputs=out,
                    uid=f"{prefix}{uid}", source=source_of(meta, call_site),
                    seq_nr=meta.get("seq_nr") if isinstance(meta.get("seq_nr"), int) else None,
                    aten=symbol_name(target) if isinstance(target, torch._ops.OpOverload)
                    else (symbol_name(aten) if aten is not None else None),
                ))
                uid += 1
            elif node.op == "output":
                outputs = arg(node.args[0])
    except UnsupportedValue as e:
        raise UnsupportedGraph(str(e)) from None
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    renamed = {final: fx for fx, final in final_names.items() if final != fx}
    return Trace(name=name or chain, inputs=tuple(inputs), symbols=tuple(symbols), outputs=outputs,
                 chain=chain, graph=graph, pass_name="acquire", next_uid=uid, next_name=counter,
                 fx_names=renamed)
