"""The ``torch.compile`` backend: Dynamo graph -> AOTAutograd -> our pipeline -> callable.

Every Dynamo graph becomes one compiled graph with chains ``dynamo``, ``joint``, ``forward``,
``backward`` (or ``inference``). Whatever fails inside the compiler, the user's training goes on:
a chain that fails to compile runs its ATen graph eagerly, a graph that AOTAutograd cannot take runs
the Dynamo graph eagerly, and a compiled callable that fails on its first call is replaced by the
eager graph. Each failure is reported once to the observer.
"""
from __future__ import annotations

import itertools
import threading
import time
import traceback
from typing import Callable, Optional, Sequence

from . import triton_mode

triton_mode.set_for_torch()  # before torch's AOTAutograd imports Triton

import torch  # noqa: E402
import torch.fx  # noqa: E402
from torch._functorch.aot_autograd import aot_module_simplified  # noqa: E402

from . import remat as _remat
from .acquire import UnsupportedGraph, fx_to_trace
from .input_names import aot_argument_names, dynamo_input_names, parameter_flags
from .input_names import aot_names as _aot_names, saved_names as _saved_names
from .ir import Trace, flatten
from .heap_freeze import compiling as _gc_compiling
from .chain_wrappers import (_announced, _eager_boxed, _flatten_boxed_inputs, _guard_first_call,
                             _mutated_inputs_saved, _no_donated_buffers, _saving_copies, _tracing_context)
from .graph_cache import GraphCapture, runtime_meta
from .graph_hit import cached_graph
from .observer import CompileObserver, MultiObserver, session_observer
from .pipeline import CompileOptions, compile_chain
from .profiling import ProfileSettings
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
_defaults = {"observer": None, "executors": None, "debug": False, "profile": None, "aot": None, "remat": "auto",
             "abstract": False, "cache": None}
_lock = threading.Lock()
_OWN_AOT: dict = {}  # (targets, id(observer)) -> the AheadOfTime compilers made for themselves


def set_defaults(*, observer: Optional[CompileObserver] = None, executors: Optional[Sequence[str]] = None,
                 debug: Optional[bool] = None, profile: Optional[ProfileSettings] = None,
                 aot=None, remat: Optional[str] = None, abstract: Optional[bool] = None,
                 cache: Optional[bool] = None) -> None:
    """Set what ``backend="thundervis"`` uses when called without options (``thundervis run`` does);
    ``cache``: use the persistent compile cache (:mod:`.compile_cache`; None: unchanged);
    ``remat``: the rematerialization policy (:mod:`.remat`; None: unchanged);
    ``profile``: run-time profiling / input capture settings (None: off); ``aot``: the
    :class:`~.aot.pool.AheadOfTime` every compiler shares (None: none)."""
    _defaults["observer"] = observer
    _defaults["executors"] = list(executors) if executors else None
    _defaults["profile"] = profile
    _defaults["aot"] = aot
    if remat is not None:
        _defaults["remat"] = _remat.check_policy(remat)
    if abstract is not None:  # an abstract run (:mod:`.abstract`): fake outputs, kernels planned only
        _defaults["abstract"] = bool(abstract)
    if debug is not None:
        _defaults["debug"] = debug
    if cache is not None:
        _defaults["cache"] = bool(cache)


def reset_graph_ids() -> None:
    """Restart graph numbering at 0 (a new recording starts)."""
    global _graph_ids
    _graph_ids = itertools.count()


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


def _acquire_one(gm, graph: int, chain: str, arguments: list, forward_outputs: list, site) -> Trace:
    """Return the trace of AOTAutograd chain graph ``gm`` with readable input names."""
    names = _aot_names(gm, arguments)
    if chain == "backward":
        names = {**_saved_names(gm, forward_outputs), **names}
    return fx_to_trace(gm, chain=chain, graph=graph, input_names=names, call_site=site)


