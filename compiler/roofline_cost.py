"""The roofline cost of a trace: bytes moved and FLOPs of every kernel and torch op of a chain's
final trace, and the time a GPU (``thundervis.gpus.GPU``: HBM bandwidth and dense peaks) needs at
least for them. The recording writer stores the costs of every chain's final trace
(``recording/costs.py``); views model them on the GPUs of ``thundervis.gpus``.

``roofline µs = max(bytes / HBM bandwidth, FLOPs / peak FLOP/s)`` for the op's precision: a lower
bound. ``modelled µs`` (``Cost.modelled_us``) is the same max at the GPU's achievable rates
(``thundervis.gpu_rates``: measured GEMM, attention, copy rates), a matrix product slowed by its wave
quantization over the SMs, plus one kernel launch. What is counted (docs/targets.md, "Roofline model", says the same for users):

- **Bytes**: each input read once and each output written once, at the elements its strides reach:
  a broadcast input (stride 0) is read once, not per element. An input the kernel only gathers from
  or slices (embedding, index, gather, index_select, slice, select) counts the elements those ops
  take, at most the whole tensor. Values between a fusion's members stay on chip (not counted).
- **FLOPs**: one per output element of an elementwise op (transcendental functions included), one
  per input element of a reduction (``mean`` adds one per output, ``var`` counts three per input),
  ``2·M·N·K`` per matrix product, ``2·B·H·L·S·(E+Ev)`` for attention (half when causal; backward
  2.5x forward), ``2·out·Cin/groups·kernel`` for a convolution (backward 2x). Shape ops, copies,
  conversions, factories, random numbers and indexing count none; a torch op without a formula
  counts one per output element.
- **Precision**: fusions compute in FP32 on CUDA cores (Triton upcasts 16-bit loads), so they use
  the FP32 peak; matrix products, attention and convolutions use the tensor-core peak of their input
  dtype (bf16/fp16: BF16, float8: FP8); FP32 matmuls use the FP32 (non-tensor) peak because torch
  leaves TF32 off by default. FP64 has no peak in the table: its time is the memory term alone.

Pure functions over the trace IR (:mod:`.ir`); no torch, no Triton, no file, nothing of thundervis
core (a GPU is any object with ``hbm_bytes_per_s`` and ``peak_flops(precision)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from .ir import BoundSymbol, TensorProxy, Trace

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "uint16": 2, "uint32": 4,
            "uint64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}

UNARY = set("""abs neg exp exp2 expm1 log log1p log2 log10 sin cos tan asin acos atan sinh cosh tanh asinh
acosh atanh sqrt rsqrt reciprocal sigmoid erf erfc erfinv floor ceil round trunc sign logical_not
bitwise_not isnan lgamma digamma signbit relu gelu silu""".split())
BINARY = set("""add sub mul div pow maximum minimum remainder fmod atan2 eq ne lt le gt ge logical_and
logical_or logical_xor bitwise_and bitwise_or bitwise_xor copysign nextafter""".split())
TERNARY = {"where", "clamp"}
REDUCTION = {"sum", "amax", "amin", "prod", "any", "all", "argmax", "argmin", "mean", "var"}
# Ops that move or create data and compute nothing.
NO_FLOPS = set("""convert_element_type _to_copy to_copy copy clone cat constant_pad_nd flip index_select gather
index index_put scatter embedding full iota arange scalar_tensor empty empty_strided full_like zeros_like
ones_like rand rand_like randn randn_like randint randint_like normal normal_functional uniform log_normal
multinomial bernoulli native_dropout tensor_constant""".split())
# Ops torch runs as views of their input: no data moves.
VIEWS = set("""view _unsafe_view reshape expand permute squeeze unsqueeze slice alias select t transpose
as_strided detach split split_with_sizes unbind view_as expand_as narrow""".split())
# Ops that read only part of their first input: the elements they output.
PARTIAL_READERS = {"slice", "select", "index_select", "gather", "index", "embedding", "narrow"}
MATMULS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "addbmm"}
KINDS = ("fusion", "matmul", "attention", "conv", "op", "view")  # what a Cost can be
PRECISIONS = ("fp32", "bf16", "fp8", "fp64")  # the peaks a Cost can be held to


@dataclass(frozen=True)
class Cost:
    """What one kernel or torch op moves and computes: ``kind`` is ``fusion``, ``matmul``,
    ``attention``, ``conv``, ``op`` or ``view`` (no data moved); ``precision`` the peak it is held
    to (``fp32``, ``bf16``, ``fp8``, ``fp64``)."""

    name: str
    uid: str
    kind: str
    bytes_read: int
    bytes_written: int
    flops: int
    precision: str = "fp32"
    # A matrix product's (batch, M, N, K), for its wave quantization; () unknown. Not stored with the
    # costs (table symbol_costs), so it takes no part in equality: a stored cost equals its trace's.
    dims: tuple = field(default=(), compare=False)


    @property
    def bytes(self) -> int:
        """Bytes read plus bytes written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> Optional[float]:
        """FLOPs per byte moved (None when nothing moves)."""
        return self.flops / self.bytes if self.bytes else None

    def memory_us(self, gpu) -> float:
        """Microseconds the bytes take at ``gpu``'s HBM bandwidth."""
        return self.bytes / gpu.hbm_bytes_per_s * 1e6

    def compute_us(self, gpu) -> float:
        """Microseconds the FLOPs take at ``gpu``'s dense peak for this precision (0 without a peak)."""
        peak = gpu.peak_flops(self.precision)
        return self.flops / peak * 1e6 if peak else 0.0

    def roofline_us(self, gpu) -> float:
        """``max(bytes / bandwidth, FLOPs / peak)`` on ``gpu``, in microseconds."""
        return max(self.memory_us(gpu), self.compute_us(gpu))

    def modelled_us(self, rates) -> float:
        """Microseconds the op takes at ``rates``' achievable figures (``thundervis.gpu_rates.Rates``,
        or any object with its attributes): ``max(bytes / achievable bandwidth, FLOPs / achievable
        rate)``, a matrix product's rate lowered by its wave quantization (:func:`wave_efficiency`),
        plus one launch. A view is not a kernel: 0."""
        if self.kind == "view":
            return 0.0
        memory = self.bytes / rates.hbm_bytes_per_s * 1e6
        if self.precision == "fp64":
            rate, efficiency = None, 1.0
        elif self.kind in ("matmul", "conv"):
            rate = rates.gemm_flops(self.precision)
            efficiency = wave_efficiency(self.dims, rates.sms, rates.tile)
        elif self.kind == "attention" and self.precision != "fp32":
            rate = rates.attention_bwd if "backward" in self.name else rates.attention_fwd
            efficiency = 1.0
        else:  # fusions and torch ops compute on CUDA cores
            rate, efficiency = rates.fp32_flops, 1.0
        compute = self.flops / (rate * efficiency) * 1e6 if rate else 0.0
        return max(memory, compute) + rates.launch_us

    def bound(self, gpu) -> str:
        """``memory`` or ``compute``: which term sets the roofline time on ``gpu``."""
        return "compute" if self.compute_us(gpu) > self.memory_us(gpu) else "memory"

    def as_json(self) -> dict:
        """Return every field plus ``bytes`` and ``intensity``."""
        return {"name": self.name, "uid": self.uid, "kind": self.kind, "bytes_read": self.bytes_read,
                "bytes_written": self.bytes_written, "bytes": self.bytes, "flops": self.flops,
                "precision": self.precision, "intensity": self.intensity}


