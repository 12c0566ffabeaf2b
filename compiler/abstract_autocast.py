"""CUDA autocast in an abstract run, where CUDA is stood in for by CPU fake tensors.

CUDA autocast only casts CUDA tensors, so :func:`init_patch` turns ``torch.autocast("cuda", ...)``
(and ``torch.cuda.amp.autocast()``) into CPU autocast with the same dtype and flags. CPU autocast's op
lists are not CUDA's, so :func:`cuda_policies` registers, for the session, ``AutocastCPU`` kernels that
apply CUDA's policy to the ops where the two differ (torch 2.13: ``AT_FORALL_*`` in
``aten/src/ATen/autocast_mode.h``, which ``AutocastCUDA`` uses, against ``AutocastCPU``'s list in
``autocast_mode.cpp``; docs/abstract.md has the table). A CPU autocast region in an abstract run with a
visible GPU therefore acts as CUDA's would, whichever device name the script gave: every CPU tensor
there stands for a CUDA one.
"""
from __future__ import annotations

import warnings

import torch

aten = torch.ops.aten

# CUDA casts these to the autocast dtype; CPU autocast leaves them alone.
LOWER = ("mv", "addmv", "addr", "convolution", "_convolution", "lstm_cell", "gru_cell", "rnn_tanh_cell",
         "rnn_relu_cell", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell")
# CUDA runs these in float32 (its ``fp32`` list); CPU autocast leaves a bf16 input in bf16.
FP32 = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
        "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm",
        "native_layer_norm", "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim",
        "cosine_similarity", "dist", "pdist", "renorm", "logsumexp")
# CUDA gives these a float32 output dtype unless one is asked for (``fp32_set_opt_dtype``).
FP32_OUT = ("softmax.int", "log_softmax.int", "cumprod", "cumsum", "linalg_vector_norm", "linalg_matrix_norm",
            "sum", "sum.dim_IntList", "prod", "prod.dim_int")
# CUDA runs these in the widest floating type of their inputs (``promote``); CPU would raise on a mix.
# A mix of the two low-precision types (bf16 beside fp16) raises on CUDA, and here too.
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler", "index_put",
           "tensordot", "scatter_add")
# CPU autocast runs these in float32; CUDA autocast does not touch them.
PLAIN = ("avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "max_unpool2d", "max_unpool3d",
         "fractional_max_pool2d", "fractional_max_pool3d", "reflection_pad1d", "reflection_pad2d",
         "replication_pad1d", "replication_pad2d", "replication_pad3d", "grid_sampler_2d", "grid_sampler_3d",
         "polar", "trace")

_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)


def _overload(name: str):
    """Return the ATen overload ``name`` (``pow.Scalar``; a bare name is ``.default``), None if this
    torch has none."""
    op, _, overload = name.partition(".")
    return getattr(getattr(aten, op, None), overload or "default", None)


def _eligible(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64


def _cast(x, dtype):
    if _eligible(x):
        return x.to(dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(y, dtype) for y in x)
    return x


def _tensors(args):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _tensors(a)
        elif _eligible(a):
            yield a


def _kernel(op, policy: str):
    """Return the ``AutocastCPU`` kernel that runs ``op`` under CUDA's ``policy``."""
    dtype_at = next((i for i, a in enumerate(op._schema.arguments) if a.name == "dtype" and not a.kwarg_only), None)

    def run(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_KEYS):  # the redispatch must not come back here
            if policy == "lower":
                to = torch.get_autocast_dtype("cpu")
            elif policy == "fp32":
                to = torch.float32
            elif policy == "promote":
                low = torch.get_autocast_dtype("cpu")
                dtypes = {t.dtype for t in _tensors((args, tuple(kwargs.values())))}
                if dtypes - {torch.float32, low}:  # bf16 beside fp16: CUDA's prioritize raises, so do we
                    raise RuntimeError(f"Unexpected floating ScalarType in at::autocast::prioritize "
                                       f"({op} under CUDA autocast to {low} got {sorted(map(str, dtypes))})")
                to = torch.float32 if torch.float32 in dtypes else low
            elif policy == "plain":
                to = None
            else:  # fp32 output: set the dtype argument when the first input is eligible and none is given
                to = None
                if args and _eligible(args[0]):
                    if dtype_at is not None and len(args) > dtype_at:
                        if args[dtype_at] is None:
                            args = args[:dtype_at] + (torch.float32,) + args[dtype_at + 1:]
                    elif kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
            if to is not None:
                args, kwargs = _cast(args, to), {k: _cast(v, to) for k, v in kwargs.items()}
            return op(*args, **kwargs)
    return run


class Registration:
    """The session's ``AutocastCPU`` kernels; :meth:`remove` gives CPU autocast its own back."""

    def __init__(self):
        self.lib = torch.library.Library("aten", "IMPL")
        lists = ((LOWER, "lower"), (FP32, "fp32"), (FP32_OUT, "fp32_out"), (PROMOTE, "promote"), (PLAIN, "plain"))
        with warnings.catch_warnings():  # torch warns that a kernel is overridden: that is the point
            warnings.simplefilter("ignore")
            for names, policy in lists:
                for name in names:
                    op = _overload(name)
                    if op is not None:  # an op a later torch drops is simply not overridden
                        self.lib.impl(name, _kernel(op, policy), "AutocastCPU")

    def remove(self) -> None:
        """Deregister every kernel (torch's ``AutocastCPU`` ones apply again)."""
        self.lib._destroy()


def cuda_policies() -> Registration:
    """Register CUDA's autocast policy for the ops where CPU's differs (see the module doc); return
    the registration, whose ``remove()`` undoes it."""
    return Registration()


def init_patch() -> tuple:
    """Return (owner, name, replacement) for ``torch.autocast.__init__``: CUDA autocast becomes CPU
    autocast with the same dtype (CUDA's default, float16, when none is given) and the same enabled
    and cache flags. Patching ``__init__`` rather than the class keeps Dynamo's own handling of the
    context manager: it matches the class by identity and records ``torch.amp._enter_autocast("cuda",
    ...)`` in the graph, which AOTAutograd's tracing then enters through this same ``__init__``."""
    autocast = torch.amp.autocast_mode.autocast
    real_init = autocast.__init__

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "cuda":
            device_type, dtype = "cpu", torch.get_autocast_dtype("cuda") if dtype is None else dtype
        real_init(self, device_type, dtype, enabled, cache_enabled)
    return (autocast, "__init__", __init__)
