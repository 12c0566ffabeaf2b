"""Dynamic-shape graphs compiled one concrete shape at a time.

The compiler's IR has static shapes. When Dynamo hands the backend a graph traced with symbolic
sizes (``torch.compile(dynamic=True)``, or its automatic dynamic shapes once a size changed between
calls, as a smaller last batch does), the graph is not compiled as it is: :class:`ShapeSpecialized`
compiles it at its first call with each new set of sizes, with those sizes as constants (its size
inputs removed; so are the floats Dynamo passes as 0-d tensors, a dropout's ``p`` or a BatchNorm's
``eps``, inside a checkpointed region's body too), and reuses that compile while they recur. Each compile is a graph of its own in
the recording, its reason naming the sizes. After ``limit`` shapes a new one runs the Dynamo graph
eagerly, and that is recorded as a fallback the first time (as Dynamo stops compiling a frame after
its recompile limit).
"""
from __future__ import annotations

import copy
import threading
from typing import Callable, Optional, Sequence

import torch
import torch.fx

# Shapes one dynamic-shape graph compiles before new ones run eagerly; None: as many as Dynamo's
# own recompile limit lets one frame have (torch._dynamo.config.recompile_limit, 8 by default).
SHAPE_LIMIT: Optional[int] = None


def shape_limit() -> int:
    """Return :data:`SHAPE_LIMIT`, or Dynamo's recompile limit when it is None."""
    if SHAPE_LIMIT is not None:
        return SHAPE_LIMIT
    try:
        from torch._dynamo import config
        limit = getattr(config, "recompile_limit", None) or getattr(config, "cache_size_limit", None)
        return int(limit) if limit else 8
    except Exception:
        return 8


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _placeholder_value(node: torch.fx.Node):
    return node.meta.get("example_value", node.meta.get("val"))


def _symbolic_sizes(value) -> bool:
    return isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))


def is_dynamic(gm: torch.fx.GraphModule, example_inputs: Sequence) -> bool:
    """True when Dynamo traced ``gm`` with symbolic sizes: an input is a symbolic int, float or
    bool, or a placeholder's traced value (or example input) has a symbolic size or stride."""
    if any(isinstance(a, _SYMBOLIC) or _symbolic_sizes(a) for a in example_inputs):
        return True
    return any(_symbolic_sizes(_placeholder_value(n)) for n in gm.graph.nodes if n.op == "placeholder")


def _item_only(node: torch.fx.Node) -> bool:
    """True when every use of placeholder ``node`` is ``.item()``: a Python float or int Dynamo
    passed as a 0-d tensor, which a static graph takes as a constant."""
    return bool(node.users) and all(
        (u.op == "call_function" and u.target in (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default))
        or (u.op == "call_method" and u.target == "item")
        for u in node.users)


def _float_as_tensor(node: torch.fx.Node) -> bool:
    """True when Dynamo passes placeholder ``node``, a Python float (a dropout's ``p``, a
    BatchNorm's ``eps``), as a 0-d tensor (``specialize_float=False``, part of its dynamic shapes)."""
    value = _placeholder_value(node)
    return (getattr(value, "item_memo", None) is not None  # the float Dynamo traced it from
            or bool(getattr(node.meta.get("grapharg"), "pass_arg_as_tensor", False)) or _item_only(node))


# Higher-order ops whose body, a submodule named by their first argument, is called with the rest
# of their arguments in order (torch.utils.checkpoint's region, Dynamo's plain wrap). Others lay
# their arguments out differently (invoke_subgraph, the autocast and grad-mode wraps) and are left
# alone: a constant reaching one stays an argument of it.
_BODY_CALLS = ("tag_activation_checkpoint", "wrap")


def _body_call(node: torch.fx.Node) -> Optional[str]:
    """Return the attribute name of the body ``node`` calls when it is one of :data:`_BODY_CALLS`
    whose first argument names a submodule no other node reads, else None."""
    if node.op != "call_function" or getattr(node.target, "__name__", None) not in _BODY_CALLS:
        return None
    body = node.args[0] if node.args else None
    if not (isinstance(body, torch.fx.Node) and body.op == "get_attr") or len(body.users) != 1:
        return None
    return body.target


