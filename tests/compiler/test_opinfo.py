"""A representative subset of the OpInfo sweep (``scripts/opinfo_coverage.py`` runs all of it).

Per op, with the device's default executors (what users run): compiled forward and gradients match
eager, the decomposed traces run through the reference interpreter (prims, not the parent ATen ops)
match the ATen traces, and the ops a transformer's training uses lower to prims completely.
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]


def _load_harness():
    """Return ``scripts/opinfo_harness.py`` as a module (scripts/ is not a package)."""
    name = "thundervis_opinfo_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "opinfo_harness.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


h = _load_harness()

# Ops that must lower to prims completely (what training a transformer uses, and the basic kinds).
LOWERED = """abs neg exp log sin tanh sigmoid sqrt rsqrt erf reciprocal
add sub mul div.no_rounding_mode pow maximum atan2 where clamp masked_fill
sum mean amax var std prod argmax logsumexp cumsum max.reduction_with_dim
view reshape permute transpose expand cat stack squeeze unsqueeze split chunk flatten index_select gather
tril diagonal zeros_like scatter_add
softmax log_softmax nn.functional.layer_norm nn.functional.rms_norm nn.functional.gelu nn.functional.silu
nn.functional.relu nn.functional.nll_loss nn.functional.cross_entropy nn.functional.mse_loss
nn.functional.linear nn.functional.embedding nn.functional.dropout
matmul mm bmm addmm baddbmm
take put as_strided as_strided_scatter diag unfold scatter_reduce.sum scatter_reduce.mean isin angle
nn.functional.pad.replicate nn.functional.adaptive_avg_pool2d nn.functional.scaled_dot_product_attention
randn normal""".split()

# Ops whose non-default arguments a fusion executor must honour or refuse, never drop
# (round's decimals, div's rounding_mode ...), and ops that once crashed the default executors.
ARGUMENTS = """round round.decimals_3 round.decimals_neg_3 div.trunc_rounding div.floor_rounding
var var_mean std nn.functional.embedding diff""".split()

# Ops that must not fail but may fall back (to torch for some ATen op, or eagerly as a whole).
FALLBACK_OK = ["sort", "nonzero", "nn.functional.conv2d"]

_BY_ID = {}
for _op in h.op_db():
    _BY_ID.setdefault(h.op_id(_op), _op)


def _check(name: str, samples: int = 1, remat=None):
    op = _BY_ID.get(name)
    if op is None:
        pytest.skip(f"this PyTorch has no float32 CPU OpInfo named {name!r}")
    return h.check_op(op, samples=samples, timeout=60, remat=remat)


@pytest.mark.parametrize("name", LOWERED)
def test_op_matches_and_lowers(name):
    r = _check(name)
    assert r.status == h.LOWERED, f"{name}: {r.status}: {r.reason}"
    assert r.samples >= 1


# Ops whose backward differs between the two remat policies (min-cut recomputes or saves other
# values): LOWERED runs them under the default, auto; these run them under off as well.
REMAT_OFF = ["pow", "logsumexp", "nn.functional.cross_entropy", "nn.functional.rms_norm", "mm"]


@pytest.mark.parametrize("name", REMAT_OFF)
def test_op_matches_and_lowers_with_remat_off(name):
    r = _check(name, remat="off")
    assert r.status == h.LOWERED, f"{name} (remat off): {r.status}: {r.reason}"


@pytest.mark.parametrize("name", ARGUMENTS)
def test_op_arguments_are_honoured(name):
    r = _check(name, samples=2)
    assert r.status not in h.FAILURES, f"{name}: {r.status}: {r.reason}"


def test_sweep_runs_the_default_executors():
    from thundervis.compiler.pipeline import default_executor_names
    assert h.DEFAULT_EXECUTORS is None  # check_op's default: the device's default order
    assert default_executor_names(h.DEVICE)[-1] == "torch"


@pytest.mark.parametrize("name", FALLBACK_OK)
def test_op_falls_back_without_failing(name):
    r = _check(name)
    assert r.status not in h.FAILURES, f"{name}: {r.status}: {r.reason}"
    if r.status in (h.TORCH_FALLBACK, h.EAGER_FALLBACK):
        assert r.reason, "a fallback must say why"


def test_random_op_compares_shapes_only():
    """Dropout draws random numbers: the harness recognises it and checks shapes and dtypes (its
    third sample is the first with p > 0 in training mode). Its draws stay whole with torch, so a
    seeded run keeps eager's mask (compiler/random_whole), and the fallback says so."""
    r = _check("nn.functional.dropout", samples=3)
    assert r.random and r.status == h.TORCH_FALLBACK
    assert "native_dropout" in r.reason and "eager's" in r.reason


def test_wrong_decomposition_is_caught(monkeypatch):
    """A lowering that computes something else must show up as a mismatch of the decomposed trace,
    although the compiled program (the torch executor runs the parent ATen op) stays right."""
    import thundervis.compiler.decompositions as dec

    table = dict(dec.decomposition_table())
    table[torch.ops.prims.hypot.default] = lambda a, b: torch.ops.aten.add.Tensor(a, b)
    monkeypatch.setattr(dec, "decomposition_table", lambda: table)
    monkeypatch.setattr(dec, "_TEMPLATES", {})
    # torch executor only: it runs the parent op, so only the replay of the decomposed trace sees the
    # wrong prims (with a fusion executor the compiled forward itself would already be wrong)
    r = h.check_op(_BY_ID["hypot"], samples=1, timeout=60, executors=("torch",))
    assert r.status == h.MISMATCH, r
    assert "decomposed" in r.reason


def test_prims_table_lists_every_prim():
    """docs/prims.md documents every prim with its kind, and every kind has a description."""
    from thundervis.compiler.prims import KINDS, PRIMS

    text = (REPO / "docs" / "prims.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in text.splitlines() if line.startswith("| ") and line.count("|") >= 4}
    rows.pop("prim", None)  # the header
    for name, prim in PRIMS.items():
        assert rows.get(name) == prim.kind, f"docs/prims.md: prim {name} ({prim.kind}) is missing or has another kind"
        assert prim.kind in KINDS and KINDS[prim.kind]
    assert set(rows) <= set(PRIMS), f"docs/prims.md lists prims that do not exist: {set(rows) - set(PRIMS)}"
