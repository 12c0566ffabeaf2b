"""The persistent compile cache: a chain's passes kept on disk across runs, replayed on a hit.

A chain's entry is keyed by a hash of what decides its passes: the acquired trace as the
serialized JSON format writes it (the graph in canonical form: stable names and uids, shapes,
strides, dtypes, devices, the source lines and the graph and chain it is; Dynamo's guards chose
this graph, and what they specialize on is in it), the pass the pipeline starts at, the executors,
the debug flag and the GPU targets, and the versions: ours (the version and a fingerprint of the
compiler's source files, so an edited checkout never reads stale entries), torch's, triton's and
Python's.

An entry is one gzip-compressed JSON document holding every pass's trace in the recordings' JSON
trace format, its kernel records and the decomposed symbols the fusion executors read. It is loaded
through the same validating loader as recordings (:mod:`.serialize`; the trace that code is
generated from also passes the registry's allow-list), never unpickled; the chain's code is
generated again from that validated IR (the ``codegen`` pass runs on a hit). Anything malformed,
truncated or refused is a miss, with a note, and the chain compiles as if no entry were there.

Location: ``$THUNDERVIS_CACHE_DIR/compile`` (else ``$XDG_CACHE_HOME/thundervis/compile``, else
``~/.cache/thundervis/compile``); size cap ``$THUNDERVIS_COMPILE_CACHE_MB`` (default 512), least
recently used entries evicted first. Off with ``--no-cache``, ``cache=False`` or
``THUNDERVIS_COMPILE_CACHE=off``.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import platform
import re
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

from .ir import KernelRecord, Trace
from .serialize import (TraceEncoder, executable_trace_from_dict, kernel_from_dict, kernel_to_dict,
                        trace_from_dict, trace_to_json)

ENTRY_FORMAT = 1
FROM_CACHE = "from_cache"  # the meta flag of a pass replayed from the cache
_DEFAULT_CAP_MB = 512.0
_MAX_ENTRY_BYTES = 256 << 20  # what a decompressed entry may hold
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,63}")
_KEY = re.compile(r"[0-9a-f]{64}")


def cache_root() -> str:
    """Return the folder of the compile cache (see the module doc)."""
    base = os.environ.get("THUNDERVIS_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = os.path.join(xdg, "thundervis") if xdg else os.path.join(os.path.expanduser("~"), ".cache", "thundervis")
    return os.path.join(base, "compile")


def cache_cap_bytes() -> int:
    """Return the size cap in bytes (``$THUNDERVIS_COMPILE_CACHE_MB``, default 512 MB)."""
    try:
        mb = float(os.environ.get("THUNDERVIS_COMPILE_CACHE_MB", "") or _DEFAULT_CAP_MB)
    except ValueError:
        mb = _DEFAULT_CAP_MB
    return max(0, int(mb * (1 << 20)))


def enabled_by_default() -> bool:
    """Return False when ``$THUNDERVIS_COMPILE_CACHE`` is ``off``/``0``/``no``/``false``."""
    return os.environ.get("THUNDERVIS_COMPILE_CACHE", "").strip().lower() not in ("off", "0", "no", "false")


_fingerprint: Optional[str] = None


def versions() -> dict:
    """Return the versions an entry depends on (ours: version + source fingerprint)."""
    global _fingerprint
    import torch
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = None
    if _fingerprint is None:
        here = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for folder, dirs, files in os.walk(here):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    st = os.stat(os.path.join(folder, f))
                    h.update(f"{os.path.relpath(os.path.join(folder, f), here)}:{st.st_size}:{st.st_mtime_ns};".encode())
        _fingerprint = h.hexdigest()[:32]
    try:
        from importlib.metadata import version
        ours = version("thundervis")
    except Exception:
        ours = "unknown"
    return {"thundervis": ours, "source": _fingerprint, "torch": torch.__version__, "triton": triton_version,
            "python": platform.python_version(), "format": ENTRY_FORMAT}


@dataclass
class CachedChain:
    """A validated entry: ``passes`` as (index, name, changed, compiled_ms, trace, kernels), the
    last one being what codegen runs on, ``parents`` ({uid: decomposed symbol}) and ``seq_base``
    (the smallest autograd ``seq_nr`` of the trace it was compiled from)."""

    passes: list
    parents: dict
    seq_base: int = 0


def seq_base(trace: Trace) -> int:
    """Return the smallest ``seq_nr`` in ``trace`` (0 when none)."""
    return min((b.seq_nr for b in trace.walk() if b.seq_nr is not None), default=0)


def _shift_symbol(b, delta: int, memo: Optional[dict] = None):
    if memo is not None:
        hit = memo.get(id(b))
        if hit is not None and hit[0] is b:
            return hit[1]
    subs = tuple(_shift_symbol(s, delta) for s in b.subsymbols)
    moved = b.replace(seq_nr=None if b.seq_nr is None else b.seq_nr + delta, subsymbols=subs)
    if memo is not None:
        memo[id(b)] = (b, moved)  # holds b: its id is not reused while the entry lives
    return moved


def shift_seq(trace: Trace, delta: int, memo: Optional[dict] = None) -> Trace:
    """Return ``trace`` with every ``seq_nr`` moved by ``delta`` (a forward and its backward keep
    their link: both move alike). ``memo`` (a dict kept across the passes of a chain): a symbol
    shared by several traces is moved once and stays shared."""
    if not delta:
        return trace
    return trace.replace(symbols=tuple(_shift_symbol(b, delta, memo) for b in trace.symbols))


def _shift_kernel(k: KernelRecord, delta: int) -> KernelRecord:
    if not delta or k.region is None:
        return k
    import dataclasses
    return dataclasses.replace(k, region=shift_seq(k.region, delta))


class CompileCache:
    """One cache folder (``root``; None: :func:`cache_root`) with a size cap in bytes (None:
    :func:`cache_cap_bytes`). ``notes`` collects one sentence per refused entry (a view of the
    last run's misses; the pipeline also reports each)."""

    def __init__(self, root: Optional[str] = None, cap_bytes: Optional[int] = None):
        self.root = root or cache_root()
        self.cap = cache_cap_bytes() if cap_bytes is None else int(cap_bytes)

    def key(self, trace: Trace, start: int, executors: list, debug: bool, targets=()) -> str:
        """Return the entry key of compiling acquired ``trace`` from pass ``start`` (module doc)."""
        h = hashlib.sha256()
        head = {"versions": versions(), "start": start, "executors": [e.name for e in executors],
                "debug": bool(debug), "targets": sorted(str(t) for t in (targets or ())),
                "chain": trace.chain, "graph": trace.graph}
        h.update(json.dumps(head, sort_keys=True).encode())
        base = seq_base(trace)  # autograd's counter runs on across compiles: only differences count
        h.update(trace_to_json(shift_seq(trace, -base) if base else trace).encode())
        return h.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + ".json.gz")

    def load(self, key: str) -> tuple[Optional[CachedChain], Optional[str]]:
        """Return (the entry of ``key``, None), (None, None) when there is none, or (None, why)
        when the entry is refused (malformed, tampered, not allowed: a miss)."""
        if not _KEY.fullmatch(key):
            return None, "bad key"
        path = self._path(key)
        try:
            raw = read_gz(path, _MAX_ENTRY_BYTES)
        except FileNotFoundError:
            return None, None
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            return None, f"compile cache entry {key[:12]} unreadable ({type(e).__name__}); compiled again"
        try:
            if len(raw) > _MAX_ENTRY_BYTES:
                raise ValueError("entry too large")
            entry = _validated(json.loads(raw), key)
        except Exception as e:  # any refusal is a miss: the chain compiles as if it were not there
            first = str(e).splitlines()[0][:160] if str(e) else ""
            return None, f"compile cache entry {key[:12]} refused ({type(e).__name__}: {first}); compiled again"
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        return entry, None

    def store(self, key: str, passes: list, parents: dict, seq: int = 0) -> None:
        """Write the entry of ``key``: ``passes`` as (index, name, changed, seconds, trace,
        kernels), ``parents`` {uid: symbol}, ``seq`` the acquired trace's :func:`seq_base`; then
        evict down to the cap. Failures are silent: a cache that cannot write is a cache that misses."""
        if write_gz(self._path(key), _entry_text(key, passes, parents, seq)):
            self.evict()

    def evict(self) -> list[str]:
        """Delete least recently used entries until the folder fits the cap; return their paths."""
        entries = []
        for folder, _, files in os.walk(self.root):
            for f in files:
                p = os.path.join(folder, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                entries.append((st.st_mtime, st.st_size, p))
        total = sum(s for _, s, _ in entries)
        gone = []
        for _, size, p in sorted(entries):
            if total <= self.cap:
                break
            try:
                os.remove(p)
                gone.append(p)
            except OSError:
                pass
            total -= size
        return gone


_dumps = json.JSONEncoder(separators=(",", ":")).encode


def write_gz(path: str, text: str) -> bool:
    """Write ``text`` gzip-compressed to ``path`` atomically (readers see a whole entry or none);
    return False when it could not be written (a cache that cannot write is a cache that misses)."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", compresslevel=3) as gz:
            gz.write(text.encode())
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        return False
    return True


def read_gz(path: str, limit: int) -> bytes:
    """Return at most ``limit + 1`` decompressed bytes of gzip file ``path`` (one more than the limit
    says it is too large); raise FileNotFoundError, OSError, EOFError or gzip.BadGzipFile."""
    with gzip.open(path, "rb") as f:
        return f.read(limit + 1)


def _entry_text(key: str, passes: list, parents: dict, seq: int) -> str:
    """Return the entry's JSON text (arguments as :meth:`CompileCache.store`'s). The traces' JSON
    is spliced in as the encoder writes it, not parsed back and dumped again; one memoising
    encoder serves all passes, which share most symbols."""
    enc = TraceEncoder()
    head = _dumps({"format": ENTRY_FORMAT, "key": key, "written_at": time.time(), "seq_base": int(seq)})
    out = [head[:-1], ',"parents":', enc.to_json(_parents_trace(parents)), ',"passes":[']
    for n, (i, name, changed, s, t, ks) in enumerate(passes):
        out += ["," if n else "", '{"index":', _dumps(i), ',"name":', _dumps(name), ',"changed":',
                _dumps(bool(changed)), ',"ms":', _dumps(s * 1e3), ',"trace":', enc.to_json(t),
                ',"kernels":', _dumps([kernel_to_dict(k) for k in ks]), "}"]
    out.append("]}")
    return "".join(out)


def _parents_trace(parents: dict) -> Trace:
    return Trace(name="decomposed", inputs=(), symbols=tuple(parents.values()), outputs=(), pass_name="claim")


def _validated(doc, key: str) -> CachedChain:
    """Check an entry field by field (plain JSON only) and rebuild its traces through the
    validating loader; the last pass's trace, which code is generated from, and the decomposed
    symbols, which the CPU path calls, also pass the registry's allow-list."""
    if not isinstance(doc, dict) or doc.get("format") != ENTRY_FORMAT or doc.get("key") != key:
        raise ValueError("not an entry of this key and format")
    raw = doc.get("passes")
    if not isinstance(raw, list) or not raw or len(raw) > 64:
        raise ValueError("bad pass list")
    passes, shared = [], {}  # shared: the passes' equal symbols are one object (serialize.trace_from_dict)
    for n, p in enumerate(raw):
        if not isinstance(p, dict):
            raise ValueError("bad pass")
        index, name, changed, ms = p.get("index"), p.get("name"), p.get("changed"), p.get("ms")
        if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 64):
            raise ValueError("bad pass index")
        if not (isinstance(name, str) and _NAME.fullmatch(name)) or not isinstance(changed, bool):
            raise ValueError("bad pass name or flag")
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not 0 <= ms < 1e9:
            raise ValueError("bad pass time")
        kernels = p.get("kernels")
        if not isinstance(kernels, list):
            raise ValueError("bad kernel list")
        last = n == len(raw) - 1
        trace = (executable_trace_from_dict if last else trace_from_dict)(p.get("trace"), shared=shared)
        records: list[KernelRecord] = [kernel_from_dict(k) for k in kernels]
        passes.append((index, name, changed, float(ms), trace, records))
    parents = executable_trace_from_dict(doc.get("parents")).symbols
    base = doc.get("seq_base")
    if not isinstance(base, int) or isinstance(base, bool) or not 0 <= base < 1 << 62:
        raise ValueError("bad seq_base")
    return CachedChain(passes=passes, parents={b.uid: b for b in parents}, seq_base=base)


