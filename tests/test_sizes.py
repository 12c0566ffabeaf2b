"""Sizes that stay readable (issue 37): no module over 450 lines outside tests, and at most six
functions over 60 lines in the whole package, each listed below with why it stays whole.

Counts every ``.py`` file under the four source folders (``thundervis/``, ``compiler/``, ``tui/``,
``notebook_ext/``), and every ``.js`` file of the widget's front end (``notebook_ext/static/``,
the same 450-line cap); lines as ``wc -l`` counts them, a function from its ``def`` to its last line
(decorators excluded, nested functions counted on their own too).
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = ("thundervis", "compiler", "tui", "notebook_ext")
SCRIPT_FOLDER = "notebook_ext/static"  # the widget's front end, shipped as ES module parts
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
MAX_LONG_FUNCTIONS = 6

# Modules over the cap that other work of this round (issue 37) is changing while this test was
# written; each must come off the list when it fits (test_allowances_are_still_needed fails on an
# entry no longer needed, so the list only shrinks).
MODULE_ALLOWANCES: dict[str, str] = {}

# The functions that stay over 60 lines: each is one table or one algorithm that reads best whole.
LONG_FUNCTIONS: dict[str, str] = {
    "compiler/executors/triton_codegen.py:Part.op":
        "the Triton generator's op table: one branch per prim, each a line or two of Triton",
    "compiler/executors/nvfuser_op_lowerings.py:OpLowerings._elementwise":
        "nvFuser's elementwise op table, one branch per op",
    "compiler/executors/nvfuser_op_lowerings.py:OpLowerings._shape":
        "nvFuser's shape op table, one branch per op",
    "thundervis/diff/align.py:align_lines": "one alignment algorithm (anchors, then the gaps between them)",
    "compiler/acquire.py:fx_to_trace": "one walk over an FX graph's nodes, each kind of node a short branch",
    "compiler/executors/triton_plan.py:_module": "writes one kernel module: launcher signature, bodies, grid, in order",
}

# Functions over 60 lines not split yet (issue 37): a ratchet, not an allowance. Each entry names
# who splits it; the list may only shrink (test_allowances_are_still_needed), a new long function
# fails test_at_most_six_long_functions.
NOT_SPLIT_YET: dict[str, str] = {}


def _sources(root: pathlib.Path):
    for folder in FOLDERS:
        yield from sorted((root / folder).rglob("*.py"))


def module_lengths(root: pathlib.Path = ROOT) -> dict[str, int]:
    """Return {path relative to the repository: line count} of every source module."""
    return {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in _sources(root)}


def script_lengths(root: pathlib.Path = ROOT) -> dict[str, int]:
    """Return {path relative to the repository: line count} of every JavaScript part of the widget."""
    return {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
            for p in sorted((root / SCRIPT_FOLDER).rglob("*.js"))}


def over_the_cap(lengths: dict[str, int]) -> dict[str, int]:
    """Return the entries of ``lengths`` over :data:`MAX_MODULE_LINES` that no allowance covers."""
    return {p: n for p, n in lengths.items() if n > MAX_MODULE_LINES and p not in MODULE_ALLOWANCES}


def long_functions(root: pathlib.Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Return {``path:qualified name``: lines} of every function longer than ``limit`` lines."""
    found = {}
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef) and child.end_lineno - child.lineno + 1 > limit:
                        found[f"{rel}:{name}"] = child.end_lineno - child.lineno + 1
                    visit(child, name + ".")
                else:
                    visit(child, prefix)
        visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "")
    return found


def test_no_module_over_the_cap():
    over = over_the_cap(module_lengths())
    assert over == {}, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {over}"


def test_no_front_end_part_over_the_cap():
    lengths = script_lengths()
    assert "notebook_ext/static/widget.js" in lengths  # the count sees the front end at all
    over = over_the_cap(lengths)
    assert over == {}, f"widget JS parts over {MAX_MODULE_LINES} lines (split them by concern): {over}"


def test_at_most_six_long_functions():
    found = long_functions()
    assert len(LONG_FUNCTIONS) <= MAX_LONG_FUNCTIONS
    extra = {k: v for k, v in found.items() if k not in LONG_FUNCTIONS and k not in NOT_SPLIT_YET}
    assert extra == {}, f"functions over {MAX_FUNCTION_LINES} lines beyond the listed ones (split them): {extra}"


def test_allowances_are_still_needed():
    lengths, found = module_lengths(), long_functions()
    lengths.update(script_lengths())
    assert [p for p in MODULE_ALLOWANCES if lengths.get(p, 0) <= MAX_MODULE_LINES] == []
    assert [f for f in list(LONG_FUNCTIONS) + list(NOT_SPLIT_YET) if f not in found] == []
    assert not set(LONG_FUNCTIONS) & set(NOT_SPLIT_YET)


def test_the_counts_see_a_long_function(tmp_path):
    (tmp_path / "thundervis").mkdir()
    for folder in FOLDERS[1:]:
        (tmp_path / folder).mkdir()
    body = "".join(f"        x{i} = {i}\n" for i in range(60))
    (tmp_path / "thundervis" / "m.py").write_text(f"class C:\n    def f(self):\n{body}\n    def g(self):\n        pass\n")
    (tmp_path / "compiler" / "n.py").write_text("def h():\n" + "    pass\n" * 59)
    assert long_functions(tmp_path) == {"thundervis/m.py:C.f": 61}
    assert module_lengths(tmp_path) == {"thundervis/m.py": 65, "compiler/n.py": 60}


def test_the_cap_sees_a_long_front_end_part(tmp_path):
    static = tmp_path / SCRIPT_FOLDER
    static.mkdir(parents=True)
    (static / "long_view.js").write_text("const x = 1;\n" * (MAX_MODULE_LINES + 1))
    (static / "short_view.js").write_text("const y = 2;\n" * MAX_MODULE_LINES)
    (static / "widget.css").write_text("a {}\n" * (MAX_MODULE_LINES + 5))  # only the scripts are held to it
    lengths = script_lengths(tmp_path)
    assert lengths == {"notebook_ext/static/long_view.js": MAX_MODULE_LINES + 1,
                       "notebook_ext/static/short_view.js": MAX_MODULE_LINES}
    assert over_the_cap(lengths) == {"notebook_ext/static/long_view.js": MAX_MODULE_LINES + 1}
