"""The answer of an abstract run, per target GPU: does the step fit, and how long does it take.

Computed once from the recording (the ``abstract_*`` events, the memory ledger, the roofline costs of
every final trace); ``run`` prints it, ``ls`` (text and ``--json``), the TUI and the widget lay it out.

Memory, per step: parameters and gradients (the ledger), the optimizer state its first step made
(what ``optimizer.step()`` allocated, read from the optimizer; torch's AdamW keeps two states per
parameter in the parameter's dtype), and the activations: the static peak of the compiled chains,
less the gradients when the peak is in the backward (the backward's peak counts the gradients it has
produced so far). Total against the GPU's memory (HBM_BYTES: datasheet capacities).

Step time: every kernel and torch op of one call of each chain (present.roofline's costs) at the GPU's
achievable rates (thundervis.gpu_rates: measured GEMM, attention and copy rates, GEMM wave
quantization, one launch per kernel), never below the physical floor ``6 · N · tokens / peak bf16``:
N the parameters' elements, tokens the elements of the first graph's integer input (token ids), else
its first input's rows. The MFU is the floor over the modelled time. The pure roofline (every kernel
at datasheet peak) is shown beside it as the lower bound. Breakdowns (modelled time) by kernel, by
module block (repeated layers folded: ``model.layers.0–31 × 32``) and by source line (a fusion's time
goes to its first member's line). A run that compiled no graph has nothing to model, and says so.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Optional

from thundervis.gpu_rates import rates_for
from thundervis.gpus import GPUS
from thundervis.present.kernel_folds import layer_of
from thundervis.present.units import format_bytes, plural

# Datasheet HBM capacities (decimal GB), the SXM/HGX parts of thundervis.gpus.GPUS.
HBM_BYTES = {"a100": 80e9, "h100": 80e9, "h200": 141e9, "b200": 180e9}
NOTHING_COMPILED = "no graph compiled before the run stopped: nothing to model"
NOTHING_RAN = "no graph compiled: nothing to model"


@dataclass(frozen=True)
class GpuAnswer:
    """One GPU's answer: memory fit and step time (µs): ``modelled_us`` at the achievable rates,
    ``step_us`` the same raised to the floor when below it, ``roofline_us`` at datasheet peak (the
    lower bound), and the breakdowns of the modelled time."""

    key: str
    name: str
    capacity: float
    total: int
    step_us: float
    roofline_us: float
    floor_us: Optional[float]
    modelled_us: float
    by_kernel: tuple  # (label, µs), largest first
    by_block: tuple
    by_line: tuple

    @property
    def fits(self) -> bool:
        """Whether the step's memory fits the GPU."""
        return self.total <= self.capacity

    @property
    def mfu(self) -> Optional[float]:
        """The model FLOPs utilization the modelled time implies (floor / modelled)."""
        return self.floor_us / self.step_us if self.floor_us and self.step_us else None

    @property
    def ratio(self) -> Optional[float]:
        """The modelled step over the floor (None without a floor)."""
        return self.step_us / self.floor_us if self.floor_us else None

    def as_json(self) -> dict:
        """Return the JSON form: ``step_us`` (modelled, at least the floor), ``floor_us``,
        ``roofline_us`` (datasheet peak), ``ratio``, ``mfu`` and the breakdowns."""
        rows = lambda rs: [{"label": lab, "us": us} for lab, us in rs]  # noqa: E731
        return {"gpu": self.key, "name": self.name, "memory_bytes": self.capacity, "total_bytes": self.total,
                "fits": self.fits, "step_us": self.step_us, "modelled_us": self.modelled_us,
                "roofline_us": self.roofline_us, "floor_us": self.floor_us, "ratio": self.ratio, "mfu": self.mfu,
                "model": "achievable rates (thundervis.gpu_rates; docs/targets.md)", "by_kernel": rows(self.by_kernel),
                "by_block": rows(self.by_block), "by_line": rows(self.by_line)}


