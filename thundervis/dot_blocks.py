"""Module blocks of a trace, for diagrams that read like Model Explorer: one box per block.

A block is the module path up to its first numbered component (``model.layers.3`` for
``model.layers.3.self_attn.q_proj``, ``transformer.h.0`` for ``transformer.h.0.ln_1``); a module
without a numbered component is its own block (``model.embed_tokens``, ``lm_head``). A top-level
symbol belongs to the block most of its ops come from (a fusion's members vote; ties go to the
first), and a fusion with any op from a numbered block belongs to a numbered block: it runs once per
layer, so voting it into a shared module (the rotary table, a helper function recorded as its own
module) would make that module one hub box wired to every layer. A symbol with no recorded module
belongs to no block and is drawn on its own.

:func:`module_blocks` groups the top-level symbols of a trace; the diagram (``thundervis.dot``)
draws each block collapsed to one node unless it is expanded. Pure functions over the IR: no
Graphviz, nothing executed.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from thundervis.compiler.ir import BoundSymbol
from thundervis.present.kernel_folds import FOLD_AT, layer_of

# Below this many numbered blocks a trace is drawn op by op (auto mode): a 2-block model reads
# fine in full, a 24-layer one does not.
AUTO_MIN_BLOCKS = 3


def block_of(module: str) -> str:
    """Return the block of a module path (see the module docstring); ``""`` for no module."""
    parts = module.split(".") if module else []
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[:i + 1])
    return module


def _modules(b: BoundSymbol) -> list[str]:
    if b.fusion and b.subsymbols:
        return [s.source.module if s.source is not None else "" for s in b.subsymbols]
    if b.source is not None and b.source.module:
        return [b.source.module]
    return [s.source.module for s in b.subsymbols if s.source is not None and s.source.module][:1] or [""]


def symbol_block(b: BoundSymbol) -> str:
    """Return the block of one top-level symbol (``""``: none)."""
    blocks = [block_of(m) for m in _modules(b) if m]
    numbered = [blk for blk in blocks if is_numbered(blk)]
    blocks = numbered or blocks  # a repeated layer's op outvotes any shared module (module docstring)
    if not blocks:
        return ""
    votes = Counter(blocks)
    top = max(votes.values())
    return next(blk for blk in blocks if votes[blk] == top)


def submodule_of(b: BoundSymbol, block: str) -> str:
    """Return the submodule of ``block`` one level down that most of ``b``'s ops come from
    (``model.layers.3.self_attn`` for ``model.layers.3.self_attn.q_proj``); ``""`` when they come
    from the block itself. An expanded block draws one nested cluster per submodule."""
    votes = Counter()
    for m in _modules(b):
        if m.startswith(block + "."):
            votes[block + "." + m[len(block) + 1:].split(".", 1)[0]] += 1
        elif m:
            votes[""] += 1
    return votes.most_common(1)[0][0] if votes else ""


def is_numbered(block: str) -> bool:
    """Whether ``block`` ends in a numbered component (a repeated layer)."""
    return block.rsplit(".", 1)[-1].isdigit()


@dataclass(frozen=True)
class Block:
    """One block of a trace: its module ``path``, a stable ``node_id`` (``block_N``, N in order of
    first appearance), and its top-level ``symbols`` in trace order; or a fold of equal layers."""

    path: str
    node_id: str
    symbols: tuple
    fold: str = ""  # a fold of equal layers (fold_blocks): ``model.layers.1–22 × 22``; path: the first's
    instances: int = 1  # how many layers it stands for (symbols: all of theirs)

    @property
    def kernels(self) -> tuple:
        """Its fusion symbols."""
        return tuple(b for b in self.symbols if b.fusion)

    @property
    def ops(self) -> tuple:
        """Its top-level symbols that are not fusions."""
        return tuple(b for b in self.symbols if not b.fusion)

    def sources(self) -> list[tuple[str, int]]:
        """Return the (file, line) of every op of the block (members of its fusions included)."""
        out = []
        for b in self.symbols:
            for s in (b.subsymbols if b.fusion else (b,)):
                if s.source is not None and s.source.line:
                    out.append((s.source.file, s.source.line))
        return out

    def executors(self) -> list[str]:
        """Return the executors of its symbols, most used first."""
        return [ex for ex, _ in Counter(b.executor or "torch" for b in self.symbols).most_common()]


def module_blocks(symbols: Sequence[BoundSymbol]) -> list[Block]:
    """Return the blocks of ``symbols`` (top-level symbols of one trace) in order of first
    appearance; symbols without a module are in none."""
    members: dict[str, list] = {}
    for b in symbols:
        blk = symbol_block(b)
        if blk:
            members.setdefault(blk, []).append(b)
    return [Block(path, f"block_{i}", tuple(syms)) for i, (path, syms) in enumerate(members.items())]


def wants_blocks(blocks: Sequence[Block]) -> bool:
    """Auto mode: group when the trace repeats at least ``AUTO_MIN_BLOCKS`` numbered blocks."""
    return sum(1 for b in blocks if is_numbered(b.path)) >= AUTO_MIN_BLOCKS


def expanded_paths(blocks: Sequence[Block], expand: Optional[Iterable[str]]) -> set[str]:
    """Return the block paths ``expand`` names: a block path, a prefix of block paths on whole
    components (``model.layers`` expands every layer), a module inside a block (its block), or
    ``*`` (all). Raise ValueError naming the blocks when a name matches none."""
    out: set[str] = set()
    paths = [b.path for b in blocks]
    for name in expand or ():
        if name == "*":
            return set(paths)
        hit = {p for p in paths if p == name or p.startswith(name + ".") or name.startswith(p + ".")}
        if not hit:
            shown = ", ".join(paths[:12]) + (", …" if len(paths) > 12 else "")
            raise ValueError(f"no block {name!r} to expand (blocks: {shown or 'none'})")
        out |= hit
    return out


def _structure(blk: Block) -> tuple:
    """What two layers' blocks must share to fold: per symbol its op (a kernel's name without its
    number), executor, output shapes and dtypes and members' ops; ``del`` aside."""
    def one(b):
        outs = tuple((tuple(p.shape), str(p.dtype)) for p in b.flat_outputs() if hasattr(p, "shape"))
        return (re.sub(r"\d+$", "#", b.sym) if b.fusion else b.sym, b.executor, outs,
                tuple(s.sym for s in b.subsymbols))
    return tuple(one(b) for b in blk.symbols if b.sym != "del")


