"""The ``triton`` executor: one generated Triton kernel per fusion region.

It claims pointwise prims (with broadcasting), type conversions, constant factories and ``arange``,
reductions over leading or trailing dims, the shape prims the generated code absorbs as index
arithmetic (slices and concatenations included), and the indexing of a training step: ``gather``,
``aten.embedding``, a scalar ``scatter`` with one index per row, ``index_put`` (atomic adds).
Matmuls, random numbers and anything else stay with torch (``why_not`` says which rule refused a
symbol). A region becomes one kernel: over one iteration domain, as independent sections side by
side, or, when small, as dependent phases of one program (:mod:`.triton_plan`). Kernels are written as ``.py`` files into a cache folder (default
``~/.cache/thundervis/triton``, or ``$THUNDERVIS_CACHE_DIR/triton``) under a hash of the region's
structure and input metadata, and imported from there: Triton's JIT needs a real source file.

Without CUDA, Triton runs in interpreter mode: this module sets ``TRITON_INTERPRET=1`` before Triton
is imported when no GPU is present. CPU tensors can only run under the interpreter; CUDA tensors
only compiled. A kernel that fails on its first launch is replaced by the region's prims run by torch
(with a warning), so training never stops on a kernel bug.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import threading
import warnings
from typing import Callable, Optional

import torch

# Triton decides at import time whether its own library functions (tl.sum, tl.sigmoid ...) are
# interpreted, so the flag must be set before the first `import triton`; if somebody imported
# triton earlier without it, CPU kernels cannot run and the executor says so.
_IMPORTED_TOO_EARLY = False
if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") is None:
    _IMPORTED_TOO_EARLY = "triton" in sys.modules
    os.environ["TRITON_INTERPRET"] = "1"

from ..ir import BoundSymbol, Trace, TensorProxy, map_structure  # noqa: E402
from ..observer import runtime_reporter  # noqa: E402
from ..prims import PRIMS  # noqa: E402
from . import triton_ops as ops  # noqa: E402
from .arguments import dropped_argument
from .base import BuiltKernel, FusionExecutor, KernelBuildError, register_executor
from .cpu_path import VIA_INTERPRETER, VIA_TORCH, VIA_TRITON, CpuRegion, path_event, report_path
from .inductor_executor import inductor_unavailable_reason
from .triton_codegen import ATEN_OPS, Unfusable, bind, prim_name
from .triton_index import numel
from .triton_index_checks import indexing_problem
from .triton_region import reduce_dims
from .triton_plan import PHASE_LIMIT, generate


CODEGEN_VERSION = 2
_MODULES: dict[str, object] = {}
_WRITTEN: set = set()  # kernel files this process wrote (the fast CPU path writes, never imports)
_LOCK = threading.Lock()


def interpreting() -> bool:
    """Return True when Triton runs in interpreter mode in this process."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0", "false", "False")


