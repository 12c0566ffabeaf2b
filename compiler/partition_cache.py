"""The partition cache: what each remat policy's partition of a joint graph chose, kept across runs.

Partitioning a joint graph both ways (:mod:`.remat`) costs most of a compile that the pass cache
(:mod:`.compile_cache`) replays: the min-cut search, and the CSE that precedes it (whose first use
imports Inductor's pattern matcher, seconds). What decides a partition is small: the names of the
values (and symbolic sizes) the forward saves for the backward, and, for min-cut, which nodes its
CSE merged. An entry keeps exactly that, per policy, as plain JSON, with a digest of the graphs the
partition made. On a hit torch's own min-cut partitioner runs on this run's joint graph with its two
costly steps answered from the entry (:func:`hooked`: the CSE merges those nodes, the search returns
those saved values), so everything else it does, down to the extraction of the forward and backward
modules (``partitioners._extract_fwd_bwd_modules``), is this torch's own; the modules must then
match the entry's names and digest. ``default_partition`` (a linear scan) runs as it is, and its
result is checked against the entry's ``off`` choice.

Key: a canonical hash of the joint graph (each node's op, target, name, argument structure, the
shape, stride, dtype and device of its value, the partitioner's tags), the partitioner's arguments,
the min-cut settings (:data:`.remat.AUTO_CONFIG` and functorch's config) and the versions the pass
cache keys on. Entries are validated strictly: a name that is no node of this joint graph, a
duplicate, a wrong type or an oversized list is a miss with a note, and the partition runs as if
there were no entry. Graphs the rebuild cannot reproduce exactly (activation checkpointing tags,
opaque saved objects, activation offloading or quantization) are never cached; a torch whose
partitioner lacks these steps or the extraction helper, or refuses the names, partitions for real.
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import tempfile
import threading
from typing import Optional

import torch
import torch.fx

ENTRY_FORMAT = 1
_SUFFIX = ".part.json"
_MAX_ENTRY_BYTES = 8 << 20
_MAX_NAMES = 100_000  # no joint graph we take has more nodes; a longer list is not an entry
_FX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
_KEY = re.compile(r"[0-9a-f]{64}")
# Node metadata the partitioners read to decide (besides the values' shapes).
_DECIDING_META = ("partitioner_tag", "recompute", "ac_graph_id", "saved_tensor_with_no_vc_check", "custom",
                  "memory_budget")


class Refused(ValueError):
    """An entry (or this torch) cannot rebuild the partition: a miss, with the reason."""


def _value(v) -> object:
    """A canonical, JSON-ready description of an FX value (what the partitioners read of it)."""
    if isinstance(v, torch.Tensor):
        try:
            stride = [int(s) for s in v.stride()]
        except Exception:  # sparse and other layouts have none
            stride = None
        return ["T", [int(s) for s in v.shape], stride, str(v.dtype), str(v.device), bool(v.requires_grad)]
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return [type(v).__name__, repr(v)[:200]]


def _arg(a) -> object:
    return torch.fx.node.map_arg(a, lambda n: ("node", n.name))


def _node_doc(n: torch.fx.Node) -> list:
    meta = {k: repr(n.meta[k])[:500] for k in _DECIDING_META if k in n.meta}
    target = n.target if isinstance(n.target, str) else str(n.target)
    return [n.op, n.name, target, repr(_arg(n.args)), repr(_arg(n.kwargs)), _value(n.meta.get("val")), meta]


def key(joint: torch.fx.GraphModule, kwargs: dict, settings: dict) -> str:
    """Return the entry key of partitioning ``joint`` with the partitioner's ``kwargs`` under
    ``settings`` (the min-cut settings; the versions are added here)."""
    from .compile_cache import versions
    from torch._functorch import config
    h = hashlib.sha256()
    head = {"format": ENTRY_FORMAT, "versions": versions(), "settings": settings,
            "kwargs": repr(sorted(kwargs.items())), "functorch": repr(sorted(config.get_config_copy().items()))}
    h.update(json.dumps(head, sort_keys=True, default=repr).encode())
    for n in joint.graph.nodes:
        h.update(json.dumps(_node_doc(n), default=repr).encode())
        h.update(b"\n")
    return h.hexdigest()


def cacheable(joint: torch.fx.GraphModule) -> Optional[str]:
    """Return why ``joint``'s partition cannot be rebuilt from names (None: it can)."""
    from torch._functorch import config, partitioners as P
    from torch._inductor import config as inductor_config
    if config.enable_activation_offloading or getattr(config, "_sync_decision_cross_ranks", False):
        return "activation offloading or cross-rank decisions are on"
    if (getattr(inductor_config, "post_grad_fusion_options", None) or {}).get("activation_quantization_aten_pass"):
        return "activation quantization is on"
    if P.has_recomputable_ops(joint):
        return "the graph has activation checkpointing tags"
    if _extract() is None:
        return "this torch has no _extract_fwd_bwd_modules"
    return None


