"""The dependency rules of DESIGN.md, checked: import-linter contracts from pyproject.toml, plus an
AST check that core modules import the views and UI toolkits only lazily (inside functions).

``thundervis.compiler`` / ``.tui`` / ``.notebook_ext`` are mapped from top-level folders
(setuptools ``package-dir``), so they are sub-package roots, which grimp's default package finder
refuses (``NotATopLevelModule``). :class:`_SubpackageRootFinder` accepts them; everything else is
import-linter's own configuration reading and contract checking.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import importlib.util
import pathlib

import pytest

try:  # a missing import-linter fails the suite: the architecture would go unchecked
    import importlinter.api  # noqa: F401  (configures import-linter on import)
except ImportError as e:  # pragma: no cover
    raise ImportError("import-linter is a dev dependency (pip install -e '.[dev]'); "
                      "tests/test_import_contracts.py must run") from e
from grimp.adaptors.packagefinder import ImportLibPackageFinder  # noqa: E402
from grimp.application.config import settings as grimp_settings  # noqa: E402
from importlinter.application import use_cases  # noqa: E402
from importlinter.application.app_config import settings as linter_settings  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
UI_AND_VIEWS = ("textual", "ipywidgets", "anywidget", "thundervis.tui", "thundervis.notebook_ext")


class _SubpackageRootFinder(ImportLibPackageFinder):
    """grimp's package finder, but a root may be a sub-package living in its own folder."""

    def determine_package_directories(self, package_name, file_system):
        spec = importlib.util.find_spec(package_name)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"Could not find package '{package_name}'.")
        return set(spec.submodule_search_locations)


@contextlib.contextmanager
def _subpackage_roots():
    old = grimp_settings.PACKAGE_FINDER
    grimp_settings.configure(PACKAGE_FINDER=_SubpackageRootFinder())
    try:
        yield
    finally:
        grimp_settings.configure(PACKAGE_FINDER=old)


_GRAPHS: dict = {}


@contextlib.contextmanager
def _extra_imports(edges):
    """Build import-linter's graph once per session and hand out copies with ``(importer,
    imported)`` edges added (to prove the contracts catch violations)."""
    builder = linter_settings.GRAPH_BUILDER
    original = builder.build

    def build(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        if key not in _GRAPHS:
            _GRAPHS[key] = original(*args, **kwargs)
        graph = copy.deepcopy(_GRAPHS[key])
        for importer, imported in edges:
            graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="import x")
        return graph
    builder.build = build
    try:
        yield
    finally:
        del builder.build


def _report(edges=()):
    use_cases._register_built_in_contract_types()  # what `lint-imports` does before checking
    options = use_cases.read_user_options(str(PYPROJECT))
    with _subpackage_roots(), _extra_imports(edges):
        return use_cases.create_report(options, cache_dir=None)


def _broken(report) -> dict[str, str]:
    return {contract.name: str(check.warnings or check.metadata)
            for contract, check in report.get_contracts_and_checks() if not check.kept}


@pytest.fixture(scope="module")
def report():
    return _report()


def test_contracts_are_configured():
    options = use_cases.read_user_options(str(PYPROJECT))
    ids = {c.get("id") for c in options.contracts_options}
    assert {"compiler-independent", "compiler-layers", "core-layers", "front-ends-independent",
            "front-ends-use-the-view-model", "views-read-through-the-reader", "sql-only-in-recording",
            "recording-layers"} <= ids
    assert "thundervis.compiler" in options.session_options["root_packages"]


def test_import_contracts_pass(report):
    assert not report.could_not_run, report.invalid_contract_options
    assert _broken(report) == {}
    assert report.contains_failures is False


def test_compiler_has_no_import_cycles(report):
    """No module of the compiler reaches itself through its imports (the layers contract proves
    it between layers; this checks every module, listed in a layer or not)."""
    graph = report.graph
    modules = sorted(m for m in graph.modules if m.startswith("thundervis.compiler."))
    cyclic = [m for m in modules
              if any(graph.find_shortest_chain(importer=s, imported=m) for s in graph.find_modules_directly_imported_by(m)
                     if s.startswith("thundervis.compiler.") and s != m)]
    assert cyclic == []


def test_graph_covers_every_part(report):
    modules = report.graph.modules
    for name in ("thundervis.cli", "thundervis.compiler.backend", "thundervis.compiler.passes.cse", "thundervis.tui"):
        assert name in modules
    assert "thundervis.compiler.ir" in report.graph.find_modules_directly_imported_by("thundervis.compiler.printer")