def cache_dir() -> str:
    """Return the folder generated kernels are written to (created on demand)."""
    root = os.environ.get("THUNDERVIS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "thundervis")
    return os.path.join(root, "triton")


def _device_kind(device: str) -> str:
    return device.split(":")[0]


class TritonExecutor(FusionExecutor):
    """Generates, caches and launches one Triton kernel per fusion region."""

    name = "triton"
    language = "python"

    # Regions whose values all have at most this many elements may run as dependent phases of one
    # program (see triton_plan); 0 turns that off (then only single-domain kernels and sections).
    phase_limit = PHASE_LIMIT

    def __init__(self):
        self._built: dict[str, Callable] = {}
        # True: CPU regions run through the fast CPU path (cpu_path), their kernels generated but
        # not launched; False: they run in Triton's interpreter (an explicit ``triton`` executor).
        self.cpu_fast = False
        self._parents: dict = {}

    def see_decomposed(self, parents: dict) -> None:
        self._parents = dict(parents)

    def chosen_by_default(self, device: str) -> None:
        """The executor comes from the default order for ``device``: without CUDA its regions run
        through the fast CPU path (torch or Inductor), not Triton's interpreter."""
        self.cpu_fast = device == "cpu" and not torch.cuda.is_available()

    def run_path(self, device: str) -> str:
        """Return how a kernel of this executor runs on ``device`` (a :mod:`.cpu_path` ``VIA_*``;
        on the fast CPU path the first call picks ``torch`` or ``inductor``, ``torch`` is the plan)."""
        if device == "cuda":
            return VIA_TRITON
        return VIA_TORCH if self.cpu_fast else VIA_INTERPRETER

    def device_kind_of(self, device: str) -> str:
        """Return the device kind kernels for tensors on ``device`` are planned for (``cpu``/``cuda``)."""
        return _device_kind(device)

    def interpreter_mode(self) -> bool:
        """Return whether kernels run in Triton's interpreter here."""
        return interpreting()

    def available(self) -> Optional[str]:
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed"
        if self.cpu_fast:  # kernels are generated, not launched: no interpreter needed
            return None
        if not torch.cuda.is_available() and not interpreting():
            return "no CUDA device and TRITON_INTERPRET is not set"
        if _IMPORTED_TOO_EARLY:
            return ("triton was imported before TRITON_INTERPRET=1 was set, so its interpreter cannot "
                    "run here; set TRITON_INTERPRET=1 in the environment")
        return None

    # ------------------------------------------------------------------ claiming
    def problem(self, b: BoundSymbol) -> Optional[str]:
        """Return why this executor cannot run ``b`` (None when it can)."""
        if not b.sym.startswith("prims.") and b.sym not in ATEN_OPS:
            return f"{b.sym} is not a prim"
        name = prim_name(b)
        if name not in ops.SUPPORTED:
            prim = PRIMS.get(name)
            kind = {"matmul": "matmuls stay with torch",
                    "rng": "random numbers stay with torch (same RNG stream as eager)",
                    "constant": "constant data is made by torch (no kernel needed)"}.get(prim.kind if prim else "")
            return kind or f"{b.sym} has no Triton lowering"
        if self.available() is not None:
            return self.available()
        outs = b.flat_outputs()
        if len(outs) != 1 or not isinstance(b.outputs, TensorProxy):
            return f"{b.sym} has several outputs"
        why = self._tensor_problem(b, outs)
        if why is not None:
            return why
        try:
            a = bind(b)
        except Exception as e:
            return f"cannot read the arguments of {b.sym}: {e}"
        dropped = dropped_argument("triton", b.sym, b.aten, a, ops.HONOURED.get(name, ()))
        if dropped is not None:
            return dropped
        return self._op_problem(name, b, a, outs[0], self.device_kind_of(outs[0].device))

    def _tensor_problem(self, b: BoundSymbol, outs: list) -> Optional[str]:
        """Return why the tensors of ``b`` (``outs`` its outputs) cannot run here: mixed or
        unsupported devices, the interpreter mode, dtypes, empty tensors (None when they can)."""
        devices = {p.device for p in b.flat_inputs() + outs}
        if len(devices) > 1:
            return f"{b.sym} mixes devices {sorted(devices)}"
        device = self.device_kind_of(outs[0].device)
        if device == "cpu" and not self.interpreter_mode() and not self.cpu_fast:
            return "CPU tensors run in Triton only in interpreter mode (TRITON_INTERPRET=1)"
        if device not in ("cpu", "cuda"):
            return f"device {device} is not supported by Triton"
        if device == "cuda" and self.interpreter_mode():
            return "Triton is in interpreter mode; CUDA tensors are left to torch"
        for p in b.flat_inputs() + outs:
            if p.dtype not in ops.TL_DTYPE:
                return f"dtype {p.dtype} is not supported by the triton executor"
            if p.dtype in ops.HALF and device != "cuda":
                return f"{p.dtype} runs in Triton only on CUDA"
            if 0 in p.shape:
                return "empty tensors are left to torch"
        return None

    def _op_problem(self, name: str, b: BoundSymbol, a: dict, out: TensorProxy, device: str) -> Optional[str]:
        """Return why this op cannot run here with its bound arguments ``a`` (None when it can):
        reductions past the persistent limit, ``pow``, ``sign``, device transfers, factories,
        ``arange`` and the indexing ops' own checks."""
        if name in ops.REDUCTIONS:
            # dims apart are reduced last, read through a permute (triton_plan.generate)
            x = b.args[0]
            N = numel([x.shape[d] for d in reduce_dims(b, x)]) if x.shape else 1
            limit = None if device == "cuda" else 65536  # GPU rows longer than a block are looped
            if limit is not None and N > limit:
                return f"a reduction over {N} elements exceeds the persistent-reduction limit {limit}"
            if name == "var" and not isinstance(a.get("correction") if a.get("correction") is not None else 1, (int, float)):
                return "var with a non-numeric correction"
        if name == "pow":
            base, exp = a.get("self"), a.get("exponent")
            if isinstance(exp, TensorProxy) and not (isinstance(base, (int, float)) and base > 0):
                return "pow with a tensor exponent is left to torch"
        if name == "sign" and out.dtype == "bool":
            return "sign of bool is left to torch"
        if name == "convert_element_type" and a.get("device") is not None and str(a["device"]) != out.device \
                and self.device_kind_of(str(a["device"])) != device:
            return "device transfer is left to torch"
        if name in ops.FACTORY and not isinstance(a.get("fill_value", a.get("s")), (int, float, bool)):
            return "factory with a non-constant value"
        if name == "arange":
            if not all(isinstance(a.get(k), int) for k in ("start", "end", "step") if a.get(k) is not None) \
                    or out.dtype not in ("int64", "int32"):
                return "arange of non-integers is left to torch"
        if name in ops.INDEXING or name in ("slice", "select"):
            return indexing_problem(name, a, out)
        return None

    def can_run(self, b: BoundSymbol) -> bool:
        return self.problem(b) is None

    def why_not(self, b: BoundSymbol) -> str:
        return f"triton: {self.problem(b) or 'not claimed'}"

    # ------------------------------------------------------------------ regions and kernels
    def region_problem(self, members: list[BoundSymbol], outputs: Optional[list[TensorProxy]] = None) -> Optional[str]:
        devices = {p.device for b in members for p in b.flat_outputs()}
        if len(devices) > 1:
            return f"different devices {sorted(devices)}"
        if outputs is None:
            outputs = [p for b in members for p in b.flat_outputs()]
        if not outputs:  # a dead prim left by flattening a decomposition: a kernel would write nothing
            return "nothing the region computes is read after it"
        kind = self.device_kind_of(next(iter(devices)))

        def plan() -> Optional[str]:
            try:
                generate(members, outputs, kind, phase_limit=self.phase_limit, check=True)  # no text: only whether
            except Unfusable as e:
                return str(e)
            return None
        from .region_verdicts import verdict  # planned once per distinct region: repeated layers fold
        return verdict(members, outputs, kind, self.phase_limit, plan)

    def build_kernel(self, fusion: BoundSymbol) -> BuiltKernel:
        members = list(fusion.subsymbols)
        outputs = [p for p in fusion.outputs]
        device = _device_kind(outputs[0].device)
        try:
            ks = generate(members, outputs, device, title=fusion.sym, phase_limit=self.phase_limit)
        except Unfusable as e:
            raise KernelBuildError(str(e)) from None
        key = structure_key(fusion, device)
        path = os.path.join(cache_dir(), f"k_{key}.py")
        via = self.run_path(device)
        if via == VIA_TORCH:  # the fast CPU path runs the region; the kernel is written, not launched
            if path not in _WRITTEN:  # an equal region (another layer) differs only in its op listing
                _write_kernel(path, ks.source)
                _WRITTEN.add(path)
            launch = CpuRegion(fusion, inductor=inductor_unavailable_reason() is None, parents=self._parents)
        else:
            module = _import_kernel(key, path, ks.source)
            launch = _guarded(module.launch, fusion, via)
        # What will run it, said now (the fast CPU path says again, with its times, at its first call).
        report_path(fusion, device, via, planned=True)
        self._built[fusion.uid] = launch
        return BuiltKernel(ks.source, "python", ks.note,
                           {"cache_path": path, "grid": ks.grid, "plan": ks.plan, "parts": ks.parts,
                            # equal keys: the same kernel but for names (the recording folds them)
                            "fold_key": f"{key}:{self.phase_limit}",
                            "ran_on": {"device": device, "via": via}})

    def callable_for(self, b: BoundSymbol) -> Callable:
        if b.uid not in self._built:
            self.build_kernel(b)
        return self._built[b.uid]


def structure_key(fusion: BoundSymbol, device: str) -> str:
    """Return the cache key of a region: a hash of its ops (values named by position), the
    metadata of its inputs and outputs, the device kind and the generator version."""
    names: dict[str, str] = {}
    for i, p in enumerate(fusion.args):
        names[p.name] = f"in{i}"

    def canon(v):
        if isinstance(v, TensorProxy):
            if v.name not in names:
                names[v.name] = f"v{len(names)}"
            return [names[v.name], list(v.shape), v.dtype, list(v.strides) if v.strides is not None else None]
        if isinstance(v, float) and v != v:
            return "nan"
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        return repr(v)

    ops_desc = [[b.sym, b.aten, map_structure(canon, b.args), map_structure(canon, b.kwargs),
                 map_structure(canon, b.outputs)] for b in fusion.subsymbols]
    desc = {"v": CODEGEN_VERSION, "device": device, "inputs": [canon(p) for p in fusion.args],
            "ops": ops_desc, "outputs": [canon(p) for p in fusion.outputs],
            "triton": _triton_version(), "interpret": interpreting()}
    from .. import faults
    if faults.active_faults():  # a test fault changes the generated code: never share its kernels
        desc["faults"] = list(faults.active_faults())
    text = json.dumps(desc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _triton_version() -> str:
    try:
        from importlib.metadata import version
        return version("triton")
    except Exception:
        return "unknown"


def _write_kernel(path: str, source: str) -> None:
    """Write ``source`` to ``path`` unless it already holds it (atomically: rename of a temp file)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except OSError:
        current = None
    if current != source:
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)


def _import_kernel(key: str, path: str, source: str):
    """Write ``source`` to ``path`` (unless it already holds it) and import it as a module."""
    with _LOCK:
        mod = _MODULES.get(path)
        if mod is not None and os.path.isfile(path):
            return mod
        _write_kernel(path, source)
        name = f"thundervis_triton_{key}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)  # our own generated file, written just above
        _MODULES[path] = mod
        return mod


def _reference(fusion: BoundSymbol) -> Callable:
    """Return a callable running the region's prims with torch (the fallback)."""
    from ..interpreter import run_trace
    region = Trace(name=fusion.sym, inputs=tuple(fusion.args), symbols=fusion.subsymbols,
                   outputs=tuple(fusion.outputs))

    def run(*args):
        return run_trace(region, list(args))
    return run


def _sources(fusion: BoundSymbol) -> list[dict]:
    """Return the distinct source lines of a fusion's members (file, line, code), in order."""
    out, seen = [], set()
    for b in fusion.subsymbols:
        s = b.source
        if s is not None and s.line and (s.file, s.line) not in seen:
            seen.add((s.file, s.line))
            out.append({"file": s.file, "line": s.line, "code": s.code})
    return out


def copied_inputs(fusion: BoundSymbol, args) -> list:
    """Return the inputs of a launch of ``fusion`` that arrive with other strides than they were
    recorded with, which the launcher copies into the recorded layout on every call:
    ``[{index, name, strides, recorded}]`` (sizes-1 dimensions do not count)."""
    from .triton_index import strides_of
    out = []
    for i, (p, a) in enumerate(zip(fusion.args, args)):
        if not isinstance(p, TensorProxy) or not isinstance(a, torch.Tensor):
            continue
        recorded = strides_of(p)
        if any(st != r for s, st, r in zip(a.shape, a.stride(), recorded) if s != 1):
            out.append({"index": i, "name": p.name, "strides": [int(x) for x in a.stride()],
                        "recorded": [int(x) for x in recorded]})
    return out


def _guarded(launch: Callable, fusion: BoundSymbol, via: str) -> Callable:
    """Return ``launch`` guarded: if its first call fails, warn, report a ``kernel_fallback``
    runtime event (kernel, error, source lines) and run the region with torch from then on. A
    first call that copies an input into its recorded layout (:func:`copied_inputs`) is reported
    as a measured ``kernel_path`` event carrying them (``via``: what launches it, as the executor
    planned): the copy is paid on every call."""
    state = {"fn": None}
    report = runtime_reporter()

    def run(*args):
        fn = state["fn"]
        if fn is not None:
            return fn(*args)
        try:
            copied = copied_inputs(fusion, args)
        except Exception:  # the report must not stop the launch
            copied = []
        try:
            out = launch(*args)
        except Exception as e:  # a kernel bug must not stop training
            error = f"{type(e).__name__}: {str(e)[:300]}"
            warnings.warn(f"thundervis: Triton kernel {fusion.sym} failed on its first launch "
                          f"({error}); its region runs in torch instead")
            report("kernel_fallback", {"kernel": fusion.sym, "uid": fusion.uid, "executor": "triton",
                                       "error": error, "sources": _sources(fusion)})
            report("kernel_path", path_event(fusion, _device_kind(fusion.outputs[0].device), VIA_TORCH,
                                             why=f"the Triton kernel failed on its first launch: {error}"))
            state["fn"] = _reference(fusion)
            return state["fn"](*args)
        state["fn"] = launch
        if copied:
            event = path_event(fusion, _device_kind(fusion.outputs[0].device), via,
                               why="inputs copied into their recorded layout on every call")
            report("kernel_path", dict(event, copied_inputs=copied))
        return out
    run.fusion_name = fusion.sym
    return run


register_executor("triton", TritonExecutor)
