"""Kernel plans: how one fusion region becomes one Triton kernel, and the module text for it.

A region is generated, in order of preference, as

- one part (:class:`.triton_codegen.Part`): the whole region over one iteration domain (a
  reduction over dims apart of a region input reads it through a permute, :func:`.triton_region.reduced_last`);
- one part in the permuted frame of its reductions (:mod:`.triton_frame`): a reduction over dims
  apart of a value computed in the region (BatchNorm's statistics and gradient sums), the whole
  region iterating with the reduced dims last;
- sections (horizontal fusion): the region is made of independent pieces (no value flows between
  them), each one part over its own domain; the grid is the concatenation of their grids and each
  program runs the section its id falls in. Valid at any size;
- phases: the region's parts depend on each other (a reduction over rows feeding one over columns,
  a gather of a computed value, an ``index_put`` or ``scatter_add``...). One program runs the parts one after another,
  each looping over its own blocks, with ``tl.debug_barrier()`` between them; values passed between
  parts go through memory (region outputs or scratch buffers the launcher allocates). Because a
  single program does all the work, phases are only used for small regions: every value at most
  :data:`PHASE_LIMIT` elements (on CPU, one interpreter tile; on a GPU, a few dozen blocks of one
  CTA), where launch latency dominates. Larger regions are refused and become separate kernels.

Shape ops and constants are cheap to recompute, so a part that needs one of them made elsewhere in
the region re-derives it from its sources instead of reading it from memory.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from ..ir import BoundSymbol, TensorProxy
from .triton_codegen import Part, Unfusable, prim_name
from . import triton_ops as ops
from .triton_ops import REDUCTIONS
from .triton_region import reduced_last, reduces_apart
from .triton_index import out_strides
from .triton_index import numel, strides_of
from .part_checks import part_inputs
from .triton_phase_plan import PhasePlan, free_closure
from .generated_once import REGION_OPS, generated_once

PHASE_LIMIT = 1 << 16


@dataclass(frozen=True)
class KernelDef:
    """One ``@triton.jit`` function of a kernel module: its name, its parameters as (name, dtype of
    the tensor it points to), and how it is launched (warps, programs)."""
    name: str
    params: tuple
    num_warps: int
    grid: int


@dataclass
class KernelSource:
    """Generated kernel module text and what the launcher needs to know. ``jit_source`` holds only
    the ``@triton.jit`` functions (what ahead-of-time compilation compiles; identical regions give
    identical text), ``jit_lines`` maps its 1-based line numbers to the index of the member symbol
    the line was generated for, and ``kernels`` describes its functions in launch order."""
    source: str
    grid: int
    note: str
    plan: str = "single"  # single | sections | phases | launches
    parts: int = 1
    jit_source: str = ""
    jit_lines: dict = field(default_factory=dict)
    kernels: tuple = ()
    listed: tuple = ()  # a template's symbols whose listing fills its REGION_OPS line (generated_once)


# What a check-only :func:`generate` returns: the region generates (no text was written).
CHECKED = KernelSource("", 0, "")


def generate(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str, title: str = "",
             phase_limit: int = PHASE_LIMIT, check: bool = False) -> KernelSource:
    """Return the Triton module source for a region (members in trace order); raise Unfusable.
    Its ``jit_lines`` map a line of the jitted source to the index in ``members`` of the symbol
    the line was generated for (the plans rewrite the members; each rewritten symbol keeps the uid
    of the one it came from). ``check``: only whether it generates (raises exactly when the module
    would), returning :data:`CHECKED` without writing any text. The text is generated once per
    distinct region (:mod:`.generated_once`): an equal region gets it with its own op listing."""
    if check:
        return _generate(members, outputs, device_kind, title, phase_limit, check)

    def template() -> KernelSource:
        ks = _generate(members, outputs, device_kind, title, phase_limit)
        position = {b.uid: i for i, b in enumerate(members)}  # positions: the same in every equal region
        return dataclasses.replace(ks, jit_lines={line: position[uid] for line, uid in ks.jit_lines.items()
                                                  if uid in position})
    return generated_once(members, outputs, device_kind, phase_limit, template)


def _generate(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str, title: str,
              phase_limit: int, check: bool = False) -> KernelSource:
    given = members
    members = [r for b in members for r in (reduced_last(b) if prim_name(b) in REDUCTIONS and reduces_apart(b)
                                            else (b,))]
    try:
        part = Part(members, outputs, device_kind)
        part.run()
        for k, p in enumerate(outputs):
            part.store(k, p)
        if part.looped and part.M == 1:  # one program would walk the whole tensor: split it
            split = _split(members, outputs, device_kind, check)
            if split is not None:
                return split
        return _module([(part, members)], members, outputs, [], "single", device_kind, check)
    except Unfusable as e:
        first = e
    framed = _in_frame(given, outputs, device_kind, check)
    if framed is not None:
        return framed
    comps = components(members)
    if len(comps) > 1:
        try:
            return _sections(comps, members, outputs, device_kind, check)
        except Unfusable:
            pass
    if phase_limit and _small(members, phase_limit):
        return _phases(members, outputs, device_kind, check)
    put = next((prim_name(b) for b in members if prim_name(b) in ops.PUTS), None)
    if put is not None:  # say why no phase of its own was tried
        raise Unfusable(f"{put} runs as a phase of its own, only in a region whose tensors have at most "
                        f"{phase_limit} elements")
    raise first


def _in_frame(members, outputs, device_kind, check: bool = False) -> Optional[KernelSource]:
    """Return the single-kernel plan of a region run in its reductions' permuted frame
    (:mod:`.triton_frame`), or None when that does not apply or does not generate."""
    from .triton_frame import permuted_frame
    frame = permuted_frame(members, outputs)
    if frame is None:
        return None
    framed, framed_outputs, perm = frame
    try:
        part = Part(framed, framed_outputs, device_kind)
        part.run()
        for k, p in enumerate(framed_outputs):
            part.store(k, p)
        ks = _module([(part, framed)], framed, outputs, [], "single", device_kind, check)
    except Unfusable:
        return None
    return dataclasses.replace(ks, note=f"{ks.note}; iterates in its reductions' frame, dims in the order "
                                         f"{list(perm)} (the reduced ones last)")


def _split(members, outputs, device_kind, check: bool = False) -> Optional[KernelSource]:
    """Return the two-launch plan of a whole-tensor reduction (:mod:`.triton_split`), or None."""
    from .triton_split import split_region
    plan = split_region(members, outputs)
    if plan is None:
        return None
    first, first_outs, second, scratch = plan
    try:
        a = Part(first, first_outs, device_kind, prefix="p0_")
        a.run()
        for k, p in enumerate(first_outs):
            a.store(k, p)
        made = {p.name for b in first for p in b.flat_outputs()}
        b_outs = [p for p in outputs if p.name not in made]
        b = Part(second, b_outs, device_kind, prefix="p1_", read_strides={scratch.name: (1,)})
        b.run()
        for k, p in enumerate(b_outs):
            b.store(k, p)
        return _module([(a, first), (b, second)], first + second, outputs, [scratch], "launches", device_kind, check)
    except Unfusable:
        return None


def components(members: list[BoundSymbol]) -> list[list[int]]:
    """Return the indices of ``members`` grouped into pieces no value flows between."""
    parent = list(range(len(members)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    producer = {p.name: i for i, b in enumerate(members) for p in b.flat_outputs()}
    for i, b in enumerate(members):
        for p in b.flat_inputs():
            j = producer.get(p.name)
            if j is not None:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(members)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


def _small(members: list[BoundSymbol], limit: int) -> bool:
    return all(numel(p.shape) <= limit for b in members for p in b.flat_inputs() + b.flat_outputs())


def _sections(comps, members, outputs, device_kind, check: bool = False) -> KernelSource:
    made = {p.name for b in members for p in b.flat_outputs()}
    parts = []
    for c, idx in enumerate(comps):
        mine = [members[i] for i in idx]
        names = {p.name for b in mine for p in b.flat_outputs()}
        outs = [p for p in outputs if p.name in names and p.name in made]
        part = Part(mine, outs, device_kind, prefix=f"s{c}_")
        part.run()
        for k, p in enumerate(outs):
            part.store(k, p)
        parts.append((part, mine))
    return _module(parts, members, outputs, [], "sections", device_kind, check)


def _phases(members: list[BoundSymbol], outputs: list[TensorProxy], device_kind: str,
            check: bool = False) -> KernelSource:
    plan = PhasePlan(members, outputs, device_kind)
    if check:
        return _phases_check(plan, outputs)
    closure, written, region_out = plan.closure, plan.written, plan.region_out
    stored = {p.name for kind, own in plan.steps if kind == "copy" for p in members[own[0]].flat_outputs()}
    reads_after = plan.reads_after()
    parts, scratch = [], []
    out_names = [p.name for p in outputs]
    for n, (kind, own) in enumerate(plan.steps):
        later = set().union(*reads_after[n + 1:]) if n + 1 < len(plan.steps) else set()
        prefix = f"p{n}_"
        if kind == "put":
            syms = [members[j] for j in closure(own)]
            part = Part(syms, [], device_kind, prefix=prefix, read_strides=written, index_put=True)
            part.run()
            part.dst = members[own[0]].outputs
            parts.append((part, syms))
            continue
        if kind == "copy":
            b = members[own[0]]
            copy = BoundSymbol("prims.clone", (b.args[0],), {}, b.outputs, uid=b.uid, aten="aten.clone.default")
            syms = [members[j] for j in free_closure(b, plan.producer, plan.free, members)] + [copy]
            outs = [b.outputs]
        else:
            syms = [members[j] for j in closure(own)]
            outs = [p for j in own for p in members[j].flat_outputs()
                    if (p.name in region_out or p.name in later) and p.name not in stored]
        part = Part(syms, outs, device_kind, prefix=prefix, read_strides=written)
        part.run()
        for k, p in enumerate(outs):
            part.store(k, p)
            stored.add(p.name)
            if p.name not in out_names and p not in scratch:
                scratch.append(p)
        parts.append((part, syms))
    # On a GPU one program runs phases only while each fits one block; else a phase per launch.
    spread = device_kind == "cuda" and any(part.sizes["grid"] > 1 for part, _ in parts)
    return _module(parts, members, outputs, scratch, "launches" if spread else "phases", device_kind)


def _phases_check(plan: PhasePlan, outputs: list[TensorProxy]) -> KernelSource:
    """Return :data:`CHECKED` when the phases of ``plan`` generate (raise Unfusable as
    :func:`_phases` would); each step's part is answered once per fuse pass (:mod:`.part_checks`)."""
    members, closure, written, region_out = plan.members, plan.closure, plan.written, plan.region_out
    stored = {p.name for kind, own in plan.steps if kind == "copy" for p in members[own[0]].flat_outputs()}
    reads_after = plan.reads_after()
    reads: list[tuple[str, ...]] = []
    for n, (kind, own) in enumerate(plan.steps):
        later = set().union(*reads_after[n + 1:]) if n + 1 < len(plan.steps) else set()
        if kind == "put":
            reads.append(part_inputs([members[j] for j in closure(own)], [], plan.device_kind, written, True))
            continue
        if kind == "copy":
            b = members[own[0]]
            copy = BoundSymbol("prims.clone", (b.args[0],), {}, b.outputs, uid=b.uid, aten="aten.clone.default")
            part = Part([members[j] for j in free_closure(b, plan.producer, plan.free, members)] + [copy],
                        [b.outputs], plan.device_kind, read_strides=written)
            part.run()
            part.store(0, b.outputs)
            reads.append(tuple(p.name for p in part.inputs))
            stored.add(b.outputs.name)
            continue
        outs = [p for j in own for p in members[j].flat_outputs()
                if (p.name in region_out or p.name in later) and p.name not in stored]
        grown = plan.grown[n]
        if grown is not None and tuple(outs) == grown.returned:  # the part the planner grew: known
            reads.append(plan.grower.inputs(grown))
        else:
            reads.append(part_inputs([members[j] for j in closure(own)], outs, plan.device_kind, written))
        stored.update(p.name for p in outs)
    _check_reads(reads, members)
    return CHECKED


