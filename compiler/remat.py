"""Rematerialization: which values the forward saves for the backward, and which the backward
recomputes instead.

Both policies partition the same joint graph: ``off`` with AOTAutograd's ``default_partition``
(saves what eager saves), ``auto`` with its min-cut partitioner (recomputes cheap pointwise and
reshape chains in the backward when that saves memory). Both are computed at every compile, so a
recording holds each policy's decisions and the bytes each keeps (the what-if of ``thundervis memory
--remat``) whichever one ran. Everything here reads FX metadata (shapes, dtypes) only, never storage.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from typing import Optional

import torch
import torch.fx
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

from .compile_cache import FROM_CACHE
from .ir import BoundSymbol, Minter, TensorProxy, Trace, map_structure

POLICIES = ("off", "auto")
# The min-cut partitioner's settings under ``auto``. Its default bans recomputing a value whose
# backward use is "materialized" (read by an op outside its fusible list), which in our graphs
# (not decomposed: tanh_backward, gelu_backward ... stay whole) bans nearly every pointwise chain;
# Inductor's decomposed graphs do not hit that. Lifting that one ban recomputes GPT-2's GELU chain
# (4 of its [b, s, 4h] tensors per layer) and still never recomputes a matmul, attention or a
# reduction (those bans stay).
AUTO_CONFIG = {"ban_recompute_materialized_backward": False}
PASS_NAME = "remat"


def check_policy(policy: Optional[str]) -> str:
    """Return ``policy`` (None: ``auto``) or raise ValueError naming the accepted ones."""
    policy = "auto" if policy is None else policy
    if policy not in POLICIES:
        raise ValueError(f"unknown remat policy {policy!r}: use off or auto")
    return policy


@dataclasses.dataclass
class Partitioned:
    """One graph's partitions: the ``off`` pair, the ``auto`` pair (None when min-cut failed, with
    ``error``), the policy that ran, each saved value's decisions (:func:`decisions`), and the
    seconds both partitions and the decisions took (the ``remat`` pass's time, on the forward), and
    what the partition cache did (``cache``)."""

    policy: str
    n_user_outputs: int
    off: tuple
    auto: Optional[tuple]
    error: Optional[str]
    decisions: list
    seconds: float = 0.0
    cache: Optional[dict] = None  # the partition cache's event: {"hit", "key", "note"} (None: no cache)
    # {policy: its forward module as the forward chain acquired it}: the ledger's what-if reads
    # these instead of acquiring the same modules again (its byte counts do not depend on names)
    acquired: dict = dataclasses.field(default_factory=dict)


def _saved_nodes(fw: torch.fx.GraphModule, n_user_outputs: int) -> list[torch.fx.Node]:
    out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    return [n for n in out[n_user_outputs:]
            if isinstance(n, torch.fx.Node) and isinstance(n.meta.get("val"), torch.Tensor)]


def _bytes(node: torch.fx.Node) -> int:
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        return 0
    return v.numel() * v.element_size()


def _describe(node: torch.fx.Node) -> dict:
    v = node.meta.get("val")
    shape = [int(s) for s in v.shape] if isinstance(v, torch.Tensor) else []
    dtype = str(v.dtype).removeprefix("torch.") if isinstance(v, torch.Tensor) else type(v).__name__
    op = "input" if node.op == "placeholder" else str(getattr(node.target, "__name__", node.target))
    return {"fx": node.name, "shape": shape, "dtype": dtype, "bytes": _bytes(node), "op": op}


def _recompute_chain(nodes: dict, name: str, saved: set) -> list[str]:
    """Return the ops the backward runs to recompute node ``name`` from what it is given
    (``nodes``: {name: node} of its graph)."""
    chain, stack, seen = [], [nodes[name]], set()
    while stack:
        n = stack.pop()
        if n.name in seen or n.op != "call_function":
            continue
        seen.add(n.name)
        chain.append(str(getattr(n.target, "__name__", n.target)))
        stack.extend(a for a in n.all_input_nodes if a.name not in saved)
    return chain


def decisions(off: tuple, auto: Optional[tuple], n_user_outputs: int) -> list[dict]:
    """Return one dict per value either policy saves: its FX name, shape, dtype, bytes, the op that
    made it, and per policy (``off``, ``auto``) ``saved`` / ``recomputed`` / ``not saved`` with
    ``why``."""
    off_saved = {n.name: n for n in _saved_nodes(off[0], n_user_outputs)}
    auto_saved = {n.name: n for n in _saved_nodes(auto[0], n_user_outputs)} if auto else dict(off_saved)
    auto_bw = {n.name: n for n in auto[1].graph.nodes} if auto else {}
    saved_auto = set(auto_saved)
    rows = []
    for name, node in off_saved.items():
        row = {**_describe(node), "off": "saved", "why_off": "off saves what eager autograd saves"}
        if name in auto_saved:
            row.update(auto="saved", why_auto="min-cut keeps it: no cheaper set of saved values reaches it")
        elif name in auto_bw and auto_bw[name].op == "call_function":
            ops = _recompute_chain(auto_bw, name, saved_auto)
            row.update(auto="recomputed", why_auto=f"recomputed in the backward by {len(ops)} cheap op(s) "
                       f"({', '.join(sorted(set(ops))[:4])}) instead of keeping {row['bytes']} bytes")
        else:
            row.update(auto="not saved", why_auto="min-cut saves other values the backward needs instead")
        rows.append(row)
    for name, node in auto_saved.items():
        if name not in off_saved:
            rows.append({**_describe(node), "off": "not saved", "why_off": "off saves what eager autograd saves",
                         "auto": "saved", "why_auto": "saved so the backward can recompute cheaper values from it"})
    return rows


def partition(joint: torch.fx.GraphModule, joint_inputs, policy: str, cache=None, **kwargs) -> Partitioned:
    """Partition ``joint`` both ways (AOTAutograd's ``partition_fn`` arguments) and return a
    :class:`Partitioned`; ``policy`` says which pair runs. A min-cut failure leaves ``off`` running.
    ``cache``: a :class:`.compile_cache.CompileCache` whose folder keeps each partition's choice
    (:mod:`.partition_cache`; None: no cache): on a hit min-cut takes the recorded choice instead
    of searching, and the result is checked against it (any fault: partitioned again, with a note)."""
    from . import partition_cache as pc
    n_user, t0 = int(kwargs.get("num_fwd_outputs", 0)), time.perf_counter()
    store, key, entry, event = _lookup(cache, joint, kwargs)
    # each partitioner may edit the joint graph it is given; node metadata (fake tensors) is shared
    spare = _spare_module(joint, copy.deepcopy(joint.graph))
    off = default_partition(spare, joint_inputs, **kwargs)
    auto, error, hit = None, None, False
    if entry is not None:
        try:
            auto, error = _replayed(joint, joint_inputs, kwargs, entry, off, n_user)
            hit = True
        except Exception as e:  # a refused entry is a miss: partition as if it were not there
            event["note"] = pc.refused_note(key, e)
    if not hit:
        with pc.hooked() as hooks:
            auto, error = _min_cut(joint, joint_inputs, kwargs)
        if store is not None:
            try:
                if not hooks.usable:
                    raise pc.Refused("this torch's min-cut has no steps to hook")
                if auto is not None and hooks.pairs is None and hooks.cse_ran:
                    raise pc.Refused("its CSE cannot be replayed")
                chose = ({"error": error[:2000]} if auto is None else
                         {**pc.choice(auto[0], n_user), "cse": hooks.pairs or [], "digest": pc.digest(auto)})
                store.store(key, {"off": {**pc.choice(off[0], n_user), "digest": pc.digest(off)}, "auto": chose})
            except Exception as e:  # a choice that cannot be kept is simply not kept
                event["note"] = f"partition not cached: {e}"[:300]
    if hit:
        event = {"hit": True, "key": key[:16]}
    rows = decisions(off, auto, n_user)
    return Partitioned(policy=policy, n_user_outputs=n_user, off=off, auto=auto, error=error,
                       decisions=rows, seconds=time.perf_counter() - t0, cache=event)


def _spare_module(root: torch.fx.GraphModule, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """Return a module of ``graph`` over ``root``'s attributes for ``default_partition``, which reads
    its graph and never runs it: a lazy one where this torch has them, as generating and compiling
    the Python code of a 24-layer joint graph that nothing calls costs a quarter of a second."""
    try:
        from torch.fx._lazy_graph_module import _LazyGraphModule
    except ImportError:  # a torch without lazy modules
        return torch.fx.GraphModule(root, graph)
    return _LazyGraphModule(root, graph)


def _lookup(cache, joint: torch.fx.GraphModule, kwargs: dict) -> tuple:
    """Return (store, key, raw entry, event) of ``joint``'s partition in ``cache`` (a
    ``CompileCache`` or None); store and key are None when it is not to be cached, the entry None on
    a miss. Never raises: a cache that cannot be used is a miss with a note."""
    from . import partition_cache as pc
    if cache is None:
        return None, None, None, None
    try:
        why = pc.cacheable(joint)
        if why is not None:
            return None, None, None, {"hit": False, "note": f"partition not cached: {why}"}
        store = pc.PartitionStore(cache.root)
        key = pc.key(joint, kwargs, AUTO_CONFIG)
        entry, note = store.load(key)
    except Exception as e:  # the partition goes on without the cache
        return None, None, None, {"hit": False, "note": f"partition cache unusable: {type(e).__name__}: {e}"[:300]}
    return store, key, entry, {"hit": False, "key": key[:16], **({"note": note} if note else {})}


def _min_cut(joint: torch.fx.GraphModule, joint_inputs, kwargs: dict) -> tuple:
    """Return (the min-cut pair, None) or (None, its error)."""
    try:
        from torch._functorch import config
        with config.patch(**AUTO_CONFIG):
            return min_cut_rematerialization_partition(joint, joint_inputs, **kwargs), None
    except Exception as e:  # the compile goes on with what eager saves
        return None, f"{type(e).__name__}: {e}"


def _replayed(joint: torch.fx.GraphModule, joint_inputs, kwargs: dict, entry: dict, off: tuple, n_user: int):
    """Return (auto pair, error) partitioned from a cache ``entry``'s choice; raise when the entry
    does not fit this graph, leaving ``joint`` as it was."""
    from . import partition_cache as pc
    nodes = {n.name: n for n in joint.graph.nodes}
    policies = entry["policies"]
    want_off, want_auto = (pc.validated_choice(policies.get(p), nodes) for p in POLICIES)
    said = {k: want_off.get(k) for k in ("saved", "sym", "n_fwd")}
    if "error" in want_off or pc.choice(off[0], n_user) != said or pc.digest(off) != want_off["digest"]:
        raise pc.Refused("the off partition differs from the entry's")
    if "error" in want_auto:
        return None, want_auto["error"]
    if want_auto["n_fwd"] != n_user:
        raise pc.Refused("the entry's forward output count differs")
    backup = copy.deepcopy(joint.graph)
    try:
        with pc.hooked(want_auto) as hooks:
            auto, error = _min_cut(joint, joint_inputs, kwargs)
        if auto is None or not hooks.chose:
            raise pc.Refused(error or "min-cut did not take the recorded choice")
        got = pc.choice(auto[0], n_user)
        if got["saved"] != want_auto["saved"] or got["sym"] != want_auto["sym"]:
            raise pc.Refused("min-cut saved other values than the entry names")
        if pc.digest(auto) != want_auto["digest"]:
            raise pc.Refused("min-cut made other graphs than the entry's")
    except Exception:
        joint.graph = backup
        raise
    return auto, None


def chosen(p: Partitioned) -> tuple:
    """Return the (forward, backward) pair that runs under ``p.policy``."""
    return p.auto if p.policy == "auto" and p.auto is not None else p.off


def _call_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The nodes :func:`~.acquire.fx_to_trace` makes one symbol of, in its order."""
    import operator
    tuples = {n for n in gm.graph.nodes if isinstance(n.meta.get("val"), (tuple, list))}
    return [n for n in gm.graph.nodes if n.op == "get_attr"
            or (n.op == "call_function" and not (n.target is operator.getitem and n.args[0] in tuples))]


def aligned(before: Trace, before_gm: torch.fx.GraphModule, after: Trace, after_gm: torch.fx.GraphModule,
            notes: dict) -> Trace:
    """Return ``after`` (acquired from ``after_gm``) with the proxy names and uids ``before``
    (acquired from ``before_gm``) gave the same FX nodes, so a diff of the two shows only what
    moved; a node only ``after`` has gets fresh ones. ``notes``: {FX name: note} for the symbols
    whose value a policy decision concerns."""
    fx_before = {n.name: b for n, b in zip(_call_nodes(before_gm), before.symbols)}
    names, uids, olds = {}, {}, {}
    for n, b in zip(_call_nodes(after_gm), after.symbols):
        old = fx_before.get(n.name)
        if old is None:
            continue
        uids[b.uid], olds[b.uid] = old.uid, old
        for p, q in zip(b.flat_outputs(), old.flat_outputs()):
            names[p.name] = q.name
    mint = Minter(before)
    made = {p.name for b in before.symbols for p in b.flat_outputs()}
    taken = {p.name for p in before.inputs} | made
    for p in after.inputs:  # inputs keep their readable names (the saved values a backward reads)
        if p.name not in made:
            names[p.name] = p.name
            taken.add(p.name)

    def rename(x):
        if not isinstance(x, TensorProxy):
            return x
        if x.name not in names:
            fresh = mint.name()
            while fresh in taken:
                fresh = mint.name()
            names[x.name] = fresh
        return dataclasses.replace(x, name=names[x.name])

    fx_after = {b.uid: n.name for n, b in zip(_call_nodes(after_gm), after.symbols)}
    symbols = []
    for b in after.symbols:
        uid = uids.get(b.uid) or mint.uid()
        note = notes.get(fx_after.get(b.uid, ""))
        old = olds.get(b.uid)
        # A part equal to the ``before`` symbol's (the same types, order and values) is that very
        # object: the recording's printer and encoder, memoised by identity, then reuse its text.
        args, kwargs, outputs = (_kept(map_structure(rename, part), getattr(old, field) if old is not None else None)
                                 for part, field in ((b.args, "args"), (b.kwargs, "kwargs"), (b.outputs, "outputs")))
        symbols.append(BoundSymbol(
            sym=b.sym, args=args, kwargs=kwargs, outputs=outputs, uid=uid, origin=b.origin,
            source=b.source, seq_nr=b.seq_nr, aten=b.aten, executor=b.executor, note=note or b.note))
    return mint.stamp(after, inputs=tuple(map_structure(rename, after.inputs)), symbols=tuple(symbols),
                      outputs=map_structure(rename, after.outputs), pass_name=PASS_NAME)


def _kept(new, old):
    """Return ``old`` when it is the same structure as ``new`` down to its leaves' types and
    values (so both print and serialize alike), else ``new``."""
    return old if old is not None and _same(new, old) else new


def _same(x, y) -> bool:
    """Whether ``x`` and ``y`` are alike in type, order and value all the way down (stricter than
    ``==``, under which ``1 == True``, ``0.0 == -0.0`` and dicts in another order are equal)."""
    if type(x) is not type(y):
        return False
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict):
        return (len(x) == len(y) and all(type(a) is type(b) and a == b for a, b in zip(x, y))
                and all(_same(x[k], y[k]) for k in x))
    if isinstance(x, float):
        return repr(x) == repr(y)
    return x == y


