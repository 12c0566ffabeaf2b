"""Every Python package folder of the repository is listed in pyproject.toml's setuptools packages:
the list is explicit (the folders map onto one namespace through package-dir), so a package left out
installs from an editable checkout but is missing from a wheel."""
from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[1]
ROOTS = {"thundervis": "thundervis", "compiler": "thundervis.compiler", "tui": "thundervis.tui",
         "notebook_ext": "thundervis.notebook_ext"}


def _listed() -> set:
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^packages = \[(.*?)\]", text, re.M | re.S).group(1)
    return set(re.findall(r'"([\w.]+)"', block))


def test_every_package_folder_is_listed():
    found = set()
    for folder, name in ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name,) + rel))
    missing = sorted(found - _listed())
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_stylesheet_is_package_data():
    """A data file a package reads at run time (the TUI's ``.tcss``, the widget's JS and CSS) is
    matched by that package's ``[tool.setuptools.package-data]`` globs, so a wheel ships it."""
    import fnmatch
    import tomllib
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"].get("package-data", {})
    unshipped = []
    for folder, name in ROOTS.items():
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".tcss", ".js", ".css") or "node_modules" in path.parts:
                continue
            rel = path.relative_to(REPO / folder)
            package = ".".join((name,) + rel.parts[:-1])
            # a glob of a package covers files below it ("static/*.js"); find the package that owns it
            owners = [(pkg, globs) for pkg, globs in data.items()
                      if package == pkg or package.startswith(pkg + ".")]
            ok = any(fnmatch.fnmatch(str(path.relative_to(REPO / folder / pkg[len(name) + 1:].replace(".", "/")
                                                          if pkg != name else REPO / folder)), g)
                     for pkg, globs in owners for g in globs)
            if not ok:
                unshipped.append(str(path.relative_to(REPO)))
    assert (REPO / "tui" / "app.tcss").exists()
    assert not unshipped, f"add these to [tool.setuptools.package-data] in pyproject.toml: {unshipped}"
