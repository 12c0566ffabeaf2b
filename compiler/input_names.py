"""Readable names for the inputs of acquired traces.

FX names inputs after how they were traced, not what they are: Dynamo's placeholders read
``l_self_modules_blocks_modules_0_modules_attn_modules_qkv_parameters_weight_``, AOTAutograd's
``primals_7`` and ``tangents_1``. A trace a person reads names them ``blocks_0_attn_qkv_weight``,
``idx`` and ``grad_out_0`` instead, and keeps the FX name in :attr:`Trace.fx_names`.

Where the names come from:

- Dynamo: each placeholder's ``grapharg`` metadata holds the :class:`Source` it was read from
  (``L['self']._modules['blocks']._modules['0']...._parameters['weight']``); the keys along that
  path make the name, minus the ``_modules``/``_parameters``/``_buffers`` hops and minus the root
  when it is the module itself (``self``, ``fn`` when Dynamo starts in ``Module._call_impl``, or
  ``args[0]`` when it starts in a ``wrapper(*args, **kwargs)`` decorator around ``forward``, as
  transformers' models do) or the wrapper's ``kwargs`` dict: whatever the calling convention,
  ``model(input_ids=...)`` reads ``input_ids`` and a parameter ``model_layers_0_..._weight``.
  Without it the placeholder name itself is cleaned the same way.
- AOTAutograd: ``aot_module_simplified`` flattens its inputs as the module's own parameters, then
  its buffers, then the Dynamo graph's inputs, and names them ``primals_{i+1}`` (training) or
  ``arg{i}_1`` (inference) in that order; ``tangents_{i+1}`` is the gradient of the forward's i-th
  differentiable output.
- The backward graph's other inputs are the values the forward saved for it: the partitioner
  appends them, in order, to the forward graph's outputs. Each is named after the forward value it
  is (``fw_t12`` for the forward trace's ``t12``, or the input's own name) instead of its FX name
  (``mul_3``); when shapes and dtypes do not line up one to one, the FX names stay.

Every name is a valid identifier that cannot shadow what generated code uses (``torch``, builtins,
``t<N>`` proxy names, callee and kernel names), unique in its trace and deterministic.
"""
from __future__ import annotations

import builtins
import keyword
import re
from typing import Iterable, Mapping, Optional, Sequence

_KEY = re.compile(r"\['([^'\]]*)'\]|\[(\d+)\]|\.([A-Za-z_][A-Za-z0-9_]*)|^([A-Za-z_][A-Za-z0-9_]*)")
_HOPS = frozenset(("_modules", "_parameters", "_buffers"))
_PROXY = re.compile(r"t\d+")
_KERNEL = re.compile(r"(g\d+_)?[A-Za-z]+_fusion_\d+")
# Prefixes of the callee names codegen binds in the generated function's namespace.
_CALLEE_PREFIXES = ("aten_", "prims_", "torch_", "_tv_", "operator_")
_RESERVED = frozenset(dir(builtins)) | {"torch", "args", "aten", "prims", "math", "operator"}
MAX_LEN = 80


def source_path_name(source_name: str) -> Optional[str]:
    """Return ``blocks_0_attn_qkv_weight`` for a Dynamo source name such as
    ``L['self']._modules['blocks']._modules['0']._modules['attn']._modules['qkv']._parameters['weight']``
    (``idx`` for ``L['idx']``); None when nothing usable is in it."""
    keys = [next(g for g in m.groups() if g is not None) for m in _KEY.finditer(source_name)]
    if keys and keys[0] in ("L", "G"):  # the frame's locals / globals
        keys = keys[1:]
    keys = _without_frame_root(keys)
    parts = [k for k in keys if k not in _HOPS]
    return _identifier("_".join(parts)) if parts else None


def _without_frame_root(keys: list[str]) -> list[str]:
    """Drop what names the traced frame rather than the value: the module itself as the root
    (``self``, ``fn`` when Dynamo starts in ``Module._call_impl``, or ``args[i]`` when it starts in a
    ``wrapper(*args, **kwargs)`` decorator around ``forward``: a module path follows it) and the
    ``kwargs`` dict of such a wrapper (its key is the argument's name). So a model reads
    ``model_layers_0_input_layernorm_weight`` and ``input_ids`` however it was called."""
    if len(keys) > 1 and keys[0] == "kwargs":
        return keys[1:]
    if len(keys) > 2 and keys[0] == "args" and keys[1].isdigit() and keys[2] in _HOPS:
        return keys[2:]
    if len(keys) > 1 and (keys[1] in _HOPS or keys[0] == "self"):  # the root is the module itself
        return keys[1:]
    return keys


def placeholder_name(fx_name: str) -> Optional[str]:
    """Return a readable name from a Dynamo placeholder name alone:
    ``l_self_modules_fc1_parameters_weight_`` -> ``fc1_weight``, ``l_x_`` -> ``x``,
    ``l_kwargs_input_ids_`` -> ``input_ids``, ``l_args_0_modules_fc_parameters_weight_`` -> ``fc_weight``."""
    m = re.fullmatch(r"[lg]_(.+?)_?", fx_name)
    if m is None:
        return None
    name = re.sub(r"^(self_|kwargs_(?=.)|args_\d+_(?=(modules|parameters|buffers)_))", "", m.group(1))
    name = re.sub(r"(^|_)(modules|parameters|buffers)_", r"\1", name)
    return _identifier(name)


def _identifier(text: str) -> Optional[str]:
    name = re.sub(r"\W+", "_", text).strip("_")[:MAX_LEN].rstrip("_")
    if not name:
        return None
    return f"_{name}" if name[0].isdigit() else name