def with_constants(gm: torch.fx.GraphModule, values: dict) -> torch.fx.GraphModule:
    """Return a copy of ``gm`` whose placeholders named in ``values`` (name -> int, float or bool)
    are no longer inputs: a symbolic scalar is that constant in every use, a float passed as a 0-d
    tensor has each ``.item()`` of it replaced by the value, and one handed to the body of a
    checkpointed region (:data:`_BODY_CALLS`) is made a constant of that body in the same way.
    ``gm`` is not changed."""
    graph = copy.deepcopy(gm.graph)
    bodies: dict = {}  # attribute -> that body with constants, for the copy

    def replace_uses(node: torch.fx.Node, value) -> None:
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n: value if n is node else n)
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n: value if n is node else n)

    for node in list(graph.nodes):
        if node.op != "placeholder" or node.name not in values:
            continue
        value = values[node.name]
        for user in list(node.users):
            attr = _body_call(user)
            if attr is None:
                continue
            body = bodies.get(attr, getattr(gm, attr))
            inner = [n.name for n in body.graph.nodes if n.op == "placeholder"]
            positions = [i for i, a in enumerate(user.args) if a is node and i > 0]
            bodies[attr] = with_constants(body, {inner[i - 1]: value for i in positions})
            user.args = tuple(a for i, a in enumerate(user.args) if i not in positions)
        if _item_only(node):
            for item in list(node.users):
                replace_uses(item, value)
                graph.erase_node(item)
        else:
            replace_uses(node, value)
        graph.erase_node(node)
    graph.lint()
    out = torch.fx.GraphModule(gm, graph)
    for attr, body in bodies.items():
        setattr(out, attr, body)
    return out


def propagate_sizes(gm: torch.fx.GraphModule, args: Sequence) -> None:
    """Replace the symbolic values Dynamo left in ``gm``'s node metadata by fake values of
    ``args``' concrete sizes (what the recorded Dynamo-level trace shows); on failure the old
    metadata stays (that trace is informative only; AOTAutograd traces the graph anew)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    try:
        FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*args)
    except Exception:
        return
    for node in gm.graph.nodes:  # the acquirer reads "val" first; Dynamo's own passes "example_value"
        if "val" in node.meta:
            node.meta["example_value"] = node.meta["val"]


def _shape_key(args: Sequence, constant: Sequence[bool], varying: Sequence[int]) -> tuple:
    """What a specialization depends on: the sizes and strides of the tensors whose sizes Dynamo
    left symbolic (``varying``), each scalar's (and each 0-d tensor taken as a constant's) type and
    value, and the grad mode (a training or an inference graph). The other tensors' sizes, strides,
    dtypes and devices are fixed by Dynamo's guards on the graph: not read again at every call."""
    key = [torch.is_grad_enabled()]
    for i in varying:
        key.append((tuple(args[i].shape), tuple(args[i].stride())))
    for a, fixed in zip(args, constant):
        if fixed:
            key.append(("item", a.item()) if isinstance(a, torch.Tensor) else (type(a), a))
    return tuple(key)


def _shape_text(dims: Sequence) -> str:
    return "×".join(str(d) for d in dims) if dims else "scalar"


