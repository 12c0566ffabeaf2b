"""Hostile strings and a recording that holds them everywhere (issue 22): every view must show them
as data, never as markup (Textual, Rich, DOT, HTML) nor as terminal control.

``PAYLOAD`` combines Textual/Rich markup that would run an app action or crash the parser, a Rich
hyperlink, a backslash (the end of a DOT or Python string), ESC and a bidi override, and HTML.
:func:`write_hostile_recording` writes a recording through the real writer with the payload in every
free-text field the writer stores (script, argv, cwd, pass names, symbol sources, notes, kernel
name, executor and source lines, failures, traceback, events, functions Dynamo ran eagerly).
:func:`poison_every_text_column`
then appends it to every TEXT column at the SQLite level (what a tampered file can hold).
"""
from __future__ import annotations

import contextlib
import os
import sqlite3

MARKUP = "[@click=app.quit]Q[/] [/] [b]B[/b] [link=https://evil.example]L[/link]"
PAYLOAD = MARKUP + " \\ \x1b[31mred\x1b]0;pwned\x07 \u202eabc <script>alert(1)</script> &amp; \\"


def write_hostile_recording(path: str, payload: str = PAYLOAD) -> str:
    """Write a finished (failed) recording at ``path`` with ``payload`` in every free-text field;
    return the path. Names that must stay identifiers (proxies, uids) are left valid."""
    from thundervis.compiler.ir import BoundSymbol, SourceInfo, Trace, TensorProxy
    from thundervis.compiler.serialize import _proxy_json, trace_to_dict
    from thundervis.recording import RecordingObserver

    a = TensorProxy("a", (4, 8), "float32", "cpu", (8, 1))
    b = TensorProxy("b", (8,), "float32", "cpu", (1,))
    t0 = TensorProxy("t0", (4, 8), "float32", "cpu", (8, 1))
    t1 = TensorProxy("t1", (4, 8), "float32", "cpu", (8, 1))
    src = SourceInfo(file=f"/nope/{payload} x.py", line=3, code=f"y = f(x)  # {payload}", module=f"fc{payload}")
    add = BoundSymbol("prims.add", (a, b), {}, t0, "f1", source=src, aten="aten.add.Tensor", note=payload)
    tanh = BoundSymbol("prims.tanh", (t0,), {}, t1, "f2", source=src, aten="aten.tanh.default")
    before = Trace("forward", (a, b), (add, tanh), (t1,), chain="forward", graph=0, pass_name="acquire")
    fused = BoundSymbol("triton_fusion_0", (a, b), {}, (t1,), "f3", origin=("f1", "f2"), source=src,
                        subsymbols=(add, tanh), executor="triton", note=payload)
    after = before.replace(symbols=(fused,), pass_name=f"fuse{payload}")
    region = Trace(f"triton_fusion_0{payload}", (a, b), (add, tanh), (t1,), chain="forward", graph=0,
                   pass_name="fuse")
    record = {"name": region.name, "executor": f"triton{payload}", "uid": "f3", "members": ["f1", "f2"],
              "ops": ["prims.add", "prims.tanh"], "code": f"# {payload}\n", "language": "python",
              "inputs": [_proxy_json(p) for p in region.inputs],
              "outputs": [_proxy_json(p) for p in region.flat_outputs()],
              "source_lines": [{"file": src.file, "line": 3, "code": payload, "module": payload,
                                "direction": "forward"}],
              "pass": f"fuse{payload}", "note": payload, "trace": trace_to_dict(region)}
    with RecordingObserver(path) as rec:
        rec.start_run(script=f"/tmp/train{payload}.py", module=None, argv=["train.py", payload],
                      cwd=f"/tmp/{payload}")
        rec.graph_started(0, {"n_inputs": 2, "n_nodes": 2, "reason": payload})
        rec.pass_done(0, "forward", 0, "acquire", before, 0.001, True)
        rec.pass_done(0, "forward", 1, f"fuse{payload}", after, 0.001, True)
        rec.pass_done(0, "forward", 2, "codegen", after.replace(pass_name="codegen"), 0.001, False)
        rec.kernels_built(0, "forward", [record])
        rec.note(f"event{payload}", {"why": payload})
        # functions Dynamo ran eagerly: no graph of theirs, shown in run summaries and banners
        rec.note("dynamo_frame_failed", {"function": f"fwd{payload}", "file": f"/nope/{payload}.py", "line": 3,
                                         "fail_type": payload, "reason": f"{payload}\n  Explanation: {payload}",
                                         "at_file": f"/nope/{payload}.py", "at_line": 4})
        rec.note("dynamo_recompile_limit", {"limit_type": payload, "limit": payload, "function": payload,
                                            "file": payload, "line": 5, "reason": payload})
        rec.chain_failed(0, "backward", f"boom {payload}", f"Traceback {payload}")
        rec.graph_finished(0, 0.01)
        rec.finish_run("failed", 1, f"Traceback (most recent call last):\n  {payload}\nError: {payload}")
    return path


def text_columns(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Return (table, column) of every TEXT column of the recording."""
    out = []
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        for row in conn.execute(f"PRAGMA table_info({table})").fetchall():
            if "TEXT" in (row[2] or "").upper():
                out.append((table, row[1]))
    return out


def poison_every_text_column(path: str, payload: str = PAYLOAD) -> int:
    """Append ``payload`` to every non-NULL value of every TEXT column of the recording at
    ``path`` (JSON columns too: they become invalid JSON); return how many columns changed."""
    n = 0
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        for table, col in text_columns(c):
            try:
                c.execute(f"UPDATE {table} SET {col} = {col} || ? WHERE {col} IS NOT NULL", (payload,))
                n += 1
            except sqlite3.IntegrityError:  # a CHECKed column (run.status): cannot hold it
                pass
    return n


def assert_no_markup_applied(text: str) -> None:
    """The payload's markup shows literally: its tags are still in ``text``."""
    assert "[@click=app.quit]" in text and "[/]" in text and "[b]B[/b]" in text, text[-2000:]


def assert_terminal_safe(text: str) -> None:
    """No escape sequence, bell, bidi control or OSC 8 hyperlink from the recording reached ``text``."""
    assert "\x1b]" not in text and "\x07" not in text and "\u202e" not in text, repr(text[-2000:])
    assert "\x1b[31m" not in text, repr(text[-2000:])


def hostile_copy(folder: str, name: str = "hostile.tvrec", poisoned: bool = False) -> str:
    """Write the hostile recording into ``folder`` (every TEXT column poisoned too if asked)."""
    path = write_hostile_recording(os.path.join(folder, name))
    if poisoned:
        poison_every_text_column(path)
    return path
