"""The ``torch.compile`` backend: Dynamo graph -> AOTAutograd -> our pipeline -> callable.

Every Dynamo graph becomes one compiled graph with chains ``dynamo``, ``joint``, ``forward``,
``backward`` (or ``inference``). Whatever fails inside the compiler, the user's training goes on:
a chain that fails to compile runs its ATen graph eagerly, a graph that AOTAutograd cannot take runs
the Dynamo graph eagerly, and a compiled callable that fails on its first call is replaced by the
eager graph. Each failure is reported once to the observer.
"""
from __future__ import annotations

import contextlib
import itertools
import threading
import time
import traceback
from typing import Callable, Optional, Sequence

from . import chain_calls, triton_mode

triton_mode.set_for_torch()  # before torch's AOTAutograd imports Triton

import torch  # noqa: E402
import torch.fx  # noqa: E402
from torch._functorch.aot_autograd import aot_module_simplified  # noqa: E402
from torch._functorch.partitioners import default_partition  # noqa: E402

from .acquire import UnsupportedGraph, fx_to_trace
from .input_names import aot_argument_names, aot_input_names, dynamo_input_names, saved_input_names
from .ir import flatten
from .observer import CompileObserver
from .pipeline import CompileOptions, compile_chain
from .profiling import ProfiledChain, ProfileSettings
from .shape_specialize import ShapeSpecialized, is_dynamic
from .source import call_site

_graph_ids = itertools.count()


def _dynamo_control_flow() -> tuple:
    """The exceptions Dynamo raises through a backend to steer its own analysis (what its
    ``call_user_compiler`` re-raises rather than treating as a backend failure)."""
    from torch._dynamo import exc
    names = ("RestartAnalysis", "SkipFrame", "ShortenTraceback")
    return tuple(c for c in (getattr(exc, n, None) for n in names) if isinstance(c, type))


_DYNAMO_CONTROL_FLOW = _dynamo_control_flow()
_defaults = {"observer": None, "executors": None, "debug": False, "profile": None, "aot": None}
_lock = threading.Lock()
_OWN_AOT: dict = {}  # (targets, id(observer)) -> the AheadOfTime compilers made for themselves


def set_defaults(*, observer: Optional[CompileObserver] = None, executors: Optional[Sequence[str]] = None,
                 debug: Optional[bool] = None, profile: Optional[ProfileSettings] = None,
                 aot=None) -> None:
    """Set what ``backend="thundervis"`` uses when called without options (``thundervis run`` does);
    ``profile``: run-time profiling / input capture settings (None: off); ``aot``: the
    :class:`~.aot.pool.AheadOfTime` every compiler shares (None: none)."""
    _defaults["observer"] = observer
    _defaults["executors"] = list(executors) if executors else None
    _defaults["profile"] = profile
    _defaults["aot"] = aot
    if debug is not None:
        _defaults["debug"] = debug


def reset_graph_ids() -> None:
    """Restart graph numbering at 0 (a new recording starts)."""
    global _graph_ids
    _graph_ids = itertools.count()


def _eager_boxed(gm: torch.fx.GraphModule) -> Callable:
    def run(args):
        out = gm(*args)
        args.clear()
        return out
    run._boxed_call = True
    return run


def _announced(fn: Callable, graph: int, chain: str) -> Callable:
    """Return boxed ``fn`` telling :mod:`.chain_calls` when each of its calls starts and ends
    (``fn.state`` of :func:`_guard_first_call`, if any, stays readable on the result)."""
    def run(args):
        chain_calls.started(graph, chain)
        try:
            return fn(args)
        finally:
            chain_calls.finished(graph, chain)
    run._boxed_call = True
    if hasattr(fn, "state"):
        run.state = fn.state
    return run


def _tracing_context(fresh: bool):
    """A tracing context of its own for a compile outside Dynamo's (a shape's first call), where
    AOTAutograd leaves its metadata (:func:`_mutated_inputs_saved` reads it); else no-op."""
    if not fresh or torch._guards.TracingContext.try_get() is not None:
        return contextlib.nullcontext()
    return torch._guards.tracing(torch._guards.TracingContext(None))