class ShapeSpecialized:
    """The callable the backend returns for a dynamic-shape Dynamo graph ``gm``: each new shape of
    its arguments is compiled by ``compile_static(gm_with_constants, tensor_args, reason)`` (the
    backend's own compile, which records it as a graph); past ``limit`` shapes, ``run_eagerly(reason)``
    is told once and new shapes run ``gm`` itself. ``names``: readable names of ``gm``'s inputs
    (Dynamo's sources), for the reasons."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence,
                 compile_static: Callable, run_eagerly: Callable[[str], None],
                 names: Optional[Sequence[str]] = None, limit: Optional[int] = None):
        self.gm, self.compile_static, self.run_eagerly = gm, compile_static, run_eagerly
        self.limit = shape_limit() if limit is None else limit
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise ValueError(f"{len(placeholders)} graph inputs, {len(example_inputs)} example inputs")
        self.placeholders = [n.name for n in placeholders]
        self.names = [n or p for n, p in zip(list(names or []) + [None] * len(placeholders), self.placeholders)]
        # Inputs that become constants: scalars, and 0-d tensors read only by .item().
        self.constant = [not isinstance(a, torch.Tensor) or (_float_as_tensor(n) and a.dim() == 0)
                         for n, a in zip(placeholders, example_inputs)]
        # Tensors whose sizes are symbolic: what a reason shows ("idx 8×7").
        self.varying = [i for i, (n, a) in enumerate(zip(placeholders, example_inputs))
                        if not self.constant[i] and (_symbolic_sizes(a) or _symbolic_sizes(_placeholder_value(n)))]
        self.compiled: dict = {}
        self.eager_told = False
        self.tried = 0  # shapes compiled or failed to compile (the limit counts them)
        self.described: set = set()  # the reasons' texts so far
        self._lock = threading.Lock()

    def describe(self, args: Sequence, floats: bool = False) -> str:
        """Return the sizes of ``args`` a reason names: each tensor whose size varies, then each
        scalar input that is not one of their sizes (``idx 8×7, n=3``); ``floats``: the floats
        passed as 0-d tensors too (a model has dozens, eps and dropout rates, that rarely change:
        named only where the sizes alone do not tell two compiles apart)."""
        shown = [self.names[i] for i in self.varying]
        parts = [f"{self.names[i]} {_shape_text(tuple(args[i].shape))}" for i in self.varying]
        for i, a in enumerate(args):
            name = self.names[i]
            if not self.constant[i] or (isinstance(a, torch.Tensor) and not floats) or any(
                    name.startswith(f"{t}_size_") or name.startswith(f"{t}_stride_") for t in shown):
                continue
            parts.append(f"{name}={a.item() if isinstance(a, torch.Tensor) else a}")
        return ", ".join(parts) or "the same sizes"

    def _specialize(self, args: Sequence) -> Callable:
        shape = self.describe(args)
        if shape in self.described:  # the same sizes with other floats
            shape = self.describe(args, floats=True)
        self.described.add(shape)
        self.tried += 1
        constants = {p: (a.item() if isinstance(a, torch.Tensor) else a)
                     for p, a, fixed in zip(self.placeholders, args, self.constant) if fixed}
        keep = [i for i, fixed in enumerate(self.constant) if not fixed]
        static = with_constants(self.gm, constants)
        propagate_sizes(static, [args[i] for i in keep])
        reason = (f"a dynamic-shape graph compiled for {shape} "
                  f"(shape {self.tried}; at most {self.limit}, then eager)")
        compiled = self.compile_static(static, [args[i] for i in keep], reason)

        def run(*call_args):
            return compiled(*[call_args[i] for i in keep])
        return run

    def _first_call(self, key: tuple, args: Sequence) -> Callable:
        """Return what runs shape ``key`` from now on: its compile, or the graph itself past the
        limit (told once) or when compiling it failed (told, and counted as a shape)."""
        if self.tried >= self.limit:
            if not self.eager_told:
                self.eager_told = True
                self.run_eagerly(f"a dynamic-shape graph met more than {self.limit} shapes: "
                                 f"{self.describe(args)} and every later new shape run eagerly")
            return self.gm.forward  # not kept: any number of shapes may come
        try:
            fn = self._specialize(args)
        except Exception as e:  # our own failure must not stop training
            self.run_eagerly(f"a dynamic-shape graph could not be specialized for "
                             f"{self.describe(args)}: {type(e).__name__}: {e}")
            fn = self.gm.forward
        self.compiled[key] = fn
        return fn

    def __call__(self, *args):
        key = _shape_key(args, self.constant, self.varying)
        fn = self.compiled.get(key)
        if fn is None:
            with self._lock:
                fn = self.compiled.get(key) or self._first_call(key, args)
        return fn(*args)
