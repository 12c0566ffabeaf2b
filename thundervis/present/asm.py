"""Machine code of kernels compiled ahead of time, as rows every view shows.

:func:`asm_listing` returns one stage (``ttir``, ``ttgir``, ``llir``, ``ptx`` or ``sass``) of one
kernel's build for one GPU target with every line annotated: the generated Triton source line it
came from, the member symbol that line was generated for (uid and op) and that symbol's user source
line (``train_gpt.py:52``). :func:`rows_for_source` keeps what one user line became;
:func:`rows_for_uid` what one symbol became, and :attr:`AsmRow.uid` / :attr:`AsmRow.source` go the
other way. :func:`target_summaries` and :func:`target_line` are the per-target resources ``ls``
shows. Stage text, symbol uids and ops, file names, targets and plans are recorded data: the
listing and its build carry every such string made visible (``safe_text.visible_line``), so no front
end (CLI, TUI, widget) can print one raw, and nothing here executes it. Torch-free: reads only
through the reader API.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Optional

from thundervis.safe_text import visible_line

from .units import format_occupancy

STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")


class AsmUnavailable(LookupError):
    """The asked-for build or stage is not in the recording; the message is one sentence."""


@dataclass(frozen=True)
class AsmRow:
    """One line of a compiled stage: ``text`` (control characters made visible), its 0-based
    ``index`` in the stage, the generated Triton source line (0: none), the member symbol's uid and
    op, and the user's source (``file`` full path, ``line``; ``where`` like ``train_gpt.py:52``)."""

    index: int
    text: str
    triton_line: int
    uid: Optional[str]
    sym: Optional[str]
    file: Optional[str]
    line: Optional[int]

    @property
    def where(self) -> Optional[str]:
        """``basename:line`` of the user source line, or None."""
        if not self.file or not self.line:
            return None
        return f"{os.path.basename(self.file)}:{self.line}"

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"index": self.index, "text": self.text, "triton_line": self.triton_line, "uid": self.uid,
                "sym": self.sym, "file": self.file, "line": self.line, "where": self.where}


@dataclass(frozen=True)
class AsmListing:
    """One stage of one kernel build: the kernel, target, stage, the build (``KernelBuild``, its
    names, ``line_uids`` and ``members`` made visible by :func:`visible_build`), the rows, and the
    compiled Triton source's lines (for views that show both side by side)."""

    kernel: str
    target: str
    stage: str
    build: object
    rows: tuple
    triton_source: tuple

    def as_json(self) -> dict:
        """Return a JSON-able dict."""
        return {"kernel": self.kernel, "target": self.target, "stage": self.stage,
                "build": self.build.as_json(), "rows": [r.as_json() for r in self.rows],
                "triton_source": list(self.triton_source)}


def kernel_targets(rec, kernel) -> list[str]:
    """Return the GPU targets ``kernel`` (a ``KernelInfo``) was compiled for ahead of time, made
    visible (what a view lists and hands back to :func:`pick_build`); [] without builds."""
    return [visible_line(b.target) for b in rec.kernel_builds(kernel)]


def pick_build(rec, kernel, target: Optional[str] = None):
    """Return the ``KernelBuild`` of ``kernel`` (a ``KernelInfo``) for ``target`` (default: the
    first recorded; a recorded target or its visible form, as views list it);
    :class:`AsmUnavailable` naming the recorded targets otherwise."""
    builds = rec.kernel_builds(kernel)
    if not builds:
        raise AsmUnavailable(f"{visible_line(kernel.name)} was not compiled for any GPU target "
                             "(record the run with --target sm_90)")
    if target is None:
        return builds[0]
    m = re.fullmatch(r"(?:sm_?)?(\d{2,3})a?", target.strip().lower())
    want = f"sm_{m.group(1)}" if m else target
    for b in builds:
        if b.target == want or visible_line(b.target) == want:
            return b
    raise AsmUnavailable(f"{visible_line(kernel.name)} has no {visible_line(target)} build; "
                         f"recorded targets: {', '.join(visible_line(b.target) for b in builds)}")