def replay(cache: CompileCache, key: str, runner, executors: list) -> Optional[Trace]:
    """Report the passes of ``key``'s entry through ``runner`` (a ``pipeline.PassRunner``) as the
    pipeline would have, each trace marked :data:`FROM_CACHE` (with its first compile's time as
    ``compiled_ms``), its kernel records built and handed to the ahead-of-time compiler, and the
    decomposed symbols told to the executors, every ``seq_nr`` moved to this compile's
    (``runner.seq_base``); return the trace codegen runs on, or None on a miss
    (a refused entry also reports why, as a ``compile_cache`` runtime event)."""
    obs, graph, chain = runner.options.observer, runner.graph, runner.chain
    entry, why = cache.load(key)
    if entry is None:
        obs.runtime(graph, chain, "compile_cache", {"hit": False, "key": key[:16],
                                                    **({"note": why} if why else {})})
        return None
    trace, delta, moved = None, runner.seq_base - entry.seq_base, {}
    for index, name, changed, ms, trace, kernels in entry.passes:
        trace, kernels = shift_seq(trace, delta, moved), [_shift_kernel(k, delta) for k in kernels]
        trace = trace.replace(graph=graph, chain=chain, pass_name=name,
                              meta={**trace.meta, FROM_CACHE: True, "compiled_ms": round(ms, 3)})
        obs.pass_done(graph, chain, index, name, trace, 0.0, changed)
        if kernels:
            obs.kernels_built(graph, chain, list(kernels))
            if runner.options.aot is not None:
                runner.options.aot.submit(graph, chain, list(kernels))
        runner.index = index + 1
    from .passes.claim import DECOMPOSED
    parents = {uid: _shift_symbol(b, delta) for uid, b in entry.parents.items()}
    for e in executors:
        see = getattr(e, "see_decomposed", None)  # fusion executors hear it before they build kernels
        if see is not None:
            see(parents)
    obs.runtime(graph, chain, "compile_cache", {"hit": True, "key": key[:16], "passes": len(entry.passes)})
    return trace.replace(meta={**trace.meta, DECOMPOSED: parents}) if parents else trace
