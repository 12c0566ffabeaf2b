"""The plan of a region that runs as phases (:func:`.triton_plan.generate`'s ``phases`` mode): which
members each phase computes, a phase per generated part and a copy then a put per index_put /
scatter_add, the free (shape) ops each phase re-derives, and which values each phase reads that an
earlier one writes.
"""
from __future__ import annotations

from ..ir import BoundSymbol, TensorProxy
from . import triton_ops as ops
from .triton_codegen import FREE_OPS as FREE
from .part_checks import GrowingPart, part_generates
from .triton_codegen import Part, prim_name
from .triton_index import out_strides


class PhasePlan:
    """How a region runs as phases: which members each phase computes (``gen``: a generated part;
    ``copy`` then ``put``: an index_put / scatter_add, its destination copied first), re-deriving the
    free (shape) ops each phase reads, and which values each phase reads that an earlier one writes."""

    def __init__(self, members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str):
        self.members, self.device_kind = members, device_kind
        self.producer = {p.name: i for i, b in enumerate(members) for p in b.flat_outputs()}
        self.free = {i for i, b in enumerate(members) if prim_name(b) in FREE}
        self.written = {p.name: out_strides(p) for b in members for p in b.flat_outputs()}
        self.region_out = {p.name for p in outputs}
        # per gen step, its phase as GrowingPart grew it (None for copy and put steps)
        self.grown: list = []
        self.grower = GrowingPart(self)
        self.steps: list[tuple[str, list[int]]] = self._plan()  # (kind, own member indices)

    def closure(self, own) -> list[int]:
        """Return ``own`` with the free members they read, transitively, in member order."""
        need, stack = set(own), list(own)
        while stack:
            for x in self.members[stack.pop()].flat_inputs():
                j = self.producer.get(x.name)
                if j is not None and j not in need and j in self.free:
                    need.add(j)
                    stack.append(j)
        return sorted(need)

    def fits(self, own) -> bool:
        """Whether members ``own`` (and the free ones they read) generate as one part."""
        members = self.members
        returned = [p for i in own for p in members[i].flat_outputs() if p.name in self.region_out]
        # asked again for every member and every merge that grows the region: answered once
        return part_generates([members[i] for i in self.closure(own)], returned, self.device_kind,
                              read_strides=self.written)

    def _plan(self) -> list[tuple[str, list[int]]]:
        members, free, region_out = self.members, self.free, self.region_out
        plan: list[tuple[str, list[int]]] = []  # kinds: gen, copy, put
        cur: list[int] = []
        grower = self.grower  # fits(cur + [i]), asked as cur grows: cost independent of len(cur)
        grown = GrowingPart.EMPTY
        for i, b in enumerate(members):
            if i in free and not any(p.name in region_out for p in b.flat_outputs()):
                continue  # re-derived by each part that needs it
            if prim_name(b) in ops.PUTS:
                if cur:
                    plan.append(("gen", cur))
                    self.grown.append(grown)
                    cur = []
                plan += [("copy", [i]), ("put", [i])]
                self.grown += [None, None]
                grown = GrowingPart.EMPTY
                continue
            more = grower.grow(grown, i)
            if grower.generates(more):
                cur.append(i)
                grown = more
                continue
            if cur:
                plan.append(("gen", cur))
                self.grown.append(grown)
            cur = [i]
            grown = grower.grow(GrowingPart.EMPTY, i)
            if not grower.generates(grown):
                Part([members[j] for j in self.closure(cur)], [], self.device_kind,
                     read_strides=self.written).run()  # raises why
        if cur:
            plan.append(("gen", cur))
            self.grown.append(grown)
        return plan

    def reads_after(self) -> list[set[str]]:
        """Return, per step, the values it reads that an earlier step must write."""
        members, out = self.members, []
        for kind, own in self.steps:
            syms = [members[j] for j in self.closure(own)]
            if kind == "copy":
                syms = [members[j] for j in free_closure(members[own[0]], self.producer, self.free, members)]
                syms.append(members[own[0]])
            inside = {p.name for s in syms for p in s.flat_outputs()}
            if kind == "copy":
                inside.discard(members[own[0]].outputs.name)
            out.append({p.name for s in syms for p in s.flat_inputs()} - inside)
        return out


def free_closure(b: BoundSymbol, producer: dict, free: set, members: list) -> list[int]:
    """Return the free (shape) members ``b`` reads, transitively, in member order."""
    need, stack = set(), [b]
    while stack:
        for x in stack.pop().flat_inputs():
            j = producer.get(x.name)
            if j is not None and j not in need and j in free:
                need.add(j)
                stack.append(members[j])
    return sorted(need)
