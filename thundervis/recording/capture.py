"""Captured fusion inputs: safetensors files next to a recording, written and read back.

``thundervis run --capture-inputs`` makes the compiler hand each fusion's inputs from its first call
to the recording (``runtime(..., "inputs", data)``, see ``compiler/profiling.py``);
:func:`save_captured_inputs` writes them to ``<rec>.inputs/<kernel>.safetensors`` (a kernel name
seen before in another graph or chain gets ``-g<graph>-<chain>`` appended). safetensors holds raw
tensor bytes and a JSON header only: loading never runs code.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Optional


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def inputs_dir(rec_path: str) -> str:
    """Return the folder holding a recording's captured inputs."""
    return os.path.abspath(rec_path) + ".inputs"


def save_captured_inputs(rec_path: str, graph: int, chain: str, data: dict) -> dict:
    """Write the tensors of one ``inputs`` event and return the JSON-able note to record
    (kernel, graph, chain, file, bytes, or ``skipped`` with the reason)."""
    kernel = _SAFE.sub("_", str(data.get("kernel", "kernel")))
    note = {"kernel": data.get("kernel"), "uid": data.get("uid"), "graph": graph, "chain": chain,
            "bytes": data.get("bytes"), "file": None, "skipped": data.get("skipped")}
    tensors = data.get("tensors")
    if tensors is None:
        return note
    from safetensors.torch import save_file
    folder = inputs_dir(rec_path)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{kernel}.safetensors")
    if os.path.exists(path):
        path = os.path.join(folder, f"{kernel}-g{graph}-{_SAFE.sub('_', chain)}.safetensors")
    names = [str(n) for n in data.get("names", [])]
    save_file({n: t.contiguous() for n, t in zip(names, tensors)}, path,
              metadata={"kernel": str(data.get("kernel")), "graph": str(graph), "chain": chain,
                        "names": ",".join(names)})
    note["file"] = os.path.basename(path)
    return note


def find_captured_file(rec_path: str, kernel: str, graph: int, chain: str) -> Optional[str]:
    """Return the captured-inputs file of one kernel, or None."""
    from safetensors import safe_open
    folder = inputs_dir(rec_path)
    base = _SAFE.sub("_", kernel)
    candidates = [os.path.join(folder, f"{base}.safetensors")]
    candidates += sorted(glob.glob(os.path.join(glob.escape(folder), f"{glob.escape(base)}-g*.safetensors")))
    for path in candidates:
        if not os.path.isfile(path):
            continue
        try:
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
        except Exception:
            continue
        if meta.get("kernel") == kernel and meta.get("graph") == str(graph) and meta.get("chain") == chain:
            return path
    return None


def load_captured_inputs(rec_path: str, kernel: str, graph: int, chain: str,
                         inputs_meta: list[dict]) -> tuple[Optional[list], str]:
    """Return (tensors in input order, "") for a kernel's captured inputs when they exist and match
    ``inputs_meta`` (name, shape, dtype; strides are restored), else (None, why not)."""
    path = find_captured_file(rec_path, kernel, graph, chain)
    if path is None:
        return None, f"no captured inputs for {kernel} (run with --capture-inputs to capture them)"
    from safetensors.torch import load_file
    try:
        loaded = load_file(path)
    except Exception as e:
        return None, f"the captured inputs of {kernel} cannot be read ({type(e).__name__}: {e})"
    out = []
    for m in inputs_meta:
        t = loaded.get(m["name"])
        if t is None:
            return None, f"the captured inputs of {kernel} lack {m['name']}"
        if list(t.shape) != list(m["shape"]) or str(t.dtype).removeprefix("torch.") != m["dtype"]:
            return None, (f"the captured {m['name']} of {kernel} is {str(t.dtype).removeprefix('torch.')}"
                          f"{list(t.shape)}, the recording says {m['dtype']}{list(m['shape'])}")
        strides = m.get("strides")
        if strides is not None and list(t.stride()) != list(strides):
            import torch  # only when captured tensors are loaded: reading a recording needs no torch
            t2 = torch.empty_strided(t.shape, strides, dtype=t.dtype)
            t2.copy_(t)
            t = t2
        out.append(t)
    return out, ""
