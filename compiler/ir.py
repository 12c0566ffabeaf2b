"""The trace IR: tensor proxies, bound symbols and traces.

A :class:`Trace` is an ordered list of :class:`BoundSymbol` over named :class:`TensorProxy` values.
Traces are immutable by convention: passes build new traces (see :meth:`Trace.replace`) and never
mutate their input. Printing lives in :mod:`printer`, JSON in :mod:`serialize`, execution in
:mod:`interpreter`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

# Chain names and the single-letter prefix of the uids minted in each chain. The prefix keeps uids
# unique across all chains of a compiled graph without a shared counter.
CHAIN_PREFIX = {"dynamo": "d", "joint": "j", "forward": "f", "backward": "b", "inference": "i"}


@dataclass(frozen=True, slots=True)
class TensorProxy:
    """A named tensor value in a trace, with its metadata (strides may be unknown: None)."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # torch dtype name without the "torch." prefix, e.g. "float32"
    device: str  # "cpu", "cuda:0", ...
    strides: Optional[tuple[int, ...]] = None

    def short(self) -> str:
        """Return the compact type string, e.g. ``cpu f32[8, 64]``."""
        return f"{self.device} {short_dtype(self.dtype)}[{', '.join(str(s) for s in self.shape)}]"

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


_SHORT = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8",
    "complex64": "c64", "complex128": "c128",
}


def short_dtype(dtype: str) -> str:
    """Return the short spelling of a dtype name (``float32`` -> ``f32``)."""
    return _SHORT.get(dtype, dtype)


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """Where a symbol came from in the user's program: file, line, code text and module path."""

    file: str
    line: int
    code: str = ""
    module: str = ""  # dotted module path, e.g. "model.blocks.0.attn"
    function: str = ""

    def label(self) -> str:
        """Return ``file.py:LINE`` with the file's base name."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"


@dataclass(frozen=True, slots=True)
class BoundSymbol:
    """One operation in a trace: a symbol applied to arguments, producing outputs.

    ``sym`` names the operation: ``prims.add``, ``aten.addmm.default``, a Dynamo-level callable such
    as ``torch.nn.functional.linear``, or a fusion such as ``fw_fusion_0``. ``args``/``kwargs``
    hold proxies and plain constants, ``outputs`` a proxy, a tuple of proxies, or None.
    ``fusion`` is True only for the kernel symbols the ``fuse`` pass makes (one kernel whose
    ``subsymbols`` are its members); a decomposed op also has subsymbols but is not a fusion.
    """

    sym: str
    args: tuple
    kwargs: dict
    outputs: Any
    uid: str
    origin: tuple[str, ...] = ()
    source: Optional[SourceInfo] = None
    seq_nr: Optional[int] = None
    aten: Optional[str] = None  # the ATen overload it came from, e.g. "aten.native_layer_norm.default"
    subsymbols: tuple["BoundSymbol", ...] = ()
    executor: Optional[str] = None
    note: Optional[str] = None  # why the symbol is as it is (fallback reason, fusion reason ...)
    fusion: bool = False

    def replace(self, **changes) -> "BoundSymbol":
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)

    def flat_outputs(self) -> list[TensorProxy]:
        """Return the output proxies as a flat list."""
        out = self.outputs
        if isinstance(out, TensorProxy):
            return [out]
        found: list[TensorProxy] = []
        _collect_proxies(out, found)
        return found

    def flat_inputs(self) -> list[TensorProxy]:
        """Return the proxies read by this symbol (args then kwargs), duplicates kept."""
        found: list[TensorProxy] = []
        _collect_proxies(self.args, found)
        if self.kwargs:
            _collect_proxies(self.kwargs, found)
        return found


def _collect_proxies(x, found: list) -> None:
    """Append the proxies among the leaves of ``x`` to ``found``, in :func:`flatten`'s order.
    Every pass asks every symbol for its proxies, often more than once: a plain loop, not
    :func:`flatten`'s nested generators, keeps that cheap."""
    if isinstance(x, TensorProxy):
        found.append(x)
    elif isinstance(x, (tuple, list)):
        for y in x:
            if isinstance(y, TensorProxy):
                found.append(y)
            elif isinstance(y, (tuple, list, dict)):
                _collect_proxies(y, found)
    elif isinstance(x, dict):
        for y in x.values():
            if isinstance(y, TensorProxy):
                found.append(y)
            elif isinstance(y, (tuple, list, dict)):
                _collect_proxies(y, found)