@dataclass(frozen=True)
class AbstractAnswer:
    """What an abstract run answers: placeholders, where it stopped, memory and step time per GPU."""

    device: str
    placeholders: tuple  # {kind, file, line, code, count}
    stopped: Optional[dict]
    parameters: int
    gradients: int
    optimizer_state: int
    optimizer: str
    activations: int
    remat_saves: int  # bytes --remat auto would save over what ran (0: nothing, or auto ran)
    folding: str  # how repeated layers folded: regions planned, kernels compiled once per distinct one
    param_elements: int
    tokens: int
    gpus: tuple  # GpuAnswer; () when nothing compiled
    compiled: bool = True  # False: no graph compiled, so there is no memory or step to model

    @property
    def total(self) -> int:
        """Bytes of the step: parameters, gradients, optimizer state and the activations live at the step's peak."""
        return self.parameters + self.gradients + self.optimizer_state + self.activations

    def memory_line(self) -> str:
        """Return ``memory  parameters 16.1 GB + gradients ... = 61.2 GB``."""
        opt = f"optimizer state ({self.optimizer}) {_gb(self.optimizer_state)}" if self.optimizer else \
            "optimizer state 0 GB (no optimizer step ran)"
        return (f"memory  parameters {_gb(self.parameters)} + gradients {_gb(self.gradients)} + {opt} + "
                f"activations at the peak {_gb(self.activations)} = {_gb(self.total)}")

    def fit_text(self, g: GpuAnswer) -> str:
        """Return ``fits: 61.2 of 80 GB`` or ``short by 9.4 GB: --remat auto saves 6.1 GB``, with
        the fewest GPUs a fully sharded run needs when remat alone cannot close the gap
        (:meth:`sharded_gpus`)."""
        if g.fits:
            return f"fits: {_gb(g.total)} of {_gb(g.capacity)}"
        short = f"short by {_gb(g.total - g.capacity)} of {_gb(g.capacity)}"
        if self.remat_saves > 0:
            short += f": --remat auto saves {_gb(self.remat_saves)}"
        n = self.sharded_gpus(g) if g.total - self.remat_saves > g.capacity else None
        if n is not None:
            each = (self.parameters + self.gradients + self.optimizer_state) / n + self.activations
            short += (f"; fully sharded (FSDP, ZeRO-3) it needs at least {n} of them: {_gb(each)} each "
                      "before the gathered layers")
        return short

    def sharded_gpus(self, g: GpuAnswer) -> Optional[int]:
        """Return the fewest ``g`` GPUs over which a fully sharded data-parallel run (FSDP, ZeRO-3:
        parameters, gradients and optimizer state split evenly, each GPU keeping the activations of
        this step's batch) fits, before the buffers of the layers it gathers; None when one GPU
        fits or when the activations alone do not fit (sharding the state cannot help then)."""
        state = self.parameters + self.gradients + self.optimizer_state
        room = g.capacity - self.activations
        if g.fits or room <= 0 or state <= 0:
            return None
        n = -(-state // int(room))  # ceil
        return int(n) if n > 1 else None

    def step_text(self, g: GpuAnswer) -> str:
        """Return the modelled step line: the time at achievable rates, the floor, the ratio, the MFU,
        and the roofline at datasheet peak."""
        floor = ""
        if g.floor_us:
            raised = " (raised to the floor)" if g.modelled_us < g.floor_us else ""
            floor = (f"; floor 6·N·tokens/peak bf16 = {_ms(g.floor_us)} (N {_count(self.param_elements)}, "
                     f"{self.tokens} tokens), {g.ratio:.2f}x the floor, MFU {g.mfu:.0%}{raised}")
        return f"modelled step {_ms(g.step_us)} at achievable rates{floor}; at datasheet peak {_ms(g.roofline_us)}"

    def nothing_text(self) -> str:
        """Return why there is nothing to model (a run that compiled no graph), else ''."""
        if self.compiled:
            return ""
        return NOTHING_COMPILED if self.stopped else NOTHING_RAN

    def text_lines(self, top: int = 3) -> list[str]:
        """Return the lines ``run`` and ``ls`` print."""
        seen = ("the script saw a GPU, stood in for by CPU fake tensors" if self.device == "cuda" else
                "the script saw no GPU (--device cpu)")
        out = [f"abstract run: fake tensors, nothing allocated, no kernel executed ({seen})"]
        if self.placeholders:
            sites = ", ".join(f"{os.path.basename(p['file'])}:{p['line']} {p['kind']}"
                              + (f" ×{p['count']}" if p["count"] > 1 else "") for p in self.placeholders[:5])
            more = f" and {len(self.placeholders) - 5} more" if len(self.placeholders) > 5 else ""
            out.append(f"placeholders (values not computed): {sites}{more}")
        if self.stopped:
            out.append(f"stopped: {self.stopped.get('message', '')}")
        if not self.compiled:
            out.append(self.nothing_text())
            return out
        if self.folding:
            out.append(self.folding)
        out.append(self.memory_line())
        for g in self.gpus:
            out.append(f"{g.name}: {self.fit_text(g)} · {self.step_text(g)}")
        if self.gpus:
            g = self.gpus[0]
            for title, rows in (("by kernel", g.by_kernel), ("by block", g.by_block), ("by line", g.by_line)):
                if rows:
                    out.append(f"  {title} ({g.key}): " + ", ".join(f"{lab} {_ms(us)}" for lab, us in rows[:top]))
        return out

    def as_json(self) -> dict:
        """Return the ``ls --json`` ``abstract`` object. A run that compiled no graph has
        ``compiled`` false, ``nothing_to_model`` saying so, null byte counts and no GPUs. Each GPU
        carries the achievable ``rates`` it was modelled with, each figure's source beside it."""
        known = (lambda v: v) if self.compiled else (lambda v: None)  # noqa: E731
        return {"abstract": True, "device": self.device, "placeholders": list(self.placeholders),
                "stopped": self.stopped, "compiled": self.compiled, "nothing_to_model": self.nothing_text() or None,
                "parameters_bytes": known(self.parameters), "gradients_bytes": known(self.gradients),
                "optimizer_state_bytes": known(self.optimizer_state), "optimizer": self.optimizer,
                "activations_bytes": known(self.activations), "total_bytes": known(self.total),
                "remat_saves_bytes": known(self.remat_saves), "param_elements": known(self.param_elements),
                "tokens": known(self.tokens), "folding": self.folding,
                "gpus": [dict(g.as_json(), fit=self.fit_text(g), step=self.step_text(g),
                              sharded_gpus=self.sharded_gpus(g), rates=rates_for(g.key).as_json())
                         for g in self.gpus]}


def _count(n: int) -> str:
    """Return a parameter count as ``8.03 B`` / ``1.7 M``."""
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.3g} M"


