"""Roofline rows every view shows: per kernel and torch matmul/attention its bytes, FLOPs and
roofline µs on a target GPU next to its measured time, and the modelled step time per target.

Reads through the reader API only (the costs stored with each chain's final pass, else its final
trace; kernels, timings, events) and models them (``compiler/roofline_cost.py``) on the GPUs of
:mod:`thundervis.gpus`; torch-free. A measured time
is compared with the roofline (``% of roofline``) only when it was measured on a GPU: nothing here
calls a CPU time a GPU time.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from thundervis.gpus import DEFAULT_TARGET, GPU, TARGET_GPU, gpu_for
from thundervis.compiler.roofline_cost import trace_costs

from .units import format_roofline_us, plural

STEP_CHAINS = ("forward", "backward", "inference")  # what one training or inference step calls
MODELLED_KINDS = ("fusion", "matmul", "attention", "conv")  # the rows of the roofline table


# ------------------------------------------------------------------------------- targets

def recorded_targets(rec) -> list[str]:
    """Return the targets the run was planned for (``run --target``: the ``aot_started`` event, else
    the targets of the recorded kernel builds), in order; [] when none was recorded."""
    found: list = []
    for e in rec.events("aot_started"):
        data = e.data.get("targets") if isinstance(e.data, dict) else None
        if isinstance(data, list):
            found.extend(data)
    if not found and callable(getattr(rec, "kernel_builds", None)):
        found = [b.target for b in rec.kernel_builds()]
    out = []
    for t in found:
        t = str(t).strip().lower()
        t = f"sm_{t}" if t.isdigit() else t
        if t and t not in out:
            out.append(t)
    return out


def model_targets(rec, gpus: Optional[Iterable[str]] = None) -> tuple[dict[str, GPU], bool]:
    """Return ({target: GPU} to model on, assumed): the recorded targets (each on its table GPU),
    else ``sm_90`` with ``assumed`` True (:func:`assumption` says why). ``gpus`` (``h200``,
    ``sm_80`` ...) picks the GPUs instead; raises :class:`thundervis.gpus.UnknownGPU` for a name the
    table lacks."""
    if gpus:
        chosen = [gpu_for(s) for s in gpus]
        return {g.arch if g.key == TARGET_GPU.get(g.arch) or _alone(g, chosen) else f"{g.arch}:{g.key}": g
                for g in chosen}, False
    known = {t: gpu_for(t) for t in recorded_targets(rec) if t in TARGET_GPU}
    if known:
        return known, False
    return {DEFAULT_TARGET: gpu_for(DEFAULT_TARGET)}, True


def assumption(rec) -> str:
    """Return why ``sm_90`` is assumed: no target recorded, or none of the recorded ones in the table."""
    targets = recorded_targets(rec)
    if not targets:
        return "no target recorded: sm_90 assumed"
    return f"recorded targets {', '.join(targets)} are not in the GPU table: sm_90 assumed"


def _alone(g: GPU, chosen: list[GPU]) -> bool:
    return sum(1 for c in chosen if c.arch == g.arch) == 1


# ---------------------------------------------------------------------------------- costs

class ChainCosts(dict):
    """{(graph, chain): costs of its final trace in call order}, plus ``left_out``: the chains not
    modelled, as (graph, chain, why) (a failed chain ran eagerly; a damaged trace cannot be read)."""

    def __init__(self, costs=(), left_out=()):
        super().__init__(costs)
        self.left_out = tuple(left_out)


def chain_costs(rec, cache: Optional[dict] = None) -> ChainCosts:
    """Return the :class:`ChainCosts` of every forward, backward or inference chain of the recording:
    the costs the writer stored with its final pass (``Recording.roofline_costs``), else (older
    recordings) those of its final trace, read and costed here. ``cache`` (a dict the caller keeps,
    keyed by final pass): a live viewer re-reads only new chains."""
    from thundervis.recording import RecordingError
    costs, left_out = {}, []
    try:
        stored = rec.roofline_costs() if callable(getattr(rec, "roofline_costs", None)) else {}
    except RecordingError:  # damaged stored costs: cost the traces instead
        stored = {}
    for g in rec.overview().graphs:
        for c in g.chains:
            if c.kind not in STEP_CHAINS:
                continue
            if c.status != "compiled" or c.last is None:
                left_out.append((g.id, c.kind, "ran eagerly" if c.status == "failed" else c.status))
                continue
            if (g.id, c.kind) in stored and c.passes[-1].name == "codegen":
                costs[(g.id, c.kind)] = stored[(g.id, c.kind)]
                continue
            try:
                if cache is not None and c.last in cache:
                    costs[(g.id, c.kind)] = cache[c.last]
                    continue
                costs[(g.id, c.kind)] = trace_costs(rec.pass_trace(c.last))
                if cache is not None:
                    cache[c.last] = costs[(g.id, c.kind)]
            except RecordingError as e:
                left_out.append((g.id, c.kind, str(e)))
    return ChainCosts(costs, left_out)


@dataclass(frozen=True)
class RooflineRow:
    """One kernel or torch matmul/attention/convolution of one chain on one GPU: what it moves and
    computes, its roofline µs and which term bounds it, and its measured median (``clock`` says
    whose: ``device`` on a GPU, ``host`` for CPU wall time). ``pct_of_roofline`` (roofline / measured)
    is set only for a time measured on a GPU."""

    graph: int
    chain: str
    name: str
    uid: str
    kind: str
    kernel_id: Optional[int]
    bytes_read: int
    bytes_written: int
    flops: int
    precision: str
    target: str
    gpu: str
    roofline_us: float
    bound: str
    measured_us: Optional[float] = None
    clock: Optional[str] = None
    measured_on: Optional[str] = None
    pct_of_roofline: Optional[float] = None

    def as_json(self) -> dict:
        """Return every field (the widget's and ``--json`` form)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _measured_on_gpu(timing) -> bool:
    return timing is not None and timing.clock == "device" and str(timing.device).startswith("cuda")


def roofline_rows(rec, gpu: Optional[str] = None, costs=None) -> list[RooflineRow]:
    """Return the roofline rows of every fusion kernel and torch matmul/attention/convolution of the
    compiled chains, in chain call order, on ``gpu`` (a target or GPU name; default the first
    recorded target, else ``sm_90``). ``costs``: a :func:`chain_costs` result to reuse."""
    if gpu:
        g = gpu_for(gpu)
        target = g.arch
    else:
        target, g = next(iter(model_targets(rec)[0].items()))
    costs = chain_costs(rec) if costs is None else costs
    ov = rec.overview()
    kernels = {(k.graph, k.chain, k.uid): k for gr in ov.graphs for k in gr.kernels}
    timings = {(t.graph, t.chain, t.uid): t for gr in ov.graphs for t in gr.timings.kernels}
    rows = []
    for (graph, chain), cs in costs.items():
        for c in cs:
            if c.kind not in MODELLED_KINDS:
                continue
            k = kernels.get((graph, chain, c.uid))
            t = (k.timing if k is not None else None) or timings.get((graph, chain, c.uid))
            roof = c.roofline_us(g)
            measured = t.median_us if t is not None else None
            pct = roof / measured * 100 if _measured_on_gpu(t) and measured else None
            rows.append(RooflineRow(graph, chain, c.name, c.uid, c.kind, k.id if k is not None else None,
                                    c.bytes_read, c.bytes_written, c.flops, c.precision, target, g.name, roof,
                                    c.bound(g), measured, t.clock if t else None, t.device if t else None, pct))
    return rows


def target_label(rec, gpu: Optional[str] = None) -> str:
    """Return what the roofline column is modelled on, e.g. ``sm_90 H100 SXM`` (``, assumed`` when
    no target was recorded and none was asked for)."""
    if gpu:
        g = gpu_for(gpu)
        return f"{g.arch} {g.name}"
    targets, assumed = model_targets(rec)
    t, g = next(iter(targets.items()))
    return f"{t} {g.name}" + (f" ({assumption(rec)})" if assumed else "")


# ------------------------------------------------------------------------ per fusion, per step

def fusion_targets(rec, costs=None, gpus: Optional[Iterable[str]] = None) -> dict:
    """Return {(graph, chain, kernel uid): {target: {"roofline_us", "bound"}}} for every fusion on
    every modelled target: what ``ls --json`` merges into each fusion's ``targets`` (the AOT
    builds add registers, spills, shared memory and occupancy beside it)."""
    targets, _ = model_targets(rec, gpus)
    costs = chain_costs(rec) if costs is None else costs
    out: dict = {}
    for (graph, chain), cs in costs.items():
        for c in cs:
            if c.kind == "fusion":
                out[(graph, chain, c.uid)] = {t: {"roofline_us": c.roofline_us(g), "bound": c.bound(g)}
                                              for t, g in targets.items()}
    return out


def fusion_model(costs) -> dict:
    """Return {(graph, chain, kernel uid): {"bytes_read", "bytes_written", "flops", "intensity",
    "precision"}} of every fusion (target-independent)."""
    return {(graph, chain, c.uid): {"bytes_read": c.bytes_read, "bytes_written": c.bytes_written, "flops": c.flops,
                                    "intensity": c.intensity, "precision": c.precision}
            for (graph, chain), cs in costs.items() for c in cs if c.kind == "fusion"}


@dataclass(frozen=True)
class StepModel:
    """The modelled time of one step on one target: the roofline µs of every kernel and torch op of
    one call of each compiled forward/backward/inference chain, per chain and in total.
    ``assumed``: no target was recorded, so ``sm_90`` was used."""

    target: str
    gpu: str
    total_us: float
    chains: tuple[tuple[int, str, float], ...]  # (graph, chain, µs)
    kernels: int
    torch_ops: int
    assumed: bool = False
    left_out: tuple = ()  # (graph, chain, why) of the chains not modelled
    why: str = ""  # why sm_90 was assumed (``assumption``)

    def as_json(self) -> dict:
        """Return the ``modelled_step.<target>`` object of ``ls --json`` (``us`` null when no chain
        compiled: nothing to model, not a step of 0 µs)."""
        return {"gpu": self.gpu, "us": self.total_us if self.chains else None, "assumed": self.assumed,
                "assumed_why": self.why,
                "kernels": self.kernels,
                "torch_ops": self.torch_ops,
                "chains": [{"graph": g, "chain": c, "us": us} for g, c, us in self.chains],
                "left_out": [{"graph": g, "chain": c, "why": why} for g, c, why in self.left_out]}

    def text(self) -> str:
        """Return the ``ls`` line, e.g. ``modelled step  sm_90 H100 SXM  3.8 µs (forward 1.5 + ...)``."""
        by_chain: dict[str, float] = {}
        for _, c, us in self.chains:
            by_chain[c] = by_chain.get(c, 0.0) + us
        parts = " + ".join(f"{c} {format_roofline_us(us)}" for c, us in by_chain.items())
        if not self.chains:
            why = f" ({', '.join(f'graph {g} {c}: {w}' for g, c, w in self.left_out[:3])})" if self.left_out else ""
            return f"modelled step  {self.target} {self.gpu}  nothing to model: no graph compiled{why}"
        note = f" · {self.why or 'no target recorded: sm_90 assumed'} (run --target, or ls --gpu)" \
            if self.assumed else ""
        if self.left_out:
            note += f" · {plural(len(self.left_out), 'chain')} not modelled ({', '.join(f'graph {g} {c}' for g, c, _ in self.left_out[:3])}" \
                    + (" ..." if len(self.left_out) > 3 else "") + ")"
        return (f"modelled step  {self.target} {self.gpu}  {format_roofline_us(self.total_us)} µs"
                + (f" ({parts})" if parts else "")
                + f" · roofline of {plural(self.kernels, 'kernel')} and {plural(self.torch_ops, 'torch op')}, one call per chain{note}")


def step_models(rec, gpus: Optional[Iterable[str]] = None, costs=None) -> list[StepModel]:
    """Return the modelled step time on every modelled target (:func:`model_targets`)."""
    targets, assumed = model_targets(rec, gpus)
    costs = chain_costs(rec) if costs is None else costs
    moving = [c for cs in costs.values() for c in cs if c.kind != "view"]
    kernels = sum(1 for c in moving if c.kind == "fusion")
    out = []
    for t, g in targets.items():
        chains = tuple((graph, chain, sum(c.roofline_us(g) for c in cs)) for (graph, chain), cs in costs.items())
        out.append(StepModel(t, g.name, sum(us for _, _, us in chains), chains, kernels, len(moving) - kernels,
                             assumed, tuple(getattr(costs, "left_out", ())), assumption(rec) if assumed else ""))
    return out
