"""Assembling and disassembling many functions together: one ``ptxas``, one ``cuobjdump`` and one
``nvdisasm`` for a batch of kernels.

``nvdisasm`` spends about 0.35 s of CPU starting up whatever it disassembles, more than Triton
takes to compile a small function (measured on the example: 20.6 s of the 28.6 s of CPU its 41
functions cost for sm_90 went to ``nvdisasm``), and Triton runs ``ptxas`` once per function. A
worker compiles a batch of kernels (:func:`.worker.compile_jobs`), each one or more Triton
functions, up to PTX. :func:`assemble_together` puts their PTX (entries renamed apart by the caller)
into one PTX module, assembles it once with the ``ptxas`` command and options Triton runs (``-v``
included: its report is split per function), reads every function's resources with one
``cuobjdump -res-usage``, disassembles that cubin once and splits the text back per function. Each
function's machine code is what ptxas makes of the same PTX with the same options (ptxas compiles
entries independently), and the line information is the same: every ``.loc`` is kept (file numbers
made common, labels renamed apart) with the ``.debug_str`` names its inlined locations refer to.
One difference is corrected: in a merged cubin every function gets the reserved shared-memory block
once any function declares shared memory, so a function that declares none reports 0, as its own
cubin does. Tested on the example's 15 distinct kernels (41 functions, sm_80 and sm_90): the same
stages, line maps, instruction mix, resources and per-function figures as Triton's own ptxas and one
``nvdisasm`` per cubin. Anything unexpected returns None and the caller builds each kernel as Triton
does.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from typing import Callable, Optional

_HEADER = re.compile(r"^\s*\.(version|target|address_size)\b")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_LOC = re.compile(r"^(\s*)\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:\s*,\s*function_name\s+[^,]+,\s*inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_DECL = re.compile(r"^\.(global|extern|const|shared)\b.*?([A-Za-z_$][\w$]*)\s*(\[|;|=)")
_ENTRY = re.compile(r"^\.visible\s+\.entry\s+([\w$]+)\s*\(")

_TIMEOUT_S = 120


def _parts(ptx: str) -> Optional[tuple[list[str], list[str], list[str], dict, list[str]]]:
    """Split one function's PTX into (header lines, module declarations, the entry's lines, file
    table {number: path}, the lines of its ``.debug_str`` section); None when it is not the shape
    Triton emits."""
    lines = ptx.splitlines()
    header, decls, body, files = [], [], [], {}
    i = 0
    while i < len(lines) and not _ENTRY.match(lines[i]):
        line = lines[i]
        if _HEADER.match(line):
            header.append(line.strip())
        elif _DECL.match(line):
            decls.append(line.rstrip())
        elif line.strip() and not line.lstrip().startswith("//"):
            return None
        i += 1
    if i == len(lines):
        return None
    while i < len(lines) and not _FILE.match(lines[i]):
        body.append(lines[i])
        i += 1
    strings, in_strings = [], False
    for line in lines[i:]:
        m = _FILE.match(line)
        if m:
            files[int(m.group(1))] = m.group(2)
        elif line.strip().startswith(".section"):
            in_strings = line.split()[-1] == ".debug_str"
        elif in_strings and line.strip() not in ("{", "}"):
            strings.append(line)
    return header, decls, body, files, strings


def merge_ptx(ptxs: list[str]) -> Optional[str]:
    """Return one PTX module holding every entry of ``ptxs`` (Triton PTX, one entry each, distinct
    names): one header, module declarations once (the same name declared differently: None),
    labels renamed apart, ``.loc`` file numbers made common, the ``.debug_str`` names of inlined
    locations kept (the other debug sections are left out: ptxas makes its line table from the
    ``.loc`` directives); None when a part is not as expected."""
    parts = [_parts(p) for p in ptxs]
    if not parts or any(p is None for p in parts):
        return None
    header = parts[0][0]
    if any(p[0] != header for p in parts) or not header:
        return None
    decls: dict[str, str] = {}
    order: list[str] = []
    files: dict[str, int] = {}
    bodies: list[str] = []
    strings: list[str] = []
    for n, (_, part_decls, body, part_files, part_strings) in enumerate(parts):
        for d in part_decls:
            name = _DECL.match(d).group(2)
            if name in decls and decls[name] != d:
                return None
            if name not in decls:
                decls[name] = d
                order.append(name)
        number = {}
        for k, path in part_files.items():
            number[k] = files.setdefault(path, len(files) + 1)
        for line in body:
            m = _LOC.match(line)
            if m:
                f, at = int(m.group(2)), m.group(5) and int(m.group(5))
                if f not in number or (at and at not in number):
                    return None
                if at:  # renumber the file and the inlined-at file, keep the rest as written
                    line = (f"{m.group(1)}.loc\t{number[f]} {m.group(3)} {m.group(4)}"
                            f"{line[m.end(4):m.start(5)]}{number[at]}{line[m.end(5):]}")
                else:
                    line = f"{m.group(1)}.loc\t{number[f]}{line[m.end(2):]}"
            bodies.append(line.replace("$L__", f"$L__m{n}_"))
        strings += [line.replace("$L__", f"$L__m{n}_") for line in part_strings]
    out = [*header, "", *(decls[name] for name in order), "", *bodies]
    out += [f'\t.file\t{k} "{path}"' for path, k in files.items()]
    if strings:  # the names ``function_name`` refers to in an inlined location
        out += ["\t.section\t.debug_str", "\t{", *strings, "\t}"]
    return "\n".join(out) + "\n"


# nvdisasm's banner before each function's section and before the symbol table
_BANNERS = {"section": re.compile(r"^//-+ \.text\.([\w$]+)\s+-+$"), "symbols": re.compile(r"^//-+ SYMBOLS -+$")}


def split_disassembly(text: str, names: list[str]) -> Optional[dict[str, str]]:
    """Return each function's part of ``nvdisasm -c`` output for a cubin holding ``names``: the
    module header, the function's own section and the symbol table, as ``nvdisasm`` prints a
    cubin of that function alone; None when a name is missing."""
    lines = text.splitlines()
    head, sections, tail = [], {}, []
    current = None
    for line in lines:
        m = _BANNERS["section"].match(line.strip())
        if m:
            current = m.group(1)
            sections[current] = [line]
        elif _BANNERS["symbols"].match(line.strip()):
            current = "\0symbols"
            tail.append(line)
        elif current is None:
            head.append(line)
        elif current == "\0symbols":
            tail.append(line)
        else:
            sections[current].append(line)
    if any(n not in sections for n in names):
        return None
    return {n: "\n".join([*head, *sections[n], *tail]) + "\n" for n in names}


_ENTRY_LOG = re.compile(r"Compiling entry function '([\w$]+)'")
_USAGE = re.compile(r"Function ([\w$]+):\s*\n\s*(REG:\d+\s+STACK:\d+\s+SHARED:\d+\s+LOCAL:\d+)")


def split_ptxas_log(log: str) -> dict[str, str]:
    """Return each function's part of a ``ptxas -v`` log (from its ``Compiling entry function``
    line to the next one's), by function name."""
    out, name = {}, None
    for line in log.splitlines():
        m = _ENTRY_LOG.search(line)
        if m:
            name = m.group(1)
            out[name] = []
        if name is not None:
            out[name].append(line)
    return {n: "\n".join(lines) + "\n" for n, lines in out.items()}