def notes_for(p: Partitioned, chain: str) -> dict:
    """Return {FX name: note} of the decisions the ``chain`` trace of the policy that ran shows:
    in the forward each saved value's producer, in the backward each recomputed value."""
    notes = {}
    for d in p.decisions:
        verdict, why = d[p.policy], d[f"why_{p.policy}"]
        if chain == "forward" and verdict == "saved":
            notes[d["fx"]] = f"saved for backward ({d['bytes']} B; remat {p.policy}: {why})"
        elif chain == "backward" and verdict == "recomputed":
            notes[d["fx"]] = f"recomputed, not saved (remat {p.policy}: {why})"
    return notes


def without_notes(trace: Trace) -> Trace:
    """Return ``trace`` without the decision notes :func:`aligned` put on it: they belong to the
    recorded ``remat`` pass; later passes keep a note field for their own reasons. The pass's
    ``from_cache`` flag goes too: it says where this partition came from, not what the passes after
    it compile (whose cache key the trace is)."""
    marks = ("saved for backward (", "recomputed, not saved (")
    meta = {k: v for k, v in trace.meta.items() if k != FROM_CACHE}
    return trace.replace(meta=meta, symbols=tuple(b.replace(note=None) if b.note and b.note.startswith(marks) else b
                                                  for b in trace.symbols))