class ThundervisCompiler:
    """A Dynamo backend object: ``torch.compile(model, backend=ThundervisCompiler(...))``.
    ``targets``: GPU targets every Triton kernel is compiled for ahead of time (``"sm_80,sm_90"``;
    ``"local"``: the local GPU's architecture, none without CUDA; None: none); ``aot``: a shared
    :class:`~.aot.pool.AheadOfTime` instead (``thundervis run`` passes one); ``remat``: ``off`` or
    ``auto`` (None: the process default, ``auto``), see :mod:`.remat`."""

    def __init__(self, executors: Optional[Sequence[str]] = None, debug: bool = False,
                 observer: Optional[CompileObserver] = None, profile: Optional[ProfileSettings] = None,
                 targets=None, aot=None, remat: Optional[str] = None, abstract: Optional[bool] = None,
                 cache: Optional[bool] = None):
        observer = observer or CompileObserver()
        self.abstract = bool(_defaults.get("abstract", False) if abstract is None else abstract)
        if self.abstract and not executors:  # planned for the GPU target, never launched
            from .aot import shape_plan  # noqa: F401  (registers triton_planning)
            executors = ["triton_planning"]
        self.remat = _remat.check_policy(remat if remat is not None else _defaults["remat"])
        self._partitions: dict[int, _remat.Partitioned] = {}  # graph id -> both policies' partitions
        self._finals: dict[int, Trace] = {}  # graph id -> its final forward trace, until the backward's
        self._param_flags: dict[int, list] = {}  # graph id -> per AOTAutograd argument: a parameter/buffer?
        self.options = CompileOptions(executors=executors, debug=debug, observer=observer,
                                      profile=profile, aot=ahead_of_time(targets, observer, aot),
                                      cache=_compile_cache(cache, self.abstract))
        self._capture = GraphCapture() if self.options.cache is not None else None  # graph entries: graph_cache
        if self._capture is not None:
            self.options.observer = MultiObserver(observer, self._capture)
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
        try:
            self._param_flags[graph] = parameter_flags(gm)
        except Exception:
            self._param_flags[graph] = []
        if self.abstract:
            from .abstract import check_size
            check_size(info["n_nodes"], obs, graph)
        try:
            with _gc_compiling(), torch.fx.traceback.preserve_node_meta(), _tracing_context(specialization is not None):
                self._record_dynamo_trace(gm, graph, site, dynamo_names)  # never raises
                compiled = cached_graph(self.options, self.remat, self._capture, graph, gm, example_inputs, site)
                if compiled is None:
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

    def _record_dynamo_trace(self, gm: torch.fx.GraphModule, graph: int, site, dynamo_names: list) -> None:
        """Record the Dynamo graph ``gm`` as the ``dynamo`` chain's one pass (informative only)."""
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        try:
            t0 = time.perf_counter()
            dyn = fx_to_trace(gm, chain="dynamo", graph=graph, aten_only=False, call_site=site,
                              input_names={p: n for p, n in zip(placeholders, dynamo_names) if n})
            self.options.observer.pass_done(
                graph, "dynamo", 0, "acquire", dyn.replace(meta={"duration_ms": (time.perf_counter() - t0) * 1e3}),
                time.perf_counter() - t0, True)
        except Exception:  # the Dynamo-level record is informative only
            pass

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
            part = _remat.partition(joint_module, joint_inputs, self.remat, cache=self.options.cache, **kwargs)
            self._partitions[graph] = part
            if part.cache is not None:  # hit or miss, and why an entry was refused
                obs.runtime(graph, "joint", "partition_cache", part.cache)
            return _remat.chosen(part)
        return partition

    def _acquire(self, gm, graph: int, chain: str, t0: float) -> Trace:
        """Acquire chain ``gm`` and report it; with both partitions known, report the ``off``
        partition's chain as ``acquire`` and the one that runs as pass 1, ``remat``, whose notes
        say what each decision kept or recomputed. Return the trace to compile."""
        obs, site, arguments = self.options.observer, self._sites.get(graph), self._arguments.get(graph, [])
        part = self._partitions.get(graph) if chain in ("forward", "backward") else None
        outs = self._forward_outputs.pop(graph, {}) if chain == "backward" else {}
        off_gm = part.off[0 if chain == "forward" else 1] if part is not None else None
        before = _acquire_one(off_gm, graph, chain, arguments, outs.get("off", []), site) if off_gm else None
        trace = _acquire_one(gm, graph, chain, arguments, outs.get("run", []), site)  # acquired last: what runs
        if before is None:
            before = trace
        else:
            if chain == "forward":  # the ledger's what-if reads them (remat.ledger)
                part.acquired["off"] = before
                if part.auto is not None and part.auto[0] is gm:
                    part.acquired["auto"] = trace
            trace = _remat.aligned(before, off_gm, trace, gm, _remat.notes_for(part, chain))
        if chain == "forward":
            self._forward_outputs[graph] = {"run": list(flatten(trace.outputs)), "off": list(flatten(before.outputs))}
        dt = time.perf_counter() - t0
        obs.pass_done(graph, chain, 0, "acquire", before.replace(meta={"duration_ms": dt * 1e3}), dt, True)
        if part is None:
            return trace
        trace = trace.replace(meta=_remat.pass_meta(part))
        obs.pass_done(graph, chain, 1, _remat.PASS_NAME, trace, part.seconds if chain == "forward" else 0.0,
                      trace.symbols != before.symbols or trace.outputs != before.outputs)
        return _remat.without_notes(trace)

    def _ledger(self, graph: int, chain: str, final: Trace) -> None:
        """Keep the final forward trace; once the backward's is there, report the graph's ledger."""
        if chain == "forward":
            self._finals[graph] = final
            return
        fw, part = self._finals.pop(graph, None), self._partitions.pop(graph, None)
        if chain != "backward" or fw is None or part is None:
            return
        try:
            data = _remat.ledger(part, fw, final, self._param_flags.get(graph, []))
        except Exception as e:  # the ledger is a record: the compiled chain runs without it
            data = {"error": f"{type(e).__name__}: {e}"}
        self.options.observer.memory_ledger(graph, data)

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
            if chain != "backward" and self._capture is not None and self._capture.wants(graph):
                self._capture.note(graph, "meta", runtime_meta(gm, chain))
            eager = _eager_boxed(gm)
            t0 = time.perf_counter()
            try:
                with _gc_compiling():  # the backward compiles at the first backward, outside aot_module_simplified
                    trace = self._acquire(gm, graph, chain, t0)
                    final, fn = compile_chain(trace, options)  # after acquire (and remat, pass 1)
                    self._ledger(graph, chain, final)
            except Exception as e:
                kind = "unsupported" if isinstance(e, UnsupportedGraph) else "compiler error"
                obs.chain_failed(graph, chain, f"{kind}: {type(e).__name__}: {e}", traceback.format_exc())
                obs.runtime(graph, chain, "chain_compiled", {"seconds": time.perf_counter() - t0})
                return _saving_copies(_announced(eager, graph, chain), saved_copies)
            # The chain's own compile time: the backward's is not in the graph's compile_s
            # (AOTAutograd compiles it lazily, at the first backward); views add it from this event.
            obs.runtime(graph, chain, "chain_compiled", {"seconds": time.perf_counter() - t0})
            if chain != "forward" and self._capture is not None:  # the graph's entry is complete
                self._capture.finish(graph, options.cache.root, options.cache.cap)
            if self.abstract:
                from .abstract import fake_outputs
                return _announced(fake_outputs(final), graph, chain)

            def report(e: BaseException):
                obs.chain_failed(graph, chain, f"runtime error: {type(e).__name__}: {e}", traceback.format_exc())
            guarded = _guard_first_call(fn, eager, report)
            steps = options.profile.compare_steps if options.profile is not None else 0
            if steps > 0:  # run --compare-eager: the ATen graph runs eagerly beside the first calls
                from .numerics_hooks import compared_with_eager, reporter
                guarded = compared_with_eager(guarded, eager, steps, reporter(obs, graph, chain))
            return _saving_copies(_announced(guarded, graph, chain), saved_copies)
        return compile_fx_graph


