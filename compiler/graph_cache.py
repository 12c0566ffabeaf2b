"""The compile cache above AOTAutograd: a whole graph kept across runs, so that a hit skips
AOTAutograd's metadata pass and, for a training graph, its joint trace and both partitions.

A chain's entry (:mod:`.compile_cache`) starts after the partition; by then AOTAutograd has traced
the joint graph and both policies have partitioned it, which is most of what a warm run still spent.
A graph entry holds what the backend reported before each chain's pipeline (the joint trace, each
chain's ``acquire`` and ``remat`` passes), the partition's cache event, the memory ledger and the
calling convention of AOTAutograd's compiled forward and backward (:func:`runtime_meta`). On a hit
(:mod:`.graph_hit`) those are replayed into the recording, each chain compiles from its ``remat``
trace (which finds its own chain entry) and an ``autograd.Function`` calls them as AOTAutograd would.

An inference graph (no input requires grad, or grad mode off) keeps its one chain's ``acquire``
and is called directly. Only plain graphs are kept: every input a tensor, no parameter held by the graph module,
no input mutated, no output aliasing an input or another output, no functionalized RNG, no tensor
subclass, no symbolic value saved for the backward, every tangent contiguous. Anything else compiles
through AOTAutograd every time (its chains still use their own entries).

Key: the Dynamo graph's code, every node's source provenance (stack trace, module stack) and the
content digest of each file it names, each input's shape, stride, dtype, device and ``requires_grad``, the grad
and autocast modes, the call site, the executors, remat policy, debug flag, GPU targets, functorch's
config and the versions of :func:`.compile_cache.versions`. Entries live beside the chain entries
(same folder, cap and eviction) and load through the same validating trace loader; never unpickled.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Optional

import torch

from .compile_cache import CompileCache, read_gz, versions, write_gz
from .ir import Trace, flatten
from .observer import CompileObserver
from .serialize import TraceEncoder, executable_trace_from_dict, trace_from_dict

GRAPH_FORMAT = 1
NOT_PLAIN = "not plain"  # what load returns for a graph a cold compile found not plain
_SUFFIX = ".graph.json.gz"
_MAX_ENTRY_BYTES = 256 << 20
_KEY = re.compile(r"[0-9a-f]{64}")
_ADDRESS = re.compile(r" (?:at|object at) 0x[0-9a-fA-F]+")
_FILE = re.compile(r'File "([^"]+)", line \d+')
# (chain, index, pass name) of every pass an entry replays, in the order the backend reports them
EXPECTED_PASSES = {
    "training": (("joint", 0, "acquire"), ("forward", 0, "acquire"), ("forward", 1, "remat"),
                 ("backward", 0, "acquire"), ("backward", 1, "remat")),
    "inference": (("inference", 0, "acquire"),),
}
_KEPT = {p for passes in EXPECTED_PASSES.values() for p in passes}


def _input_meta(x) -> Optional[list]:
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
        return None
    return [list(x.shape), list(x.stride()), int(x.storage_offset()), str(x.dtype), str(x.device),
            bool(x.requires_grad)]


def _file_digests(gm: torch.fx.GraphModule, site) -> list:
    files = set()
    for n in gm.graph.nodes:
        files.update(_FILE.findall(n.meta.get("stack_trace") or ""))
    if site is not None and getattr(site, "file", None):
        files.add(site.file)
    return [[f, _file_digest(f)] for f in sorted(files)]


def _file_digest(path: str) -> Optional[str]:
    """Return the sha256 of the file at ``path`` (None when it cannot be read). The content, not the
    stat, goes into the key: a file touched, checked out again or copied keeps its entries. Read on
    every key (a few source files, about a millisecond): a stat-keyed memo misses a same-size edit
    within one clock tick of the filesystem's coarse timestamps."""
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def graph_key(gm: torch.fx.GraphModule, example_inputs, *, executors, remat: str, debug: bool,
              targets=(), site=None) -> Optional[str]:
    """Return the graph entry key of compiling Dynamo graph ``gm`` for ``example_inputs`` (module
    doc), or None when this graph is not one a graph entry may hold."""
    metas = [_input_meta(x) for x in example_inputs]
    if not metas or any(m is None for m in metas):
        return None
    if next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None:
        return None
    try:
        config = torch._functorch.config.get_config_copy()
    except Exception:
        config = {}
    head = {"format": GRAPH_FORMAT, "versions": versions(), "inputs": metas, "executors": list(executors or ()),
            "remat": remat, "debug": bool(debug), "grad": torch.is_grad_enabled(), "targets": sorted(str(t) for t in (targets or ())),
            "autocast": [torch._C._is_any_autocast_enabled(), torch.is_autocast_enabled("cpu"),
                         str(torch.get_autocast_dtype("cpu")), torch.is_autocast_enabled("cuda"),
                         str(torch.get_autocast_dtype("cuda"))],
            "site": repr(site), "files": _file_digests(gm, site),
            "functorch": sorted((k, repr(v)) for k, v in config.items())}
    h = hashlib.sha256(_stable(json.dumps(head, sort_keys=True, default=repr)).encode())
    h.update(gm.code.encode())
    for n in gm.graph.nodes:
        modules = list((n.meta.get("nn_module_stack") or {}).values())  # its keys are object ids
        h.update(_stable(repr((n.name, n.meta.get("stack_trace"), modules, n.meta.get("source_fn_stack")))).encode())
    return h.hexdigest()


