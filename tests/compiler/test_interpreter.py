"""The reference interpreter runs the trace of every pass and matches the eager FX graph; printed
traces are runnable Python that matches too; the codegen callable matches and frees its inputs."""
from __future__ import annotations

import pytest
import torch

from thundervis.compiler import PrintOptions, print_trace
from thundervis.compiler.executors import get_executor
from thundervis.compiler.interpreter import run_trace
from thundervis.compiler.passes.codegen import codegen
from thundervis.compiler.prims import prims

# The chain that runs starts at the remat pass: acquire holds the remat=off split of the joint
# graph, which takes other inputs than the ones captured (what the remat=auto split was given).
PASSES = ["remat", "decompose", "cse", "dce", "claim", "liveness", "codegen"]
CASES = [(run, chain) for run in ("mlp_run", "gpt_run") for chain in ("forward", "backward")]


def _clone(args):
    return [a.clone() for a in args]


def _assert_outputs_close(got, want, rtol, atol, what):
    got, want = list(got), list(want)
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, rtol=rtol, atol=atol, msg=f"{what}: output {i}")
        else:
            assert g == w, f"{what}: output {i}"


@pytest.fixture(scope="module", params=CASES, ids=[f"{r.split('_')[0]}-{c}" for r, c in CASES])
def case(request):
    """(pass traces of one chain, its FX graph module, its first-call inputs, the eager outputs)."""
    run_name, chain = request.param
    run = request.getfixturevalue(run_name)
    gm, inputs = run.capture.case(chain)
    traces = run.recorder.traces(chain)
    assert set(PASSES) <= set(traces)
    with torch.no_grad():
        want = gm(*_clone(inputs))
    return traces, gm, inputs, want


@pytest.mark.parametrize("expand", [True, False], ids=["prims", "aten"])
@pytest.mark.parametrize("pass_name", PASSES)
def test_run_trace_matches_eager(case, pass_name, expand):
    traces, _, inputs, want = case
    trace = traces[pass_name]
    with torch.no_grad():
        got = run_trace(trace, _clone(inputs), expand=expand)
    # Running the prims changes rounding (e.g. layer norm's variance); the ATen ops are the same
    # kernels eager runs.
    rtol, atol = (1e-4, 1e-5) if expand else (1e-6, 1e-7)
    _assert_outputs_close(got, want, rtol, atol, f"{trace.chain}/{pass_name}")


def test_run_trace_checks_arity(case):
    traces, _, inputs, _ = case
    with pytest.raises(ValueError):
        run_trace(traces["remat"], inputs[:-1])


@pytest.mark.parametrize("pass_name", ["remat", "decompose", "liveness"])
def test_printed_trace_runs(case, pass_name):
    """The printed form is runnable Python (the text was generated here, in memory)."""
    traces, _, inputs, want = case
    trace = traces[pass_name]
    text = print_trace(trace, PrintOptions(header=False))
    namespace = {"torch": torch, "aten": torch.ops.aten, "prims": prims}
    exec(compile(text, f"<printed {trace.chain}>", "exec"), namespace)
    with torch.no_grad():
        got = namespace[trace.chain](*_clone(inputs))
    _assert_outputs_close(got, want, 1e-6, 1e-7, f"printed {trace.chain}/{pass_name}")


def test_codegen_callable_matches_and_frees_inputs(case):
    traces, _, inputs, want = case
    final, fn = codegen(traces["liveness"], [get_executor("torch")])
    assert final.meta["python"].startswith(f"def {final.chain}(args):")
    assert "del " in final.meta["python"]
    args = _clone(inputs)
    with torch.no_grad():
        got = fn(args)
    assert args == []  # boxed convention: the callable clears its input list
    _assert_outputs_close(got, want, 1e-6, 1e-7, "codegen")
