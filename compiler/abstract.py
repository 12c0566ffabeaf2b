"""Abstract runs: a script's torch calls on fake tensors, so nothing is allocated and no kernel runs.

:func:`abstract_session` wraps a script's execution in a :class:`FakeTensorMode`: parameters,
activations, gradients and optimizer state carry shapes, dtypes and strides only. A script written
for a GPU works on a machine without one: a CUDA device (``.cuda()``, ``.to("cuda")``,
``device="cuda"``) is stood in for by fake *CPU* tensors, because a CPU-only torch build has no CUDA
device guard and its autograd engine aborts the process on the first CUDA tensor it accumulates into
(``InputMetadata``); kernels are still planned for the GPU target (``triton_planning``), and the
recording says the device was stood in for. CUDA autocast acts on the stand-ins as on the GPU
(:mod:`.abstract_autocast`).

Values that depend on data cannot be known: ``.item()``, ``.tolist()`` and a printed tensor give an
:class:`AbstractValue` placeholder (it formats as ``<abstract>`` and survives arithmetic), each call
site reported once; control flow on one (``if loss.item() < 0.1``, ``if (x > 0).any()``) raises
:class:`NeedsRealValue` naming the script line. :func:`fake_outputs` is what a compiled chain runs in
an abstract run: empty fake tensors shaped like the final trace's outputs.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from .abstract_autocast import cuda_policies, init_patch
from .ir import TensorProxy, Trace
from .values import torch_dtype

STAND_IN = torch.device("cpu")
_OWN_PACKAGES = ("torch", "thundervis", "triton", "functorch")


class NeedsRealValue(RuntimeError):
    """The script's control flow needs a value an abstract run cannot know. ``where``: (file, line,
    code) of the script line that asked for it."""

    def __init__(self, message: str, where: tuple):
        super().__init__(message)
        self.where = where


def script_frame(depth: int = 2):
    """Return the innermost frame outside torch, triton and thundervis (the user's line), or None."""
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_globals.get("__name__", "") or ""
        if name.split(".")[0] not in _OWN_PACKAGES:
            return f
        f = f.f_back
    return None


def _library_roots() -> tuple:
    import sysconfig
    paths = sysconfig.get_paths()
    return tuple({os.path.realpath(paths[k]) for k in ("purelib", "platlib", "stdlib") if paths.get(k)})


_LIBRARY_ROOTS = _library_roots()


def _script_file(path: str) -> bool:
    """Whether ``path`` is the user's code (not under site-packages or the standard library)."""
    if not path or path.startswith("<"):
        return False
    return not os.path.realpath(path).startswith(_LIBRARY_ROOTS)


def _where(frame) -> tuple:
    if frame is None:
        return ("<unknown>", 0, "")
    import linecache
    file, line = frame.f_code.co_filename, frame.f_lineno
    return (file, line, linecache.getline(file, line).strip())


def _needs(what: str, frame=None) -> NeedsRealValue:
    where = _where(frame if frame is not None else script_frame(3))
    base = os.path.basename(where[0])
    return NeedsRealValue(f"{base}:{where[1]} needs a real value ({what}), which an abstract run does not "
                          f"compute: `{where[2]}`", where)


class AbstractValue(float):
    """A placeholder for a number an abstract run cannot know (NaN underneath). It prints as
    ``<abstract>`` and arithmetic on it gives another placeholder; comparing it, or branching or
    indexing on it, raises :class:`NeedsRealValue` naming the line."""

    def __new__(cls, origin: str = ""):
        v = float.__new__(cls, float("nan"))
        v.origin = origin
        return v

    def __repr__(self):
        return "<abstract>"

    __str__ = __repr__

    def __format__(self, spec):
        return "<abstract>"

    def _same(self, *_):
        return AbstractValue(self.origin)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _same
    __mod__ = __rmod__ = __neg__ = __pos__ = __abs__ = __round__ = _same

    def _control(self, *_):
        raise _needs(f"a comparison of the placeholder from {self.origin}" if self.origin else "a comparison",
                     script_frame(2))

    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __bool__ = __int__ = __index__ = _control
    __hash__ = float.__hash__


@dataclass
class Placeholders:
    """The call sites that got a placeholder: (kind, file, line) -> [code, count], in first-seen order."""

    sites: dict = field(default_factory=dict)
    on_new: Optional[Callable[[dict], None]] = None
    optimizers: dict = field(default_factory=dict)  # class name -> what its first step held (see _optimizer_seen)

    def give(self, kind: str, frame) -> AbstractValue:
        """Count a placeholder handed out at ``frame`` (reporting a new site) and return it."""
        file, line, code = _where(frame)
        key = (kind, file, line)
        if key in self.sites:
            self.sites[key][1] += 1
        else:
            self.sites[key] = [code, 1]
            if self.on_new is not None:
                self.on_new({"kind": kind, "file": file, "line": line, "code": code})
        return AbstractValue(f"{os.path.basename(file)}:{line}")

    def as_list(self) -> list[dict]:
        """Return every site as {kind, file, line, code, count}."""
        return [{"kind": k, "file": f, "line": n, "code": c, "count": cnt}
                for (k, f, n), (c, cnt) in self.sites.items()]


def _stand_in(d):
    if isinstance(d, str) and d.split(":")[0] == "cuda":
        return STAND_IN
    if isinstance(d, torch.device) and d.type == "cuda":
        return STAND_IN
    return d


class _AbstractMode(FakeTensorMode):
    """Fake tensors whose factories asked for CUDA are made on the stand-in device."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs and "device" in kwargs:
            kwargs = {**kwargs, "device": _stand_in(kwargs["device"])}
        return super().__torch_dispatch__(func, types, args, kwargs)


def _module_apply(self, fn, recurse=True):
    """``nn.Module._apply`` for fake parameters: each is replaced by a new Parameter (torch swaps a
    fake parameter in place, which fails: its fake-tensor converter holds a weak reference)."""
    if recurse:
        for m in self.children():
            m._apply(fn)
    for k, p in self._parameters.items():
        if p is None:
            continue
        with torch.no_grad():
            out = nn.Parameter(fn(p), p.requires_grad)
            if p.grad is not None:
                out.grad = fn(p.grad)
        self._parameters[k] = out
    for k, b in self._buffers.items():
        if b is not None:
            self._buffers[k] = fn(b)
    return self


def _patches(placeholders: Placeholders, gpu_visible: bool, capability: tuple) -> list:
    """Return (owner, name, replacement) for every attribute an abstract run replaces."""
    to, item, tolist, rep = torch.Tensor.to, torch.Tensor.item, torch.Tensor.tolist, FakeTensor.__repr__
    real_available = torch.cuda.is_available

    def tensor_to(self, *args, **kw):
        args = tuple(_stand_in(a) if isinstance(a, (str, torch.device)) else a for a in args)
        if "device" in kw:
            kw["device"] = _stand_in(kw["device"])
        return to(self, *args, **kw)

    def tensor_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        return to(self, STAND_IN, non_blocking=non_blocking, memory_format=memory_format)

    def tensor_item(self):
        if not isinstance(self, FakeTensor):
            return item(self)
        caller = sys._getframe(1)  # torch's own .item() (AdamW's step count) is told apart from the script's
        return placeholders.give("item" if script_frame(2) is caller else "item inside torch", script_frame(2))

    def tensor_tolist(self):
        if not isinstance(self, FakeTensor):
            return tolist(self)
        v = placeholders.give("tolist", script_frame(2))

        def nest(shape):
            return v if not shape else [nest(shape[1:]) for _ in range(shape[0])]
        return nest(list(self.shape)) if self.numel() <= 65536 else v

    def tensor_bool(self):
        if script_frame(2) is not sys._getframe(1):  # torch's own code gets torch's own exception
            return torch.Tensor.__bool__(self)
        raise _needs("the truth of a tensor", script_frame(2))

    def fake_repr(self, *, tensor_contents=None):
        frame = script_frame(2)
        if frame is not None:
            placeholders.give("print", frame)
        return f"tensor(<abstract>, shape={list(self.shape)}, dtype={str(self.dtype).removeprefix('torch.')})"

    # On FakeTensor, not torch.Tensor: Dynamo inlines a Python torch.Tensor.to into every compiled
    # frame and breaks the graph at the builtin inside it; the script's own values are all fake.
    out = [(FakeTensor, "to", tensor_to), (FakeTensor, "cuda", tensor_cuda),
           (torch.Tensor, "item", tensor_item), (torch.Tensor, "tolist", tensor_tolist),
           (FakeTensor, "__bool__", tensor_bool), (FakeTensor, "__repr__", fake_repr),
           (nn.Module, "_apply", _module_apply)]
    return out + (_cuda_patches(placeholders, capability, real_available) if gpu_visible else [])


def _cuda_patches(placeholders: Placeholders, capability: tuple, real_available) -> list:
    """Return the replacements that let the script's own code see a GPU (``torch.cuda``, CUDA
    autocast) and make the CPU stand-ins count as the GPU's (the ledger's op-by-op regions)."""
    def is_available():
        # Only the script's own files see the GPU: a library asked (torchvision loading its
        # extension, transformers choosing kernels) would go on to real CUDA calls.
        return True if _script_file(sys._getframe(1).f_code.co_filename) else real_available()

    def none():  # a new function per name: Dynamo's rule map refuses one object under two names
        return lambda *a, **k: None

    def memory():
        return lambda *a, **k: placeholders.give("cuda_memory", script_frame(2))
    out = [(torch.cuda, "is_available", is_available), (torch.cuda, "device_count", lambda: 1),
           (torch.cuda, "current_device", lambda: 0), (torch.cuda, "synchronize", none()),
           (torch.cuda, "set_device", none()), (torch.cuda, "empty_cache", none()),
           (torch.cuda, "reset_peak_memory_stats", none()),
           (torch.cuda, "get_device_name", lambda *a: "abstract GPU (fake tensors)"),
           (torch.cuda, "get_device_capability", lambda *a: capability),
           (torch.cuda, "is_bf16_supported", lambda *a, **k: True)]
    from . import ledger
    return out + [(torch.cuda, n, memory()) for n in ("memory_allocated", "max_memory_allocated",
                                                      "memory_reserved", "max_memory_reserved")] + [
        init_patch(),
        # No fusion runs op by op on the CPU here (the CPU stands in for the GPU): the static peak
        # is the GPU kernels', without the CPU path's region intermediates the stand-in implies.
        # An abstract run for the CPU keeps them: there the regions do run op by op.
        (ledger, "op_by_op", lambda b: False)]


@contextlib.contextmanager
def abstract_session(placeholders: Placeholders, *, gpu_visible: bool = True, capability: tuple = (9, 0)):
    """Run the body with fake tensors (see the module doc); ``gpu_visible``: the script's own code
    (not torch's) sees a CUDA device (``torch.cuda.is_available()`` is True for it, a few
    ``torch.cuda`` queries answer for a GPU of ``capability``). Yields the fake mode."""
    saved = []
    try:
        for owner, name, new in _patches(placeholders, gpu_visible, capability):
            saved.append((owner, name, owner.__dict__.get(name, _MISSING) if isinstance(owner, type)
                          else getattr(owner, name)))
            setattr(owner, name, new)
        from torch.optim.optimizer import register_optimizer_step_post_hook
        hook = register_optimizer_step_post_hook(lambda opt, a, k: _optimizer_seen(placeholders, opt))
        saved.append((hook, None, _HOOK))
        if gpu_visible:  # CPU autocast stands in for CUDA's: CUDA's op lists (abstract_autocast)
            saved.append((cuda_policies(), None, _HOOK))
        with _AbstractMode(allow_non_fake_inputs=True) as mode:
            yield mode
    finally:
        for owner, name, old in reversed(saved):
            if old is _HOOK:
                owner.remove()
            elif old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)


_MISSING, _HOOK = object(), object()


def _optimizer_seen(placeholders: Placeholders, opt) -> None:
    """Keep, once per optimizer class, the bytes of its parameters and of the state its step made."""
    name = type(opt).__name__
    if name in placeholders.optimizers:
        return
    params = [p for g in opt.param_groups for p in g["params"]]
    state, dtypes = 0, set()
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, torch.Tensor) and v.dim() > 0:
                state += v.numel() * v.element_size()
                dtypes.add(str(v.dtype).removeprefix("torch."))
    placeholders.optimizers[name] = {
        "optimizer": name, "params": len(params), "param_elements": sum(p.numel() for p in params),
        "param_bytes": sum(p.numel() * p.element_size() for p in params), "state_bytes": state,
        "state_dtypes": sorted(dtypes)}


def data_dependent(e: BaseException) -> bool:
    """Whether ``e`` is torch saying a fake tensor's value was needed (data-dependent output, an
    output shape that depends on data, a guard on an unbacked symbol)."""
    names = {"DataDependentOutputException", "DynamicOutputShapeException", "GuardOnDataDependentSymNode",
             "NeedsRealValue"}
    return type(e).__name__ in names or any(c.__name__ in names for c in type(e).__mro__)


def script_line_of(tb) -> tuple:
    """Return (file, line, code) of the innermost frame of traceback ``tb`` in the user's code."""
    found = None
    while tb is not None:
        name = (tb.tb_frame.f_globals.get("__name__", "") or "").split(".")[0]
        if name not in _OWN_PACKAGES and name != "runpy":
            found = tb
        tb = tb.tb_next
    if found is None:
        return ("<unknown>", 0, "")
    import linecache
    file, line = found.tb_frame.f_code.co_filename, found.tb_lineno
    return (file, line, linecache.getline(file, line).strip())


