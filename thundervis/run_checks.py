"""What ``thundervis run`` runs and where it records, checked before anything starts: the script
(or module) exists and compiles, and the recording's path is new and writable. Each bad input is one
:class:`~thundervis.errors.UserError` sentence. :mod:`thundervis.runner` re-exports these.
"""
from __future__ import annotations

import datetime
import importlib.util
import os
import sys
from typing import Optional

from thundervis.errors import UserError

DEFAULT_DIR = "thundervis-runs"


def check_target(script: Optional[str], module: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """Check that the script exists and compiles (or the module can be found and compiles); return
    (absolute script path or None, source path to compile-check or None). Raises UserError."""
    if module:
        saved_path = sys.path[:]
        sys.path.insert(0, os.getcwd())  # as `python -m` does
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            raise UserError(f"cannot find module {module!r} ({e}).") from None
        finally:
            sys.path[:] = saved_path
        if spec is None:
            raise UserError(f"cannot find module {module!r}.")
        origin = spec.origin
        if spec.submodule_search_locations is not None:  # a package runs its __main__
            main = os.path.join(list(spec.submodule_search_locations)[0], "__main__.py")
            if not os.path.exists(main):
                raise UserError(f"{module!r} is a package and cannot be run directly (it has no __main__.py).")
            origin = main
        if origin and origin.endswith(".py"):
            _compile_check(origin)
        return None, origin
    path = os.path.abspath(script)
    if not os.path.exists(path):
        raise UserError(f"script {script} does not exist.")
    if os.path.isdir(path):
        raise UserError(f"{script} is a directory, not a Python script.")
    _compile_check(path)
    return path, path


def _compile_check(path: str) -> None:
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise UserError(f"cannot read {path} ({e.strerror}).") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise UserError(f"{path} has a syntax error at line {e.lineno}: {e.msg}.") from None
    except ValueError as e:  # null bytes
        raise UserError(f"{path} is not valid Python source ({e}).") from None


def default_output(stem: str, directory: str = DEFAULT_DIR, suffix: str = ".tvrec") -> str:
    """Return a new path ``DIRECTORY/<stem>-<YYYYmmdd-HHMMSS><suffix>`` that does not exist yet
    (``-2``, ``-3``... added before the suffix when it does); ``suffix`` ``.tvgroup`` names a
    group folder."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = os.path.join(directory, f"{stem}-{stamp}")
    path, n = base + suffix, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}{suffix}"
    return path


def check_output(path: str) -> str:
    """Create the output's folder if needed and check the file can be created; return its absolute
    path. Raises UserError when it exists or cannot be written."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise UserError(f"output {path} is a directory; give a file name such as run.tvrec.")
    if os.path.exists(path):
        raise UserError(f"output {path} already exists; choose another name or remove it.")
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the output folder {folder} ({e.strerror}).") from None
    probe = path + ".probe"
    try:
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as e:
        raise UserError(f"cannot write the recording to {path} ({e.strerror}).") from None
    return path
