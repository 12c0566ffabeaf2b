"""Every kernel of real models compiles for GPU targets ahead of time, with no GPU here (slow: real
ptxas builds). The example for sm_80 and sm_90 with no failure and no spill; the model zoo and a
24-layer tiny Llama for sm_90 with no failure (the zoo with no single-program kernel over more than
one block); one Llama-7B layer at full size (hidden 4096, seq
2048, vocab 32000, bf16), planned from shapes alone on meta tensors, for sm_80 and sm_90 with no
failure and no single-program kernel over more than one block (its spills are printed per target:
the test report lists them)."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch

from thundervis.compiler import CompileObserver, ThundervisCompiler
from thundervis.compiler.aot.plan import plan_for_gpu, region_members
from thundervis.compiler.aot.pool import AheadOfTime
from thundervis.compiler.backend import reset_graph_ids
from thundervis.compiler.executors.triton_region import GPU_ROW_BLOCK
from thundervis.compiler.executors.triton_index import numel

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


class Builds(CompileObserver):
    """Keeps kernel records and submits them to an AheadOfTime; keeps every build."""

    def __init__(self):
        self.records, self.builds, self.failures = [], [], []

    def kernels_built(self, graph, chain, kernels):
        self.records += [k for k in kernels if k.executor == "triton"]

    def kernel_compiled(self, graph, chain, kernel, target, build):
        self.builds.append((graph, chain, kernel, target, build))

    def chain_failed(self, graph, chain, error, tb):
        self.failures.append((graph, chain, error))


def compile_all(records, targets, workers=2):
    obs = Builds()
    aot = AheadOfTime(targets, obs, workers=workers)
    for r in records:
        aot.submit(0, "forward" if r.name.startswith("fw") else "backward", [r])
    return aot.finish(3000), obs.builds


def spans_one_program(record) -> int:
    """Return the elements a kernel walks when its GPU plan runs a single program over more than
    one block's worth of data (0 when it does not)."""
    ks = plan_for_gpu(record).kernel
    if any(k.grid > 1 for k in ks.kernels):
        return 0
    members, _ = region_members(record)
    sizes = [numel(p.shape) for b in members for p in b.flat_outputs()]
    sizes += [numel(b.args[0].shape) for b in members if b.sym.startswith("prims.") and
              b.sym[6:] in ("sum", "amax", "amin", "mean", "var")]
    biggest = max(sizes, default=0)
    return biggest if biggest > GPU_ROW_BLOCK else 0


def _failed(builds):
    return [(k, t, b["status"], (b.get("error") or "")[:300]) for _, _, k, t, b in builds if b["status"] != "ok"]


def test_example_compiles_for_sm80_and_sm90_without_spills():
    sys.path.insert(0, str(REPO / "examples"))
    from train_gpt import build, train
    torch._dynamo.reset()
    reset_graph_ids()
    obs = Builds()
    aot = AheadOfTime((80, 90), obs, workers=2)
    model, batches = build()
    backend = ThundervisCompiler(executors=["triton", "torch"], observer=obs, aot=aot)
    train(model, batches, steps=1, compile_fn=lambda m: torch.compile(m, backend=backend))
    stats = aot.finish(3000)
    assert obs.records and not obs.failures
    assert stats["failed"] == 0 and stats["unfinished"] == 0 and stats["distinct"] < stats["kernels"]
    assert not _failed(obs.builds)
    assert len(obs.builds) == 2 * len(obs.records)
    spills = [(k, t, b["resources"]["spills"]) for _, _, k, t, b in obs.builds if b["resources"]["spills"]]
    assert spills == []
    assert [(r.name, n) for r in obs.records if (n := spans_one_program(r))] == []


def _zoo():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import model_zoo
    model_zoo.import_torchvision()
    return model_zoo


@pytest.mark.parametrize("name", ["mistral", "qwen2", "phi", "gpt2", "t5", "vit", "distilbert", "resnet18"])
def test_model_zoo_compiles_for_sm90(name):
    zoo = _zoo()
    torch.manual_seed(0)
    torch._dynamo.reset()
    reset_graph_ids()
    model, batch, loss_fn = zoo.MODELS[name]()
    obs = Builds()
    aot = AheadOfTime((90,), obs, workers=2)
    run = torch.compile(model, backend=ThundervisCompiler(executors=["triton", "torch"], observer=obs, aot=aot))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(run(**batch)).backward()
    stats = aot.finish(3000)
    # A kernel that fell back ran its region in torch: the step matched eager without our kernel.
    assert [str(w.message) for w in caught if "failed on its first launch" in str(w.message)] == []
    assert obs.records, name
    assert _failed(obs.builds) == [] and stats["unfinished"] == 0
    assert [(r.name, n) for r in obs.records if (n := spans_one_program(r))] == []


def _planned(step, *args):
    from thundervis.compiler.backend import plan_records
    records, failures = plan_records(step, *args)
    assert records and failures == []
    return records


def _llama_step(compile, model, ids):
    out = compile(model)(ids, labels=ids, use_cache=False)
    out.loss.backward()


def test_tiny_llama_24_layers_compiles_for_sm90():
    _zoo()  # transformers imports torchvision
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=24,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg)
    records = _planned(_llama_step, model, torch.zeros(2, 16, dtype=torch.long, device="meta"))
    stats, builds = compile_all(records, (90,))
    assert _failed(builds) == [] and stats["unfinished"] == 0
    assert stats["distinct"] < len(records) / 4  # 24 identical layers share their builds


def test_llama_7b_layer_plans_and_compiles_for_sm80_and_sm90(capsys):
    _zoo()
    import transformers
    cfg = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
                                   num_key_value_heads=32, vocab_size=32000, max_position_embeddings=2048,
                                   num_hidden_layers=1, attn_implementation="eager")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    records = _planned(_llama_step, model, torch.zeros(1, 2048, dtype=torch.long, device="meta"))
    assert any("looped" in plan_for_gpu(r).kernel.source for r in records)  # the 32000-wide softmax
    assert [(r.name, n) for r in records if (n := spans_one_program(r))] == []
    stats, builds = compile_all(records, (80, 90))
    with capsys.disabled():
        print(f"\nLlama-7B layer: {len(records)} kernels, {stats['distinct']} distinct")
        for target in ("sm_80", "sm_90"):
            ok = [(k, b["resources"]) for _, _, k, t, b in sorted(builds, key=lambda x: x[2])
                  if t == target and b["status"] == "ok"]
            failed = [f for f in _failed(builds) if f[1] == target]
            spilled = [(k, r) for k, r in ok if r["spills"] or r["spill_store_bytes"]]
            print(f"  {target}: {len(ok)} ok, {len(failed)} failed, {len(spilled)} with spills")
            for k, r in spilled:
                print(f"    spills: {k} {r['registers']} regs, {r['spills']} words local, "
                      f"{r['spill_store_bytes']} B spill stores")
    assert _failed(builds) == [] and stats["unfinished"] == 0