def _empty(p: TensorProxy):
    dtype = torch_dtype(p.dtype)  # the dtype table, never getattr on torch by a name
    device = _stand_in(p.device)
    if p.strides is not None and len(p.strides) == len(p.shape):
        return torch.empty_strided(p.shape, p.strides, dtype=dtype, device=device)
    return torch.empty(p.shape, dtype=dtype, device=device)


def fake_outputs(final: Trace) -> Callable:
    """Return the boxed callable an abstract run uses for a compiled chain: no kernel runs, each
    output is an empty tensor shaped as ``final``'s (an input handed back is that input). Called on
    real tensors it raises :class:`NeedsRealValue`: empty outputs cannot flow into real tensors."""
    positions = {p.name: i for i, p in enumerate(final.inputs)}

    def build(x, args):
        if isinstance(x, TensorProxy):
            if x.name in positions and positions[x.name] < len(args):
                return args[positions[x.name]]
            return _empty(x)
        if isinstance(x, (tuple, list)):
            return type(x)(build(y, args) for y in x)
        return x

    def run(args):
        fake = torch._guards.detect_fake_mode(args)
        if fake is None and not _in_fake_mode() and any(isinstance(a, torch.Tensor) for a in args):
            raise NeedsRealValue("a function compiled with abstract=True was called on real tensors: call it on "
                                 "fake ones, inside thundervis.abstract_mode() or thundervis run --abstract",
                                 _where(script_frame(2)))
        with fake if fake is not None and not _in_fake_mode() else contextlib.nullcontext():
            out = build(final.outputs, list(args))
        args.clear()
        return out
    run._boxed_call = True
    return run