def _mutated_inputs_saved(gm: torch.fx.GraphModule) -> list[int]:
    """Return the positions among forward graph ``gm``'s outputs of the tensors saved for backward
    that are inputs AOTAutograd mutates after the forward returns (BatchNorm's running statistics,
    which a checkpointed region saves to recompute from). Empty when AOTAutograd's metadata is not
    there or does not line up with the graph."""
    try:
        meta = torch._guards.TracingContext.try_get().fw_metadata
        mutated = {i for i, info in enumerate(meta.input_info) if info.mutates_data}
        first_saved = int(meta.num_forward_returns)
    except Exception:
        return []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if not mutated or len(placeholders) != len(meta.input_info):
        return []
    index = {n: i for i, n in enumerate(placeholders)}
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return [j for j, o in enumerate(outputs)
            if j >= first_saved and isinstance(o, torch.fx.Node) and index.get(o) in mutated]


def _no_donated_buffers() -> None:
    """Tell AOTAutograd (through the forward's metadata) that the backward reuses none of the
    tensors the forward saved for it: none is written, the generated code only drops its references.
    With the donated buffers AOTAutograd finds otherwise (buffers Inductor may overwrite), a
    ``backward(retain_graph=True)`` after the backward was compiled is refused ("compiled with
    non-empty donated buffers"), and a training loop that keeps its graph would stop."""
    try:
        meta = torch._guards.TracingContext.try_get().fw_metadata
        if meta.bw_donated_idxs:
            meta.bw_donated_idxs = []
    except Exception:  # no tracing context, or a torch without donated buffers
        pass


def _saving_copies(fn: Callable, positions: Sequence[int]) -> Callable:
    """Return boxed ``fn`` whose outputs at ``positions`` are copies: a tensor saved for backward
    must keep the value it had in the forward, and AOTAutograd writes the input's new value into
    the input itself after the forward returns (autograd would then refuse the saved tensor, its
    version having moved)."""
    if not positions:
        return fn

    def run(args):
        out = list(fn(args))
        for j in positions:
            if isinstance(out[j], torch.Tensor):
                out[j] = out[j].clone()
        return out
    run._boxed_call = True
    if hasattr(fn, "state"):
        run.state = fn.state
    return run


def _guard_first_call(fn: Callable, eager: Callable, report: Callable[[BaseException], None]) -> Callable:
    """Return a boxed callable that runs ``fn``; if its first call raises, report it and switch to
    ``eager`` for good (the functional graph has no side effects to undo). When ``fn`` is a
    :class:`ProfiledChain`, its plain callable replaces it once profiling is done; ``run.state``
    shows which callable runs now."""
    state = {"fn": fn, "checked": False}
    if isinstance(fn, ProfiledChain):
        def profiling_done():
            if state["fn"] is fn:
                state["fn"] = fn.plain
        fn.on_done = profiling_done

    def run(args):
        if state["checked"]:
            return state["fn"](args)
        saved = list(args)
        try:
            out = fn(args)
        except Exception as e:  # a kernel that fails at run time must not stop training
            report(e)
            state["fn"] = eager
            state["checked"] = True
            return eager(saved)
        state["checked"] = True
        return out
    run._boxed_call = True
    run.state = state
    return run


def ahead_of_time(targets, observer: Optional[CompileObserver], aot=None):
    """Return the :class:`~.aot.pool.AheadOfTime` for ``targets`` (names like ``"sm_80,sm_90"`` or
    a sequence; ``"local"``: the local GPUs' architectures, none without CUDA; None or empty: none),
    or ``aot`` when given; None when there is no target. Raises ``TargetError`` for an unknown name."""
    if aot is not None:
        return aot
    if not targets:
        return None
    from .aot.targets import local_targets, parse_targets
    archs = local_targets() if targets == "local" else parse_targets(targets)
    if not archs:
        return None
    key = (archs, id(observer))
    with _lock:
        made = _OWN_AOT.get(key)
        if made is None:  # one per targets and observer: backend="thundervis" makes a compiler per graph
            from .aot.pool import AheadOfTime
            made = _OWN_AOT[key] = AheadOfTime(archs, observer)
            import atexit
            atexit.register(made.finish, 30.0)  # nobody else ends a compiler-owned one: bounded wait at exit
    return made


