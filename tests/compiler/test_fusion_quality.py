"""The kernel counting of ``benchmarks/fusion_quality.py`` (no compilation here)."""
from __future__ import annotations

import importlib.util
import pathlib

from thundervis.compiler.ir import BoundSymbol, TensorProxy

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "fusion_quality.py"
_spec = importlib.util.spec_from_file_location("fusion_quality", _PATH)
fq = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fq)

INDUCTOR_OUTPUT = '''
cpp_fused_add_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r\'\'\'
extern "C" void kernel(const float* in_ptr0, float* out_ptr0) { out_ptr0[0] = in_ptr0[0]; }
\'\'\')
triton_per_fused_softmax_1 = async_compile.triton('triton_per_fused_softmax_1', \'\'\'
def triton_per_fused_softmax_1(in_ptr0): pass
\'\'\')
async_compile.wait(globals())
del async_compile

class Runner:
    def __init__(self, partitions):
        self.partitions = partitions

    def call(self, args):
        primals_1, primals_2 = args
        args.clear()
        buf0 = empty_strided_cpu((4, 4), (4, 1), torch.float32)
        # Topologically Sorted Source Nodes: [add], Original ATen: [aten.add]
        cpp_fused_add_0(primals_1, buf0)
        buf1 = reinterpret_tensor(buf0, (16, ), (1, ), 0); del buf0  # reuse
        extern_kernels.mm(buf1, primals_2, out=buf2)
        buf3 = torch.ops.aten.embedding_dense_backward.default(buf2, primals_1, 49, -1, False)
        buf4.zero_()
        triton_per_fused_softmax_1.run(buf2, stream=stream0)
        cpp_fused_add_0(buf2, buf5)
        return (buf5, )

runner = Runner(partitions=[])
call = runner.call
'''


def test_counts_inductor_launches_and_extern_calls():
    generated, extern = fq.count_inductor_code(INDUCTOR_OUTPUT)
    assert generated == 3  # cpp_fused_add_0 twice (a reused kernel launches twice) + the triton kernel
    assert extern == 3  # mm, the ATen fallback, the zero_ fill; never reinterpret_tensor or allocations


def _p(name, shape=(4, 4)):
    return TensorProxy(name, tuple(shape), "float32", "cpu", None)


def test_counts_our_launches_without_views():
    a, b = _p("a"), _p("b")
    view = BoundSymbol(sym="prims.view", args=(a, [16]), kwargs={}, outputs=_p("v", (16,)), uid="f0")
    perm = BoundSymbol(sym="aten.t.default", args=(a,), kwargs={}, outputs=b, uid="f1",
                       subsymbols=(BoundSymbol(sym="prims.permute", args=(a, [1, 0]), kwargs={}, outputs=b, uid="f2"),))
    mm = BoundSymbol(sym="prims.mm", args=(a, b), kwargs={}, outputs=_p("m"), uid="f3")
    fusion = BoundSymbol(sym="fw_fusion_0", args=(a,), kwargs={}, outputs=(_p("c"),), uid="f4",
                         subsymbols=(BoundSymbol(sym="prims.exp", args=(a,), kwargs={}, outputs=_p("c"), uid="f5"),),
                         executor="triton", fusion=True)
    dels = BoundSymbol(sym="del", args=(a,), kwargs={}, outputs=None, uid="f6")
    assert [fq.launches(s) for s in (view, perm, mm, fusion, dels)] == [0, 0, 1, 1, 0]