def _gb(n: float) -> str:
    """Return ``61.2 GB`` (one decimal from 0.1 GB up, smaller sizes in their own unit)."""
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else format_bytes(int(n))


def _ms(us: float) -> str:
    """Return a time in its unit: ``1.97 s``, ``412 ms``, ``12.5 µs``."""
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    return f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.3g} µs"


def _key(spec) -> Optional[str]:
    """Return the GPU key of a spec (``h200``, ``sm_80``), None when the table has none."""
    from thundervis.gpus import UnknownGPU, gpu_for
    try:
        return gpu_for(str(spec)).key
    except UnknownGPU:
        return None


def _int(v) -> int:
    """Return ``v`` as a non-negative int (0 for anything else: recorded values are untrusted)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _sites(rec) -> tuple:
    """Return the placeholder sites as {kind, file, line, code, count} with checked types: the
    run's summary, else (a run that ended before it) the sites as they came, once each."""
    raw = _last(rec, "abstract_placeholders")
    if not isinstance(raw, list) or not raw:
        raw = [dict(e.data, count=1) for e in rec.events("abstract_placeholder") if isinstance(e.data, dict)]
    return tuple({"kind": str(p.get("kind", "")), "file": str(p.get("file", "")), "line": _int(p.get("line")),
                  "code": str(p.get("code", "")), "count": max(1, _int(p.get("count")))}
                 for p in raw if isinstance(p, dict))


