"""No import cycles anywhere in the package, function-level imports included.

Two independent graphs of every part (``thundervis``, its compiler, TUI and notebook extension):

- grimp's (installed with import-linter; the parts are sub-package roots: see
  test_import_contracts.py);
- this file's own AST walk over the source folders (``compiler/`` is ``thundervis.compiler``, and
  so on: the package-dir mapping of pyproject.toml), which takes every import statement anywhere in
  a file (inside functions, classes, ``try`` and ``if`` blocks; relative imports resolved against
  the module's package) and, unlike grimp, the dynamic imports whose target is written in the call:
  ``importlib.import_module("a.b")``, and ``import_module(f"a.b.{name}")`` /
  ``import_module(f"{__package__}.{name}")`` as an edge to every module under that prefix (the CLI
  loads its commands so: a command importing the CLI closes a cycle that no import statement shows).

Any strongly connected component of more than one module is a cycle, listed with the imports that
close it.
"""
from __future__ import annotations

import ast
import pathlib

import grimp
import pytest

from test_import_contracts import _subpackage_roots

ROOTS = ("thundervis", "thundervis.compiler", "thundervis.tui", "thundervis.notebook_ext")


@pytest.fixture(scope="module")
def graph():
    with _subpackage_roots():
        return grimp.build_graph(*ROOTS)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one module of the graph ``edges``
    (module -> modules it imports), each sorted; Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _edges(graph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _explain(graph, component: list[str]) -> str:
    lines = []
    for m in component:
        for i in sorted(graph.find_modules_directly_imported_by(m)):
            if i in component:
                detail = graph.get_import_details(importer=m, imported=i)
                where = detail[0]["line_number"] if detail else "?"
                lines.append(f"  {m}:{where} -> {i}")
    return "\n".join(lines)


def test_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_includes_function_level_imports(graph):
    # thundervis.api imports the notebook extension only inside show(): still an edge
    assert "thundervis.notebook_ext" in graph.find_modules_directly_imported_by("thundervis.api")


def test_no_import_cycles_in_the_package(graph):
    found = cycles(_edges(graph))
    assert found == [], "import cycles:\n" + "\n\n".join(_explain(graph, c) for c in found)


def test_an_added_back_edge_is_caught(graph):
    edges = _edges(graph)
    edges["thundervis.recording.file_store"].add("thundervis.recording.reader")
    assert any("thundervis.recording.reader" in c for c in cycles(edges))


# -- the AST walk ---------------------------------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Source folder -> installed package name (pyproject.toml's [tool.setuptools] package-dir).
PARTS = {"thundervis": "thundervis", "compiler": "thundervis.compiler", "tui": "thundervis.tui",
         "notebook_ext": "thundervis.notebook_ext"}


def source_modules(root: pathlib.Path = ROOT) -> dict[str, pathlib.Path]:
    """Return {installed module name: source file} for every ``.py`` file of the four parts."""
    out = {}
    for folder, name in PARTS.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join((name,) + parts)] = path
    return out


def _is_import_module(call: ast.Call) -> bool:
    f = call.func
    return bool(call.args) and ((isinstance(f, ast.Attribute) and f.attr == "import_module")
                                or (isinstance(f, ast.Name) and f.id in ("import_module", "__import__")))


def _dynamic_targets(arg: ast.expr, package: str, known) -> list[str]:
    """The modules an ``import_module(arg)`` call may load: a literal name, or every known module
    under the constant prefix of an f-string (``__package__`` as the module's package)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if not isinstance(arg, ast.JoinedStr):
        return []
    prefix = ""
    for part in arg.values:
        if isinstance(part, ast.Constant):
            prefix += part.value
        elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) \
                and part.value.id == "__package__" and not prefix:
            prefix += package
        else:
            break
    if not prefix.endswith("."):
        return []
    return [m for m in known if m.startswith(prefix)]


def imports_of(module: str, path: pathlib.Path, known) -> list[tuple[int, str]]:
    """Return ``(line, imported name)`` for every import in ``path`` (the source of ``module``),
    wherever it sits in the file; ``from a import b`` names ``a.b`` when that is a module, else ``a``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = ".".join(base[:len(base) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module
            for a in node.names:
                full = f"{source}.{a.name}"
                found.append((node.lineno, full if full in known else source))
        elif isinstance(node, ast.Call) and _is_import_module(node):
            found += [(node.lineno, m) for m in _dynamic_targets(node.args[0], package, known)]
    return found


def ast_import_graph(root: pathlib.Path = ROOT) -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    """Return the package's import graph from the AST walk (module -> the package's modules it
    imports; an import of a name inside a module counts as importing that module) and the line of
    one import per edge."""
    known = source_modules(root)
    edges: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], int] = {}
    for module, path in known.items():
        edges[module] = set()
        for line, name in imports_of(module, path, known):
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges[module].add(name)
                lines.setdefault((module, name), line)
    return edges, lines


@pytest.fixture(scope="module")
def ast_graph():
    return ast_import_graph()


def test_ast_walk_sees_every_part_and_function_level_imports(ast_graph):
    edges, lines = ast_graph
    assert {"thundervis.cli", "thundervis.compiler.backend", "thundervis.tui.app",
            "thundervis.notebook_ext.widget", "thundervis.compiler.passes.cse"} <= set(edges)
    # thundervis.api imports the views only inside functions; the CLI loads its commands by name
    assert {"thundervis.tui.launch", "thundervis.notebook_ext"} <= edges["thundervis.api"]
    assert "thundervis.commands.view" in edges["thundervis.cli"]
    # relative imports resolve against the package (``from ..ir import`` in an executor)
    assert "thundervis.compiler.ir" in edges["thundervis.compiler.executors.torch_executor"]


def test_ast_walk_resolves_imports(tmp_path):
    pkg = tmp_path / "thundervis"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "a.py").write_text("def f():\n    from .sub.b import x\n")
    (pkg / "sub" / "b.py").write_text("import importlib\n"
                                      "def g(n):\n    return importlib.import_module(f'{__package__}.{n}')\n")
    (pkg / "sub" / "c.py").write_text("class C:\n    def m(self):\n        from .. import a\n")
    for folder in ("compiler", "tui", "notebook_ext"):
        (tmp_path / folder).mkdir()
    edges, _ = ast_import_graph(tmp_path)
    assert edges["thundervis.a"] == {"thundervis.sub.b"}
    assert edges["thundervis.sub"] == {"thundervis.sub.b"}
    assert edges["thundervis.sub.b"] == {"thundervis.sub.c"}  # every module the prefix can name
    assert edges["thundervis.sub.c"] == {"thundervis.a"}
    assert cycles(edges) == [["thundervis.a", "thundervis.sub.b", "thundervis.sub.c"]]


def test_no_import_cycles_in_the_source(ast_graph):
    edges, lines = ast_graph
    found = cycles(edges)
    assert found == [], "import cycles:\n" + "\n\n".join(
        "\n".join(f"  {m}:{lines[m, i]} -> {i}" for m in c for i in sorted(edges[m]) if i in c) for c in found)


def test_the_ast_walk_catches_a_command_importing_the_cli(ast_graph):
    edges, _ = ast_graph
    edges = {m: set(e) for m, e in edges.items()}
    edges["thundervis.commands.view"].add("thundervis.cli")  # the cycle grimp missed (issue 37)
    assert any({"thundervis.cli", "thundervis.commands.view"} <= set(c) for c in cycles(edges))