@dataclass(frozen=True)
class Trace:
    """An ordered program over proxies: ``inputs`` -> ``symbols`` -> ``outputs``.

    ``graph``/``chain`` say which compiled graph and chain it belongs to; ``pass_name`` which pass
    made it; ``next_uid``/``next_name`` are the counters for symbols and proxies new passes mint.
    ``fx_names`` maps an input renamed for readability (``blocks_0_attn_qkv_weight``) to the name
    its FX graph gave it (``primals_7``). ``kernels`` holds the records of the kernels the pass that
    made this trace built; the pipeline hands them to the observer and clears them.
    """

    name: str
    inputs: tuple[TensorProxy, ...]
    symbols: tuple[BoundSymbol, ...]
    outputs: tuple
    chain: str = "forward"
    graph: int = 0
    pass_name: str = "acquire"
    next_uid: int = 0
    next_name: int = 0
    meta: dict = field(default_factory=dict)
    fx_names: dict = field(default_factory=dict)
    kernels: tuple["KernelRecord", ...] = ()

    def replace(self, **changes) -> "Trace":
        """Return a copy with the given fields changed."""
        return dataclasses.replace(self, **changes)

    def walk(self) -> Iterator[BoundSymbol]:
        """Yield every symbol, top level first then its subsymbols, depth first."""
        stack = list(reversed(self.symbols))
        while stack:
            b = stack.pop()
            yield b
            stack.extend(reversed(b.subsymbols))

    def flat_outputs(self) -> list[TensorProxy]:
        """Return the trace's output proxies as a flat list."""
        return [p for p in flatten(self.outputs) if isinstance(p, TensorProxy)]


# Short chain tags in kernel names; an inference chain is a forward pass (a graph has either an
# inference chain or a forward/backward pair, so the tag still tells its kernels apart).
_KERNEL_CHAIN_TAG = {"forward": "fw", "backward": "bw", "inference": "fw"}


def kernel_name(graph: int, chain: str, index: int) -> str:
    """Return the name of fusion ``index`` of a chain, unique in a recording: ``fw_fusion_3`` /
    ``bw_fusion_3`` in graph 0, ``g2_fw_fusion_3`` in graph 2 (graph 0 is the common one-graph
    case, so it stays short)."""
    tag = _KERNEL_CHAIN_TAG.get(chain) or (chain if chain.isidentifier() else "x")
    return f"{tag}_fusion_{index}" if graph == 0 else f"g{graph}_{tag}_fusion_{index}"


@dataclass(frozen=True, slots=True)
class SourceLine:
    """A user source line a kernel covers, and whether it ran in the forward or backward pass."""

    file: str
    line: int
    code: str = ""
    module: str = ""
    direction: str = "forward"  # "forward" | "backward"


@dataclass(frozen=True)
class KernelRecord:
    """What a fusion executor built for one fusion symbol: the kernel's name (= the symbol's
    ``sym``), executor, the uid of the fusion symbol and of its members, the member ops, the
    generated ``code`` in ``language``, the region's inputs and outputs, the user source lines it
    covers, a note, and ``region``: a standalone trace of the members (what re-run rebuilds the
    kernel from). ``details`` holds executor-specific JSON-able extras (Triton: plan, grid ...)."""

    name: str
    executor: str
    uid: str
    members: tuple[str, ...]
    ops: tuple[str, ...]
    code: str
    language: str
    inputs: tuple[TensorProxy, ...]
    outputs: tuple[TensorProxy, ...]
    source_lines: tuple[SourceLine, ...]
    region: Optional["Trace"]
    pass_name: str = "fuse"
    note: Optional[str] = None
    details: dict = field(default_factory=dict)


def flatten(x) -> Iterator[Any]:
    """Yield the leaves of nested tuples/lists/dicts (dict values only)."""
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from flatten(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from flatten(y)
    else:
        yield x


def map_structure(fn, x):
    """Apply ``fn`` to each leaf of nested tuples/lists/dicts, keeping the structure."""
    if isinstance(x, tuple):
        return tuple(map_structure(fn, y) for y in x)
    if isinstance(x, list):
        return [map_structure(fn, y) for y in x]
    if isinstance(x, dict):
        return {k: map_structure(fn, v) for k, v in x.items()}
    return fn(x)


class Minter:
    """Mints deterministic uids and proxy names for a pass that adds symbols to a trace."""

    def __init__(self, trace: Trace):
        self.prefix = CHAIN_PREFIX.get(trace.chain, "x")
        self.next_uid = trace.next_uid
        self.next_name = trace.next_name

    def uid(self) -> str:
        """Return a fresh uid such as ``f12``."""
        u = f"{self.prefix}{self.next_uid}"
        self.next_uid += 1
        return u

    def name(self) -> str:
        """Return a fresh proxy name such as ``t7``."""
        n = f"t{self.next_name}"
        self.next_name += 1
        return n

    def stamp(self, trace: Trace, **changes) -> Trace:
        """Return ``trace`` with the minted counters (and ``changes``) applied."""
        return trace.replace(next_uid=self.next_uid, next_name=self.next_name, **changes)
