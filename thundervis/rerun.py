"""Re-run one recorded fusion on its own, with any executor, and check its numerics.

The kernel is rebuilt from the recorded IR only: the kernel record's ``trace`` (a standalone trace of
the region) is loaded by the compiler's validating loader, turned back into one fusion symbol and
handed to the executor, which generates its kernel again. Text stored in the recording (the
generated source) is never executed. Inputs are made with the recorded shapes, strides and dtypes
(or loaded from the safetensors files ``run --capture-inputs`` wrote); outputs are compared with the
reference interpreter run in float64 on the same inputs. Results are appended to the recording's
``rerun_results`` table (by ``thundervis.recording.results``). The TUI, the widget and ``thundervis
rerun`` call :func:`rerun_kernel`; :func:`rerun_recorded_kernel` is the computation on one
``KernelInfo`` of an open recording. Inputs, error measures and timing are
:mod:`thundervis.kernel_numerics`, which repro scripts embed.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import keyword
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import torch

from thundervis.compiler.ir import BoundSymbol, TensorProxy, Trace
from thundervis.compiler.registry import UnknownSymbol
from thundervis.compiler.serialize import TraceFormatError, executable_trace_from_dict
from thundervis.compiler.values import torch_dtype
# float64_region, float64_symbol: re-exported for the callers that import them from here.
from thundervis.float64_reference import (flat_values, float64_region, float64_symbol,  # noqa: F401
                                         reference_outputs)
from thundervis.kernel_numerics import check_layout, errors, make_inputs, timed
from thundervis.recording.model import KernelInfo, RerunResult  # noqa: F401  (RerunResult: re-exported)

ALL_EXECUTORS = ("triton", "nvfuser", "inductor", "torch")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


def kernel_symbol_name(recorded: str, fallback: str) -> str:
    """Return the name a rebuilt fusion symbol gets: the recorded kernel name (``fw_fusion_3``, or
    ``triton_fusion_3`` from older recordings) when it is a plain identifier, since it ends up in
    generated kernel source; else ``fallback``."""
    if _PLAIN_NAME.fullmatch(recorded) and not keyword.iskeyword(recorded):
        return recorded
    return fallback


def _shown(name) -> str:
    """A recorded name quoted for a one-line message (control characters made visible)."""
    from thundervis.safe_text import visible_line
    return visible_line(str(name)[:80])


class RerunError(Exception):
    """A problem with what was asked (unknown kernel, no CUDA, bad recording): one sentence."""


class ExecutorMissing(RerunError):
    """The executor asked for is not installed or cannot run here."""


@dataclass
class RerunReport:
    """Everything one ``rerun`` did: the kernel, where, which inputs, notes, one result per executor."""

    kernel: str
    graph: int
    chain: str
    device: str
    inputs: str
    notes: list[str] = field(default_factory=list)
    results: list[RerunResult] = field(default_factory=list)
    # Why the results could not be appended to the recording (read-only file ...), or None.
    store_error: Optional[str] = None

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"kernel": self.kernel, "graph": self.graph, "chain": self.chain, "device": self.device,
                "inputs": self.inputs, "notes": list(self.notes), "results": [r.as_json() for r in self.results],
                "stored": self.store_error is None, "store_error": self.store_error}


# ------------------------------------------------------------------------------ finding kernels

def find_kernel(rec, name: str, graph: Optional[int] = None, chain: Optional[str] = None) -> KernelInfo:
    """Return the recorded kernel called ``name`` (``Recording.find_kernel``); raise
    :class:`RerunError` naming the closest kernel names when there is none."""
    from thundervis.recording import UnknownItem
    try:
        return rec.find_kernel(name, graph, chain)
    except UnknownItem as e:
        raise RerunError(str(e)) from None


def other_places(rec, kernel) -> list[str]:
    """Return where else (graph and chain) a kernel of the same name was recorded."""
    return [f"graph {k.graph} {k.chain}" for k in rec.kernels()
            if k.name == kernel.name and (k.graph, k.chain) != (kernel.graph, kernel.chain)]


def _retarget_devices(d, device: str):
    """Return a copy of a trace dict with every device (proxies and device constants) set to ``device``."""
    d = copy.deepcopy(d)

    def walk(v):
        if isinstance(v, dict):
            if set(v) == {"V"}:
                return {"V": device}
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    for p in d.get("proxies", []) if isinstance(d.get("proxies"), list) else []:
        if isinstance(p, dict):
            p["device"] = device
    d["symbols"] = walk(d.get("symbols", []))
    return d


def kernel_device(kernel: KernelInfo) -> str:
    """Return the device the kernel was recorded on (from its input metadata)."""
    return kernel.device


def choose_device(kernel, device: Optional[str]) -> str:
    """Return the device to re-run on: ``device`` ("cpu"/"cuda") or the recorded one; raise
    :class:`RerunError` when CUDA is needed and absent."""
    recorded = kernel_device(kernel)
    if device is None:
        if recorded.startswith("cuda") and not torch.cuda.is_available():
            raise RerunError(f"{kernel.name} was recorded on {recorded} and this machine has no CUDA; "
                             "pass --device cpu to re-run it on the CPU")
        return recorded
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RerunError("--device cuda was asked for but this machine has no CUDA")
        return recorded if recorded.startswith("cuda") else "cuda:0"
    if device != "cpu":
        raise RerunError(f"unknown device {device!r}; use cpu or cuda")
    return "cpu"


def region_trace(kernel, device: Optional[str] = None) -> Trace:
    """Rebuild the kernel's region (inputs -> member prims -> outputs) from its recorded trace dict
    (``kernel``: a ``KernelSource``), validated by the compiler's loader, with every device set to
    ``device`` when given."""
    if not kernel.trace_json:
        raise RerunError(f"{_shown(kernel.name)} has no recorded IR to rebuild it from")
    try:
        d = json.loads(kernel.trace_json)
    except (ValueError, RecursionError):
        raise RerunError(f"the recorded IR of {_shown(kernel.name)} is not valid JSON") from None
    if not isinstance(d, dict):
        raise RerunError(f"the recorded IR of {_shown(kernel.name)} is damaged (not an object)")
    if device is not None:
        d = _retarget_devices(d, device)
    try:
        trace = executable_trace_from_dict(d)
    except UnknownSymbol as e:
        raise RerunError(f"the recorded IR of {_shown(kernel.name)} is refused: {e}") from None
    except (TraceFormatError, ValueError, TypeError, RecursionError) as e:
        raise RerunError(f"the recorded IR of {_shown(kernel.name)} is damaged ({e})") from None
    members = [b for b in trace.symbols if b.sym != "del"]
    # A region recorded as one fusion symbol: its subsymbols are the members.
    if len(members) == 1 and members[0].fusion:
        members = list(members[0].subsymbols)
    if not members:
        raise RerunError(f"the recorded IR of {_shown(kernel.name)} holds no operations")
    return trace.replace(symbols=tuple(members), chain="rerun")


# ----------------------------------------------------------------------------------- inputs

def random_inputs(trace: Trace, seed: int = 0) -> list[torch.Tensor]:
    """Return tensors with the region's recorded shapes, strides, dtypes and devices."""
    return make_inputs([(p.shape, p.strides, torch_dtype(p.dtype), p.device) for p in trace.inputs], seed)