# ------------------------------------------------------------------------------- tensors

def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def itemsize(dtype: str) -> int:
    """Return the bytes per element of a dtype name (4 for a name the table does not know)."""
    return ITEMSIZE.get(str(dtype), 4)


def addressed_elements(shape, strides=None) -> int:
    """Return how many distinct memory elements a tensor of ``shape`` and ``strides`` reaches: a
    dimension of stride 0 (a broadcast) reaches one element along it. Unknown strides: every element."""
    shape = tuple(int(s) for s in shape)
    if strides is None or len(tuple(strides)) != len(shape):
        return _numel(shape)
    n = 1
    for size, stride in zip(shape, strides):
        n *= 1 if int(stride) == 0 else size
    return n


def tensor_bytes(p: TensorProxy) -> int:
    """Return the bytes a kernel reads or writes for proxy ``p`` (broadcasts read once)."""
    return addressed_elements(p.shape, p.strides) * itemsize(p.dtype)


def op_name(sym: str) -> str:
    """Return the bare op of a symbol name: ``prims.add`` -> ``add``, ``aten.addmm.default`` ->
    ``addmm``, ``torch.nn.functional.linear`` -> ``linear``."""
    parts = str(sym).split(".")
    if parts[0] == "aten" and len(parts) >= 3:
        return parts[1]
    return parts[-1] if parts[0] in ("prims", "aten", "torch") else str(sym)