def _visible_member(m: dict) -> dict:
    """Return a member entry with its ``sym`` and ``file`` made visible; other strings dropped."""
    return {k: (visible_line(v) if isinstance(v, str) else v) for k, v in m.items()
            if k not in ("sym", "file") or isinstance(v, str)}


def visible_build(build):
    """Return a copy of ``build`` (a ``KernelBuild``) whose recorded names a view may print (kernel,
    target, error, ``line_uids`` values, ``members`` uids and their ``sym``/``file``) are made
    visible, so uids still match between ``line_uids``, ``members`` and :class:`AsmRow`."""
    return replace(build, kernel=visible_line(build.kernel), target=visible_line(build.target),
                   error=None if build.error is None else visible_line(build.error),
                   line_uids={n: visible_line(u) for n, u in build.line_uids.items()},
                   members={visible_line(u): _visible_member(m) for u, m in build.members.items()
                            if isinstance(m, dict)})


def asm_listing(rec, kernel, target: Optional[str] = None, stage: str = "sass") -> AsmListing:
    """Return the annotated rows of ``stage`` of ``kernel``'s build for ``target``;
    :class:`AsmUnavailable` when the build failed or holds no such stage."""
    if stage not in STAGES:
        raise AsmUnavailable(f"unknown stage {visible_line(stage)}; use one of {', '.join(STAGES)}")
    build = pick_build(rec, kernel, target)
    if build.status != "ok":
        why = visible_line((build.error or build.status).splitlines()[0] if (build.error or build.status) else "")
        raise AsmUnavailable(f"the {visible_line(build.target)} build of {visible_line(kernel.name)} "
                             f"{build.status}: {why}")
    stages = rec.build_stages(build)  # read with the recorded target, before it is made visible
    if stages is None or stage not in stages.stages:
        raise AsmUnavailable(f"the {visible_line(build.target)} build of {visible_line(kernel.name)} "
                             f"has no {stage} stage recorded")
    build = visible_build(build)
    text = stages.stages[stage].splitlines()
    lines = stages.lines.get(stage) or []
    rows = []
    for i, t in enumerate(text):
        tl = lines[i] if i < len(lines) else 0
        uid = build.line_uids.get(tl) if tl else None
        m = build.members.get(uid) if uid else None  # visible_build made both sides visible
        m = m if isinstance(m, dict) else {}
        file = m.get("file") if isinstance(m.get("file"), str) else None
        line = m.get("line") if isinstance(m.get("line"), int) and not isinstance(m.get("line"), bool) else None
        sym = m.get("sym") if isinstance(m.get("sym"), str) else None
        rows.append(AsmRow(i, visible_line(t.expandtabs(8)), tl, uid, sym, file, line))
    source = tuple(visible_line(t.expandtabs(8)) for t in stages.source.splitlines())
    return AsmListing(visible_line(kernel.name), build.target, stage, build, tuple(rows), source)


def _same_file(recorded: Optional[str], asked: str) -> bool:
    if not recorded:
        return False
    if recorded == asked or os.path.basename(recorded) == asked:
        return True
    return recorded.endswith(os.sep + asked.lstrip(os.sep)) or os.path.abspath(asked) == recorded


def rows_for_source(listing: AsmListing, file: str, line: int) -> list[AsmRow]:
    """Return the rows generated for user source line ``file:line`` (``file``: a path, a path
    suffix or a base name)."""
    return [r for r in listing.rows if r.line == line and _same_file(r.file, file)]


def rows_for_uid(listing: AsmListing, uid: str) -> list[AsmRow]:
    """Return the rows generated for the member symbol ``uid``."""
    return [r for r in listing.rows if r.uid == uid]


def parse_source_arg(text: str) -> tuple[str, int]:
    """Return (file, line) of ``FILE:LINE``; ValueError (one sentence) otherwise."""
    file, sep, line = text.rpartition(":")
    if not sep or not file or not line.strip().isdigit() or int(line) < 1:
        raise ValueError(f"--source takes FILE:LINE (e.g. train_gpt.py:52), not {visible_line(text)[:60]!r}")
    return file, int(line)


