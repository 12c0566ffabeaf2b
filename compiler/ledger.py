"""The memory ledger of one compiled graph, from trace metadata alone (shapes, dtypes, strides).

For the forward/backward pair of a graph it lists each tensor the forward saves for the backward
(what made it, where in the user's source, which backward ops read it, whether it is new memory or
an input, a parameter or a view of one, and the remat decision about it) and a static timeline of
each final trace: the bytes the trace's own allocations keep alive after each symbol, freed at its
``del`` symbols. Nothing here touches a tensor's storage, so the same ledger can be computed for an
abstract run from shapes only. Saved bytes are counted as autograd's saved-tensor hooks see them:
one storage once, parameters and buffers excluded.
"""
from __future__ import annotations

from typing import Optional, Sequence

from .ir import BoundSymbol, TensorProxy, Trace

# ATen / prims ops whose output shares its input's storage (the first tensor argument).
VIEW_OPS = frozenset((
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "slice", "select",
    "unsqueeze", "squeeze", "alias", "as_strided", "split", "split_with_sizes", "unbind", "detach",
    "diagonal", "narrow", "unfold", "chunk", "view_as", "expand_as", "numpy_T", "T", "mT",
    "broadcast_in_dim", "reshape_alias", "_reshape_alias", "movedim", "swapaxes", "flatten",
    "unflatten", "view_as_real", "view_as_complex", "squeeze_copy_never",
))
_ITEMSIZE = {"float64": 8, "int64": 8, "complex64": 8, "complex128": 16, "float32": 4, "int32": 4,
             "float16": 2, "bfloat16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
             "float8_e4m3fn": 1, "float8_e5m2": 1}


def itemsize(dtype: str) -> int:
    """Return the bytes of one element of dtype name ``dtype`` (4 for an unknown name)."""
    return _ITEMSIZE.get(dtype, 4)


def tensor_bytes(p: TensorProxy) -> int:
    """Return the bytes of ``p``'s elements."""
    return p.numel * itemsize(p.dtype)


def extent_bytes(p: TensorProxy) -> int:
    """Return the bytes of the smallest storage that holds ``p`` at offset 0 (its strides' reach)."""
    if any(s == 0 for s in p.shape):
        return 0
    if p.strides is None or len(p.strides) != len(p.shape):
        return tensor_bytes(p)
    return (1 + sum((s - 1) * abs(st) for s, st in zip(p.shape, p.strides))) * itemsize(p.dtype)


def _op_base(name: Optional[str]) -> str:
    """``aten.view.default`` -> ``view``; ``prims.broadcast_in_dim`` -> ``broadcast_in_dim``."""
    if not name:
        return ""
    parts = name.split(".")
    return parts[1] if len(parts) >= 3 and parts[0] in ("aten", "prims", "torch") else parts[-1]


def _is_view(b: BoundSymbol) -> bool:
    return not b.fusion and (_op_base(b.aten) in VIEW_OPS or _op_base(b.sym) in VIEW_OPS)


def aliases(trace: Trace) -> dict[str, str]:
    """Return {proxy name: the name of the value whose storage it uses} for every value of
    ``trace`` (itself when it is new memory or an input; a fusion member's result when a fusion
    output is a view of it)."""
    root: dict[str, str] = {p.name: p.name for p in trace.inputs}

    def visit(symbols, env):
        for b in symbols:
            if b.sym == "del":
                continue
            ins = [p for p in b.flat_inputs() if isinstance(p, TensorProxy)]
            if b.fusion and b.subsymbols:
                inner = dict(env)
                visit(b.subsymbols, inner)
                # A fusion runs its members' ops: an output that is a view keeps the storage of the
                # value it views, a fusion input or a member's result (shared by several outputs).
                for p in b.flat_outputs():
                    env[p.name] = inner.get(p.name, p.name)
                continue
            for p in b.flat_outputs():
                env[p.name] = env.get(ins[0].name, ins[0].name) if ins and _is_view(b) else p.name
    visit(trace.symbols, root)
    return root