def _last(rec, name: str):
    events = rec.events(name)
    return events[-1].data if events else None


def block_of(module: str) -> str:
    """Return the folded block of a module path: ``model.layers.7.mlp`` -> ``model.layers.#``; a
    path without an index keeps its first two parts."""
    found = layer_of(module)
    if found:
        return f"{found[0]}.#" if found[0] else "#"
    return ".".join((module or "(no module)").split(".")[:2])


def fold_label(block: str, indices: set) -> str:
    """Return ``model.layers.0–31 × 32`` for a folded block, the block itself otherwise."""
    if not block.endswith("#") or not indices:
        return block
    lo, hi, head = min(indices), max(indices), block[:-1]
    return f"{head}{lo}–{hi} × {len(indices)}" if len(indices) > 1 else f"{head}{lo}"


def _attribution(rec, costs) -> tuple[dict, dict]:
    """Return ({(graph, chain, uid): (module, "file.py:LINE")}, {(graph, chain, uid): (batch, M, N, K)}
    of every matrix product) from each modelled chain's final trace (stored costs carry no shapes)."""
    from thundervis.compiler.roofline_cost import gemm_dims
    out, dims = {}, {}
    for (graph, chain) in costs:
        try:
            ref = next(c.last for g in rec.overview().graphs if g.id == graph for c in g.chains if c.kind == chain)
            trace = rec.pass_trace(ref)
        except Exception:  # a chain whose trace cannot be read is attributed to nothing
            continue
        for b in trace.symbols:
            src = b.source or next((s.source for s in b.subsymbols if s.source is not None), None)
            if src is not None:
                out[(graph, chain, b.uid)] = (src.module, f"{os.path.basename(src.file)}:{src.line}")
            if not b.fusion and (d := gemm_dims(b)):
                dims[(graph, chain, b.uid)] = d
    return out, dims


def _folding(rec) -> str:
    """Return how repeated blocks folded: ``folded: 550 of 3933 regions planned; 586 kernels, 29 distinct,
    each compiled once for sm_90`` (empty when nothing was recorded)."""
    parts = []
    fold = _last(rec, "abstract_folding")
    if isinstance(fold, dict) and _int(fold.get("regions_asked")):
        parts.append(f"{_int(fold.get('regions_planned'))} of {_int(fold['regions_asked'])} candidate regions planned")
    aot, started = _last(rec, "aot_finished"), _last(rec, "aot_started")
    if isinstance(aot, dict) and _int(aot.get("kernels")):
        targets = ", ".join(str(t) for t in (started or {}).get("targets", [])) if isinstance(started, dict) else ""
        parts.append(f"{plural(_int(aot['kernels']), 'kernel')}, {_int(aot.get('distinct'))} distinct, each compiled once"
                     + (f" for {targets}" if targets else ""))
    return ("folded: " + "; ".join(parts)) if parts else ""


def _kernel_folds(rec) -> dict:
    """Return {(graph, chain, kernel name): label}: a repeated layer's kernels share the label
    ``fw_fusion_3 × 32``, as the kernel table folds them (present.kernel_folds)."""
    from .kernel_folds import fold_labels, kernel_folds
    try:
        return fold_labels(kernel_folds(rec))
    except Exception:  # unreadable kernel rows: every kernel stands alone
        return {}


def _tokens(rec) -> int:
    """Return the tokens of a step: the most elements of an integer input (token ids) of the first
    four graphs' forward chains, else the rows of graph 0's first input of two or more dimensions."""
    inputs = []
    try:
        for g in rec.overview().graphs[:4]:
            for c in g.chains:
                if c.kind in ("forward", "inference") and c.passes:
                    inputs.append(rec.pass_trace(c.passes[0].ref).inputs)
    except Exception:  # an unreadable trace: no token count, so no floor
        pass
    ints = [p for ins in inputs for p in ins if p.dtype.startswith("int") and p.shape]
    if ints:
        return max(p.numel for p in ints)
    floats = [p for p in (inputs[0] if inputs else ()) if len(p.shape) >= 2]
    return floats[0].numel // floats[0].shape[-1] if floats else 0


