"""Reading compiled stages without torch or Triton: which generated Triton source line each line of
TTIR, TTGIR, LLVM IR, PTX and SASS came from, the SASS instruction mix, and the resource figures
ptxas and cuobjdump print.

Every line map is a list with one entry per line of the stage text: the 1-based line of the
generated Triton source (the compiled file, ``filename``) or 0 where the line has no location.
Code inlined from Triton's library (``tl.sum``, ``tl.sigmoid`` ...) is attributed to the kernel line
that called it: the outermost location wins. Lines without a location of their own (SASS
instructions after a ``//## File`` comment, PTX after a ``.loc``) take the last one seen.
"""
from __future__ import annotations

import re

STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")

# ------------------------------------------------------------------------------ MLIR (TTIR, TTGIR)
_MLIR_DEF = re.compile(r"^#(loc\d*)\s*=\s*loc\((.*)\)\s*$")
_MLIR_USE = re.compile(r"loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$")
_FILE_LOC = re.compile(r"^\"([^\"]*)\":(\d+):\d+$")


def mlir_lines(text: str, filename: str) -> list[int]:
    """Return the Triton source line of each line of a TTIR/TTGIR module (its ``loc`` attributes)."""
    lines = text.splitlines()
    defs = {}
    for line in lines:
        m = _MLIR_DEF.match(line)
        if m:
            defs["#" + m.group(1)] = m.group(2).strip()
    memo: dict[str, int] = {}

    def resolve(expr: str, depth: int = 0) -> int:
        expr = expr.strip()
        if depth > 64:
            return 0
        if expr.startswith("#"):
            if expr not in memo:
                memo[expr] = 0
                memo[expr] = resolve(defs.get(expr, "unknown"), depth + 1)
            return memo[expr]
        m = _FILE_LOC.match(expr)
        if m:
            return int(m.group(2)) if m.group(1) == filename else 0
        if expr.startswith("callsite("):  # callsite(#callee at #caller): the caller is outermost
            inner = expr[len("callsite("):].rstrip(")")
            callee, _, caller = inner.rpartition(" at ")
            return resolve(caller, depth + 1) or resolve(callee, depth + 1)
        m = re.match(r'^"[^"]*"\((.*)\)$', expr)  # a named location: loc("x"(#loc3))
        if m:
            return resolve(m.group(1), depth + 1)
        if expr.startswith("fused"):
            for part in re.findall(r"#loc\d*", expr):
                r = resolve(part, depth + 1)
                if r:
                    return r
        if expr.startswith("loc("):
            return resolve(expr[4:-1], depth + 1)
        return 0
    out = []
    for line in lines:
        if _MLIR_DEF.match(line):
            out.append(0)
            continue
        m = _MLIR_USE.search(line)
        out.append(resolve(m.group(1)) if m else 0)
    return out


# ------------------------------------------------------------------------------ LLVM IR
_DBG_USE = re.compile(r"!dbg (!\d+)")
_DILOC = re.compile(r"^(!\d+) = (?:distinct )?!DILocation\(line: (\d+)(?:, column: \d+)?, scope: (!\d+)"
                    r"(?:, inlinedAt: (!\d+))?")


def llir_lines(text: str, filename: str) -> list[int]:
    """Return the Triton source line of each line of an LLVM IR module (``!dbg`` locations,
    followed through ``inlinedAt`` to the kernel's own line)."""
    lines = text.splitlines()
    locs = {}
    for line in lines:
        m = _DILOC.match(line)
        if m:
            locs[m.group(1)] = (int(m.group(2)), m.group(4))

    def resolve(ref: str) -> int:
        seen = 0
        line = 0
        while ref in locs and seen < 64:
            line, ref = locs[ref][0], locs[ref][1]
            seen += 1
            if ref is None:
                break
        return line
    out = []
    for line in lines:
        m = _DBG_USE.search(line)
        out.append(resolve(m.group(1)) if m and not line.startswith("!") else 0)
    return out


# ------------------------------------------------------------------------------ PTX
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")