def annotated_text(listing: AsmListing, rows=None, width: int = 72) -> str:
    """Return the rows as text: each stage line padded to ``width`` then ``# <op> <uid> <file:line>``."""
    out = []
    for r in listing.rows if rows is None else rows:
        note = " ".join(x for x in (r.sym and r.sym.removeprefix("prims."), r.uid and f"[{r.uid}]",
                                    r.where, r.triton_line and f"(triton line {r.triton_line})") if x)
        out.append(f"{r.text:<{width}}  # {note}" if note else r.text)
    return "\n".join(out) + ("\n" if out else "")


# ------------------------------------------------------------------------------ ls

def target_summary(build) -> dict:
    """Return the ``ls --json`` entry of one build: ``targets.sm_90`` of a fusion. ``roofline_us``
    is left for the roofline model (None until it is computed)."""
    occ = build.occupancy_detail or {}
    return {"status": build.status, "registers": build.registers, "spills": build.spills,
            "shared_bytes": build.shared_bytes, "local_bytes": build.local_bytes,
            "occupancy": build.occupancy, "occupancy_limited_by": occ.get("limited_by"),
            "num_warps": (build.resources or {}).get("num_warps"), "plan": build.plan.get("plan"),
            "grid": build.plan.get("grid"), "launches": len(build.plan.get("kernels") or []) or None,
            "instructions": (build.mix or {}).get("instructions"), "mix": build.mix or None,
            "compile_s": build.seconds, "error": build.error, "roofline_us": None}


def target_summaries(rec) -> dict:
    """Return {(graph, chain, kernel name): {target: :func:`target_summary`}} for a recording."""
    out: dict = {}
    for b in rec.kernel_builds():
        out.setdefault((b.graph, b.chain, b.kernel), {})[b.target] = target_summary(b)
    return out


def resources_text(registers, spills, shared_bytes, occupancy, grid=None, launches=None, short: bool = False) -> str:
    """Return what every view says of one build's machine resources and launch:
    ``64 regs · 0 spills · 1.5 KiB smem · occupancy 50% · grid 8 in 4 launches`` (``grid``
    None: no launch part); ``short``: the same numbers in fewer columns, for a narrow line
    (``64 regs · 0 spills · 1.5K smem · occ 50% · grid 8 ×4``)."""
    kib, occ, times = ("K", "occ", " ×{}") if short else (" KiB", "occupancy", " in {} launches")
    smem = shared_bytes or 0
    smem_text = f"{smem / 1024:.1f}{kib} smem" if smem else "no smem"
    text = f"{registers} regs · {spills} spills · {smem_text} · {occ} {format_occupancy(occupancy)}"
    if grid is not None:  # a recorded plan's value: any JSON, so shown as visible text
        text += f" · grid {visible_line(grid, 200)}" + (times.format(launches) if (launches or 0) > 1 else "")
    return text


def build_text(build, short: bool = False) -> str:
    """Return :func:`resources_text` of a recorded build (``KernelBuild``): its plan's grid and
    how many launches it takes (``short``: the narrow form)."""
    plan = build.plan or {}
    return resources_text(build.registers, build.spills, build.shared_bytes, build.occupancy,
                          plan.get("grid"), len(plan.get("kernels") or []) or None, short)


def target_line(targets: dict) -> Optional[str]:
    """Return the short per-target text ``ls`` prints under a fusion, e.g.
    ``sm_90: 64 regs · 0 spills · 1.5 KiB smem · occupancy 50% · grid 8``; None without builds."""
    parts = []
    for name, t in sorted(targets.items()):
        if t["status"] != "ok":
            first = (t.get("error") or "").splitlines()
            parts.append(f"{visible_line(name)}: {t['status']}" + (f" ({visible_line(first[0])[:80]})" if first else ""))
            continue
        parts.append(f"{visible_line(name)}: " + resources_text(t["registers"], t["spills"], t["shared_bytes"], t["occupancy"],
                                                  t["grid"], t.get("launches")))
    return " | ".join(parts) if parts else None