def random_inputs_or_refuse(region: Trace, kernel_name: str, seed: int = 0) -> list[torch.Tensor]:
    """:func:`random_inputs`, with a :class:`RerunError` when the recorded metadata cannot make
    tensors (a damaged or tampered recording)."""
    try:
        return random_inputs(region, seed)
    except (RuntimeError, ValueError, TypeError, OverflowError, MemoryError) as e:
        raise RerunError(f"the recorded inputs of {_shown(kernel_name)} cannot be made "
                         f"({type(e).__name__}: {_first_line(e)})") from None


def reference_or_refuse(region: Trace, kernel_name: str, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`reference_outputs`, with a :class:`RerunError` when the recorded IR does not even run
    in the reference interpreter: the recording is damaged, there is no kernel to check."""
    try:
        refs = reference_outputs(region, inputs)
    except Exception as e:  # noqa: BLE001 - any failure of recorded IR is the recording's
        raise RerunError(f"the recorded IR of {_shown(kernel_name)} does not run in the reference "
                         f"interpreter ({type(e).__name__}: {_first_line(e)})") from None
    # What the IR computes must be what it declares: a kernel is generated (and a repro script's
    # launch() written) from the declared inputs and outputs.
    declared = [p for p in region.flat_outputs() if isinstance(p, TensorProxy)]
    if len(refs) != len(declared) or any(tuple(r.shape) != tuple(p.shape) for r, p in zip(refs, declared)):
        raise RerunError(f"the recorded IR of {_shown(kernel_name)} computes "
                         f"{[list(r.shape) for r in refs]}, not the outputs it declares "
                         f"{[list(p.shape) for p in declared]}")
    read = {p.name for b in region.symbols for x in _walk_symbols(b) for p in x.flat_inputs()}
    unread = [p.name for p in region.inputs if p.name not in read]
    if unread:
        raise RerunError(f"the recorded IR of {_shown(kernel_name)} never reads its input(s) "
                         f"{', '.join(unread)}")
    return refs


def _walk_symbols(b):
    """Yield ``b`` and its subsymbols, depth first."""
    yield b
    for s in b.subsymbols:
        yield from _walk_symbols(s)


def _first_line(e: BaseException) -> str:
    from thundervis.safe_text import visible_line
    return visible_line((str(e).splitlines() or [""])[0][:200])


def compare(outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor]) -> tuple[float, float]:
    """Return (max abs error, max abs error / max |ref|) over all outputs (``kernel_numerics.errors``)."""
    return errors(outs, refs)


# ---------------------------------------------------------------------------------- executors

def get_fusion_executor(name: str):
    """Return the executor ``name`` or raise :class:`ExecutorMissing` saying why it cannot run."""
    from thundervis.compiler.executors import base
    if name not in ALL_EXECUTORS:
        raise ExecutorMissing(f"unknown executor {name!r}; choose from {', '.join(ALL_EXECUTORS)} or all")
    try:
        importlib.import_module("thundervis.compiler.executors")
        importlib.import_module(f"thundervis.compiler.executors.{name}_executor")
    except ImportError as e:
        if name != "torch":
            raise ExecutorMissing(f"the {name} executor is not installed ({e})") from None
    try:
        ex = base.get_executor(name)
    except KeyError:
        raise ExecutorMissing(f"the {name} executor is not installed in this thundervis") from None
    why = ex.available()
    if why:
        raise ExecutorMissing(f"the {name} executor is not available: {why}")
    return ex


def unavailable_executors(names: Sequence[str]) -> dict[str, str]:
    """Return ``{name: why}`` for the executors of ``names`` that cannot run here (not installed,
    no device for them): not failures, just absent; the rest of ``names`` can run."""
    out = {}
    for name in names:
        try:
            get_fusion_executor(name)
        except ExecutorMissing as e:
            out[name] = str(e).rstrip(".")
    return out


def unavailable_note(missing: dict[str, str]) -> Optional[str]:
    """Return the one note that says which executors were left out and why (None for none):
    ``left out, not available here: the nvfuser executor is not available: nvfuser needs ...``."""
    if not missing:
        return None
    return "left out, not available here: " + "; ".join(missing.values())


def build_runner(region: Trace, kernel_name: str, executor) -> Callable[[list], tuple]:
    """Return a boxed callable running the region with ``executor``: one fusion symbol regenerated
    by a fusion executor, or the member ops one by one with ``torch``."""
    from thundervis.compiler.passes.codegen import codegen
    from thundervis.compiler.executors.base import get_executor
    members = list(region.symbols)
    for m in members:
        if not executor.can_run(m):
            raise RuntimeError(executor.why_not(m))
    outputs = tuple(region.flat_outputs())
    if executor.fuses:
        name = kernel_symbol_name(kernel_name, "rerun_fusion")
        problem = getattr(executor, "region_problem", lambda ms: None)(members)
        if problem:
            raise RuntimeError(problem)
        fusion = BoundSymbol(sym=name, args=tuple(region.inputs), kwargs={}, outputs=outputs, uid="rerun0",
                             origin=tuple(m.uid for m in members), subsymbols=tuple(members),
                             executor=executor.name, fusion=True)
        if hasattr(executor, "build_kernel"):
            executor.build_kernel(fusion)
        trace = region.replace(symbols=(fusion,), outputs=outputs)
        executors = [executor, get_executor("torch")]
    else:
        trace = region.replace(symbols=tuple(m.replace(executor=executor.name) for m in members),
                               outputs=outputs)
        executors = [executor]
    _, fn = codegen(trace, executors)
    return fn


def run_one(region: Trace, kernel_name: str, executor_name: str, inputs: list, iters: int, device: str,
            refs: list, inputs_kind: str, strict: bool) -> RerunResult:
    """Re-run the region with one executor and return its result; with ``strict`` an executor that
    is missing raises :class:`ExecutorMissing`, otherwise it is reported as ``unavailable``."""
    base = dict(kernel=kernel_name, executor=executor_name, device=device, inputs=inputs_kind, iters=iters)
    try:
        ex = get_fusion_executor(executor_name)
    except ExecutorMissing as e:
        if strict:
            raise
        return RerunResult(status="unavailable", detail=str(e), **base)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn = build_runner(region, kernel_name, ex)
            median, best, clock, outs = timed(fn, inputs, iters, device)
        # An executor that falls back to torch when its kernel fails says so with a warning: here
        # that is a failure of the kernel, not a result.
        fallback = [w for w in caught if "thundervis" in str(w.message) and "instead" in str(w.message)]
        if fallback:
            raise RuntimeError(str(fallback[0].message))
        max_abs, max_rel = compare([o for o in flat_values(outs) if isinstance(o, torch.Tensor)], refs)
    except Exception as e:  # a failing executor is a result, not a crash
        return RerunResult(status="failed", detail=f"{type(e).__name__}: {e}".splitlines()[0][:300], **base)
    return RerunResult(status="ok", median_us=median, min_us=best, clock=clock, max_abs_error=max_abs,
                       max_rel_error=max_rel, **base)


# ------------------------------------------------------------------------------------- API

def rerun_recorded_kernel(rec, kernel: KernelInfo, executor: Union[str, Sequence[str], None] = None,
                          inputs: str = "random", iters: int = 10, device: Optional[str] = None,
                          seed: int = 0) -> RerunReport:
    """Re-run ``kernel`` (a ``KernelInfo`` of the open recording ``rec``) and return a
    :class:`RerunReport`; stores nothing. Arguments as :func:`rerun_kernel`."""
    if inputs not in ("random", "captured"):
        raise RerunError(f"unknown inputs {inputs!r}; use random or captured")
    if iters < 1:
        raise RerunError("--iters must be at least 1")
    k = kernel
    elsewhere = other_places(rec, k)
    source = rec.kernel_source(k)
    dev = choose_device(k, device)
    recorded = kernel_device(k)
    region = region_trace(source, dev if dev != recorded else None)
    strict = not (executor == "all" or (isinstance(executor, (list, tuple)) and len(executor) > 1))
    names = list(ALL_EXECUTORS) if executor == "all" else (
        [executor] if isinstance(executor, str) else list(executor) if executor else [k.executor])
    report = RerunReport(kernel=k.name, graph=k.graph, chain=k.chain, device=dev, inputs="random")
    if elsewhere:
        report.notes.append(f"{k.name} of graph {k.graph} {k.chain}; also recorded in {', '.join(elsewhere)} "
                            "(choose with --graph/--chain)")
    if dev != recorded:
        report.notes.append(f"recorded on {recorded}, re-run on {dev}")
    args = None
    if inputs == "captured":
        from thundervis.recording.capture import load_captured_inputs
        metas = [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype, "strides": p.strides}
                 for p in region.inputs]
        for m in metas:  # captured tensors are laid out again with the recorded strides
            try:
                check_layout(m["shape"], m["strides"])
            except ValueError as e:
                raise RerunError(f"the recorded inputs of {_shown(k.name)} cannot be made ({e})") from None
        args, why = load_captured_inputs(rec.path, k.name, k.graph, k.chain, metas)
        if args is None:
            report.notes.append(f"{why}; using random inputs")
        else:
            args = [a.to(dev) for a in args]
            report.inputs = "captured"
    if args is None:
        args = random_inputs_or_refuse(region, k.name, seed)
    refs = reference_or_refuse(region, k.name, args)
    if strict:
        for name in names:
            get_fusion_executor(name)  # say which executor is missing before running anything
    else:  # an executor not installed here is no result: said once, not a row of the table
        missing = unavailable_executors(names)
        names = [n for n in names if n not in missing]
        if missing:
            report.notes.append(unavailable_note(missing))
    for name in names:
        r = run_one(region, k.name, name, args, iters, dev, refs, report.inputs, strict)
        report.results.append(dataclasses.replace(r, kernel_id=k.id))
    return report


def rerun_kernel(path: str, kernel: str, executor: Union[str, Sequence[str], None] = None,
                 inputs: str = "random", iters: int = 10, device: Optional[str] = None,
                 graph: Optional[int] = None, chain: Optional[str] = None, store: bool = True,
                 seed: int = 0) -> RerunReport:
    """Re-run kernel ``kernel`` of the recording at ``path`` and return a :class:`RerunReport`.

    ``executor``: one name, a list, ``"all"`` (every known executor; those not
    installed here are left out, with one note saying which) or None (the kernel's own). ``inputs``: ``random`` or ``captured`` (falls back to
    random, with a note, when the captured ones are missing or do not match). ``device``: ``cpu``,
    ``cuda`` or None (where it was recorded). ``store``: append the results to the recording (when
    it cannot be written, ``report.store_error`` says why and the results still count).
    Raises :class:`RerunError` (one sentence) for bad requests and ``RecordingError`` for bad files.
    """
    from thundervis.recording.reader import open_recording
    if inputs not in ("random", "captured"):
        raise RerunError(f"unknown inputs {inputs!r}; use random or captured")
    if iters < 1:
        raise RerunError("--iters must be at least 1")
    with open_recording(path, check=False) as rec:
        k = find_kernel(rec, kernel, graph, chain)
        report = rerun_recorded_kernel(rec, k, executor, inputs, iters, device, seed)
    if store:
        from thundervis.recording.results import ResultsNotStored
        try:
            store_rerun_results(path, report.results)
        except ResultsNotStored as e:  # a read-only file or folder: the results still count
            report.store_error = str(e)
    return report


# ------------------------------------------------------------------------------ the recording

def store_rerun_results(path: str, results: Sequence[RerunResult]) -> None:
    """Append ``results`` to the recording at ``path`` (``recording.results.append_rerun_results``;
    raises ``ResultsNotStored`` when the file cannot be written)."""
    from thundervis.recording.results import append_rerun_results
    append_rerun_results(path, results)