def _proxies(trace: Trace) -> dict[str, TensorProxy]:
    out = {p.name: p for p in trace.inputs}
    for b in trace.walk():
        for p in b.flat_outputs():
            out.setdefault(p.name, p)
    return out


def op_by_op(b: BoundSymbol) -> bool:
    """Return whether fusion ``b`` runs op by op in torch: a Triton fusion on the CPU, whose fast
    CPU path (``executors/cpu_path.py``) runs the region's ATen ops from one Python function until
    (and unless) an Inductor build of it takes over, as every warm-up call does."""
    outs = [p for p in b.flat_outputs() if isinstance(p, TensorProxy)]
    return bool(b.fusion and b.subsymbols and b.executor == "triton" and outs
                and str(outs[0].device or "cpu").startswith("cpu"))


def region_scratch(b: BoundSymbol, parents: Optional[dict] = None) -> int:
    """Return the bytes of fusion ``b``'s intermediates when it runs op by op (:func:`op_by_op`):
    the result of each step the torch path runs (``cpu_path.region_steps`` with ``parents``, the
    chain's decomposed symbols {uid: symbol}) that is new memory and no output of the fusion, each
    storage once. A decomposed op whose prims are all in the region runs as its one ATen call,
    which frees its own temporaries: only that call's results count, not its prims'. The region's
    function keeps every step's result in a local until it returns, so all are live at once at its
    end; 0 for any other symbol (a compiled kernel keeps its intermediates in registers)."""
    if not op_by_op(b):
        return 0
    from .executors.cpu_path import region_steps  # the same steps the CPU path generates
    env = {p.name: p.name for p in b.flat_inputs() if isinstance(p, TensorProxy)}
    fusion_inputs = set(env)
    made: dict[str, TensorProxy] = {}
    for s in region_steps(b, parents):
        ins = [p for p in s.flat_inputs() if isinstance(p, TensorProxy)]
        for p in s.flat_outputs():
            if not isinstance(p, TensorProxy):
                continue
            if ins and _is_view(s):
                env[p.name] = env.get(ins[0].name, ins[0].name)
            else:
                env[p.name] = p.name
                made[p.name] = p
    kept = {env.get(p.name, p.name) for p in b.flat_outputs() if isinstance(p, TensorProxy)}
    return sum(extent_bytes(p) for name, p in made.items() if name not in kept and name not in fusion_inputs)


def timeline(trace: Trace, live_inputs: Sequence[str] = ()) -> list[dict]:
    """Return, per top-level symbol of ``trace``, {index, sym, uid, live_bytes, transient_bytes}:
    ``live_bytes``, the bytes of the storages alive after it, counting what the trace allocates and
    the inputs named in ``live_inputs`` (a backward's saved values), each storage freed when its
    last name is deleted; ``transient_bytes``, the bytes alive at its highest while it runs (the
    same plus :func:`region_scratch`: a fusion run op by op holds its intermediates until it ends;
    the decomposed symbols in ``trace.meta`` say which of its prims the CPU path folds back)."""
    from .passes.claim import DECOMPOSED
    parents = (trace.meta or {}).get(DECOMPOSED)
    root, proxies = aliases(trace), _proxies(trace)
    inputs = {p.name for p in trace.inputs}
    holders: dict[str, set] = {}
    size: dict[str, int] = {}
    live = 0
    for name in live_inputs:
        r = root.get(name, name)
        if r not in size:
            size[r] = extent_bytes(proxies[r])
            live += size[r]
        holders.setdefault(r, set()).add(name)
    rows = []
    for i, b in enumerate(trace.symbols):
        if b.sym == "del":
            for p in b.args:
                if not isinstance(p, TensorProxy):
                    continue
                r = root.get(p.name, p.name)
                names = holders.get(r)
                if names is not None:
                    names.discard(p.name)
                    if not names:
                        live -= size.pop(r, 0)
                        del holders[r]
        else:
            for p in b.flat_outputs():
                r = root.get(p.name, p.name)
                if r not in size and r not in inputs:
                    size[r] = extent_bytes(proxies.get(r, p))
                    live += size[r]
                if r in size:
                    holders.setdefault(r, set()).add(p.name)
        rows.append({"index": i, "sym": b.sym, "uid": b.uid, "live_bytes": live,
                     "transient_bytes": live + region_scratch(b, parents)})
    return rows