def _stable(text: str) -> str:
    """``text`` without object addresses (``<function f at 0x7f..>``), which differ per process."""
    return _ADDRESS.sub("", text)


def runtime_meta(fw_gm: torch.fx.GraphModule, chain: str = "forward"):
    """Return the calling convention of the compiled forward (or ``inference``, per ``chain``)
    ``fw_gm`` AOTAutograd is compiling now (from the tracing context's metadata): ``kind``
    (``training``/``inference``), ``n_args``, ``n_returns``, ``out_requires_grad``, ``n_saved``,
    ``disable_amp``; or, when the graph is not plain (module doc), a short phrase saying why."""
    try:
        ctx = torch._guards.TracingContext.try_get()
        m = ctx.fw_metadata if ctx is not None else None
        if m is None:
            return "no AOTAutograd metadata"
        why = _not_plain(m, chain == "inference")
        if why:
            return why
        required = [bool(o.requires_grad) for o in m.output_info]
        n_out = len(next(iter(fw_gm.graph.find_nodes(op="output"))).args[0])
        n_saved = n_out - m.num_forward_returns
        for sl in () if chain == "inference" else ("tensors_saved_for_backwards_no_vc_check_slice",
                                                   "opaque_objects_saved_for_backwards_slice"):
            s = getattr(m, sl, None)
            if s is not None and len(range(n_out)[s]):
                return "saves values the backward reads without a version check"
        if m.num_forward_returns != len(required) or n_saved < 0 or (chain == "inference" and n_saved):
            return "returns values besides its outputs and saved tensors"
        return {"kind": "inference" if chain == "inference" else "training", "n_args": len(m.input_info), "n_returns": m.num_forward_returns, "out_requires_grad": required,
                "n_saved": n_saved, "disable_amp": bool(torch._C._is_any_autocast_enabled())}
    except Exception as e:  # metadata this torch names differently: not plain
        return f"unreadable AOTAutograd metadata ({type(e).__name__})"