class ThundervisCompiler:
    """A Dynamo backend object: ``torch.compile(model, backend=ThundervisCompiler(...))``.
    ``targets``: GPU targets every Triton kernel is compiled for ahead of time (``"sm_80,sm_90"``;
    ``"local"``: the local GPU's architecture, none without CUDA; None: none); ``aot``: a shared
    :class:`~.aot.pool.AheadOfTime` instead (``thundervis run`` passes one)."""

    def __init__(self, executors: Optional[Sequence[str]] = None, debug: bool = False,
                 observer: Optional[CompileObserver] = None, profile: Optional[ProfileSettings] = None,
                 targets=None, aot=None):
        observer = observer or CompileObserver()
        self.options = CompileOptions(executors=executors, debug=debug, observer=observer,
                                      profile=profile, aot=ahead_of_time(targets, observer, aot))
        self._sites: dict = {}  # graph id -> the user line that called the compiled code (SourceInfo)
        # Per graph: the names of AOTAutograd's flat arguments, and the acquired forward trace's
        # outputs (the backward's saved values are among them); see input_names.
        self._arguments: dict[int, list] = {}
        self._forward_outputs: dict[int, list] = {}

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> Callable:
        if example_inputs and isinstance(example_inputs[0], list):
            flat = _flatten_boxed_inputs(gm, example_inputs)
            if flat is not None:  # compiled autograd's graph: a list of tensors comes first
                compiled = self(flat, list(example_inputs[0]) + list(example_inputs[1:]))

                def run(*args):
                    return compiled(*(list(args[0]) + list(args[1:])))
                return run
        if is_dynamic(gm, example_inputs):
            return self._per_shape(gm, example_inputs)
        return self._compile_graph(gm, example_inputs)

    def _per_shape(self, gm: torch.fx.GraphModule, example_inputs) -> Callable:
        """Return the callable of a dynamic-shape Dynamo graph: each new shape compiled as a graph
        of its own at its first call (:class:`~.shape_specialize.ShapeSpecialized`)."""
        obs = self.options.observer
        try:
            names = dynamo_input_names(gm)
        except Exception:
            names = []

        def compile_static(static: torch.fx.GraphModule, args: list, reason: str) -> Callable:
            return self._compile_graph(static, args, specialization=reason)

        def run_eagerly(reason: str) -> None:
            with _lock:
                graph = next(_graph_ids)
            obs.graph_started(graph, {"n_inputs": len(example_inputs), "specialization": reason,
                                      "n_nodes": sum(1 for n in gm.graph.nodes if n.op == "call_function")})
            obs.chain_failed(graph, None, reason, "")
            obs.graph_finished(graph, 0.0)
        return ShapeSpecialized(gm, example_inputs, compile_static, run_eagerly, names)

    def _compile_graph(self, gm: torch.fx.GraphModule, example_inputs, specialization: Optional[str] = None) -> Callable:
        """Compile a static-shape Dynamo graph as the next graph id and return its callable (the
        graph itself when AOTAutograd cannot take it). ``specialization``: why a dynamic-shape graph
        is compiled here for these sizes (the graph's recorded reason)."""
        with _lock:
            graph = next(_graph_ids)
        obs = self.options.observer
        t_start = time.perf_counter()
        info = {"n_inputs": len(example_inputs),
                "n_nodes": sum(1 for n in gm.graph.nodes if n.op == "call_function"),
                "reason": _compile_reason()}
        if specialization:
            info["specialization"] = specialization
        obs.graph_started(graph, info)
        site = self._sites[graph] = call_site()
        try:  # readable input names; the FX names stay in each trace's fx_names
            dynamo_names = dynamo_input_names(gm)
            arguments = aot_argument_names(gm, dynamo_names)
        except Exception:
            dynamo_names, arguments = [], []
        self._arguments[graph] = arguments
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        try:
            t0 = time.perf_counter()
            dyn = fx_to_trace(gm, chain="dynamo", graph=graph, aten_only=False, call_site=site,
                              input_names={p: n for p, n in zip(placeholders, dynamo_names) if n})
            obs.pass_done(graph, "dynamo", 0, "acquire", dyn.replace(meta={"duration_ms": (time.perf_counter() - t0) * 1e3}),
                          time.perf_counter() - t0, True)
        except Exception:  # the Dynamo-level record is informative only
            pass
        try:
            with torch.fx.traceback.preserve_node_meta(), _tracing_context(specialization is not None):
                compiled = aot_module_simplified(
                    gm, example_inputs,
                    fw_compiler=self._chain_compiler(graph, "forward"),
                    bw_compiler=self._chain_compiler(graph, "backward"),
                    inference_compiler=self._chain_compiler(graph, "inference"),
                    partition_fn=self._partition(graph),
                )
        except _DYNAMO_CONTROL_FLOW as e:
            # Not a failure during a Dynamo compile: Dynamo asks to redo its analysis of the frame
            # (a float input it will specialize) or to skip it; it compiles the graph again (the
            # next graph id) or runs the frame eagerly itself. Running this graph eagerly instead
            # would be a needless fallback. At a shape's first call (specialization) no Dynamo
            # compile is there to take it: that is a failure like any other.
            if specialization is None:
                obs.graph_finished(graph, time.perf_counter() - t_start)
                raise
            obs.chain_failed(graph, None, f"{type(e).__name__}: {e}", traceback.format_exc())
            obs.graph_finished(graph, time.perf_counter() - t_start)
            return gm.forward
        except Exception as e:
            obs.chain_failed(graph, None, f"{type(e).__name__}: {e}", traceback.format_exc())
            obs.graph_finished(graph, time.perf_counter() - t_start)
            return gm.forward
        obs.graph_finished(graph, time.perf_counter() - t_start)
        return compiled

    def _partition(self, graph: int):
        obs = self.options.observer
        site = self._sites.get(graph)

        def partition(joint_module, joint_inputs, **kwargs):
            t0 = time.perf_counter()
            try:
                joint = fx_to_trace(joint_module, chain="joint", graph=graph, call_site=site,
                                    input_names=_aot_names(joint_module, self._arguments.get(graph, [])))
                dt = time.perf_counter() - t0
                obs.pass_done(graph, "joint", 0, "acquire", joint.replace(meta={"duration_ms": dt * 1e3}), dt, True)
            except Exception as e:
                obs.chain_failed(graph, "joint", f"{type(e).__name__}: {e}", traceback.format_exc())
            return default_partition(joint_module, joint_inputs, **kwargs)
        return partition

    def _chain_compiler(self, graph: int, chain: str):
        """Return the AOTAutograd compiler of one chain of ``graph`` (whose call site, the user line
        that called the compiled code, is the source of ops with an empty FX stack trace)."""
        options = self.options
        site = self._sites.get(graph)

        def compile_fx_graph(gm: torch.fx.GraphModule, example_inputs):
            obs = options.observer
            saved_copies = _mutated_inputs_saved(gm) if chain == "forward" else []
            if chain == "forward":
                _no_donated_buffers()
            eager = _eager_boxed(gm)
            t0 = time.perf_counter()
            try:
                names = _aot_names(gm, self._arguments.get(graph, []))
                if chain == "backward":
                    names = {**_saved_names(gm, self._forward_outputs.pop(graph, [])), **names}
                trace = fx_to_trace(gm, chain=chain, graph=graph, input_names=names, call_site=site)
                if chain == "forward":
                    self._forward_outputs[graph] = list(flatten(trace.outputs))
                dt = time.perf_counter() - t0
                obs.pass_done(graph, chain, 0, "acquire", trace.replace(meta={"duration_ms": dt * 1e3}), dt, True)
                _, fn = compile_chain(trace, options)
            except Exception as e:
                kind = "unsupported" if isinstance(e, UnsupportedGraph) else "compiler error"
                obs.chain_failed(graph, chain, f"{kind}: {type(e).__name__}: {e}", traceback.format_exc())
                obs.runtime(graph, chain, "chain_compiled", {"seconds": time.perf_counter() - t0})
                return _saving_copies(_announced(eager, graph, chain), saved_copies)
            # The chain's own compile time: the backward's is not in the graph's compile_s
            # (AOTAutograd compiles it lazily, at the first backward); views add it from this event.
            obs.runtime(graph, chain, "chain_compiled", {"seconds": time.perf_counter() - t0})

            def report(e: BaseException):
                obs.chain_failed(graph, chain, f"runtime error: {type(e).__name__}: {e}", traceback.format_exc())
            guarded = _guard_first_call(fn, eager, report)
            steps = options.profile.compare_steps if options.profile is not None else 0
            if steps > 0:  # run --compare-eager: the ATen graph runs eagerly beside the first calls
                from .numerics_hooks import compared_with_eager, reporter
                guarded = compared_with_eager(guarded, eager, steps, reporter(obs, graph, chain))
            return _saving_copies(_announced(guarded, graph, chain), saved_copies)
        return compile_fx_graph


