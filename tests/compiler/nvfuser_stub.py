"""A stub nvFuser ``FusionDefinition`` for the nvFuser executor's tests (nvFuser cannot be installed
here): it records the ops a generated definition calls and evaluates them with torch under
nvFuser's rules, refusing what nvFuser would refuse."""
from __future__ import annotations

import torch

from thundervis.compiler.executors.nvfuser_codegen import DATATYPE

# nvFuser ops both frontends (nvfuser_direct and nvfuser) bind; the generated programs use no others.
NVFUSER_OPS = set("""abs acos acosh asin asinh atan atanh ceil cos cosh exp exp2 expm1 erf erfc erfinv
floor lgamma log log10 log1p log2 neg logical_not bitwise_not reciprocal round rsqrt set sign sigmoid
signbit sin sinh sqrt tan tanh trunc isnan add atan2 div fmod mul nextafter pow remainder sub minimum
maximum eq ge gt le lt ne logical_and logical_or bitwise_and bitwise_or bitwise_xor where clamp max
min prod sum var var_mean cast broadcast_in_dim reshape permute squeeze slice cat pad full""".split())

# --------------------------------------------------------------------------------------------------
# A stub FusionDefinition that records calls and evaluates them under nvFuser's rules


class _Scalar:
    def __init__(self, value, dtype):
        self.value, self.dtype = value, dtype


_TORCH = {v: getattr(torch, k) for k, v in DATATYPE.items()}


class _StubDataType:
    def __getattr__(self, name):
        if name not in _TORCH:
            raise AttributeError(name)
        return name


class _StubOps:
    def __init__(self, fd):
        self.fd = fd

    def __getattr__(self, op):
        if op not in NVFUSER_OPS:
            raise AttributeError(f"nvFuser has no op {op}")

        def call(*args, **kwargs):
            self.fd.calls.append(op)
            return getattr(self.fd, f"_op_{op}", None)(*args, **kwargs) if hasattr(self.fd, f"_op_{op}") \
                else self.fd._pointwise(op, *args, **kwargs)
        return call


class StubFusionDefinition:
    """Records calls; evaluates with torch, refusing what nvFuser would refuse."""

    def __init__(self, inputs):
        self.inputs, self.outputs, self.calls = list(inputs), [], []
        self.ops = _StubOps(self)

    def define_tensor(self, shape, contiguity, dtype, is_cpu=False, stride_order=()):
        self.calls.append("define_tensor")
        t = self.inputs.pop(0)
        assert len(shape) == t.dim() == len(contiguity) == len(stride_order)
        assert all((s == 1) == (n == 1) for s, n in zip(shape, t.shape)), (shape, t.shape)
        assert _TORCH[dtype] == t.dtype and sorted(stride_order) == list(range(t.dim()))
        order = sorted(range(t.dim()), key=lambda d: -stride_order[d])
        assert all(t.stride(a) >= t.stride(b) for a, b in zip(order, order[1:]))
        return t

    def define_scalar(self, value, dtype):
        self.calls.append("define_scalar")
        return _Scalar(value, dtype)

    def add_output(self, t):
        self.calls.append("add_output")
        self.outputs.append(t)

    @staticmethod
    def _operands(args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        assert tensors, "an op needs a tensor"
        shape, dtype = tensors[0].shape, tensors[0].dtype
        for a in args:  # nvFuser gets no implicit cross-shape broadcast or mixed dtypes from us
            if isinstance(a, torch.Tensor):
                assert a.shape == shape and a.dtype == dtype, (a.shape, shape, a.dtype, dtype)
            else:
                assert _TORCH[a.dtype] == dtype, (a.dtype, dtype)
        return [a if isinstance(a, torch.Tensor) else torch.tensor(a.value, dtype=dtype) for a in args]

    def _pointwise(self, op, *args):
        vals = self._operands(args)
        if op == "div" and not vals[0].is_floating_point():
            return torch.div(vals[0], vals[1], rounding_mode="trunc")
        fn = getattr(torch, op)
        return fn(*vals)

    def _op_where(self, c, a, b):
        assert c.dtype == torch.bool and c.shape == a.shape
        a, b = self._operands([a, b])
        return torch.where(c, a, b)

    def _op_cast(self, x, dtype):
        return x.to(_TORCH[dtype])

    def _op_set(self, x):
        return x.clone()

    def _op_broadcast_in_dim(self, x, shape, broadcast_dims):
        assert len(broadcast_dims) == x.dim() and list(broadcast_dims) == sorted(broadcast_dims)
        view = [1] * len(shape)
        for i, d in enumerate(broadcast_dims):
            assert x.shape[i] in (1, shape[d])
            view[d] = x.shape[i]
        return x.reshape(view).expand(shape)

    def _reduce(self, fn, x, dims, keepdim):
        assert list(dims) == sorted(set(dims)) and all(0 <= d < x.dim() for d in dims)
        return fn(x, dims, keepdim)

    def _op_sum(self, x, dims, keepdim=False):
        return self._reduce(lambda a, d, k: torch.sum(a, d, k), x, dims, keepdim)

    def _op_max(self, x, dims, keepdim=False):
        return self._reduce(lambda a, d, k: torch.amax(a, d, k), x, dims, keepdim)

    def _op_min(self, x, dims, keepdim=False):
        return self._reduce(lambda a, d, k: torch.amin(a, d, k), x, dims, keepdim)

    def _op_var(self, x, dims, correction, keepdim=False):
        assert isinstance(correction, int)
        return self._reduce(lambda a, d, k: torch.var(a, d, correction=correction, keepdim=k), x, dims, keepdim)

    def _op_reshape(self, x, new_shape):
        assert -1 not in new_shape
        return x.reshape(new_shape)

    def _op_permute(self, x, dims):
        assert sorted(dims) == list(range(x.dim()))
        return x.permute(dims)

    def _op_squeeze(self, x, dims):
        assert all(x.shape[d] == 1 for d in dims)
        return x.squeeze(tuple(dims))

    def _op_slice(self, x, start_indices, end_indices, strides):
        assert all(0 <= s <= e <= n for s, e, n in zip(start_indices, end_indices, x.shape))
        return x[tuple(slice(s, e, st) for s, e, st in zip(start_indices, end_indices, strides))]

    def _op_cat(self, tensors, dim):
        assert len({t.dtype for t in tensors}) == 1 and 0 <= dim < tensors[0].dim()
        return torch.cat(tensors, dim)

    def _op_pad(self, x, pad_widths, value):
        assert _TORCH[value.dtype] == x.dtype
        return torch.nn.functional.pad(x, pad_widths, value=value.value)

    def _op_full(self, shape, fill_value, dtype):
        return torch.full(shape, fill_value.value, dtype=_TORCH[dtype])