def dynamo_input_names(gm) -> list[Optional[str]]:
    """Return the readable name of each placeholder of a Dynamo ``GraphModule``, in order (None where
    there is none better than the FX name)."""
    names = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        name = None
        source = getattr(node.meta.get("grapharg"), "source", None)
        if source is not None:
            try:
                text = source.name if isinstance(source.name, str) else source.name()
                name = source_path_name(str(text))
            except Exception:  # a source kind we do not know: fall back to the placeholder name
                name = None
        names.append(name or placeholder_name(node.name))
    return names


def aot_argument_names(gm, dynamo_names: Sequence[Optional[str]]) -> list[Optional[str]]:
    """Return the names of AOTAutograd's flat arguments for Dynamo graph ``gm``: its own parameters,
    its buffers (as ``aot_module_simplified`` lists them), then the Dynamo inputs."""
    params = [_identifier(n) for n, _ in gm.named_parameters(remove_duplicate=False)]
    buffers = [_identifier(n) for n, _ in gm.named_buffers(remove_duplicate=False)]
    return params + buffers + list(dynamo_names)


def aot_input_names(fx_names: Iterable[str], arguments: Sequence[Optional[str]]) -> dict[str, str]:
    """Return {FX placeholder name: readable name} for an AOTAutograd graph's placeholders
    (``primals_N``, ``argN_1``, ``tangents_N``), given the names of its flat ``arguments``."""
    out = {}
    for fx in fx_names:
        m = re.fullmatch(r"primals_(\d+)|arg(\d+)_1|tangents_(\d+)", fx)
        if m is None:
            continue
        primal, arg, tangent = m.groups()
        if tangent is not None:
            out[fx] = f"grad_out_{int(tangent) - 1}"
            continue
        i = int(primal) - 1 if primal is not None else int(arg)
        if 0 <= i < len(arguments) and arguments[i]:
            out[fx] = arguments[i]
    return out


def saved_input_names(placeholders: Sequence[tuple[str, tuple, str]], forward_outputs: Sequence) -> dict[str, str]:
    """Return {FX name: readable name} for a backward graph's saved-value inputs.

    ``placeholders``: the backward graph's non-tangent placeholders as (FX name, shape, dtype
    name), in order; ``forward_outputs``: the forward trace's outputs, flat and in order (proxies,
    None for non-tensors). The last ``len(placeholders)`` forward outputs are the saved values;
    nothing is renamed unless every one matches its placeholder's shape and dtype."""
    if not placeholders or len(forward_outputs) < len(placeholders):
        return {}
    saved = list(forward_outputs)[len(forward_outputs) - len(placeholders):]
    out = {}
    for (fx, shape, dtype), p in zip(placeholders, saved):
        if getattr(p, "shape", None) != tuple(shape) or getattr(p, "dtype", None) != dtype:
            return {}
        out[fx] = f"fw_{p.name}" if _PROXY.fullmatch(p.name) else p.name
    return out


def _reserved(name: str) -> bool:
    return (keyword.iskeyword(name) or name in _RESERVED or _PROXY.fullmatch(name) is not None
            or _KERNEL.fullmatch(name) is not None or name.startswith(_CALLEE_PREFIXES))


def assign_input_names(fx_names: Sequence[str], wanted: Mapping[str, str]) -> dict[str, str]:
    """Return {FX name: final name} for a trace's inputs: the ``wanted`` readable name where there
    is one, made safe (not a keyword, builtin, proxy, callee or kernel name: ``_`` appended) and
    unique (``_2``, ``_3`` ...); inputs without one keep their FX name, and are never renamed."""
    kept = [n for n in fx_names if not wanted.get(n)]
    taken = set(kept)
    out = {n: n for n in kept}
    for fx in fx_names:
        if fx in out:
            continue
        base = _identifier(wanted[fx]) or fx
        if _reserved(base):
            base += "_"
        name, i = base, 2
        while name in taken:
            name = f"{base}_{i}"
            i += 1
        taken.add(name)
        out[fx] = name
    return out


def parameter_flags(gm) -> list[bool]:
    """Return, per AOTAutograd flat argument of Dynamo graph ``gm`` (:func:`aot_argument_names`'s
    order), whether it is a module parameter or buffer (Dynamo names a lifted one by its
    ``_parameters`` / ``_buffers`` hop)."""
    own = len(list(gm.named_parameters(remove_duplicate=False))) + len(list(gm.named_buffers(remove_duplicate=False)))
    raw = [n.name.lower() for n in gm.graph.nodes if n.op == "placeholder"]
    return [True] * own + [("_parameters_" in n or "_buffers_" in n) for n in raw]


def aot_names(gm, arguments: list) -> dict[str, str]:
    """Return {placeholder: readable name} for an AOTAutograd graph ``gm`` whose flat arguments
    are named ``arguments`` (see :func:`aot_input_names`)."""
    return aot_input_names([n.name for n in gm.graph.nodes if n.op == "placeholder"], arguments)


def saved_names(gm, forward_outputs: list) -> dict[str, str]:
    """Return {placeholder: readable name} for the saved values backward graph ``gm`` reads, given
    the acquired forward trace's outputs (see :func:`saved_input_names`)."""
    import torch
    saved = []
    for n in gm.graph.nodes:
        if n.op != "placeholder" or n.name.startswith("tangents_"):
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            return {}
        saved.append((n.name, tuple(int(s) for s in v.shape), str(v.dtype).removeprefix("torch.")))
    return saved_input_names(saved, forward_outputs)