def peak(trace: Trace, rows: list[dict]) -> dict:
    """Return the peak of timeline ``rows`` of ``trace``: bytes (the highest ``transient_bytes``,
    else ``live_bytes``), index, the symbol, the kernel (a fusion's name, else empty) and its
    source line."""
    if not rows:
        return {"bytes": 0, "index": -1, "sym": "", "kernel": "", "file": "", "line": 0, "code": "", "module": ""}
    top = max(rows, key=lambda r: r.get("transient_bytes", r["live_bytes"]))
    b = trace.symbols[top["index"]]
    src = b.source or next((s.source for s in b.subsymbols if s.source is not None), None)
    return {"bytes": top.get("transient_bytes", top["live_bytes"]), "index": top["index"], "sym": b.sym, "kernel": b.sym if b.fusion else "",
            "file": src.file if src else "", "line": src.line if src else 0, "code": src.code if src else "",
            "module": src.module if src else ""}


def _producers(trace: Trace) -> dict[str, tuple[BoundSymbol, BoundSymbol]]:
    """{name: (top-level symbol, innermost symbol)} that produced each value."""
    out = {}
    for b in trace.symbols:
        for p in b.flat_outputs():
            inner = b
            for s in b.subsymbols:
                if any(q.name == p.name for q in s.flat_outputs()):
                    inner = s
            out[p.name] = (b, inner)
    return out


def _readers(trace: Trace, names: set) -> dict[str, list[str]]:
    """{name: the labels of the top-level symbols of ``trace`` that read it, in order, once each}
    for each of ``names`` that something reads; one walk for all of them (a walk per saved value
    made the ledger quadratic)."""
    out: dict[str, list[str]] = {}
    for b in trace.symbols:
        if b.sym == "del":
            continue
        read = dict.fromkeys(p.name for p in b.flat_inputs() if p.name in names)
        for name in read:
            inner = [s.aten or s.sym for s in b.subsymbols if any(p.name == name for p in s.flat_inputs())]
            label = f"{b.sym} ({', '.join(dict.fromkeys(inner))})" if b.fusion and inner else (b.aten or b.sym)
            seen = out.setdefault(name, [])
            if label not in seen:
                seen.append(label)
    return out


def saved_values(forward: Trace, backward: Trace, n_user_outputs: int, parameter_inputs: Sequence[bool],
                 decisions: Sequence[Optional[dict]], policy: str) -> list[dict]:
    """Return one dict per tensor ``forward`` saves for ``backward`` (its outputs after the first
    ``n_user_outputs``; the backward's inputs in the same order). ``parameter_inputs``: per forward
    input, whether it is a parameter or buffer; ``decisions``: per saved value, its remat decision
    row (:func:`.remat.decisions`) or None. ``counted``: whether the value's storage adds to the
    saved total (the first value of a storage that is not a parameter's)."""
    root, proxies, made = aliases(forward), _proxies(forward), _producers(forward)
    params = {p.name for p, is_param in zip(forward.inputs, parameter_inputs) if is_param}
    inputs = {p.name for p in forward.inputs}
    saved = [p for p in list(forward.flat_outputs())[n_user_outputs:]]
    bw_inputs = list(backward.inputs)
    readers = _readers(backward, {p.name for p in bw_inputs[:len(saved)]})
    seen, rows = set(), []
    for j, p in enumerate(saved):
        r = root.get(p.name, p.name)
        kind = "parameter" if r in params else "input" if r in inputs else "new"
        if r != p.name:
            kind = f"view of {kind if kind != 'new' else 'a saved value'}" if kind != "new" or r in {q.name for q in saved} \
                else "view of new"
        counted = r not in params and r not in seen
        seen.add(r)
        top, inner = made.get(p.name, (None, None))
        src = (inner.source if inner is not None and inner.source is not None else top.source if top is not None else None)
        d = decisions[j] if j < len(decisions) else None
        reader = bw_inputs[j].name if j < len(bw_inputs) else None
        rows.append({
            "name": p.name, "shape": list(p.shape), "dtype": p.dtype, "bytes": tensor_bytes(p),
            "storage": r, "storage_bytes": extent_bytes(proxies.get(r, p)), "kind": kind, "counted": counted,
            "producer": top.sym if top is not None else "input", "op": (inner.aten or inner.sym) if inner is not None else "",
            "file": src.file if src else "", "line": src.line if src else 0, "code": src.code if src else "",
            "module": src.module if src else "", "readers": list(readers.get(reader, [])) if reader else [],
            "decision": "saved", "why": (d or {}).get(f"why_{policy}", "the partition saves it"),
            "fx": (d or {}).get("fx", ""),
        })
    return rows