def split_resource_usage(text: str) -> dict[str, str]:
    """Return each function's ``REG:.. STACK:.. SHARED:.. LOCAL:..`` line of ``cuobjdump -res-usage``."""
    return {m.group(1): m.group(2) for m in _USAGE.finditer(text)}


def assemble_together(ptxs: list[str], names: list[str], folder: str, tool: Callable[..., str],
                      ptxas: list[str], nvdisasm: str, cuobjdump: str) -> Optional[dict[str, dict]]:
    """Return ``{function name: {"sass": nvdisasm -gi -c text, "log": its ptxas -v report, "usage":
    its cuobjdump -res-usage line}}`` for the functions whose Triton PTX is ``ptxs`` (named
    ``names``), from one ``ptxas`` run (``ptxas``: the command Triton runs, ``-v`` included, without
    its input and output), one ``cuobjdump`` and one ``nvdisasm``; ``tool(args, stderr=False)`` runs
    a command and returns its stdout (stderr when asked), raising on failure. None when the PTX
    cannot be merged, a tool fails or a function is missing from an output (the caller then builds
    each kernel as Triton does, with its own ptxas)."""
    merged = merge_ptx(ptxs)
    if merged is None:
        return None
    fd, ptx_path = tempfile.mkstemp(suffix=".ptx", dir=folder)
    cubin = ptx_path + ".cubin"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(merged)
        log = split_ptxas_log(tool([*ptxas, ptx_path, "-o", cubin], stderr=True))
        usage = split_resource_usage(tool([cuobjdump, "-res-usage", cubin]))
        text = tool([nvdisasm, "-gi", "-c", cubin])
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return None
    finally:
        for p in (ptx_path, cubin):
            try:
                os.remove(p)
            except OSError:
                pass
    sass = split_disassembly(text, names)
    if sass is None or any(n not in log or n not in usage for n in names):
        return None
    return {n: {"sass": sass[n], "log": log[n], "usage": usage[n] if _declares_shared(p) else _no_shared(usage[n])}
            for n, p in zip(names, ptxs)}


def _declares_shared(ptx: str) -> bool:
    """Whether a function's own PTX declares shared memory (Triton's ``global_smem``)."""
    return any(".shared" in line.split("//")[0] for line in ptx.splitlines() if _DECL.match(line))


def _no_shared(usage: str) -> str:
    """A function that declares no shared memory has none in a cubin of its own; in the merged
    cubin, where another function declares it, ptxas gives every function the reserved block (on
    sm_90, 1 KiB): its ``SHARED`` is what its own cubin reports, 0."""
    return re.sub(r"SHARED:\d+", "SHARED:0", usage)