def _tensors(values) -> list[TensorProxy]:
    return [v for v in values if isinstance(v, TensorProxy)]


def _unique(proxies: Iterable[TensorProxy]) -> list[TensorProxy]:
    seen, out = set(), []
    for p in proxies:
        if p.name not in seen:
            seen.add(p.name)
            out.append(p)
    return out


def precision_of(dtype: str) -> str:
    """Return the peak a matrix product on ``dtype`` inputs is held to: ``bf16`` (bf16 and fp16
    tensor cores), ``fp8``, ``fp64`` or ``fp32``."""
    d = str(dtype)
    if d in ("bfloat16", "float16"):
        return "bf16"
    if d.startswith("float8"):
        return "fp8"
    return "fp64" if d == "float64" else "fp32"


# ---------------------------------------------------------------------------------- FLOPs

# Where each attention op takes ``is_causal`` positionally (ATen schemas).
CAUSAL_POSITION = {
    "scaled_dot_product_attention": 5, "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_flash_attention_for_cpu": 4, "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_cudnn_attention": 6, "_scaled_dot_product_flash_attention_backward": 11,
    "_scaled_dot_product_flash_attention_for_cpu_backward": 7,
    "_scaled_dot_product_efficient_attention_backward": 11, "_scaled_dot_product_cudnn_attention_backward": 14,
}


def _is_causal(b: BoundSymbol) -> bool:
    if isinstance(b.kwargs.get("is_causal"), bool):
        return b.kwargs["is_causal"]
    position = CAUSAL_POSITION.get(op_name(b.sym))
    return position is not None and len(b.args) > position and b.args[position] is True


def attention_flops(b: BoundSymbol) -> int:
    """Return the FLOPs of a scaled-dot-product attention symbol (forward or backward): the two
    matrix products ``2·B·H·L·S·(E+Ev)``, halved when causal, times 2.5 for the backward."""
    backward = "backward" in b.sym
    ts = [a for a in b.args if isinstance(a, TensorProxy)]
    q, k, v = (ts[1:4] if backward else ts[0:3]) if len(ts) >= (4 if backward else 3) else (None, None, None)
    if q is None or len(q.shape) < 2 or len(k.shape) < 2 or len(v.shape) < 2:
        return 0
    batch = _numel(q.shape[:-2])
    L, E, S, Ev = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    flops = 2 * batch * L * S * (E + Ev)
    if _is_causal(b):
        flops //= 2
    return int(flops * 2.5) if backward else flops


def conv_flops(b: BoundSymbol) -> int:
    """Return the FLOPs of ``aten.convolution`` (``2·out·Cin/groups·kernel``; transposed: per input
    element) or of its backward (twice the forward: input and weight gradients)."""
    ts = [a for a in b.args if isinstance(a, TensorProxy)]
    backward = "backward" in b.sym
    if backward:  # convolution_backward(grad_out, input, weight, ...)
        if len(ts) < 3:
            return 0
        grad, x, w = ts[0], ts[1], ts[2]
        return 2 * 2 * _numel(grad.shape) * _numel(w.shape[1:])
    if len(ts) < 2:
        return 0
    x, w = ts[0], ts[1]
    transposed = len(b.args) > 6 and b.args[6] is True
    outs = b.flat_outputs()
    if transposed:
        return 2 * _numel(x.shape) * _numel(w.shape[1:])
    return 2 * (_numel(outs[0].shape) if outs else 0) * _numel(w.shape[1:])


