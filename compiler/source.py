"""Provenance from FX node metadata: user source lines and module paths."""
from __future__ import annotations

import os
import re
from typing import Optional

import torch

from .ir import SourceInfo

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n(?P<code>[^\n]*)')
_TORCH_DIR = os.path.dirname(torch.__file__)
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_library_file(path: str) -> bool:
    p = os.path.abspath(path)
    return p.startswith(_TORCH_DIR) or "site-packages" in p or "/lib/python3" in p


def parse_stack_trace(stack_trace: Optional[str], module: str = "") -> Optional[SourceInfo]:
    """Return the innermost user frame of an FX ``stack_trace`` as a :class:`SourceInfo`.

    Frames inside torch or other installed packages are skipped; when only those exist the innermost
    frame is kept, so every op has some location.
    """
    if not stack_trace:
        return None
    frames = list(_FRAME.finditer(stack_trace))
    if not frames:
        return None
    user = [f for f in frames if not _is_library_file(f.group("file"))]
    f = (user or frames)[-1]
    return SourceInfo(
        file=f.group("file"), line=int(f.group("line")), code=f.group("code").strip(),
        module=module, function=f.group("func").strip(),
    )


_PREFIX = re.compile(r"^L\['(?:self|fn|mod|model|module)'\]\.?")
_GETATTR = re.compile(r"getattr\((?P<inner>.+), '(?P<attr>[^']+)'\)$")


def _clean_module_path(path: str) -> str:
    # Dynamo spells paths like "getattr(L['self'].layers, '0').attn"; make it "layers.0.attn".
    while True:
        m = re.search(r"getattr\(([^()]+), '([^']+)'\)", path)
        if not m:
            break
        path = path[: m.start()] + f"{m.group(1)}.{m.group(2)}" + path[m.end():]
    path = _PREFIX.sub("", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    path = re.sub(r"^L\['([^']+)'\]", r"\1", path)
    return path.strip(".")


def module_path(meta: dict) -> str:
    """Return the dotted module path of a node from ``nn_module_stack`` / ``fwd_nn_module_stack``."""
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack")
    if not stack:
        return ""
    try:
        last = list(stack.values())[-1]
        path = last[0] if isinstance(last, tuple) else str(last)
    except Exception:
        return ""
    return _clean_module_path(str(path))


def source_of(meta: dict) -> Optional[SourceInfo]:
    """Return the :class:`SourceInfo` for an FX node's ``meta`` dict (None when it has none)."""
    mod = module_path(meta)
    info = parse_stack_trace(meta.get("stack_trace"), mod)
    if info is None and mod:
        return SourceInfo(file="", line=0, module=mod)
    return info
