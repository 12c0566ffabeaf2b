"""The garbage collector while we compile (compiler.heap_freeze) and ``thundervis run``'s freeze of
the imports (runner._freeze_if_cli): nothing of the user's is ever kept from a collection."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import pytest

from thundervis.compiler import heap_freeze


class _Node:
    pass


def _cycle():
    """Return a weak reference to a two-object cycle that is garbage once this returns."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_compiling_spaces_young_collections_and_restores_the_thresholds():
    before = gc.get_threshold()
    with heap_freeze.compiling():
        assert gc.get_threshold()[0] == max(before[0], heap_freeze.COMPILE_GEN0)
        # full collections wait for the compile's end (its live traces would set them off repeatedly)
        assert gc.get_threshold()[1:] == (before[1], max(before[2], heap_freeze.COMPILE_GEN2))
        with heap_freeze.compiling():  # a compile inside a compile: the outer exit restores
            pass
        assert gc.get_threshold()[0] == max(before[0], heap_freeze.COMPILE_GEN0)
        assert gc.get_freeze_count() == 0  # it freezes nothing: the user's model exists now
        ref = _cycle()
        gc.collect()
        assert ref() is None  # cyclic garbage made while compiling is still collected
    assert gc.get_threshold() == before


def test_compiling_keeps_automatic_collection_off_when_it_was_off():
    before = gc.get_threshold()
    gc.set_threshold(0, *before[1:])
    try:
        with heap_freeze.compiling():
            assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


def test_no_freeze_when_run_in_process():
    from thundervis.runner import _freeze_if_cli
    assert _freeze_if_cli() is False  # pytest's objects exist: freezing them could leak them
    assert gc.get_freeze_count() == 0


@pytest.mark.slow
def test_thundervis_run_freezes_before_the_script_and_still_collects_its_cycles(tmp_path):
    script = tmp_path / "cycles.py"
    script.write_text(textwrap.dedent("""
        import gc, sys, weakref
        import torch
        frozen = gc.get_freeze_count()
        class Node: pass
        model = torch.nn.Linear(2, 2)
        model.me = model  # the user's own object, in a cycle, made after the freeze
        ref = weakref.ref(model)
        del model
        gc.collect()
        print("frozen", frozen, "collected", ref() is None)
        sys.exit(0 if frozen > 1000 and ref() is None else 3)
    """))
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", "--out",
                          str(tmp_path / "r.tvrec"), str(script)], capture_output=True, text=True,
                         env=env, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "collected True" in out.stdout
    assert "leaked" not in out.stderr  # unfrozen at the end: extension types are torn down normally