def abstract_answer(rec, gpus: Optional[list] = None) -> Optional[AbstractAnswer]:
    """Return the :class:`AbstractAnswer` of recording ``rec``, or None when the run was not abstract.
    ``gpus``: GPU keys to answer for (None: those the run named)."""
    run = _last(rec, "abstract_run")
    if not isinstance(run, dict):
        return None
    from thundervis.present.memory import memory_report
    from thundervis.present.roofline import chain_costs
    keys = list(dict.fromkeys(_key(k) for k in (gpus or run.get("gpus") or ["h100"]) if _key(k)))
    places = _sites(rec)
    stopped = _last(rec, "abstract_stopped")
    opts = [{k: _int(v) if k != "optimizer" else str(v) for k, v in o.items()}
            for o in (_last(rec, "abstract_optimizers") or []) if isinstance(o, dict)]
    mem = memory_report(rec)
    grads = mem.gradients
    peak_in_backward = " backward " in f" {mem.peak_where} "
    # The step peak counts the parameters once (and, in the backward, the gradients made by then):
    # they have their own lines, so the activations are the rest.
    activations = max(0, mem.peak_bytes - mem.parameters - (grads if peak_in_backward else 0))
    remat = 0
    if mem.recorded and "auto" not in mem.policy.split("/"):
        remat = max(0, mem.what_if.get("off", 0) - mem.what_if.get("auto", 0))
    params = mem.parameters or sum(o.get("param_bytes", 0) for o in opts)
    elements = sum(o.get("param_elements", 0) for o in opts)
    if not elements and params:
        elements = params // 2  # bf16 assumed when no optimizer step told the element count
    costs = chain_costs(rec)
    compiled = any(costs.values())
    (where, dims), folds = _attribution(rec, costs), _kernel_folds(rec)
    tokens = _tokens(rec)
    answers = []
    for k in (keys if compiled else ()):
        g, rates = GPUS[k], rates_for(k)
        kern, block, line, indices = {}, {}, {}, {}
        roof = 0.0
        for (graph, chain), cs in costs.items():
            for c in cs:
                roof += c.roofline_us(g)
                d = dims.get((graph, chain, c.uid))
                us = (replace(c, dims=d) if d and not c.dims else c).modelled_us(rates)
                name = folds.get((graph, chain, c.name), c.name)  # a repeated layer's kernels fold
                kern[name] = kern.get(name, 0.0) + us
                module, label = where.get((graph, chain, c.uid), ("", "(no source line)"))
                b = block_of(module)
                found = layer_of(module)
                if found:
                    indices.setdefault(b, set()).add(found[1])
                block[b] = block.get(b, 0.0) + us
                line[label] = line.get(label, 0.0) + us
        modelled = sum(kern.values())
        floor = 6 * elements * tokens / g.bf16_flops * 1e6 if elements and tokens else None
        top = lambda d: tuple(sorted(d.items(), key=lambda kv: -kv[1])[:10])  # noqa: E731
        answers.append(GpuAnswer(k, g.name, HBM_BYTES.get(k, 0.0), params + grads + sum(
            o.get("state_bytes", 0) for o in opts) + activations, max(modelled, floor or 0.0), roof, floor,
            modelled, top(kern), tuple((fold_label(b, indices.get(b, set())), us) for b, us in top(block)),
            top(line)))
    return AbstractAnswer(run.get("device", "cuda"), places, stopped if isinstance(stopped, dict) else None,
                          params, grads, sum(o.get("state_bytes", 0) for o in opts),
                          ", ".join(o.get("optimizer", "") for o in opts), activations, remat, _folding(rec),
                          elements, tokens, tuple(answers), compiled)