def _extract():
    from torch._functorch import partitioners as P
    fn = getattr(P, "_extract_fwd_bwd_modules", None)
    if fn is None:
        return None
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    return fn if "num_fwd_outputs" in params and "saved_sym_nodes" in params else None


def choice(fw: torch.fx.GraphModule, n_fwd: int) -> dict:
    """Return what decided a partition from its forward module ``fw``: the saved values' and saved
    symbolic sizes' names (in the forward's output order) and the number of forward outputs.
    Raises Refused when a saved value is neither (an opaque object: not cacheable)."""
    from torch.fx.experimental.proxy_tensor import is_sym_node
    out = next(n for n in fw.graph.nodes if n.op == "output").args[0]
    saved, sym = [], []
    for n in out[n_fwd:]:
        if not isinstance(n, torch.fx.Node):
            raise Refused("a saved output is not a node")
        if is_sym_node(n):
            sym.append(n.name)
        elif isinstance(n.meta.get("val"), torch.Tensor):
            if sym:
                raise Refused("a saved tensor follows a symbolic size")
            saved.append(n.name)
        else:
            raise Refused(f"saved value {n.name} is neither a tensor nor a size")
    return {"saved": saved, "sym": sym, "n_fwd": int(n_fwd)}


def digest(pair: tuple) -> str:
    """Return a digest of a (forward, backward) pair's graphs: a hit must rebuild exactly these."""
    h = hashlib.sha256()
    for gm in pair:
        h.update(str(gm.graph).encode())
    return h.hexdigest()[:32]


def cse_pairs(before: list, graph: torch.fx.Graph) -> list:
    """Return [[merged, kept], ...]: the nodes of ``before`` (a graph's nodes before CSE) that CSE
    replaced by an earlier identical node of ``graph`` (the graph CSE returned). Raises Refused
    when a node left without an identical one (then CSE did something names cannot replay)."""
    after = {n.name for n in graph.nodes}
    alias: dict = {}
    seen: dict = {}
    pairs = []
    for n in before:
        sig = _signature(n, alias)
        if n.name in after:
            seen.setdefault(sig, n.name)
        elif sig in seen:
            alias[n.name] = seen[sig]
            pairs.append([n.name, seen[sig]])
        else:
            raise Refused(f"node {n.name} left the graph in CSE with no identical node")
    return pairs


def _signature(n: torch.fx.Node, alias: dict) -> str:
    mapped = lambda a: torch.fx.node.map_arg(a, lambda x: ("node", alias.get(x.name, x.name)))  # noqa: E731
    return repr((n.op, str(n.target), mapped(n.args), mapped(n.kwargs)))