def _flatten_boxed_inputs(gm: torch.fx.GraphModule, example_inputs) -> Optional[torch.fx.GraphModule]:
    """Return a copy of ``gm`` whose first input, a list of tensors read only by ``list[i]``
    (compiled autograd's graphs: DDP's python reducer traces its all-reduces there), is one input
    per tensor; None when the graph uses the list any other way."""
    import operator
    gm = torch.fx.GraphModule(gm, gm.graph.__deepcopy__() if hasattr(gm.graph, "__deepcopy__") else gm.graph)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    boxed, items = placeholders[0], example_inputs[0]
    if not all(isinstance(t, torch.Tensor) for t in items):
        return None
    users = list(boxed.users)
    if not all(u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
               and 0 <= u.args[1] < len(items) for u in users):
        return None
    with gm.graph.inserting_before(boxed):
        new = [gm.graph.placeholder(f"{boxed.name}_{i}") for i in range(len(items))]
    for node, value in zip(new, items):
        node.meta["example_value"] = node.meta["val"] = value
    for u in users:
        u.replace_all_uses_with(new[u.args[1]])
        gm.graph.erase_node(u)
    gm.graph.erase_node(boxed)
    gm.recompile()
    return gm


def _aot_names(gm: torch.fx.GraphModule, arguments: list) -> dict[str, str]:
    """Return {placeholder: readable name} for an AOTAutograd graph (see :mod:`.input_names`)."""
    return aot_input_names([n.name for n in gm.graph.nodes if n.op == "placeholder"], arguments)


