"""Provenance from FX node metadata: user source lines and module paths.

A notebook cell's code lives in a file named after a hash of its text (ipykernel:
``/tmp/ipykernel_123/1422955898.py``; IPython: ``<ipython-input-7-...>``); :func:`cell_file` names it
``cell [N]`` after its execution count instead, as the notebook shows it, so views read
``cell [3]:16``. The cell's text is registered in :mod:`linecache` under that name too, so the
recording stores it like a file's.
"""
from __future__ import annotations

import functools
import linecache
import os
import re
import sys
from typing import Optional

import torch

from .ir import SourceInfo

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n(?P<code>[^\n]*)')
# torch's installed package folder, ending in a separator (the one owner: the runner, the collective
# watcher and source attribution all tell torch's own frames by it).
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Our own packages' folders (in a source checkout; installed, they are library files anyway).
_OUR_PACKAGES = tuple(os.path.join(_OUR_DIR, d) + os.sep for d in ("compiler", "thundervis", "tui", "notebook_ext"))


def _is_library_file(path: str) -> bool:
    p = os.path.abspath(path)
    return p.startswith(TORCH_DIR) or "site-packages" in p or "/lib/python3" in p


def cell_file(path: str) -> str:
    """Return ``cell [N]`` for the file of a notebook cell run as execution ``N`` in this process's
    IPython (ipykernel or a plain IPython shell), else ``path`` unchanged. IPython is not imported:
    without it in ``sys.modules`` there is no cell."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None) if ipython is not None else None
    try:
        shell = get() if get is not None else None
        number = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(path)
    except Exception:  # a shell of another kind: the path stays
        return path
    if not isinstance(number, int) or isinstance(number, bool):
        return path
    name = f"cell [{number}]"
    entry = linecache.cache.get(path)
    if entry is not None and name not in linecache.cache:
        # lines and size as IPython registered them; mtime None: checkcache never drops it
        linecache.cache[name] = (entry[0], None, list(entry[2]), name)
    return name


def parse_stack_trace(stack_trace: Optional[str], module: str = "") -> Optional[SourceInfo]:
    """Return the innermost user frame of an FX ``stack_trace`` as a :class:`SourceInfo`.

    Frames inside torch or other installed packages are skipped; when only those exist the innermost
    frame is kept, so every op has some location.
    """
    if not stack_trace:
        return None
    frame = _innermost_frame(stack_trace, os.getcwd())
    if frame is None:
        return None
    file, line, code, function = frame
    return SourceInfo(file=cell_file(file), line=line, code=code, module=module, function=function)


@functools.lru_cache(maxsize=8192)
def _innermost_frame(stack_trace: str, cwd: str) -> Optional[tuple[str, int, str, str]]:
    """Return (file, line, code, function) of the frame :func:`parse_stack_trace` picks, or None.
    Memoised: the ops of one source line share one stack trace, and telling library frames apart
    for every op was most of an acquisition. ``cwd`` is in the key because a relative path's
    folder (so whether it is a library's) depends on it."""
    frames = list(_FRAME.finditer(stack_trace))
    if not frames:
        return None
    user = [f for f in frames if not _is_library_file(f.group("file"))]
    f = (user or frames)[-1]
    return f.group("file"), int(f.group("line")), f.group("code").strip(), f.group("func").strip()


# The root object a module path starts from, however the model reached the compiled frame:
# L['self'] (torch.compile(model)), L['m'] / L['args'][0] / L['kwargs']['model'] (a function taking the
# model), G['model'] (a global the function closes over), or a bare self / args[0] / fn.
_ROOT = re.compile(r"^(?:(?:L|G)(?:\[[^\]]*\])+|(?:self|fn|args|kwargs)(?:\[[^\]]*\])*)(?:\.|$)")


_FOREIGN_ROOT = "G['__import_"


@functools.lru_cache(maxsize=8192)  # pure, and every op of a module asks for the same path
def _clean_module_path(path: str) -> str:
    """Return a module path relative to the model, e.g. ``layers.0.attn`` for Dynamo's
    ``getattr(L['self'].layers, '0').attn``, whichever way the model was called."""
    while True:
        m = re.search(r"getattr\(([^()]+), '([^']+)'\)", path)
        if not m:
            break
        path = path[: m.start()] + f"{m.group(1)}.{m.group(2)}" + path[m.end():]
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path.strip())
    path = _ROOT.sub("", path, count=1)
    path = re.sub(r"\[(?:'([^']*)'|(\d+))\]", lambda m: "." + (m.group(1) if m.group(1) is not None else m.group(2)), path)
    return path.strip(".")


def module_path(meta: dict) -> str:
    """Return the dotted module path of a node from ``nn_module_stack`` / ``fwd_nn_module_stack``,
    relative to the model (the root module itself is ``""``)."""
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack")
    if not stack:
        return ""
    try:
        paths = [str(v[0] if isinstance(v, tuple) else v) for v in stack.values()]
    except Exception:
        return ""
    # A module reached through a Python module's global (transformers 5 wraps apply_rotary_pos_emb
    # in one: G['__import_transformers...'].apply_rotary_pos_emb) is no part of the model: the op
    # belongs to the model module that called it, else every layer's rotary ops share one "module".
    paths = [p for p in paths if not p.startswith(_FOREIGN_ROOT)]
    return _clean_module_path(paths[-1]) if paths else ""


def call_site(skip: tuple[str, ...] = ()) -> Optional[SourceInfo]:
    """Return the innermost frame of the current Python stack that is user code (not torch, not an
    installed package, not thundervis, not a file in ``skip``), or None.

    Called while Dynamo compiles a graph, that is the line that called the compiled model or
    function: the only user line there is when every op of the graph comes from library code (an
    ``nn.Sequential`` of torch modules, whose FX stack traces are empty).
    """
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        cell = cell_file(path)
        if cell != path or not (_is_library_file(path) or os.path.abspath(path).startswith(_OUR_PACKAGES)
                                or path in skip or path.startswith("<")):
            line = frame.f_lineno
            return SourceInfo(file=cell, line=line, code=linecache.getline(path, line).strip(),
                              function=frame.f_code.co_name)
        frame = frame.f_back
    return None


def source_of(meta: dict, fallback: Optional[SourceInfo] = None) -> Optional[SourceInfo]:
    """Return the :class:`SourceInfo` for an FX node's ``meta`` dict: its innermost user frame, else
    ``fallback`` (the graph's call site) with the node's module path, else None."""
    mod = module_path(meta)
    info = parse_stack_trace(meta.get("stack_trace"), mod)
    if info is None and fallback is not None:
        return SourceInfo(file=fallback.file, line=fallback.line, code=fallback.code, module=mod,
                          function=fallback.function)
    if info is None and mod:
        return SourceInfo(file="", line=0, module=mod)
    return info