def _in_fake_mode() -> bool:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    return any(isinstance(m, FakeTensorMode) for m in _get_current_dispatch_mode_stack())


# What compiling one Dynamo node costs this process at its peak, every chain and pass of it kept
# (joint, forward, backward, both remat partitions): Llama-3-8B's one graph of 1234 call nodes
# peaked at 2.88 GB RSS, about 0.6 GB of it torch and transformers themselves
# (benchmarks/abstract_scale.py), so 2 MB a node, rounded up.
BYTES_PER_NODE = 2_000_000


class TooLargeForAbstract(MemoryError):
    """A graph whose compile would not fit this machine's memory (refused before it starts)."""


def memory_limit() -> int:
    """Return the bytes an abstract compile may use: ``$THUNDERVIS_ABSTRACT_MEMORY_GB``, else 80%
    of the memory available now (``/proc/meminfo``; 8 GiB when unreadable)."""
    env = os.environ.get("THUNDERVIS_ABSTRACT_MEMORY_GB")
    if env:
        try:
            return int(float(env) * 2**30)
        except ValueError:
            pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(int(line.split()[1]) * 1024 * 0.8)
    except OSError:
        pass
    return 8 * 2**30


def check_size(n_nodes: int, observer, graph: int) -> None:
    """Refuse (:class:`TooLargeForAbstract`, reported as the ``abstract_refused`` runtime event) a
    graph of ``n_nodes`` Dynamo nodes whose estimated compile memory is over :func:`memory_limit`."""
    need, limit = n_nodes * BYTES_PER_NODE, memory_limit()
    if need <= limit:
        return
    msg = (f"graph {graph} has {n_nodes} ops; compiling it abstractly needs about {need / 2**30:.1f} GiB "
           f"and {limit / 2**30:.1f} GiB may be used (set THUNDERVIS_ABSTRACT_MEMORY_GB to change it)")
    observer.runtime(graph, "dynamo", "abstract_refused", {"n_nodes": n_nodes, "estimated_bytes": need,
                                                          "limit_bytes": limit, "message": msg})
    raise TooLargeForAbstract(msg)
