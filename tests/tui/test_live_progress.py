"""A live recording's chain rows say where its compile is (``present.progress``)."""
from __future__ import annotations

from thundervis.recording.model import Chain, PassInfo
from thundervis.tui.panels import chain_row


def _chain(status: str, n: int) -> Chain:
    names = ["acquire", "decompose", "cse", "simplify", "dce", "claim", "fuse", "liveness", "codegen"]
    passes = tuple(PassInfo(0, "backward", i, names[i], 1.0, True, 10) for i in range(n))
    return Chain(0, "backward", status, None, passes)


def test_a_compiling_chain_row_shows_its_pass():
    assert "… live · pass 6/9 claim" in chain_row(_chain("compiling", 6), None).plain
    assert "live" not in chain_row(_chain("compiled", 9), None).plain