def apply_merges(graph: torch.fx.Graph, pairs: list) -> torch.fx.Graph:
    """Merge each pair's first node into its second in ``graph`` (in place; returned), as the CSE
    that recorded them did. Raises Refused, before changing anything, unless every pair merges two
    identical, deterministic nodes, the kept one first, neither a graph output, no mutation between."""
    nodes = {n.name: n for n in graph.nodes}
    order = {n.name: i for i, n in enumerate(graph.nodes)}
    region, mutations = {}, 0  # how many mutating ops come before each node: CSE never merges across one
    for n in graph.nodes:
        region[n.name] = mutations
        schema = getattr(n.target, "_schema", None)
        mutations += bool(n.op == "call_function" and schema is not None and schema.is_mutable)
    outputs = {x.name for n in graph.nodes if n.op == "output" for x in n.all_input_nodes}
    alias: dict = {}
    for dup, kept in pairs:
        d, k = nodes.get(dup), nodes.get(kept)
        if d is None or k is None or dup in alias or order[kept] >= order[dup]:
            raise Refused(f"CSE merge {dup} -> {kept} does not fit this graph")
        if d.op != "call_function" or dup in outputs or kept in outputs or _random(d) or region[dup] != region[kept]:
            raise Refused(f"CSE merge {dup} -> {kept} merges what CSE keeps apart")
        if _signature(d, alias) != _signature(k, alias):
            raise Refused(f"CSE merge {dup} -> {kept} merges different computations")
        alias[dup] = kept
    for dup, kept in pairs:
        nodes[dup].replace_all_uses_with(nodes[kept])
        graph.erase_node(nodes[dup])
    return graph


def _random(n: torch.fx.Node) -> bool:
    tags = getattr(n.target, "tags", ())
    return torch.Tag.nondeterministic_seeded in tags or "empty" in str(n.target)


class Hooks:
    """What one min-cut call did through :func:`hooked`: ``pairs`` (the CSE merges it recorded;
    None when CSE did not run or could not be recorded), ``chose`` (it took the replayed choice)."""

    def __init__(self, replay: Optional[dict]):
        self.replay, self.pairs, self.cse_ran, self.chose, self.usable = replay, None, False, False, False


_lock = threading.Lock()


@contextlib.contextmanager
def hooked(replay: Optional[dict] = None):
    """Within the block, the min-cut partitioner called on this thread records what its CSE merged
    (``replay`` None) or, given a validated choice, merges those nodes instead of running CSE and
    takes the saved values from the choice instead of searching for them; everything else it does
    is its own. Yields the :class:`Hooks` (``usable`` False: this torch has neither step to hook)."""
    from torch._functorch import partitioners as P
    cse0, choose0 = getattr(P, "fx_graph_cse", None), getattr(P, "choose_saved_values_set", None)
    h = Hooks(replay)
    if not (callable(cse0) and callable(choose0)):
        yield h
        return
    me = threading.get_ident()

    def cse(fx_g, *a, **k):
        if threading.get_ident() != me:
            return cse0(fx_g, *a, **k)
        h.cse_ran = True
        if h.replay is not None:
            return apply_merges(fx_g, h.replay["cse"])
        before = list(fx_g.nodes)
        out = cse0(fx_g, *a, **k)
        try:
            h.pairs = cse_pairs(before, out)
        except Exception:  # not recordable: this partition is not cached, and min-cut goes on unharmed
            h.pairs = None
        return out

    def choose(joint_graph, *a, **k):
        if threading.get_ident() != me or h.replay is None:
            return choose0(joint_graph, *a, **k)
        nodes = {n.name: n for n in joint_graph.nodes}
        missing = [x for x in h.replay["saved"] + h.replay["sym"] if x not in nodes]
        if missing:
            raise Refused(f"saved value {missing[0]} is not a node after CSE")
        h.chose = True
        return [nodes[x] for x in h.replay["saved"] + h.replay["sym"]]
    with _lock:
        P.fx_graph_cse, P.choose_saved_values_set, h.usable = cse, choose, True
        try:
            yield h
        finally:
            P.fx_graph_cse, P.choose_saved_values_set = cse0, choose0


def _names(raw, what: str, limit: int = _MAX_NAMES) -> list:
    if not isinstance(raw, list) or len(raw) > limit:
        raise Refused(f"{what} is not a list of at most {limit} names")
    if not all(isinstance(x, str) and _FX_NAME.fullmatch(x) for x in raw):
        raise Refused(f"{what} holds something that is not a node name")
    if len(set(raw)) != len(raw):
        raise Refused(f"{what} names a node twice")
    return raw