def _not_plain(m, inference: bool) -> Optional[str]:
    """Return why AOTAutograd metadata ``m`` is not a plain graph's (an ``inference`` one has no
    tangents), or None."""
    if any(i.mutates_data or i.mutates_metadata or getattr(i, "mutates_storage_metadata", False)
           for i in m.input_info):
        return "mutates an input"
    # the three kinds AOTAutograd's runtime returns as they are (its NoopAliasHandler)
    if any(o.output_type.name not in ("non_alias", "unsafe_view_alias", "custom_function_view") for o in m.output_info):
        return "an output aliases an input or another output"
    if any(bool(getattr(o, "requires_grad_for_backward", o.requires_grad)) != bool(o.requires_grad)
           for o in m.output_info):
        return "an output's backward need differs from its requires_grad"
    if m.num_intermediate_bases or m.num_outputs_rng_offset or m.tokens:
        return "intermediate bases, functionalized RNG or effect tokens"
    if (m.num_symints_saved_for_bw and not inference) or getattr(m, "dynamic_saved_tensors_idxs", None):
        return "saves symbolic sizes for the backward"
    subclass = list(m.subclass_inp_meta or ()) + list(m.subclass_fw_graph_out_meta or ()) + \
        list(m.subclass_tangent_meta or ())
    if any(type(s).__name__ == "SubclassCreationMeta" for s in subclass):
        return "tensor subclasses"
    required = [bool(o.requires_grad) for o in m.output_info]
    tangents = list(m.traced_tangents)
    if inference:
        return "an inference graph with tangents" if tangents else None
    if len(tangents) != sum(required) or not all(isinstance(t, torch.Tensor) and t.is_contiguous() for t in tangents):
        return "a tangent that is not a contiguous tensor"
    return None


@dataclass
class GraphEntry:
    """A validated graph entry: ``passes`` as (chain, index, name, changed, compiled_ms, trace) in
    the :data:`EXPECTED_PASSES` order of its kind (each chain's last, which it compiles from, passed
    the registry's allow-list), the partition's cache event and the memory ledger (empty for an
    inference graph) and the :func:`runtime_meta`."""

    passes: list
    partition: dict
    ledger: dict
    meta: dict

    def start(self, chain: str) -> Trace:
        """Return the trace ``chain`` compiles from as recorded: its last replayed pass (``remat``,
        or an inference chain's ``acquire``)."""
        return [p[5] for p in self.passes if p[0] == chain][-1]


class GraphCapture(CompileObserver):
    """An observer of what a cold compile of each keyed graph reported, until its backward
    compiled and the entry is written (:meth:`finish`); a failed chain drops its graph."""

    def __init__(self):
        self._graphs: dict[int, dict] = {}

    def begin(self, graph: int, key: str) -> None:
        """Start capturing ``graph`` under ``key``."""
        self._graphs[graph] = {"key": key, "passes": {}, "partition": None, "meta": None, "ledger": None}

    def wants(self, graph: int) -> bool:
        """Return whether ``graph`` is being captured."""
        return graph in self._graphs

    def pass_done(self, graph: int, chain: str, index: int, name: str, trace: Trace, seconds: float,
                  changed: bool) -> None:
        """Keep a reported pass that an entry replays."""
        g = self._graphs.get(graph)
        if g is not None and (chain, index, name) in _KEPT:
            g["passes"][(chain, index, name)] = (changed, seconds, trace)

    def runtime(self, graph: int, chain: str, event: str, data) -> None:
        """Keep the partition's cache event."""
        if event == "partition_cache" and isinstance(data, dict):
            self.note(graph, "partition", dict(data))

    def memory_ledger(self, graph: int, ledger: dict) -> None:
        """Keep the graph's memory ledger."""
        self.note(graph, "ledger", ledger)

    def chain_failed(self, graph: int, chain, error: str, tb: str) -> None:
        """A chain that failed (or the whole graph) is not written."""
        self.drop(graph)

    def note(self, graph: int, what: str, value) -> None:
        """Keep ``partition`` (the cache event), ``meta`` (:func:`runtime_meta`) or ``ledger``."""
        g = self._graphs.get(graph)
        if g is not None:
            g[what] = value

    def drop(self, graph: int) -> None:
        """Forget ``graph`` (a chain failed or fell back: nothing of it is written)."""
        self._graphs.pop(graph, None)

    def finish(self, graph: int, root: str, cap_bytes: int) -> Optional[str]:
        """Write ``graph``'s entry under ``root`` when all of it was captured; return its path."""
        g = self._graphs.pop(graph, None)
        if g is not None and isinstance(g["meta"], str):  # later runs need not look again
            return store_not_plain(root, g["key"], g["meta"], cap_bytes)
        if g is None or not isinstance(g["meta"], dict):
            return None
        training = g["meta"]["kind"] == "training"
        expected = EXPECTED_PASSES[g["meta"]["kind"]]
        if any(p not in g["passes"] for p in expected) or (training and not isinstance(g["ledger"], dict)):
            return None
        return store(root, g["key"], [(c, i, n, *g["passes"][(c, i, n)]) for c, i, n in expected],
                     g["partition"] or {}, g["ledger"] if training else {}, g["meta"], cap_bytes)


