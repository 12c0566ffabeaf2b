"""What ``compile_time.py`` measures on one model: a tiny Llama-shaped model (``transformers``
config, random init, no download) of a given depth, one training step compiled by thundervis with
the recording on, and the per-pass cost read back from the recording.
"""
from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field

import torch


def import_transformers():
    """Return the ``transformers`` module, or raise ImportError with one sentence saying why."""
    try:  # PyPI's torchvision beside the CPU torch wheel: declare the two ops its import registers
        import torchvision  # noqa: F401  (transformers imports it)
    except RuntimeError:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import_transformers.library = lib  # the definitions live as long as the library object
        import torchvision  # noqa: F401,F811
    except ImportError:
        pass
    import transformers
    return transformers


def llama(layers: int, hidden: int = 64):
    """Return (model, input ids) of a random tiny Llama with ``layers`` decoder layers."""
    transformers = import_transformers()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=hidden, intermediate_size=2 * hidden,
                                   num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg), torch.randint(0, 128, (2, 16))


def first_step_seconds(model, ids, backend) -> float:
    """Return the wall seconds of the first training step (compile included) through ``backend``."""
    return first_step_times(model, ids, backend)[0]


def first_step_times(model, ids, backend) -> tuple[float, float]:
    """Return (wall seconds, CPU seconds) of the first training step (compile included) through
    ``backend``. CPU: this process's and its reaped children's (a C++ compiler it ran), not a
    worker pool's that outlives the step; on a loaded machine it is what the step needed, where
    the wall time is mostly how long it waited."""
    import resource
    import torch._dynamo
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, dynamic=False) if backend else torch.compile(model, dynamic=False)
    c0, t0 = _cpu_seconds(resource), time.perf_counter()
    compiled(input_ids=ids, labels=ids).loss.backward()
    return time.perf_counter() - t0, _cpu_seconds(resource) - c0


def _cpu_seconds(resource) -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class PassCost:
    """Summed over the compiled chains: a pass's wall seconds (as recorded), its input symbols, its
    CPU seconds, the CPU seconds of Python's garbage collections that ran inside it (``gc_s``: part
    of ``cpu_s``; a collection walks the whole heap, so which pass it lands in is chance, and its
    cost grows with everything alive, not with that pass), and the seconds the recording took to
    store what it produced (``record_s`` wall, ``record_cpu_s`` the calling thread's CPU: the writer
    has no thread of its own; ``record_gc_s``: the collections inside that; ``record_rows_s``: the CPU
    of a batch of symbol rows the writer flushed inside it, rows of earlier passes too, which is why
    the batches are judged on their own, as :class:`RowFlushes`)."""

    seconds: float = 0.0
    symbols: int = 0
    cpu_s: float = 0.0
    gc_s: float = 0.0
    record_s: float = 0.0
    record_cpu_s: float = 0.0
    record_gc_s: float = 0.0
    record_rows_s: float = 0.0
    chains: set = field(default_factory=set)

    def ms_per_symbol(self) -> float:
        """Milliseconds of the pass per input symbol (0 when it saw none)."""
        return 1e3 * self.seconds / self.symbols if self.symbols else 0.0

    def cpu_ms_per_symbol(self) -> float:
        """CPU milliseconds of the pass (this process only) per input symbol (0 when it saw none)."""
        return 1e3 * self.cpu_s / self.symbols if self.symbols else 0.0

    def own_cpu_ms_per_symbol(self) -> float:
        """CPU milliseconds of the pass without the collections inside it, per input symbol."""
        return 1e3 * (self.cpu_s - self.gc_s) / self.symbols if self.symbols else 0.0

    def gc_ms_per_symbol(self) -> float:
        """CPU milliseconds of the collections that ran inside the pass, per input symbol."""
        return 1e3 * self.gc_s / self.symbols if self.symbols else 0.0

    def record_ms_per_symbol(self) -> float:
        """Milliseconds of recording per input symbol (0 when it saw none)."""
        return 1e3 * self.record_s / self.symbols if self.symbols else 0.0

    def own_record_ms_per_symbol(self) -> float:
        """CPU milliseconds of recording per input symbol without the collections and the symbol-row
        batches inside it."""
        own = self.record_cpu_s - self.record_gc_s - self.record_rows_s
        return 1e3 * own / self.symbols if self.symbols else 0.0


@dataclass
class RowFlushes:
    """The recording's symbol rows, written in batches (``MAX_PENDING_SYMBOLS`` symbols kept, then
    flushed inside whichever pass crosses it, and the rest when the run ends): the CPU seconds of
    every batch, the collections inside them, and the symbols of every pass the chains ran."""

    seconds: float = 0.0
    gc_s: float = 0.0
    symbols: int = 0

    def own_ms_per_symbol(self) -> float:
        """Milliseconds of writing symbol rows per pass input symbol, without collections."""
        return 1e3 * (self.seconds - self.gc_s) / self.symbols if self.symbols else 0.0