def fold_blocks(blocks: Sequence[Block], opened: set) -> list[Block]:
    """Return ``blocks`` with each run of at least ``FOLD_AT`` adjacent layers of one block head,
    their indices consecutive (up or down) and their structure equal, as one :class:`Block`: the
    first's path and node id, every symbol of the run, ``fold`` its label. An ``opened`` (expanded)
    layer is never folded: expanding a fold's path opens its first layer, the rest stays folded."""
    out, i = [], 0
    while i < len(blocks):
        first, j, step = blocks[i], i + 1, None
        head = layer_of(first.path) if first.path not in opened and is_numbered(first.path) else None
        shape = _structure(first) if head else None
        while head and j < len(blocks):
            now, before = layer_of(blocks[j].path), layer_of(blocks[j - 1].path)
            d = now[1] - before[1] if now and now[0] == head[0] else 0
            if blocks[j].path in opened or d not in (1, -1) or step not in (None, d) or _structure(blocks[j]) != shape:
                break
            step, j = d, j + 1
        if j - i < FOLD_AT:
            out.append(first)
            i += 1
            continue
        run = blocks[i:j]
        idx = [layer_of(b.path)[1] for b in run]
        label = f"{head[0] + '.' if head[0] else ''}{min(idx)}–{max(idx)} × {len(run)}"
        out.append(Block(first.path, first.node_id, tuple(s for b in run for s in b.symbols), label, len(run)))
        i = j
    return out
