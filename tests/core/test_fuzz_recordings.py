"""Fuzzing tampered recordings: every command on a mutated recording exits 0 or 2, never shows a
traceback and never runs anything the recording injects.

A small real recording (a tiny model compiled with the default executors, so it holds Triton
kernels) is made once per module. Each example copies it and mutates it at the SQLite level the way
a hostile or damaged file could: symbol names, kwarg keys and values, argument values, kernel names,
source text, printed text and the JSON structure of pass and kernel IR. Then ``ls``, ``show``,
``diff``, ``lineage``, ``dot``, ``rerun`` and ``repro`` run in-process (``thundervis.cli.main``) and
the written repro script runs in a subprocess. Every injected command would create the canary file;
it must never appear.

``rerun`` may also exit 1: all executors ran and failed, which is a result it prints, not a crash.
Bounded for CI: a few dozen examples, no deadline, derandomized; repro scripts with the same text
run once.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zlib

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from core_helpers import stored_text, write_script  # noqa: E402
from thundervis.recording import open_recording  # noqa: E402

TINY = """
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return (torch.tanh(self.fc(x)) * 0.5).sum()  # LINE_TINY

    torch.manual_seed(0)
    tiny = torch.compile(Tiny())
    tiny(torch.randn(2, 4)).backward()
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(recording path, canary path, a uid, a FILE:LINE) of one small real run."""
    from thundervis.runner import check_output, run_target
    folder = tmp_path_factory.mktemp("fuzzbase")
    script = write_script(folder, "tiny.py", TINY, with_model=False)
    out = check_output(os.path.join(str(folder), "tiny.tvrec"))
    result = run_target(script=script, module=None, args=[], out=out, executors=None)
    assert result.exit_code == 0, result
    with sqlite3.connect(result.path) as c:
        kernels = c.execute("SELECT name FROM kernels").fetchall()
    with open_recording(result.path) as rec:  # schema 4: symbol rows are listed per pass
        uid, line = next((s.uid, s.source.line) for s in rec.symbols(rec.graphs()[0].id, "forward", 0)
                         if s.source is not None and s.source.line)
    assert kernels, "the tiny run built no kernel"
    canary = str(folder / "canary")
    return result.path, canary, uid, f"tiny.py:{line}"


def injections(canary: str) -> list[str]:
    """Strings that run ``touch canary`` wherever they would end up as code."""
    cmd = f"touch {canary}"
    return [
        f"__import__('os').system({cmd!r})",
        f"x\nimport os; os.system({cmd!r})\n#",
        f"'); import os; os.system({cmd!r}); ('",
        f'"""\nimport os; os.system({cmd!r})\n"""',
        f"\\\nimport os; os.system({cmd!r})",
        "torch.os.system", "os.system", "torch.ops.load_library", "aten.from_file.default",
        "builtins.exec", "prims.system", "triton_fusion_0\nimport os",
        "\x1b]0;pwned\x07\x1b[2J\u202e",
    ]


def _paths(node, out, parent=None, key=None):
    """Collect (container, key) of every value in a JSON tree."""
    if parent is not None:
        out.append((parent, key))
    if isinstance(node, dict):
        for k, v in node.items():
            _paths(v, out, node, k)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _paths(v, out, node, i)
    return out


def _symbols(node, out):
    """Collect every symbol dict (it has a "sym" and a "uid") of a trace JSON tree."""
    if isinstance(node, dict):
        if "sym" in node and "uid" in node:
            out.append(node)
        for v in node.values():
            _symbols(v, out)
    elif isinstance(node, list):
        for v in node:
            _symbols(v, out)
    return out


def _mutate_json(data, text: str, canary: str) -> str:
    """Return ``text`` (a trace JSON) mutated by one drawn change."""
    try:
        tree = json.loads(text)
    except ValueError:
        return text
    strings = st.one_of(st.sampled_from(injections(canary)), st.text(max_size=12))
    values = st.one_of(
        strings, st.integers(-3, 8), st.sampled_from([2 ** 63, -1.5, float("inf"), True, None]),
        st.sampled_from([{"D": "os"}, {"D": "float64"}, {"V": "cpu\nx"}, {"V": "cuda:0"}, {"Y": "__class__"},
                         {"M": "channels_last"}, {"P": "nowhere"}, {"Q": 1}, {"T": [1, {"L": []}]},
                         {"K": {"a\nb": 1}}, {"S": [0, 2, None]}, {"F": "nan"}, {"E": 1}, [], {}]))
    kind = data.draw(st.sampled_from(["sym", "kwarg_key", "kwarg_value", "value", "delete", "truncate",
                                      "wrap", "source", "aten", "deep"]), label="json mutation")
    syms = _symbols(tree, [])
    if kind == "truncate":
        return text[: data.draw(st.integers(0, max(0, len(text) - 1)), label="cut")]
    if kind == "deep":
        return "[" * 100_000 + "]" * 100_000
    if kind == "wrap":
        return json.dumps([tree])
    if kind in ("sym", "kwarg_key", "kwarg_value", "source", "aten") and syms:
        s = syms[data.draw(st.integers(0, len(syms) - 1), label="symbol")]
        if kind == "sym":
            s["sym"] = data.draw(strings, label="sym")
            if data.draw(st.booleans(), label="with command"):
                s["args"] = {"T": [f"touch {canary}"]}
                s.pop("aten", None)
        elif kind == "kwarg_key":
            s.setdefault("kwargs", {"K": {}}).setdefault("K", {})[data.draw(strings, label="key")] = \
                data.draw(values, label="value")
        elif kind == "kwarg_value":
            kw = s.setdefault("kwargs", {"K": {}}).setdefault("K", {})
            key = data.draw(st.sampled_from(sorted(kw) + ["dim", "alpha", "rounding_mode", "dtype", "keepdim"]),
                            label="existing key")
            kw[key] = data.draw(values, label="value")
        elif kind == "source":
            s["source"] = {"file": data.draw(strings, label="file"), "line": data.draw(st.integers(-1, 99)),
                           "code": data.draw(strings, label="code"), "module": data.draw(strings, label="module")}
        else:
            s["aten"] = data.draw(strings, label="aten")
        return json.dumps(tree)
    paths = _paths(tree, [])
    if not paths:
        return text
    parent, key = paths[data.draw(st.integers(0, len(paths) - 1), label="node")]
    if kind == "delete" and isinstance(parent, dict):
        del parent[key]
    else:
        parent[key] = data.draw(values, label="value")
    return json.dumps(tree)


def _mutate(data, path: str, canary: str) -> None:
    """Apply one drawn mutation to the recording at ``path``."""
    strings = st.one_of(st.sampled_from(injections(canary)), st.text(max_size=12))
    # Kernel IR weighs most: it is what rerun and repro turn into code.
    where = data.draw(st.sampled_from(["kernel_json", "pass_json", "kernel_json", "kernel_name", "kernel_json",
                                       "printed", "symbols", "run", "kernel_code", "pass_json", "json_column",
                                       "delta", "symbol_list"]),
                      label="where")
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        if where == "pass_json":
            rows = c.execute("SELECT graph_id, chain, idx, trace_json FROM passes WHERE trace_json IS NOT NULL"
                             " AND delta_base IS NULL ORDER BY graph_id, chain, idx").fetchall()
            g, ch, i, text = rows[data.draw(st.integers(0, len(rows) - 1), label="pass")]
            text = stored_text(text)
            c.execute("UPDATE passes SET trace_json=? WHERE graph_id=? AND chain=? AND idx=?",
                      (_mutate_json(data, text, canary), g, ch, i))
        elif where == "kernel_json":
            # The first kernel: the one rerun and repro rebuild below.
            kid, text = c.execute("SELECT id, trace_json FROM kernels ORDER BY id LIMIT 1").fetchone()
            text = stored_text(text)
            c.execute("UPDATE kernels SET trace_json=? WHERE id=?", (_mutate_json(data, text, canary), kid))
        elif where == "kernel_name":
            c.execute("UPDATE kernels SET name=? WHERE id=(SELECT min(id) FROM kernels)",
                      (data.draw(strings, label="kernel name"),))
        elif where == "json_column":  # the other JSON columns: wrong types, broken text, deep nesting
            table, col = data.draw(st.sampled_from(JSON_COLUMNS), label="json column")
            value = data.draw(st.sampled_from(["[" * 100_000 + "]" * 100_000, "5", '"x"', "{}", "[1,2", "null",
                                               "[5]", '[{"file": 5, "line": "x"}]', '{"a": [1]}']), label="json")
            c.execute(f"UPDATE {table} SET {col}=?", (value,))
        elif where == "kernel_code":
            c.execute("UPDATE kernels SET code=?", (data.draw(strings, label="code"),))
        elif where == "printed":
            c.execute("UPDATE passes SET printed=? WHERE printed IS NOT NULL", (data.draw(strings, label="text"),))
        elif where == "symbols":  # schema 4: rows stored once (symbol_rows), locations in symbol_sources
            col = data.draw(st.sampled_from(["sym", "code", "file", "module", "uid", "note"]), label="column")
            table = "symbol_sources" if col in ("code", "file", "module") else "symbol_rows"
            c.execute(f"UPDATE {table} SET {col}=?", (data.draw(strings, label="value"),))
        elif where == "delta":  # a pass's delta chain: loops, later or missing bases, broken operations
            rows = c.execute("SELECT graph_id, chain, idx, delta_base FROM passes WHERE delta_base IS NOT NULL"
                             " ORDER BY graph_id, chain, idx").fetchall()
            if rows:
                g, ch, i, b = rows[data.draw(st.integers(0, len(rows) - 1), label="delta pass")]
                how = data.draw(st.sampled_from(["self", "later", "negative", "drop base", "ops", "text"]), label="how")
                key = "WHERE graph_id=? AND chain=? AND idx=?"
                if how == "drop base":
                    c.execute(f"DELETE FROM passes {key}", (g, ch, b))
                elif how in ("ops", "text"):
                    value = data.draw(st.sampled_from(['[[0, 5000000]]', '[[-1, 2]]', '[5]', '{"a": 1}', "[[0]]",
                                                       json.dumps([injections(canary)[0]])]), label="delta")
                    c.execute(f"UPDATE passes SET {'trace_json' if how == 'ops' else 'printed'}=? {key}",
                              (zlib.compress(value.encode()), g, ch, i))
                else:
                    c.execute(f"UPDATE passes SET delta_base=? {key}",
                              ({"self": i, "later": i + 1, "negative": -3}[how], g, ch, i))
        elif where == "symbol_list":  # a pass's list of symbol row ids
            value = data.draw(st.sampled_from([b"", b"x", zlib.compress(b"1,2,x"), zlib.compress(b"0,-5"),
                                               zlib.compress(b"99999999"), zlib.compress(b"1," * 1000)]), label="ids")
            c.execute("UPDATE pass_symbols SET rows=? WHERE rowid=(SELECT min(rowid) FROM pass_symbols)", (value,))
        else:
            col = data.draw(st.sampled_from(["script", "argv", "traceback", "device", "status"]), label="run column")
            value = data.draw(strings, label="value")
            try:
                c.execute(f"UPDATE run SET {col}=?", (value,))
            except sqlite3.IntegrityError:  # status is CHECKed
                pass


JSON_COLUMNS = [("run", "argv"), ("run", "executors"), ("kernels", "inputs"), ("kernels", "outputs"),
                ("kernels", "source_lines"), ("kernels", "members"), ("kernels", "ops"), ("kernels", "record"),
                ("passes", "meta"), ("graphs", "info"), ("symbol_rows", "origin"), ("events", "data")]


def _cli(*argv) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    from thundervis.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse refusing an argument (a kernel name starting with "-")
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


_SCRIPTS_RUN: set = set()


@pytest.mark.slow
@settings(max_examples=36, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_tampered_recordings_never_run_code_nor_crash(base, tmp_path_factory, data):
    src, canary, uid, source = base
    folder = tmp_path_factory.mktemp("fuzz")
    path = str(folder / "mutated.tvrec")
    shutil.copyfile(src, path)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        _mutate(data, path, canary)
    with contextlib.closing(sqlite3.connect(path)) as c:
        names = [r[0] for r in c.execute("SELECT name FROM kernels ORDER BY id")]
    kernel = names[0] if names else "triton_fusion_0"
    script = str(folder / "repro.py")
    commands = [
        ["ls", path], ["ls", path, "--json"], ["show", path, "--plain"], ["show", path, "--uids"],
        ["diff", path, "--plain"], ["diff", path, "--side-by-side", "--plain"], ["diff", path, src],
        ["lineage", path, "--uid", uid], ["lineage", path, "--source", source],
        ["dot", path, "-o", str(folder / "g.dot")],
        ["rerun", "--executor", "triton", "--iters", "1", path, "--", kernel],
        ["repro", "-o", script, path, "--", kernel],
    ]
    for argv in commands:
        code, out, err = _cli(*argv)
        allowed = (0, 1, 2) if argv[0] == "rerun" and " failed " in out else (0, 2)
        assert code in allowed, (argv, code, out[-2000:], err[-2000:])
        assert "Traceback" not in err, (argv, err[-3000:])
        assert not os.path.exists(canary), f"{argv} ran an injected command"
    if os.path.exists(script):
        text = open(script, encoding="utf-8").read()
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest not in _SCRIPTS_RUN:
            _SCRIPTS_RUN.add(digest)
            env = {**os.environ, "TRITON_INTERPRET": "1"}
            proc = subprocess.run([sys.executable, script, "--iters", "1"], capture_output=True, text=True,
                                  timeout=300, cwd=str(folder), env=env)
            assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
            assert "RESULT" in proc.stdout
    assert not os.path.exists(canary), "the repro script ran an injected command"


def _first_member(tree: dict) -> dict:
    """The first op of a kernel IR (inside its fusion symbol when there is one)."""
    first = tree["symbols"][0]
    return first["subsymbols"][0] if first.get("subsymbols") else first


@pytest.mark.slow
@pytest.mark.parametrize("field", ["sym", "kwarg_key", "kwarg_value", "arg"])
def test_every_injection_in_the_kernel_ir_is_refused(base, tmp_path, field):
    """Systematically, beside the random search: each injected string in each field of the kernel IR
    that rerun and repro rebuild from. Refused (exit 2) or harmless (exit 0); never run."""
    src, canary, _, _ = base
    for n, evil in enumerate(injections(canary)):
        path = str(tmp_path / f"{field}{n}.tvrec")
        shutil.copyfile(src, path)
        with contextlib.closing(sqlite3.connect(path)) as c, c:
            kid, name, text = c.execute("SELECT id, name, trace_json FROM kernels ORDER BY id LIMIT 1").fetchone()
            tree = json.loads(stored_text(text))
            op = _first_member(tree)
            if field == "sym":
                op["sym"], op["args"] = evil, {"T": [f"touch {canary}"]}
                op.pop("aten", None)
            elif field == "kwarg_key":
                op.setdefault("kwargs", {"K": {}})["K"][evil] = 1
            elif field == "kwarg_value":
                op.setdefault("kwargs", {"K": {}})["K"]["alpha"] = evil
            else:
                op["args"] = {"T": [evil] + op["args"]["T"][1:]}
            c.execute("UPDATE kernels SET trace_json=? WHERE id=?", (json.dumps(tree), kid))
        for argv in (["rerun", "--executor", "all", "--iters", "1", path, "--", name],
                     ["repro", "-o", str(tmp_path / f"r{n}.py"), path, "--", name]):
            code, out, err = _cli(*argv)
            assert code == 2, (field, evil, argv[0], code, out[-1000:], err[-1000:])
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
            assert not os.path.exists(canary), (field, evil, argv[0])