def _check_reads(reads: list, members: list[BoundSymbol]) -> None:
    """Raise Unfusable when a part reads (by name, per part in ``reads``) a value that the region
    neither computes nor takes as an input."""
    made = {p.name for b in members for p in b.flat_outputs()}
    inputs = {p.name for b in members for p in b.flat_inputs()} - made
    for names in reads:
        for name in names:
            if name not in made and name not in inputs:
                raise Unfusable(f"{name} is read but is not an input of the region")


def _module(parts: list, members: list[BoundSymbol], outputs: list[TensorProxy], scratch: list[TensorProxy],
            mode: str, device_kind: str, check: bool = False) -> KernelSource:
    """Return the module text: the kernel made of ``parts`` ((Part, its symbols) pairs) and its launcher
    (``check``: only raise Unfusable where the text would, and return :data:`CHECKED`)."""
    # The launcher takes the region's inputs in the order the fusion symbol passes them: by first
    # read in member order (as the fuse pass lists them).
    made = {p.name for b in members for p in b.flat_outputs()}
    first: dict[str, TensorProxy] = {}
    for b in members:
        for p in b.flat_inputs():
            if p.name not in made:
                first.setdefault(p.name, p)
    inputs = list(first.values())
    for part, _ in parts:
        for p in part.inputs:
            if p.name not in made and all(q.name != p.name for q in inputs):
                raise Unfusable(f"{p.name} is read but is not an input of the region")
    if check:
        return CHECKED
    param = {p.name: f"arg{i}" for i, p in enumerate(inputs)}
    param.update({p.name: f"res{k}" for k, p in enumerate(outputs)})
    param.update({p.name: f"tmp{j}" for j, p in enumerate(scratch)})
    names = ([f"arg{i}" for i in range(len(inputs))] + [f"res{k}" for k in range(len(outputs))]
             + [f"tmp{j}" for j in range(len(scratch))])
    params = ", ".join(names)
    dtypes = [p.dtype for p in inputs] + [p.dtype for p in outputs] + [p.dtype for p in scratch]
    # Each kernel function: (name, body lines, member index per line or None, grid, warps).
    defs: list[tuple[str, list[str], list, int, int]] = []
    body, tags, grid, start = [], [], 0, 0

    def add(lines, part=None, indent=""):
        body.extend(indent + line for line in lines)
        tags.extend([None] * len(lines) if part is None else list(part.line_uids))  # uids; generate() maps them
    for n, (part, _) in enumerate(parts):
        alias = [f"    {part.p}in{i} = {param[p.name]}" for i, p in enumerate(part.inputs)]
        alias += [f"    {part.p}out{k} = {param[p.name]}" for k, p in enumerate(part.outputs)]
        if getattr(part, "dst", None) is not None:
            alias.append(f"    {part.p}dst = {param[part.dst.name]}")
        g = part.sizes["grid"]
        big = part.T >= 2 ** 31 - 1
        if mode in ("single", "launches"):
            add(alias + part.head("tl.program_id(0)" + (".to(tl.int64)" if big else "")))
            add(part.lines, part)
            grid = g
            if mode == "launches":  # one kernel per phase, launched one after another
                defs.append((f"kernel_{n}", body, tags, g, part.sizes["num_warps"]))
                body, tags = [], []
        elif mode == "sections":
            cond = f"pid < {start + g}" if start == 0 else f"(pid >= {start}) & (pid < {start + g})"
            pid = "pid" if start == 0 else f"(pid - {start})"
            add([f"    if {cond}:"])
            add(alias + part.head(pid + (".to(tl.int64)" if big else "")), indent="    ")
            add(part.lines, part, indent="    ")
            start += g
            grid = start
        else:
            if n:
                add(["    tl.debug_barrier()"])
            add(alias)
            if g == 1:  # the only program: its id is 0
                add(part.head("tl.program_id(0)"))
                add(part.lines, part)
            else:
                add([f"    for {part.p}it in range(0, {g}):"])
                add(part.head(f"{part.p}it"), indent="    ")
                add(part.lines, part, indent="    ")
            grid = 1
    if mode == "sections":
        body.insert(0, "    pid = tl.program_id(0)")
        tags.insert(0, None)
    warps = max(part.sizes["num_warps"] for part, _ in parts)
    if mode != "launches":
        defs.append(("kernel", body, tags, grid, warps))
    else:
        grid = max(d[3] for d in defs)  # the widest launch
    jit, jit_lines = ["import triton", "import triton.language as tl"], {}
    for name, lines, line_tags, _, _ in defs:
        jit += ["", "", "@triton.jit", f"def {name}({params}):"]
        for line, tag in zip(lines, line_tags):
            jit.append(line)
            if tag is not None:
                jit_lines[len(jit)] = tag
    launcher = [f"def launch({', '.join(f'arg{i}' for i in range(len(inputs)))}):"]
    for i, p in enumerate(inputs):
        launcher.append(f"    arg{i} = _layout(arg{i}, {tuple(p.shape)!r}, {tuple(strides_of(p))!r})")
    device = "arg0.device" if inputs else f"torch.device({outputs[0].device!r})"
    for name, group in (("res", outputs), ("tmp", scratch)):
        for k, p in enumerate(group):
            launcher.append(f"    {name}{k} = torch.empty_strided({tuple(p.shape)!r}, {out_strides(p)!r}, "
                            f"dtype=torch.{p.dtype}, device={device})")
    for name, _, _, g, w in defs:
        launcher.append(f"    {name}[({g},)]({params}, num_warps={w})")
    launcher.append(f"    return ({''.join(f'res{k}, ' for k in range(len(outputs)))})")
    kinds = "; ".join(part.describe() for part, _ in parts)
    title = {"single": kinds, "sections": f"{len(parts)} sections side by side ({kinds})",
             "phases": f"{len(parts)} phases in one program ({kinds})",
             "launches": f"{len(parts)} phases launched in turn ({kinds})"}[mode]
    src = "\n".join([
        f'"""thundervis Triton kernel: {title}."""',
        "# Generated by thundervis from the region below; inputs are read by their recorded strides.",
        REGION_OPS, "import torch", "import triton", "import triton.language as tl", "", "",
        "def _layout(t, shape, strides):",
        "    # The kernel indexes inputs by the strides they were recorded with; another layout is copied.",
        "    if all(a == b for s, a, b in zip(shape, t.stride(), strides) if s != 1):",
        "        return t",
        "    if not _distinct(shape, strides):",
        "        raise ValueError(f'input strides {tuple(t.stride())} differ from the recorded {strides}')",
        "    # A recorded view with gaps (one of q, k, v split from one buffer) gets a buffer with the same gaps.",
        "    return torch.empty_strided(shape, strides, dtype=t.dtype, device=t.device).copy_(t)",
        "", "",
        "def _distinct(shape, strides):",
        "    # True when no two elements share an address: a broadcast layout cannot be copied into.",
        "    reach = 0",
        "    for st, s in sorted((st, s) for s, st in zip(shape, strides) if s != 1):",
        "        if st <= reach:",
        "            return False",
        "        reach += (s - 1) * st",
        "    return True",
        *jit[2:], "", "",
        *launcher, "",
    ])
    note = ("inputs read in place by their recorded strides (broadcast, permuted and offset views "
            "included); an input arriving with other strides is first copied into the recorded layout (gaps "
            "included; a broadcast layout cannot be copied into and falls back); "
            "outputs written with their recorded strides when dense, else row-major")
    if mode == "phases":
        note += f"; {len(parts)} dependent phases run by one program, values between them in scratch memory"
    elif mode == "launches":
        note += f"; {len(parts)} dependent phases launched one after another, values between them in scratch memory"
    elif mode == "sections":
        note += f"; {len(parts)} independent sections share the grid (horizontal fusion)"
    kernels = tuple(KernelDef(name, tuple(zip(names, dtypes)), w, g) for name, _, _, g, w in defs)
    return KernelSource(src, grid, note, mode, len(parts), "\n".join(jit) + "\n", jit_lines, kernels,
                        tuple(members))
