"""A synthetic recording of any size, written through the real writer (:class:`RecordingObserver`),
for the TUI benchmark and the TUI tests.

A forward chain of ``n_symbols`` ATen-level ops (adds, muls, tanhs, matmuls from a made-up
``synthetic_model.py``, ``n_lines`` source lines, modules ``layers.K``) goes through ``n_passes``
passes that do what the real ones do to a trace: decompose some ops into prims (new uids with
``origin``), merge duplicates (CSE), drop dead ops (DCE), claim executors, fuse runs of pointwise
ops into fusion symbols (``fw_fusion_K``) with their members as subsymbols, insert ``del`` statements,
and a few passes that change nothing. A smaller backward chain links to the forward by ``seq_nr``.
Every duration is fixed, so a recording made twice looks the same (snapshot tests rely on it).
"""
from __future__ import annotations

from typing import Optional

from thundervis.compiler.ir import BoundSymbol, SourceInfo, TensorProxy, Trace

try:  # kernels are named per chain (fw_fusion_0, bw_fusion_0); older compilers: triton_fusion_0
    from thundervis.compiler.ir import kernel_name
except ImportError:  # pragma: no cover
    def kernel_name(graph: int, chain: str, index: int) -> str:
        """Return the old-style kernel name."""
        return f"triton_fusion_{index}"
from thundervis.recording import RecordingObserver

SCRIPT = "synthetic_model.py"
PASSES = ("acquire", "decompose", "cse", "simplify", "dce", "claim", "fuse", "remat", "liveness",
          "sort", "check", "codegen")
POINTWISE = ("aten.add.Tensor", "aten.mul.Tensor", "aten.tanh.default", "aten.sigmoid.default")


def _src(i: int, n_lines: int, script: str) -> SourceInfo:
    line = 10 + (i // 4) % n_lines
    return SourceInfo(file=script, line=line, code=f"h{line} = block{line}(h{line - 1})",
                      module=f"layers.{(i // 4) % 8}", function="forward")


def _acquired(n: int, n_lines: int, chain: str, prefix: str, script: str,
              shape=(8, 64)) -> Trace:
    """Return the first trace of a chain: ``n`` ATen ops on a running value plus a weight."""
    x = TensorProxy("x", shape, "float32", "cpu", (shape[1], 1))
    w = TensorProxy("w", (shape[1], shape[1]), "float32", "cpu", (shape[1], 1))
    prev, syms = x, []
    for i in range(n):
        out = TensorProxy(f"t{i}", shape, "float32", "cpu", (shape[1], 1))
        kind = i % 10
        if kind == 9:
            sym, args = "aten.mm.default", (prev, w)
        else:
            sym = POINTWISE[kind % len(POINTWISE)]
            args = (prev, w) if sym in ("aten.add.Tensor", "aten.mul.Tensor") and kind % 3 == 0 else \
                (prev, 0.5) if sym in ("aten.add.Tensor", "aten.mul.Tensor") else (prev,)
        syms.append(BoundSymbol(sym, args, {}, out, f"{prefix}{i}", source=_src(i, n_lines, script), seq_nr=i,
                                aten=sym))
        prev = out
    return Trace(name=chain, inputs=(x, w), symbols=tuple(syms), outputs=(prev,), chain=chain,
                 next_uid=n, next_name=n)


def _decompose(t: Trace, prefix: str) -> Trace:
    """Turn each ATen op into its prim; every tenth pointwise op becomes two prims."""
    out, uid, name = [], t.next_uid, t.next_name
    for k, b in enumerate(t.symbols):
        prim = "prims." + b.sym.split(".")[1]
        if k % 10 == 2:
            mid = TensorProxy(f"t{name}", b.outputs.shape, "float32", "cpu", b.outputs.strides)
            name += 1
            out.append(BoundSymbol("prims.mul", (b.args[0], 1.0), {}, mid, f"{prefix}{uid}", origin=(b.uid,),
                                   source=b.source, seq_nr=b.seq_nr, aten=b.aten))
            out.append(BoundSymbol(prim, (mid,) + b.args[1:], {}, b.outputs, f"{prefix}{uid + 1}", origin=(b.uid,),
                                   source=b.source, seq_nr=b.seq_nr, aten=b.aten))
            uid += 2
        else:
            out.append(b.replace(sym=prim))
    return t.replace(symbols=tuple(out), next_uid=uid, next_name=name)


def _drop_muls_by_one(t: Trace) -> Trace:
    """CSE-like: the ``mul(x, 1.0)`` halves of every other decomposed op disappear (their users read x)."""
    out, rename = [], {}
    for k, b in enumerate(t.symbols):
        args = tuple(rename.get(a.name, a) if isinstance(a, TensorProxy) else a for a in b.args)
        if b.sym == "prims.mul" and len(b.args) == 2 and b.args[1] == 1.0 and k % 4 < 2:
            rename[b.outputs.name] = args[0]
            continue
        out.append(b if args == b.args else b.replace(args=args))
    return t.replace(symbols=tuple(out))


def _claim(t: Trace) -> Trace:
    return t.replace(symbols=tuple(b.replace(executor="torch" if b.sym == "prims.mm" else "triton",
                                             note="not fused: matmul runs as its ATen call" if b.sym == "prims.mm"
                                             else None)
                                   for b in t.symbols))


def _fuse(t: Trace, prefix: str, group: int = 8) -> tuple[Trace, list[dict]]:
    """Fuse each run of up to ``group`` triton-claimed ops into one fusion symbol (a kernel)."""
    out, kernels, run = [], [], []
    uid = t.next_uid

    def flush():
        nonlocal uid
        if not run:
            return
        if len(run) == 1:
            out.append(run[0])
        else:
            name = kernel_name(t.graph, t.chain, len(kernels))
            produced = {p.name for b in run for p in b.flat_outputs()}
            ins = []
            for b in run:
                for p in b.flat_inputs():
                    if p.name not in produced and p not in ins:
                        ins.append(p)
            fused = BoundSymbol(name, tuple(ins), {}, (run[-1].outputs,), f"{prefix}{uid}",
                                origin=tuple(b.uid for b in run), source=run[0].source, subsymbols=tuple(run),
                                executor="triton")
            if "fusion" in BoundSymbol.__dataclass_fields__:  # the flag the fuse pass sets
                fused = fused.replace(fusion=True)
            uid += 1
            out.append(fused)
            kernels.append({"name": name, "executor": "triton", "uid": fused.uid, "pass": "fuse",
                            "language": "python", "members": [b.uid for b in run],
                            "ops": [b.sym for b in run],
                            "code": f"@triton.jit\ndef {name}_kernel(in_ptr0, out_ptr0, n):\n"
                                    "    pid = tl.program_id(0)\n    # " + ", ".join(b.sym for b in run) + "\n",
                            "inputs": [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype} for p in ins],
                            "outputs": [{"name": run[-1].outputs.name, "shape": list(run[-1].outputs.shape),
                                         "dtype": "float32"}],
                            "source_lines": sorted({(b.source.file, b.source.line) for b in run if b.source}),
                            "note": None})
        run.clear()

    for b in t.symbols:
        if b.executor == "triton":
            run.append(b)
            if len(run) == group:
                flush()
        else:
            flush()
            out.append(b)
    flush()
    for k in kernels:
        k["source_lines"] = [{"file": f, "line": ln} for f, ln in k["source_lines"]]
    return t.replace(symbols=tuple(out), next_uid=uid), kernels


