"""Whether one kernel part generates, asked once per part (the checks the fuse pass repeats).

Growing a region one merge at a time asks the phase planner the same questions again: a region of
R ops plans its phases by asking, member after member, whether the current phase plus that member
still makes one :class:`.triton_codegen.Part`, and the next merge asks nearly all of them again.
Building a part is codegen; looking an answer up costs a key over the part's members. A part's
answer depends only on its member symbols (the same objects: the memo holds them, so their ids
stay theirs), the values it stores, the strides it reads values of the region at, the device
kind and whether it may scatter; that is the key. A refusal keeps its message, so the fusion
reason reads the same as when the part was built.

The phase planner grows its current phase one member at a time: :class:`GrowingPart` names each
grown phase by a token (the token of the phase it grew from and what the member added: its free
producers and their places, its returned values, the strides it reads at), so asking about one
more member costs the same whatever the size of the phase.
"""
from __future__ import annotations

import bisect
import itertools
import threading
from dataclasses import dataclass
from typing import Optional

from ..ir import BoundSymbol, TensorProxy
from .triton_region import Unfusable

_LIMIT = 50_000  # answers kept; past it the memo starts over
_memo: dict = {}
_steps: dict = {}  # (parent token, what a member added) -> (token, the members it names, kept alive)
_tokens = itertools.count(1)  # never reused: a token held across a reset of the memo just misses
_lock = threading.Lock()
stats = {"asked": 0, "built": 0, "ops": 0}  # ops: members of the parts built (codegen work)


def _key(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str,
         read_strides: dict, index_put: bool) -> tuple:
    reads = tuple((p.name, read_strides.get(p.name)) for b in members for p in b.flat_inputs())
    return (tuple(map(id, members)), tuple(outputs), reads, device_kind, index_put)


def part_inputs(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str,
                read_strides: Optional[dict] = None, index_put: bool = False) -> tuple[str, ...]:
    """Return the names of the values a part of ``members`` storing ``outputs`` reads from memory;
    raise :class:`Unfusable` (with the part's own message) when it does not generate."""
    from .. import faults
    from .triton_codegen import Part
    read_strides = read_strides or {}

    def build() -> tuple[str, ...]:
        stats["ops"] += len(members)
        part = Part(members, outputs, device_kind, read_strides=read_strides, index_put=index_put)
        part.run()
        for k, p in enumerate(outputs):
            part.store(k, p)
        return tuple(p.name for p in part.inputs)
    if faults.active_faults():  # a test fault changes what generates: never share its answers
        return build()
    key = _key(members, outputs, device_kind, read_strides, index_put)
    with _lock:
        stats["asked"] += 1
        hit = _memo.get(key)
    if hit is None:
        try:
            answer: object = build()
        except Unfusable as e:
            answer = Unfusable(str(e))
        with _lock:
            stats["built"] += 1
            _remember(key, (tuple(members), answer))  # the members kept alive: their ids stay theirs
    else:
        answer = hit[1]
    if isinstance(answer, Unfusable):
        raise Unfusable(str(answer))
    return answer


def part_generates(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str,
                   read_strides: Optional[dict] = None, index_put: bool = False) -> bool:
    """Return whether a part of ``members`` storing ``outputs`` generates (see :func:`part_inputs`)."""
    try:
        part_inputs(members, outputs, device_kind, read_strides, index_put)
    except Unfusable:
        return False
    return True


def _remember(key, value) -> None:
    """Keep ``value`` under ``key`` (the lock held); past the limit the memo starts over."""
    if len(_memo) + len(_steps) >= _LIMIT:
        _memo.clear()
        _steps.clear()
    _memo[key] = value


@dataclass(frozen=True)
class Grown:
    """One phase of :class:`GrowingPart`: its token, its members' indices (sorted, free producers
    included, and as a set), and the region outputs it returns."""
    token: int
    closure: tuple
    need: frozenset
    returned: tuple


class GrowingPart:
    """Grows a phase of ``plan`` (a :class:`.triton_phase_plan.PhasePlan`) one member at a time and
    answers whether it generates, as :meth:`.PhasePlan.fits` would: the Python work per member is
    independent of the phase's size (only flat copies of its index list grow with it)."""

    EMPTY = Grown(0, (), frozenset(), ())

    def __init__(self, plan):
        self.plan = plan

    def grow(self, g: Grown, i: int) -> Grown:
        """Return phase ``g`` with member ``i`` (and the free members it reads, transitively)."""
        plan, members = self.plan, self.plan.members
        new, stack = [] if i in g.need else [i], [i]
        seen = set(new)
        while stack:
            for x in members[stack.pop()].flat_inputs():
                j = plan.producer.get(x.name)
                if j is not None and j in plan.free and j not in g.need and j not in seen:
                    seen.add(j)
                    new.append(j)
                    stack.append(j)
        new.sort()
        closure = list(g.closure)
        for j in new:
            bisect.insort(closure, j)
        # each added member by its place in the grown phase, its object and the strides it reads at
        added = tuple((bisect.bisect_left(closure, j), id(members[j]),
                       tuple((p.name, plan.written.get(p.name)) for p in members[j].flat_inputs())) for j in new)
        ret = tuple(p for p in members[i].flat_outputs() if p.name in plan.region_out)
        step = (g.token, added, ret)
        with _lock:
            known = _steps.get(step)
            if known is None:
                known = (next(_tokens), tuple(members[j] for j in new))
                _steps[step] = known
        return Grown(known[0], tuple(closure), g.need | seen, g.returned + ret)

    def generates(self, g: Grown) -> bool:
        """Return whether phase ``g`` generates as one part (built once per token)."""
        try:
            self.inputs(g)
        except Unfusable:
            return False
        return True

    def inputs(self, g: Grown) -> tuple[str, ...]:
        """Return the names of the values phase ``g`` reads from memory (see :func:`part_inputs`);
        raise Unfusable when it does not generate. Built once per token."""
        from .. import faults
        plan = self.plan
        if faults.active_faults():
            return part_inputs([plan.members[j] for j in g.closure], list(g.returned), plan.device_kind,
                               read_strides=plan.written)
        key = ("grown", g.token, plan.device_kind)
        with _lock:
            stats["asked"] += 1
            hit = _memo.get(key)
        if hit is None:
            try:
                hit = part_inputs([plan.members[j] for j in g.closure], list(g.returned), plan.device_kind,
                                  read_strides=plan.written)
            except Unfusable as e:
                hit = Unfusable(str(e))
            with _lock:
                _remember(key, hit)
        if isinstance(hit, Unfusable):
            raise Unfusable(str(hit))
        return hit
