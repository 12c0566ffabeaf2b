"""Keep the garbage collector off torch's heap while we compile.

A cold compile allocates millions of short-lived objects; each of CPython's full collections it sets
off walks every tracked object in the process, and after ``import torch`` (plus transformers) that
is mostly torch's own import-time heap: modules, functions, op overloads, none of which ever becomes
garbage. ``gc.freeze()`` moves every object that exists at the call into a permanent generation
that collections skip; it moves no object that is created later.

Under ``thundervis run``, :func:`freeze_imports` runs once, after our imports and torch's, before
the user's script: only what exists then is frozen (interpreter and library state that lives as
long as the process); everything the script creates, its model and its cycles included, is created
after the freeze and collected as usual. The run unfreezes at its end. Called in-process (tests, a
notebook) the caller's objects exist already and could become cyclic garbage that is never
collected: no freeze there (``runner._freeze_if_cli``).

The freeze shrinks each full collection but, as CPython schedules a full collection once the
objects promoted since the last one reach a quarter of the (now smaller) unfrozen old generation,
it also makes them more frequent. What makes a cold compile pay for them is premature promotion:
:func:`compiling` (the backend, ``thundervis.jit``, ``thundervis run`` alike) spaces the young
collections while we compile, so that a compile's temporaries die before a collection can promote
them. It freezes nothing: the user's model exists during a compile.
"""
from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0  # compiles in progress (a dynamic-shape graph compiles inside another compile)
_saved: tuple = ()  # the thresholds to restore at depth 0

# Container allocations between two young collections while we compile (CPython's default: 700).
# A young collection promotes whatever is alive at that moment; a compile's temporaries die within
# a few thousand allocations, so at 700 many are promoted, counted toward the next full collection
# and walked by it with all of torch's heap (0.3-0.5 CPU-s each). At 50,000 at most that many
# objects wait for their collection: a few MB, during a compile only.
COMPILE_GEN0 = 50_000
# Young-generation collections between two full ones while we compile (CPython's default: 10). A
# compile's live data (every pass's trace) grows the old generation by more than the quarter that
# makes CPython run a full collection, so at 10 full collections kept landing inside our passes,
# each walking the whole growing heap (at 40 layers 6 of them, 5.5 CPU-s, 1.1 of it inside
# decompose: its cost per symbol looked 3.7x at 80 layers). At 1000 none runs during a compile;
# the next one after it finds the compile's garbage.
COMPILE_GEN2 = 1_000


def freeze_imports() -> int:
    """Freeze every object alive now (call it before any user code runs; undo it with
    ``gc.unfreeze()`` once the user's code is done, so that extension modules are torn down
    normally at exit); return how many objects the permanent generation holds afterwards."""
    # No gc.collect() first: it would walk all of torch's heap once more (about 0.3 CPU-s) to free
    # the little garbage the imports left, which the freeze instead keeps until the unfreeze.
    gc.freeze()
    return gc.get_freeze_count()


@contextlib.contextmanager
def compiling():
    """Context manager for one compile: young collections run every :data:`COMPILE_GEN0`
    allocations instead of every 700, and full ones at most every :data:`COMPILE_GEN2` middle ones,
    until the outermost exit restores the thresholds (a 0, automatic collection off, stays 0). No
    object is kept from any collection. Yields nothing."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            if _saved[0]:
                gc.set_threshold(max(_saved[0], COMPILE_GEN0), _saved[1], max(_saved[2], COMPILE_GEN2))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