@pytest.mark.parametrize("importer, imported, contract_id", [
    ("thundervis.compiler.ir", "thundervis.cli", "compiler-independent"),
    ("thundervis.compiler.printer", "textual", "compiler-independent"),
    ("thundervis.cli", "textual", "core-no-ui-toolkits"),
    ("thundervis.__main__", "anywidget", "core-no-ui-toolkits"),
    ("thundervis.__main__", "thundervis.tui", "core-no-views"),
    ("thundervis.__main__", "thundervis.notebook_ext", "core-no-views"),
    ("thundervis.cli", "thundervis.compiler.ir", None),  # the allowed direction
    ("thundervis.compiler.ir", "thundervis.compiler.printer", "compiler-layers"),
    ("thundervis.compiler.executors.base", "thundervis.compiler.pipeline", "compiler-layers"),
    ("thundervis.compiler.printer", "thundervis.compiler.serialize", "compiler-layers"),  # siblings
    ("thundervis.compiler.passes.fuse", "thundervis.compiler.executors.base", None),
    ("thundervis.recording.reader", "thundervis.diff.runs", "core-layers"),
    ("thundervis.recording.reader", "thundervis.commands.show", "core-layers"),
    ("thundervis.diff.runs", "thundervis.cli", "core-layers"),
    ("thundervis.commands.ls", "thundervis.recording", None),
    ("thundervis.tui", "thundervis.notebook_ext", "front-ends-independent"),
    ("thundervis.tui", "sqlite3", "views-read-through-the-reader"),
    ("thundervis.notebook_ext", "thundervis.recording.writer", "views-read-through-the-reader"),
    ("thundervis.tui", "thundervis.commands.show", "views-read-through-the-reader"),
    ("thundervis.tui", "thundervis.recording", None),  # the one door
    ("thundervis.rerun", "sqlite3", "sql-only-in-recording"),
    ("thundervis.compiler.backend", "sqlite3", "sql-only-in-recording"),
    ("thundervis.recording.results", "sqlite3", None),
    ("thundervis.cli", "thundervis.tui", "core-no-views"),  # the CLI opens the TUI through thundervis.api
    ("thundervis.commands.view", "thundervis.tui.app", "core-no-views"),
    ("thundervis.diff", "thundervis.notebook_ext", "core-no-views"),  # no callable-module trick any more
    ("thundervis.api", "thundervis.tui.app", None),  # the one module that knows both
    ("thundervis.api", "thundervis.notebook_ext", None),
    # inside the store: group code above the reader, the reader above the stores
    ("thundervis.recording.reader", "thundervis.recording.group", "recording-layers"),
    ("thundervis.recording.reader", "thundervis.recording.rank_file", "recording-layers"),
    ("thundervis.recording.file_store", "thundervis.recording.reader", "recording-layers"),
    ("thundervis.recording.packed_store", "thundervis.recording.rank_store", "recording-layers"),
    ("thundervis.recording.typed", "thundervis.recording.file_store", "recording-layers"),
    ("thundervis.recording.group", "thundervis.recording.reader", None),
    # the compiler's layers: the executors <-> fuse cycle that the pipeline's pass list ended ...
    ("thundervis.compiler.executors.base", "thundervis.compiler.passes.fuse", "compiler-layers"),
    ("thundervis.compiler.passes.fuse", "thundervis.compiler.pipeline", "compiler-layers"),
    ("thundervis.compiler.ir", "thundervis.compiler.serialize", "compiler-layers"),
    ("thundervis.compiler.printer", "thundervis.compiler.serialize", "compiler-layers"),  # siblings
    ("thundervis.compiler.pipeline", "thundervis.compiler.passes.fuse", None),  # downwards is fine
    ("thundervis.compiler.trace_encoder", "thundervis.compiler.serialize", "compiler-layers"),  # the encoder is below
    ("thundervis.compiler.serialize", "thundervis.compiler.trace_encoder", None),
    # the modules split out of the reader, the view model and two executors keep their layers
    ("thundervis.recording.file_store", "thundervis.commands.show", "core-layers"),
    ("thundervis.recording.symbol_rows", "thundervis.diff.runs", "core-layers"),
    ("thundervis.recording.model_runs", "thundervis.cli", "core-layers"),
    ("thundervis.compiler.executors.nvfuser_support", "thundervis.compiler.pipeline", "compiler-layers"),
    ("thundervis.compiler.executors.triton_region", "thundervis.compiler.passes.fuse", "compiler-layers"),
    ("thundervis.commands.run_options", "thundervis.runner", None),  # commands use the tools
    ("thundervis.runner", "thundervis.commands.run_options", "core-layers"),
    # the front ends lay out the view model: no compiler, no store submodule, not each other
    ("thundervis.tui.panels", "thundervis.compiler.collectives", "front-ends-use-the-view-model"),
    ("thundervis.tui.styling", "thundervis.compiler.printer", "front-ends-use-the-view-model"),
    ("thundervis.notebook_ext.data", "thundervis.compiler", "front-ends-use-the-view-model"),
    ("thundervis.commands.bisect", "thundervis.compiler.triton_mode", "front-ends-use-the-view-model"),
    ("thundervis.commands.show", "thundervis.compiler.printer", "front-ends-use-the-view-model"),
    ("thundervis.commands.ls", "thundervis.recording.group", "front-ends-use-the-view-model"),
    ("thundervis.commands.ls", "thundervis.recording.reader", "front-ends-use-the-view-model"),
    ("thundervis.tui.comm_data", "thundervis.recording.collectives", "front-ends-use-the-view-model"),
    ("thundervis.notebook_ext.group_data", "thundervis.recording.group", "front-ends-use-the-view-model"),
    ("thundervis.commands.run_group", "thundervis.recording.group", "front-ends-use-the-view-model"),
    ("thundervis.tui.data", "thundervis.recording", None),  # the reader's public entry
    ("thundervis.tui.comm_data", "thundervis.present.collectives", None),
    ("thundervis.commands.bisect", "thundervis.compiler_api", None),  # the public door to the compiler
    ("thundervis.notebook_ext.data", "thundervis.compiler_api", None),
    ("thundervis.tui.data", "thundervis.rerun", "front-ends-use-the-view-model"),  # through compiler_api
    ("thundervis.commands.repro", "thundervis.repro", "front-ends-use-the-view-model"),
    ("thundervis.notebook_ext.data", "thundervis.bisect", "front-ends-use-the-view-model"),
    ("thundervis.commands.numerics", "thundervis.numerics_check", "front-ends-use-the-view-model"),
    ("thundervis.commands.profile_options", "thundervis.numerics_check", None),  # run arms the check
    ("thundervis.tui.data", "thundervis.present.numerics", None),
    ("thundervis.commands.run_options", "thundervis.compiler.executors", None),  # run drives the compiler
    ("thundervis.commands.profile_options", "thundervis.compiler.profiling", None),
    ("thundervis.commands.run", "thundervis.compiler.backend", None),
    ("thundervis.commands.run_group", "thundervis.recording.group_store", None),  # packs what it recorded
    ("thundervis.commands.ls", "thundervis.tui.app", "front-ends-independent"),
    ("thundervis.tui.app", "thundervis.commands.ls", "front-ends-independent"),
    ("thundervis.notebook_ext.widget", "thundervis.commands.show", "front-ends-independent"),
    ("thundervis.commands.view", "thundervis.api", None),  # which opens the TUI: an ignored edge
])
def test_contracts_catch_violations(importer, imported, contract_id):
    report = _report([(importer, imported)])
    ids = {contract.name for contract, check in report.get_contracts_and_checks() if not check.kept}
    if contract_id is None:
        assert ids == set()
    else:
        options = use_cases.read_user_options(str(PYPROJECT))
        name = next(c["name"] for c in options.contracts_options if c.get("id") == contract_id)
        assert name in ids


def _module_level_imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Return (line, module) for each import that runs when the module is imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []

    def visit(node, top: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue  # imports inside functions run lazily
            if isinstance(child, ast.Import):
                found.extend((child.lineno, a.name) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.lineno, child.module))
            visit(child, top)
    visit(tree, True)
    return found


def test_core_imports_views_and_toolkits_only_lazily():
    offenders = []
    for path in sorted((ROOT / "thundervis").rglob("*.py")):
        if path == ROOT / "thundervis" / "api.py":
            continue  # the user API: the one module that imports the views (nothing in core imports it)
        for line, mod in _module_level_imports(path):
            if any(mod == bad or mod.startswith(bad + ".") for bad in UI_AND_VIEWS):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert offenders == []