def pass_meta(p: Partitioned) -> dict:
    """Return the ``remat`` pass's meta: the policy, both policies' saved bytes, min-cut's error,
    and ``from_cache`` when the partition's choice came from the partition cache."""
    meta = {"remat_policy": p.policy, "saved_bytes_off": saved_bytes(p, "off"),
            "saved_bytes_auto": saved_bytes(p, "auto")}
    if p.error:
        meta["remat_error"] = p.error[:500]
    if p.cache is not None and p.cache.get("hit"):
        meta[FROM_CACHE] = True
    return meta


def saved_bytes(p: Partitioned, policy: str) -> int:
    """Return the bytes of the values ``policy`` saves (each value's own size, views not merged)."""
    return sum(d["bytes"] for d in p.decisions if d[policy] == "saved")


def ledger(p: Partitioned, forward: Trace, backward: Trace, parameter_inputs: list) -> dict:
    """Return the memory ledger (:func:`.ledger.graph_ledger`) of the final ``forward`` and
    ``backward`` traces compiled from ``p``'s chosen partition, each saved value with its decision."""
    from .acquire import fx_to_trace
    from .ledger import graph_ledger, saved_storage
    what_if = {}
    for policy, pair in (("off", p.off), ("auto", p.auto)):
        if pair is not None:
            acquired = p.acquired.get(policy) or fx_to_trace(pair[0], chain="forward", graph=forward.graph)
            what_if[policy] = saved_storage(acquired, p.n_user_outputs, parameter_inputs)
    by_fx = {d["fx"]: d for d in p.decisions}
    saved = _saved_nodes(chosen(p)[0], p.n_user_outputs)
    rows = [by_fx.get(n.name) for n in saved]
    return graph_ledger(forward, backward, p.n_user_outputs, parameter_inputs, rows,
                        p.policy if p.auto is not None else "off", p.decisions, what_if)
