"""Chain-call listeners hear a call's end in the reverse order they heard its start (the last told
of a start, innermost, hears its end first), and a failing listener never breaks the call."""
from __future__ import annotations

from thundervis.compiler import chain_calls


class _Heard:
    def __init__(self, name, log, fail=False):
        self.name, self.log, self.fail = name, log, fail

    def chain_started(self, graph, chain):
        self.log.append(("start", self.name, graph, chain))
        if self.fail:
            raise RuntimeError("a broken listener")

    def chain_finished(self, graph, chain):
        self.log.append(("end", self.name, graph, chain))
        if self.fail:
            raise RuntimeError("a broken listener")


def test_listeners_hear_ends_in_the_reverse_order_of_starts():
    log = []
    a, b, c = _Heard("a", log), _Heard("b", log, fail=True), _Heard("c", log)
    previous = chain_calls.set_listener(a)
    chain_calls.add_listener(b)
    chain_calls.add_listener(c)
    try:
        chain_calls.started(3, "forward")
        chain_calls.finished(3, "forward")
    finally:
        chain_calls.remove_listener(c)
        chain_calls.remove_listener(b)
        chain_calls.set_listener(previous)
    assert [(e, n) for e, n, _, _ in log] == [("start", "a"), ("start", "b"), ("start", "c"),
                                              ("end", "c"), ("end", "b"), ("end", "a")]
    assert {(g, ch) for _, _, g, ch in log} == {(3, "forward")}
    log.clear()
    chain_calls.started(0, "backward")  # removed: told no more
    chain_calls.finished(0, "backward")
    assert log == []
