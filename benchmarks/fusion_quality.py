"""Kernels launched per training step of ``examples/train_gpt.py``'s model: thundervis vs Inductor.

Usage: ``python benchmarks/fusion_quality.py [--executors triton,torch] [--layers 2] [--json]``

Both sides compile the same model (``train_gpt.build``) with ``torch.compile`` and run one training
step (forward + backward; the optimizer step is not compiled by either and is not counted).

Ours: the final (codegen) trace of every compiled chain, ``forward`` and ``backward``, is straight-line
code run once per step, so its launches are counted statically from it: each fusion symbol is one
kernel launch (also a multi-part Triton kernel: its sections share one grid and its phases run in one
program; scratch buffers between phases are allocations, not launches); each symbol the torch executor runs counts one launch unless it only changes metadata (views:
view/reshape-as-view, expand, permute, transpose, squeeze/unsqueeze, slice/select, alias/detach, split)
or only allocates (``empty``). An ATen call that launches several kernels inside (a few native ops do
on GPU) still counts as one, the same approximation as Inductor's extern calls below.

Inductor: ``torch._inductor.utils.run_and_get_code`` captures the output code of every graph compiled
during the step (FX graph and autograd caches are disabled so every graph is generated and seen). In
each output module's ``call()`` we count invocations of its generated kernels (names bound with
``async_compile.cpp_pybinding`` / ``async_compile.triton`` ...; called as ``name(...)`` or
``name.run(...)``) plus its extern calls (``extern_kernels.*`` such as mm/addmm/bmm, ATen fallbacks
``aten.*`` / ``torch.ops.aten.*``, and buffer ``.zero_()`` fills). Launches are counted, not kernel
definitions: Inductor reuses one kernel for identical layers. ``torch._inductor.metrics.
generated_kernel_count`` is shown for reference only: it counts kernels generated while compiling
(on CPU it also counts code variants that never launch), so it is not a launch count.

Target (issue 4): ours <= Inductor. Prints both counts and ours / Inductor.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported, for CPU machines

import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Symbols that only change metadata (no kernel) when the torch executor runs them.
VIEW_OPS = frozenset("""view _unsafe_view expand permute squeeze unsqueeze alias slice select as_strided t
transpose detach split split_with_sizes unbind view_as _reshape_alias narrow diagonal unfold
empty empty_strided""".split())


def load_example():
    """Return the ``examples/train_gpt.py`` module (imported by path)."""
    path = os.path.join(ROOT, "examples", "train_gpt.py")
    spec = importlib.util.spec_from_file_location("train_gpt", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _op_name(sym: str) -> str:
    parts = sym.split(".")
    return parts[1] if len(parts) >= 2 and parts[0] in ("prims", "aten") else sym


def launches(b) -> int:
    """Return the kernels one top-level symbol of a final trace launches (0 for views and dels)."""
    if b.sym == "del":
        return 0
    if b.fusion:
        return 1  # one kernel
    if b.subsymbols and all(_op_name(s.sym) in VIEW_OPS for s in b.subsymbols):
        return 0
    return 0 if _op_name(b.sym) in VIEW_OPS else 1


def count_ours(model, batch, executors):
    """Compile with thundervis, run one step; return ({chain: launches}, {chain: fusions}, notes)."""
    from thundervis.compiler.backend import ThundervisCompiler
    from thundervis.compiler.observer import CompileObserver

    finals: dict = {}
    failures: list = []

    class Final(CompileObserver):
        def pass_done(self, graph, chain, index, name, trace, duration_s, changed):
            if name == "codegen":
                finals[(graph, chain)] = trace

        def chain_failed(self, graph, chain, error, tb):
            failures.append(f"graph {graph} {chain}: {error}")

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=ThundervisCompiler(executors=executors, observer=Final()))
    x, y = batch
    _, loss = compiled(x, y)
    loss.backward()
    per_chain, fusions = {}, {}
    for (graph, chain), trace in sorted(finals.items()):
        key = f"graph {graph} {chain}"
        per_chain[key] = sum(launches(b) for b in trace.symbols)
        fusions[key] = sum(1 for b in trace.symbols if b.fusion)
    return per_chain, fusions, failures


_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.(?:cpp_pybinding|cpp|triton|cuda|halide)\(", re.M)
_EXTERN = re.compile(r"\bextern_kernels\.\w+\(|(?<![\w.])(?:torch\.ops\.)?aten\.\w+(?:\.\w+)?\(|\.zero_\(\)")


def count_inductor_code(code: str) -> tuple[int, int]:
    """Return (generated kernel launches, extern calls) in one Inductor output module's ``call()``."""
    match = re.search(r"^([ \t]*)def call\(", code, re.M)
    if match is None:
        return 0, 0
    indent = len(match.group(1))
    lines = []
    for line in code[match.end():].splitlines()[1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break  # the first statement at the def's own indentation ends call()
        lines.append(line)
    body = "\n".join(lines)
    names = set(_KERNEL_DEF.findall(code))
    generated = 0
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("#"):
            continue
        for n in names:
            if re.match(rf"{re.escape(n)}(\.run)?\(", s):
                generated += 1
    extern = sum(len(_EXTERN.findall(line)) for line in body.splitlines() if not line.strip().startswith("#"))
    return generated, extern


def count_inductor(model, batch):
    """Compile with the default backend, run one step; return (generated, extern, metric, n_graphs)."""
    import torch._inductor.config as inductor_config
    import torch._inductor.metrics as metrics
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    metrics.reset()
    compiled = torch.compile(model)
    x, y = batch

    def step():
        _, loss = compiled(x, y)
        loss.backward()

    patches = {"fx_graph_cache": False}
    try:
        import torch._functorch.config as functorch_config
        ctx = functorch_config.patch(enable_autograd_cache=False)
    except Exception:  # older torch without the autograd cache
        import contextlib
        ctx = contextlib.nullcontext()
    with inductor_config.patch(patches), ctx:
        _, codes = run_and_get_code(step)
    generated = extern = 0
    for code in codes:
        g, e = count_inductor_code(code)
        generated += g
        extern += e
    return generated, extern, metrics.generated_kernel_count, len(codes)


def main(argv=None) -> int:
    """Count both sides and print them with the ratio; return 0 (1 if our compile reported failures)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executors", default=None,
                        help="our executors, comma-separated (default: the default order for the device)")
    parser.add_argument("--layers", type=int, default=2, help="transformer blocks (default 2, the example's)")
    parser.add_argument("--device", default="cpu", help="device for the model and data (default cpu)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    gpt = load_example()
    executors = args.executors.split(",") if args.executors else None

    def fresh():
        model, batches = gpt.build(n_layer=args.layers)
        x, y = batches[0]
        return model.to(args.device), (x.to(args.device), y.to(args.device))

    t0 = time.perf_counter()
    model, batch = fresh()
    ours, fusions, failures = count_ours(model, batch, executors)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    model, batch = fresh()
    generated, extern, metric, n_graphs = count_inductor(model, batch)
    t_ind = time.perf_counter() - t0
    total_ours, total_ind = sum(ours.values()), generated + extern
    ratio = total_ours / total_ind if total_ind else float("inf")
    result = {"ours": total_ours, "ours_per_chain": ours, "ours_fusions": sum(fusions.values()),
              "inductor": total_ind, "inductor_generated": generated, "inductor_extern": extern,
              "inductor_generated_kernel_count_metric": metric, "inductor_graphs": n_graphs,
              "ratio": ratio, "executors": executors or "default", "failures": failures,
              "compile_seconds": {"ours": round(t_ours, 1), "inductor": round(t_ind, 1)}}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"kernels launched per training step (forward + backward), train_gpt model, {args.layers} layers")
        print(f"  thundervis ({result['executors']}): {total_ours:4d}   "
              f"({sum(fusions.values())} fusion kernels; per chain: {ours})")
        print(f"  inductor:   {total_ind:4d}   ({generated} generated kernels + {extern} extern calls; "
              f"{n_graphs} graphs; metrics.generated_kernel_count={metric}, not a launch count)")
        print(f"  ours / inductor = {ratio:.2f}   (target <= 1.00)")
        for f in failures:
            print(f"  compile failure: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