def _path(root: str, key: str) -> str:
    return os.path.join(root, key[:2], key + _SUFFIX)


def _dumps(v) -> str:
    return json.dumps(v, separators=(",", ":"), allow_nan=False)


def store(root: str, key: str, passes: list, partition: dict, ledger: dict, meta: dict,
          cap_bytes: int) -> Optional[str]:
    """Write the entry of ``key`` (``passes`` as (chain, index, name, changed, seconds, trace));
    return its path, or None when it could not be written (a cache that cannot write misses)."""
    enc = TraceEncoder()
    try:
        out = [_dumps({"format": GRAPH_FORMAT, "key": key, "written_at": time.time(), "meta": meta,
                       "partition": partition, "ledger": ledger})[:-1], ',"passes":[']
        for n, (chain, index, name, changed, s, t) in enumerate(passes):
            out += ["," if n else "", _dumps({"chain": chain, "index": index, "name": name,
                                               "changed": bool(changed), "ms": s * 1e3})[:-1],
                    ',"trace":', enc.to_json(t), "}"]
        out.append("]}")
    except (TypeError, ValueError):
        return None
    return _written(root, key, "".join(out), cap_bytes)


def store_not_plain(root: str, key: str, why: str, cap_bytes: int) -> Optional[str]:
    """Write the marker saying graph ``key`` is not plain (``why``); return its path or None."""
    return _written(root, key, _dumps({"format": GRAPH_FORMAT, "key": key, "written_at": time.time(),
                                       "not_plain": str(why)[:200]}), cap_bytes)


def _written(root: str, key: str, text: str, cap_bytes: int) -> Optional[str]:
    """Write ``text`` as ``key``'s entry and evict down to the cap; return its path or None."""
    path = _path(root, key)
    if not write_gz(path, text):
        return None
    CompileCache(root, cap_bytes).evict()
    return path


def load(root: str, key: str) -> tuple[Optional[GraphEntry], Optional[str]]:
    """Return (the entry of ``key``, None), (None, None) when there is none, (None, why) when it
    is refused (unreadable, malformed, tampered, not allowed: a miss), or (:data:`NOT_PLAIN`, why)
    when a cold compile found the graph is not one an entry can hold."""
    if not _KEY.fullmatch(key or ""):
        return None, "bad key"
    path = _path(root, key)
    try:
        raw = read_gz(path, _MAX_ENTRY_BYTES)
    except FileNotFoundError:
        return None, None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        return None, f"graph cache entry {key[:12]} unreadable ({type(e).__name__}); compiled again"
    try:
        if len(raw) > _MAX_ENTRY_BYTES:
            raise ValueError("entry too large")
        doc = json.loads(raw)
        if isinstance(doc, dict) and "not_plain" in doc and doc.get("format") == GRAPH_FORMAT and doc.get("key") == key:
            why = doc["not_plain"]
            return NOT_PLAIN, (why if isinstance(why, str) else "not plain")[:200]
        entry = _validated(doc, key)
    except Exception as e:
        first = str(e).splitlines()[0][:160] if str(e) else ""
        return None, f"graph cache entry {key[:12]} refused ({type(e).__name__}: {first}); compiled again"
    try:
        os.utime(path)  # recently used: evicted last
    except OSError:
        pass
    return entry, None