def matmul_flops(b: BoundSymbol) -> int:
    """Return ``2·M·N·K`` (times the batch) for mm, bmm, addmm, baddbmm, matmul and linear (plus one
    per output element for an added bias)."""
    name = op_name(b.sym)
    ts = [a for a in b.args if isinstance(a, TensorProxy)]
    outs = b.flat_outputs()
    if not outs or not ts:
        return 0
    out = _numel(outs[0].shape)
    if name in ("addmm", "baddbmm", "addbmm"):  # (bias, a, b): the product plus the bias
        a = ts[1] if len(ts) >= 3 else ts[0]
        batch = int(a.shape[0]) if name == "addbmm" and len(a.shape) == 3 else 1
        return 2 * batch * out * int(a.shape[-1]) + out if a.shape else 0
    if name == "linear":
        return 2 * out * int(ts[0].shape[-1]) + (out if len(ts) >= 3 else 0) if ts[0].shape else 0
    a = ts[0]
    return 2 * out * int(a.shape[-1]) if a.shape else 0


def gemm_dims(b: BoundSymbol) -> tuple:
    """Return ``(batch, M, N, K)`` of a matrix-product symbol (``addbmm`` sums its batch into K),
    () for anything else or shapes it cannot read."""
    name = op_name(b.sym)
    ts, outs = [a for a in b.args if isinstance(a, TensorProxy)], b.flat_outputs()
    if name not in MATMULS or not ts or not outs or not outs[0].shape:
        return ()
    a = ts[1] if name in ("addmm", "baddbmm", "addbmm") and len(ts) >= 3 else ts[0]
    if not a.shape:
        return ()
    out, k = tuple(int(s) for s in outs[0].shape), int(a.shape[-1])
    n = out[-1]
    if name == "addbmm":
        return (1, _numel(out) // max(n, 1), n, k * (int(a.shape[0]) if len(a.shape) == 3 else 1))
    second = ts[-1]
    if len(out) >= 3 and (name in ("bmm", "baddbmm") or (name == "matmul" and len(second.shape) > 2)):
        return (_numel(out[:-2]), out[-2], n, k)
    return (1, _numel(out) // max(n, 1), n, k)


def wave_efficiency(dims: tuple, sms: int, tile: tuple) -> float:
    """Return the fraction of a GEMM's tile slots that do useful work: its output ``B·M·N`` over the
    waves of ``tm × tn`` tiles it needs on ``sms`` SMs (one tile per SM per wave; the better of the
    tile's two orientations). 1.0 when the dimensions are unknown."""
    if len(dims) != 4 or sms <= 0 or min(dims[:3]) <= 0:
        return 1.0
    batch, m, n, _ = dims
    best = 0.0
    for tm, tn in (tuple(tile), tuple(tile)[::-1]):
        tiles = batch * -(-m // tm) * -(-n // tn)
        waves = -(-tiles // sms)
        best = max(best, batch * m * n / (waves * sms * tm * tn))
    return best


def op_flops(b: BoundSymbol) -> int:
    """Return the FLOPs of one (non-fusion) symbol, by the rules in this module's docstring."""
    name = op_name(b.sym)
    outs = b.flat_outputs()
    out = sum(_numel(o.shape) for o in outs[:1])
    ins = _tensors(b.args)
    if "scaled_dot_product" in b.sym or "flash_attention" in b.sym or "efficient_attention" in b.sym:
        return attention_flops(b)
    if name.startswith("convolution"):
        return conv_flops(b)
    if name in MATMULS:
        return matmul_flops(b)
    if name in VIEWS or name in NO_FLOPS or not outs:
        return 0
    if name == "scatter_add":
        return _numel(ins[-1].shape) if ins else 0
    if name in REDUCTION:
        n_in = _numel(ins[0].shape) if ins else out
        return 3 * n_in if name == "var" else n_in + (out if name == "mean" else 0)
    if name in UNARY or name in BINARY or name in TERNARY:
        return out
    if b.subsymbols:  # a decomposed op: what its pieces compute
        return sum(op_flops(s) for s in b.subsymbols)
    return out


# ---------------------------------------------------------------------------------- costs

def _uses(members: tuple[BoundSymbol, ...]) -> dict:
    """Return {proxy name: [(member, positions where it reads the proxy)]} over ``members``."""
    uses: dict = {}
    for m in members:
        at: dict = {}
        for i, a in enumerate(m.args):
            if isinstance(a, TensorProxy):
                at.setdefault(a.name, []).append(i)
        for k, a in m.kwargs.items():
            if isinstance(a, TensorProxy):
                at.setdefault(a.name, []).append(k)
        for name, positions in at.items():
            uses.setdefault(name, []).append((m, positions))
    return uses


def _read_bytes(p: TensorProxy, uses: dict) -> int:
    """Bytes a region reads of its input ``p`` (``uses``: :func:`_uses` of its members): the whole
    tensor (broadcasts once), or, when every member that uses it only gathers from or slices it,
    the elements those members take."""
    full = tensor_bytes(p)
    taken = 0
    for m, positions in uses.get(p.name, ()):
        if op_name(m.sym) not in PARTIAL_READERS or positions != [0]:
            return full
        taken += sum(_numel(o.shape) for o in m.flat_outputs()[:1]) * itemsize(p.dtype)
    return min(full, taken) if taken else full


def fusion_cost(b: BoundSymbol) -> Cost:
    """Return the cost of one fusion symbol (its region's inputs, outputs and member ops)."""
    members = b.subsymbols
    uses = _uses(members)
    read = sum(_read_bytes(p, uses) for p in _unique(b.flat_inputs()))
    written = sum(tensor_bytes(p) for p in _unique(b.flat_outputs()))
    flops = sum(op_flops(m) for m in members)
    dtypes = {p.dtype for m in members for p in m.flat_outputs()}
    return Cost(b.sym, b.uid, "fusion", read, written, flops, "fp64" if "float64" in dtypes else "fp32")


def op_cost(b: BoundSymbol) -> Optional[Cost]:
    """Return the cost of one top-level non-fusion symbol (None when it makes no tensor: ``del``,
    Python values). Views move nothing; other ops read their inputs and write their outputs."""
    outs = b.flat_outputs()
    if not outs:
        return None
    name = op_name(b.sym)
    if name in VIEWS:
        return Cost(b.sym, b.uid, "view", 0, 0, 0)
    ins = _unique(b.flat_inputs())
    uses = _uses((b,))
    read = sum(_read_bytes(p, uses) for p in ins)
    written = sum(tensor_bytes(p) for p in _unique(outs))
    flops = op_flops(b)
    if "scaled_dot_product" in b.sym or "flash_attention" in b.sym or "efficient_attention" in b.sym:
        kind = "attention"
    elif name.startswith("convolution"):
        kind = "conv"
    elif name in MATMULS:
        kind = "matmul"
    else:
        return Cost(b.sym, b.uid, "op", read, written, flops, "fp64" if outs[0].dtype == "float64" else "fp32")
    first = next(iter(_tensors(b.args[1:] if "backward" in b.sym else b.args)), outs[0])
    return Cost(b.sym, b.uid, kind, read, written, flops, precision_of(first.dtype),
                gemm_dims(b) if kind == "matmul" else ())


def trace_costs(trace: Trace) -> list[Cost]:
    """Return the cost of every top-level symbol of a chain's final trace that makes a tensor,
    in call order: one call of the chain runs each once."""
    out = []
    for b in trace.symbols:
        c = fusion_cost(b) if b.fusion else op_cost(b)
        if c is not None:
            out.append(c)
    return out


def total_us(costs: Iterable[Cost], gpu) -> float:
    """Return the summed roofline time of ``costs`` on ``gpu`` (microseconds)."""
    return sum(c.roofline_us(gpu) for c in costs)