def _liveness(t: Trace, prefix: str) -> Trace:
    """Insert a ``del`` after the last use of each matmul input that is not an output."""
    out, uid = [], t.next_uid
    for b in t.symbols:
        out.append(b)
        if b.sym == "prims.mm":
            out.append(BoundSymbol("del", (b.args[0],), {}, None, f"{prefix}{uid}"))
            uid += 1
    return t.replace(symbols=tuple(out), next_uid=uid)


def chain_passes(n_symbols: int, n_lines: int, chain: str, prefix: str, script: str, names=PASSES):
    """Yield ``(pass name, trace, changed, kernels or None)`` for the passes of one chain (``names``,
    a subsequence of ``PASSES``: the 12 passes by default)."""
    t = _acquired(n_symbols, n_lines, chain, prefix, script)
    kernels: Optional[list] = None
    for name in names:
        new, built = t, None
        if name == "decompose":
            new = _decompose(t, prefix)
        elif name == "cse":
            new = _drop_muls_by_one(t)
        elif name == "dce":
            new = t.replace(symbols=tuple(b for k, b in enumerate(t.symbols) if k % 97 != 50))
        elif name == "claim":
            new = _claim(t)
        elif name == "fuse":
            new, built = _fuse(t, prefix)
            kernels = built
        elif name == "liveness":
            new = _liveness(t, prefix)
        changed = name == names[0] or new is not t
        t = new.replace(pass_name=name)
        yield name, t, changed, built
    del kernels


def write_recording(path: str, n_symbols: int = 10_000, n_lines: int = 40, backward: bool = True,
                    status: str = "ok", traceback_text: Optional[str] = None, script: str = SCRIPT,
                    finish: bool = True, also=None, compile_s: float = 1.25, passes=PASSES) -> str:
    """Write a synthetic recording to ``path`` (must not exist) and return ``path``.

    ``status``/``traceback_text`` set how the run ended (``failed`` with a traceback, ...);
    ``finish=False`` leaves it ``running`` (a live or killed run); ``also(observer)`` records more
    events before the end (failures, fallbacks); ``compile_s``: the graph's compile time;
    ``passes``: the names of each chain's passes (a subsequence of ``PASSES``)."""
    obs = RecordingObserver(path)
    try:
        obs.start_run(script=script, module=None, argv=[script, "--steps", "1"], cwd="/work",
                      executors=["triton", "torch"])
        obs.graph_started(0, {"n_inputs": 2, "n_nodes": n_symbols, "reason": "first call"})
        chains = [("forward", "f", n_symbols)] + ([("backward", "b", max(8, n_symbols // 2))] if backward else [])
        for chain, prefix, n in chains:
            for index, (name, trace, changed, kernels) in enumerate(
                    chain_passes(n, n_lines, chain, prefix, script, passes)):
                duration_s = 0.0004 + 0.0011 * ((index * 7 + len(chain)) % 13)
                obs.pass_done(0, chain, index, name, trace, duration_s, changed)
                if kernels:
                    obs.kernels_built(0, chain, kernels)
        obs.graph_finished(0, compile_s)
        if also is not None:
            also(obs)
        if finish:
            obs.finish_run(status, 0 if status == "ok" else 1, traceback_text)
    finally:
        obs.close()
    return path


if __name__ == "__main__":  # pragma: no cover - a manual helper
    import sys
    print(write_recording(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10_000))
