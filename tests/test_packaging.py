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