def thundervis_step(layers: int, executors=None) -> tuple[float, dict, int, float, RowFlushes]:
    """Compile and run one training step of a ``layers``-deep tiny Llama through thundervis with
    the recording on; return (wall seconds, {pass name: PassCost}, symbols acquired, CPU seconds,
    the symbol-row batches)."""
    import thundervis.compiler.pipeline as pipeline
    from thundervis.recording import RecordingObserver

    record_s: dict = defaultdict(float)
    record_cpu_s: dict = defaultdict(float)
    record_gc_s: dict = defaultdict(float)
    record_rows_s: dict = defaultdict(float)
    collected = [0.0, 0.0]  # CPU seconds of every collection so far, when the current one started
    flushes = RowFlushes()

    class TimedRecording(RecordingObserver):
        def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
            t0, c0, g0, r0 = time.perf_counter(), time.thread_time(), collected[0], flushes.seconds
            super().pass_done(graph, chain, index, name, trace, duration_s, changed)
            record_s[(graph, chain, index)] += time.perf_counter() - t0
            record_cpu_s[(graph, chain, index)] += time.thread_time() - c0
            record_gc_s[(graph, chain, index)] += collected[0] - g0
            record_rows_s[(graph, chain, index)] += flushes.seconds - r0

        def write_symbol_rows(self):
            t0, g0 = time.thread_time(), collected[0]
            super().write_symbol_rows()
            flushes.seconds += time.thread_time() - t0
            flushes.gc_s += collected[0] - g0

    cpu_s: dict = defaultdict(float)
    gc_s: dict = defaultdict(float)
    run_pass = pipeline.PassRunner.run

    def on_collection(phase, info):
        if phase == "start":
            collected[1] = time.process_time()
        else:
            collected[0] += time.process_time() - collected[1]

    def timed_run(self, name, fn, trace):  # CPU seconds too: wall time on a shared machine is noisy
        key = (self.graph, self.chain, self.index)

        def timed(t):
            t0, g0 = time.process_time(), collected[0]
            try:
                return fn(t)
            finally:
                cpu_s[key] += time.process_time() - t0
                gc_s[key] += collected[0] - g0
        return run_pass(self, name, timed, trace)

    model, ids = llama(layers)
    pipeline.PassRunner.run = timed_run
    gc.callbacks.append(on_collection)
    try:
        out = _measure(model, ids, executors, TimedRecording, (record_s, record_gc_s, record_rows_s, record_cpu_s),
                       (cpu_s, gc_s))
        flushes.symbols = sum(c.symbols for c in out[1].values())
        return (*out, flushes)
    finally:
        pipeline.PassRunner.run = run_pass
        gc.callbacks.remove(on_collection)


def _measure(model, ids, executors, recording, record_gc, cpu_gc):
    from thundervis.compiler import ThundervisCompiler
    from thundervis.compiler.backend import reset_graph_ids
    from thundervis.recording import open_recording
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.tvrec")
        rec = recording(path)
        rec.start_run(script=__file__, module=None, argv=sys.argv, cwd=os.getcwd())
        reset_graph_ids()
        # cache=False: every step compiles from scratch, whatever $THUNDERVIS_COMPILE_CACHE says
        compiler = ThundervisCompiler(executors=executors, observer=rec, cache=False)
        wall, cpu = first_step_times(model, ids, compiler)
        rec.finish_run("ok", 0)
        rec.close()
        costs: dict = defaultdict(PassCost)
        acquired = 0
        with open_recording(path) as r:
            for g in r.graphs():
                for chain in g.chains:
                    if chain.kind not in ("forward", "backward", "inference"):
                        continue
                    passes = sorted(chain.passes, key=lambda p: p.index)
                    if passes:
                        acquired += passes[0].n_symbols
                    for before, p in zip(passes, passes[1:]):
                        c = costs[p.name]
                        c.seconds += p.duration_ms / 1e3
                        c.symbols += before.n_symbols
                        c.record_s += record_gc[0].get((g.id, chain.kind, p.index), 0.0)
                        c.record_gc_s += record_gc[1].get((g.id, chain.kind, p.index), 0.0)
                        c.record_rows_s += record_gc[2].get((g.id, chain.kind, p.index), 0.0)
                        c.record_cpu_s += record_gc[3].get((g.id, chain.kind, p.index), 0.0)
                        c.cpu_s += cpu_gc[0].get((g.id, chain.kind, p.index), 0.0)
                        c.gc_s += cpu_gc[1].get((g.id, chain.kind, p.index), 0.0)
                        c.chains.add((g.id, chain.kind))
    return wall, dict(costs), acquired, cpu