def _saved_names(gm: torch.fx.GraphModule, forward_outputs: list) -> dict[str, str]:
    """Return {placeholder: readable name} for the saved values a backward graph reads."""
    saved = []
    for n in gm.graph.nodes:
        if n.op != "placeholder" or n.name.startswith("tangents_"):
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            return {}
        saved.append((n.name, tuple(int(s) for s in v.shape), str(v.dtype).removeprefix("torch.")))
    return saved_input_names(saved, forward_outputs)


def _compile_reason() -> Optional[str]:
    """Return why Dynamo is compiling this frame again (guard failure), when it says."""
    try:
        from torch._guards import CompileContext
        ctx = CompileContext.try_get()
        if ctx is not None and getattr(ctx, "attempt", 0):
            return f"attempt {ctx.attempt}"
    except Exception:
        pass
    return None


def thundervis_backend(gm: torch.fx.GraphModule, example_inputs, **options) -> Callable:
    """The ``torch_dynamo_backends`` entry point: compile with the process defaults (see
    :func:`set_defaults`) overridden by ``options`` (``executors``, ``debug``)."""
    compiler = ThundervisCompiler(
        executors=options.get("executors", _defaults["executors"]),
        debug=options.get("debug", _defaults["debug"]),
        observer=options.get("observer", _defaults["observer"]),
        profile=options.get("profile", _defaults["profile"]),
        targets=options.get("targets"),
        aot=None if "targets" in options else _defaults["aot"],
    )
    return compiler(gm, example_inputs)


def plan_records(step: Callable, *args) -> tuple[list, list]:
    """Plan every Triton kernel of what ``step(compile, *args)`` compiles and runs once, from shapes
    alone: ``compile`` is ``torch.compile`` with the planning executor (``aot.shape_plan``: kernels
    planned for a CUDA device, never launched), meant for ``meta`` tensors. Return (the Triton kernel
    records, the chains that failed to compile as (graph, chain, error))."""
    from .aot import shape_plan  # noqa: F401  (registers the triton_planning executor)

    class Records(CompileObserver):
        def __init__(self):
            self.records, self.failures = [], []

        def kernels_built(self, graph, chain, kernels):
            self.records += [k for k in kernels if k.executor == "triton"]

        def chain_failed(self, graph, chain, error, tb):
            self.failures.append((graph, chain, error))
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Records()
    backend = ThundervisCompiler(executors=["triton_planning"], observer=obs)
    step(lambda fn: torch.compile(fn, backend=backend), *args)
    return obs.records, obs.failures


def jit(fn_or_module, *, executors: Optional[Sequence[str]] = None, debug: bool = False,
        observer: Optional[CompileObserver] = None, profile: Optional[ProfileSettings] = None,
        targets=None, **compile_kwargs):
    """Return ``torch.compile(fn_or_module)`` routed through our compiler (``profile``: time kernels
    at run time and/or capture fusion inputs, see :mod:`profiling`; ``targets``: GPU targets to
    compile every kernel for ahead of time, ``"sm_90"`` or ``"local"``; None: those of the
    ``thundervis run`` in progress, else none)."""
    shared = _defaults["aot"] if targets is None else None
    backend = ThundervisCompiler(executors=executors, debug=debug,
                                 observer=observer or _defaults["observer"],
                                 profile=profile if profile is not None else _defaults["profile"],
                                 targets=targets, aot=shared)
    return torch.compile(fn_or_module, backend=backend, **compile_kwargs)