def _compile_cache(cache: Optional[bool], abstract: bool):
    """The persistent compile cache a compiler uses: ``cache`` (None: the process default, else
    on unless ``$THUNDERVIS_COMPILE_CACHE`` is off); never for an abstract run."""
    from .compile_cache import CompileCache, enabled_by_default
    if cache is None:
        cache = _defaults["cache"]
    if cache is None:
        cache = enabled_by_default()
    return CompileCache() if cache and not abstract else None


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
    :func:`set_defaults`) overridden by ``options`` (``executors``, ``debug``, ``remat``), given as
    keywords or as ``torch.compile(..., options={...})``, which arrives as one ``options`` dict."""
    if isinstance(options.get("options"), dict):
        options = {**options.pop("options"), **options}
    compiler = ThundervisCompiler(
        executors=options.get("executors", _defaults["executors"]),
        debug=options.get("debug", _defaults["debug"]),
        observer=options.get("observer", _defaults["observer"]) or session_observer(),  # as jit: the session's
        profile=options.get("profile", _defaults["profile"]),
        targets=options.get("targets"),
        aot=None if "targets" in options else _defaults["aot"],
        remat=options.get("remat"),
        abstract=options.get("abstract"),
        cache=options.get("cache"),
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
        targets=None, remat: Optional[str] = None, abstract: Optional[bool] = None,
        cache: Optional[bool] = None, **compile_kwargs):
    """Return ``torch.compile(fn_or_module)`` routed through our compiler (``profile``: time kernels
    at run time and/or capture fusion inputs, see :mod:`profiling`; ``targets``: GPU targets to
    compile every kernel for ahead of time, ``"sm_90"`` or ``"local"``; None: those of the
    ``thundervis run`` in progress, else none; ``remat``: ``off`` or ``auto``, None: the default; ``abstract``: compile and record only, the
    compiled code returns empty outputs shaped as the final trace's, see :mod:`.abstract`; ``cache``:
    False bypasses the persistent compile cache, :mod:`.compile_cache`)."""
    shared = _defaults["aot"] if targets is None else None
    backend = ThundervisCompiler(executors=executors, debug=debug,
                                 observer=observer or _defaults["observer"],
                                 profile=profile if profile is not None else _defaults["profile"],
                                 targets=targets, aot=shared, remat=remat, abstract=abstract, cache=cache)
    return torch.compile(fn_or_module, backend=backend, **compile_kwargs)