def ptx_lines(text: str, filename: str) -> list[int]:
    """Return the Triton source line of each PTX line (``.loc`` directives; the compiled file is
    found among the ``.file`` entries by its path or base name)."""
    lines = text.splitlines()
    base = filename.rsplit("/", 1)[-1]
    ours = set()
    for line in lines:
        m = _PTX_FILE.match(line)
        if m and (m.group(2) == filename or m.group(2).rsplit("/", 1)[-1] == base):
            ours.add(m.group(1))
    out, cur = [], 0
    for line in lines:
        m = _PTX_LOC.match(line)
        if m:
            if m.group(1) in ours:
                cur = int(m.group(2))
            elif m.group(3) in ours:
                cur = int(m.group(4))
        out.append(cur if line.strip() and not line.lstrip().startswith(".file") else 0)
    return out


# ------------------------------------------------------------------------------ SASS
_SASS_FILE = re.compile(r'"([^"]*)", line (\d+)')
_SASS_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def sass_lines(text: str, filename: str) -> list[int]:
    """Return the Triton source line of each line of ``nvdisasm -g`` output (``//## File`` comments;
    an ``inlined at`` the kernel file counts as the kernel line)."""
    out, cur = [], 0
    for line in text.splitlines():
        if line.lstrip().startswith("//##"):
            hits = [int(n) for f, n in _SASS_FILE.findall(line) if f == filename]
            if hits:
                cur = hits[-1]
            out.append(0)
            continue
        out.append(cur if _SASS_INSN.match(line) else 0)
    return out


def sass_instructions(text: str) -> list[str]:
    """Return the opcode (with modifiers, ``LDG.E.128``) of every SASS instruction, in order."""
    return [m.group(3) for m in map(_SASS_INSN.match, text.splitlines()) if m]


_WIDTH = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128}


def _width(op: str) -> int:
    for mod in op.split(".")[1:]:
        if mod in _WIDTH:
            return _WIDTH[mod]
    return 32


def instruction_mix(text: str) -> dict:
    """Return the instruction mix of SASS text: total instructions, global loads and stores by
    width in bits (``{"32": n, "128": m}``), FMAs, MUFU (special function unit) ops, shuffles,
    barriers, shared-memory loads/stores and atomics."""
    mix = {"instructions": 0, "global_loads": {}, "global_stores": {}, "fma": 0, "mufu": 0, "shuffles": 0,
           "barriers": 0, "shared_loads": 0, "shared_stores": 0, "atomics": 0}
    for op in sass_instructions(text):
        mix["instructions"] += 1
        head = op.split(".")[0]
        if head == "LDG":
            w = str(_width(op))
            mix["global_loads"][w] = mix["global_loads"].get(w, 0) + 1
        elif head == "STG":
            w = str(_width(op))
            mix["global_stores"][w] = mix["global_stores"].get(w, 0) + 1
        elif head in ("FFMA", "DFMA", "HFMA2") and ".MMA" not in op:
            mix["fma"] += 1
        elif head == "MUFU":
            mix["mufu"] += 1
        elif head == "SHFL":
            mix["shuffles"] += 1
        elif head == "BAR":
            mix["barriers"] += 1
        elif head == "LDS":
            mix["shared_loads"] += 1
        elif head == "STS":
            mix["shared_stores"] += 1
        elif head in ("ATOM", "ATOMG", "RED", "REDG", "ATOMS"):
            mix["atomics"] += 1
    return mix


# ------------------------------------------------------------------------------ resources
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def resource_usage(cuobjdump_text: str) -> dict:
    """Return registers, stack, static shared and local bytes from ``cuobjdump -res-usage``
    (empty when it printed none)."""
    m = _RES.search(cuobjdump_text)
    if not m:
        return {}
    reg, stack, shared, local = map(int, m.groups())
    return {"registers": reg, "stack_bytes": stack, "static_shared_bytes": shared, "local_bytes": local}


def ptxas_report(log: str) -> dict:
    """Return registers, stack frame and spill bytes from ptxas ``-v`` output (empty when absent)."""
    out = {}
    m = _PTXAS_USED.search(log)
    if m:
        out["registers"] = int(m.group(1))
    m = _PTXAS_FRAME.search(log)
    if m:
        out.update(stack_frame_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                   spill_load_bytes=int(m.group(3)))
    return out


def line_map(stage: str, text: str, filename: str) -> list[int]:
    """Return the Triton source line of each line of ``text`` for stage ``stage``."""
    fn = {"ttir": mlir_lines, "ttgir": mlir_lines, "llir": llir_lines, "ptx": ptx_lines, "sass": sass_lines}[stage]
    return fn(text, filename)