def graph_ledger(forward: Trace, backward: Trace, n_user_outputs: int, parameter_inputs: Sequence[bool],
                 decisions: Sequence[Optional[dict]], policy: str, all_decisions: Sequence[dict],
                 what_if: dict) -> dict:
    """Return the whole ledger of one graph: ``saved`` (:func:`saved_values`), ``timelines`` and
    ``peaks`` per chain, and ``totals`` (saved bytes and storages, parameters, gradients, the static
    step peak, and ``what_if``: {policy: the bytes it saves}, see :func:`saved_storage`)."""
    saved = saved_values(forward, backward, n_user_outputs, parameter_inputs, decisions, policy)
    saved_total = sum(r["storage_bytes"] for r in saved if r["counted"])
    n_saved = len(saved)
    # The backward starts with its inputs alive: the saved values and the incoming gradients (the
    # caller made them before the call; each is freed at its last ``del``). A saved parameter or
    # buffer (or a view of one) is not: the step did not allocate it, and the step peak adds every
    # parameter once already; counting it here too put Llama-3-8B's weights in twice (15 GB).
    not_live = {q.name for q, r in zip(backward.inputs, saved) if r["kind"] in ("parameter", "view of parameter")}
    live_in = [p.name for p in backward.inputs if isinstance(p, TensorProxy) and p.name not in not_live]
    timelines = {"forward": timeline(forward), "backward": timeline(backward, live_in)}
    peaks = {c: peak(t, timelines[c]) for c, t in (("forward", forward), ("backward", backward))}
    params = sum(tensor_bytes(p) for p, is_param in zip(forward.inputs, parameter_inputs) if is_param)
    grads = sum(tensor_bytes(p) for p in backward.flat_outputs())
    step_peak = params + max(peaks["forward"]["bytes"] + 0, peaks["backward"]["bytes"])
    return {"saved": saved, "timelines": timelines, "peaks": peaks, "decisions": list(all_decisions),
            "totals": {"policy": policy, "saved_bytes": saved_total, "saved_tensors": sum(1 for r in saved if r["counted"]),
                       "parameters": params, "gradients": grads, "peak_bytes": step_peak,
                       "what_if_off": what_if.get("off", 0), "what_if_auto": what_if.get("auto", 0)}}


def saved_storage(forward: Trace, n_user_outputs: int, parameter_inputs: Sequence[bool]) -> int:
    """Return the bytes ``forward`` saves for the backward, counted like :func:`graph_ledger` (one
    storage once, parameters excluded): on an acquired (ATen) trace, the what-if of a policy."""
    root, proxies = aliases(forward), _proxies(forward)
    params = {p.name for p, is_param in zip(forward.inputs, parameter_inputs) if is_param}
    roots = {root.get(p.name, p.name) for p in list(forward.flat_outputs())[n_user_outputs:]}
    return sum(extent_bytes(proxies[r]) for r in roots - params if r in proxies)