def _count(v, what: str, top: int = 1 << 20) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
        raise ValueError(f"bad {what}")
    return v


def _plain_json(v, depth: int = 0) -> int:
    """Return the number of values in ``v``; raise unless it is plain JSON of bounded depth."""
    if depth > 8:
        raise ValueError("ledger nested too deep")
    if v is None or isinstance(v, (bool, int, float, str)):
        return 1
    if isinstance(v, list):
        return 1 + sum(_plain_json(x, depth + 1) for x in v)
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return 1 + sum(_plain_json(x, depth + 1) for x in v.values())
    raise ValueError("ledger is not plain JSON")


def _validated_meta(m) -> dict:
    if not isinstance(m, dict):
        raise ValueError("bad runtime meta")
    n_args, n_returns, n_saved = (_count(m.get(k), k) for k in ("n_args", "n_returns", "n_saved"))
    req = m.get("out_requires_grad")
    if not isinstance(req, list) or len(req) != n_returns or not all(isinstance(r, bool) for r in req):
        raise ValueError("bad out_requires_grad")
    if not isinstance(m.get("disable_amp"), bool) or not n_args or m.get("kind") not in EXPECTED_PASSES:
        raise ValueError("bad runtime meta")
    if m["kind"] == "inference" and n_saved:
        raise ValueError("an inference graph saves nothing")
    return {"kind": m["kind"], "n_args": n_args, "n_returns": n_returns, "out_requires_grad": list(req), "n_saved": n_saved,
            "disable_amp": m["disable_amp"]}


def _validated(doc, key: str) -> GraphEntry:
    """Check an entry field by field and rebuild its traces through the validating loader."""
    if not isinstance(doc, dict) or doc.get("format") != GRAPH_FORMAT or doc.get("key") != key:
        raise ValueError("not a graph entry of this key and format")
    meta = _validated_meta(doc.get("meta"))
    partition, ledger = doc.get("partition"), doc.get("ledger")
    if not isinstance(partition, dict) or not isinstance(ledger, dict):
        raise ValueError("bad partition event or ledger")
    if _plain_json(partition) > 1000 or _plain_json(ledger) > 2_000_000:
        raise ValueError("partition event or ledger too large")
    raw, expected = doc.get("passes"), EXPECTED_PASSES[meta["kind"]]
    if not isinstance(raw, list) or len(raw) != len(expected):
        raise ValueError("bad pass list")
    passes, shared = [], {}
    for n, (p, (chain, index, name)) in enumerate(zip(raw, expected)):
        if not isinstance(p, dict) or (p.get("chain"), p.get("index"), p.get("name")) != (chain, index, name):
            raise ValueError("passes not in the expected order")
        changed, ms = p.get("changed"), p.get("ms")
        if not isinstance(changed, bool) or not isinstance(ms, (int, float)) or isinstance(ms, bool) \
                or not 0 <= ms < 1e9:
            raise ValueError("bad pass flag or time")
        last = n + 1 == len(expected) or expected[n + 1][0] != chain  # the trace its chain compiles from
        load_trace = executable_trace_from_dict if last and chain != "joint" else trace_from_dict
        trace = load_trace(p.get("trace"), shared=shared)
        if trace.chain != chain:
            raise ValueError("a pass of another chain")
        passes.append((chain, index, name, changed, float(ms), trace))
    fw = passes[-1][5] if meta["kind"] == "inference" else passes[2][5]
    bad = len(fw.inputs) != meta["n_args"] or len(list(flatten(fw.outputs))) != meta["n_returns"] + meta["n_saved"]
    if meta["kind"] == "training":
        bad = bad or len(passes[4][5].inputs) != meta["n_saved"] + sum(meta["out_requires_grad"])
    if bad:
        raise ValueError("traces disagree with the calling convention")
    return GraphEntry(passes=passes, partition=partition, ledger=ledger, meta=meta)
