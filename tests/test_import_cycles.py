"""No import cycles anywhere in the package, function-level imports included.

grimp (installed with import-linter) builds the import graph of every part (``thundervis``, its
compiler, TUI and notebook extension, which are sub-package roots: see test_import_contracts.py);
an import inside a function is an edge like any other. Any strongly connected component of more
than one module is a cycle, listed with the imports that close it.
"""
from __future__ import annotations

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