def validated_choice(raw, nodes: dict) -> dict:
    """Return a policy's entry ``raw`` checked against ``nodes`` ({name: node} of this joint graph);
    raise Refused naming the first fault."""
    if not isinstance(raw, dict):
        raise Refused("a policy's entry is not an object")
    if raw.get("error") is not None:
        err = raw["error"]
        if not isinstance(err, str) or len(err) > 2000:
            raise Refused("a policy's error is not a short string")
        return {"error": err}
    saved, sym = _names(raw.get("saved"), "saved values"), _names(raw.get("sym"), "saved sizes")
    n_fwd = raw.get("n_fwd")
    if not isinstance(n_fwd, int) or isinstance(n_fwd, bool) or not 0 <= n_fwd <= _MAX_NAMES:
        raise Refused("the forward output count is not a small integer")
    if not (isinstance(raw.get("digest"), str) and re.fullmatch(r"[0-9a-f]{32}", raw["digest"])):
        raise Refused("the graphs' digest is not 32 hex digits")
    pairs = raw.get("cse", [])
    if not isinstance(pairs, list) or len(pairs) > _MAX_NAMES:
        raise Refused("the CSE merges are not a list")
    for p in pairs:  # the kept node may repeat (several merged into one), so _names checks only the merged
        if not (isinstance(p, list) and len(p) == 2 and isinstance(p[1], str) and _FX_NAME.fullmatch(p[1])):
            raise Refused("a CSE merge is not a pair of names")
    _names([p[0] for p in pairs], "CSE merged nodes")
    for name in saved + sym + [x for p in pairs for x in p]:
        if name not in nodes or nodes[name].op in ("output",):
            raise Refused(f"{name} is not a node of this joint graph")
    merged = {p[0] for p in pairs}
    if merged & (set(saved) | set(sym)):
        raise Refused("a saved value is a node CSE removes")
    return {"saved": saved, "sym": sym, "n_fwd": n_fwd, "cse": [list(p) for p in pairs], "digest": raw["digest"]}


class PartitionStore:
    """Partition entries beside the pass cache's in ``root`` (a :class:`.compile_cache.CompileCache`'s
    folder, which evicts both kinds under its one size cap)."""

    def __init__(self, root: str):
        self.root = root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + _SUFFIX)

    def load(self, key: str) -> tuple[Optional[dict], Optional[str]]:
        """Return (the raw entry of ``key``, None), (None, None) when there is none, or (None, why)
        when it is unreadable or not an entry of this key and format."""
        if not _KEY.fullmatch(key):
            return None, "bad key"
        try:
            with open(self._path(key), "rb") as f:
                raw = f.read(_MAX_ENTRY_BYTES + 1)
        except FileNotFoundError:
            return None, None
        except OSError as e:
            return None, f"partition cache entry {key[:12]} unreadable ({type(e).__name__}); partitioned again"
        try:
            if len(raw) > _MAX_ENTRY_BYTES:
                raise Refused("entry too large")
            doc = json.loads(raw)
            if not isinstance(doc, dict) or doc.get("format") != ENTRY_FORMAT or doc.get("key") != key:
                raise Refused("not an entry of this key and format")
            if not isinstance(doc.get("policies"), dict):
                raise Refused("no policies")
        except (ValueError, RecursionError) as e:
            return None, refused_note(key, e)
        try:
            os.utime(self._path(key))  # recently used: evicted last
        except OSError:
            pass
        return doc, None

    def store(self, key: str, policies: dict) -> None:
        """Write ``policies`` ({policy: choice or {"error": text}}) as the entry of ``key``; a cache
        that cannot write is a cache that misses."""
        doc = {"format": ENTRY_FORMAT, "key": key, "policies": policies}
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, separators=(",", ":"))
            os.replace(tmp, path)  # readers see a whole entry or none
        except (OSError, TypeError, ValueError):
            pass


def refused_note(key: str, e: BaseException) -> str:
    """The one-sentence note of a refused entry."""
    first = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
    return f"partition cache entry {key[:12]} refused ({first}); partitioned again"
