"""The compiled share is counted by time and by ops, not by chains (issue 40). Under ``run --profile``
a ``step_share`` event (thundervis.step_share) measures each training step's time inside compiled
chains and, in one profiled step, the ops that ran eagerly by the user frames above them;
present.compiled_share words it once for run's summary, ls, the TUI status bar and the widget. An
LSTM (Dynamo refuses RNNs) leaves most of the step eager and its lines are named; a compiled MLP
step is nearly all compiled by ops. Graph breaks are recorded under thundervis.jit and under
``torch.compile(backend="thundervis")`` without ``thundervis run`` too, into the session recording."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from core_helpers import line_of, run_cli
from thundervis.present.compiled_share import compiled_share

LSTM_MODEL = """\
import torch

class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(16, 32)
        self.rnn = torch.nn.LSTM(32, 32)
        self.dec = torch.nn.Linear(32, 16)

    def forward(self, x):
        h = torch.tanh(self.enc(x))
        out, _ = self.rnn(h)  # LINE_RNN
        return self.dec(out)  # LINE_LAST
"""

LSTM_SCRIPT = """\
import torch
from share_model import Lstm

torch.manual_seed(0)
model = Lstm()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = torch.compile(model)
for _ in range(8):
    loss = step(torch.randn(6, 4, 16)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

MLP_SCRIPT = """\
import torch

torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [torch.nn.Linear(32, 32), torch.nn.Tanh()]
model = torch.nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.01)

@torch.compile
def loss_of(x, y):
    return (model(x) - y).pow(2).mean()

for _ in range(8):
    loss = loss_of(torch.randn(8, 32), torch.randn(8, 32))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _run(folder: str, name: str, script: str, extra: dict) -> str:
    from thundervis.compiler.profiling import ProfileSettings
    from thundervis.runner import check_output, run_target
    for file, text in {name: script, **extra}.items():
        with open(os.path.join(folder, file), "w") as f:
            f.write(text)
    result = run_target(script=os.path.join(folder, name), module=None, args=[],
                        out=check_output(os.path.join(folder, name + ".tvrec")), executors=None,
                        profile=ProfileSettings(warmup=1, steps=1))
    assert result.exit_code == 0, result
    return result.path


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    """A profiled run of a model whose LSTM Dynamo leaves to eager; returns (path, model file)."""
    folder = str(tmp_path_factory.mktemp("share_lstm"))
    return _run(folder, "train_lstm.py", LSTM_SCRIPT, {"share_model.py": LSTM_MODEL}), \
        os.path.join(folder, "share_model.py")


def _share(path):
    from thundervis.present.overview import read_overview
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        return read_overview(rec).compiled_share


def test_lstm_step_is_mostly_eager_and_the_lstm_lines_are_named(lstm_run):
    path, model = lstm_run
    share = _share(path)
    assert share.measured and share.boundary == "optimizer.step" and share.steps >= 3
    assert 0 < share.time_pct < 100
    assert 0 < share.compiled_ops < share.total_ops
    where = f"share_model.py:{line_of(model, 'LINE_RNN')}-{line_of(model, 'LINE_LAST')} LSTM"
    (region,) = share.regions
    assert region.where.startswith(where) and region.ops > 0
    # the LSTM dominates this step: more of it is the region's than is compiled
    assert region.pct > share.time_pct
    assert share.text.startswith(f"compiled: ") and f"; eager: {where}" in share.text


def test_views_say_it(lstm_run, capsys):
    path, _ = lstm_run
    share = _share(path)
    code, out, _ = run_cli(capsys, "ls", path, "--brief")
    assert code == 0 and share.text in out
    doc = json.loads(run_cli(capsys, "ls", path, "--json")[1])
    assert doc["compiled_share"]["text"] == share.text and doc["compiled_share"]["regions"][0]["ops"] > 0
    from thundervis.commands.run import _print_fallbacks
    _print_fallbacks(path)
    assert f"thundervis: {share.text}" in capsys.readouterr().out
    from notebook_ext.data import RecordingData
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        assert RecordingData(rec).payload()["compiled_share"]["text"] == share.text
        from thundervis.present.overview import read_overview
        view = read_overview(rec)
    pytest.importorskip("textual")
    from tui.panels import topbar
    assert share.short in topbar(view).plain and "ops" in share.short


@pytest.mark.slow
def test_a_compiled_mlp_step_is_nearly_all_compiled_by_ops(tmp_path):
    share = _share(_run(str(tmp_path), "train_mlp.py", MLP_SCRIPT, {}))
    assert share.measured and not share.regions
    # the optimizer's update and the backward's seed are the only eager ops (autograd storing
    # each .grad is not counted)
    assert share.compiled_ops / share.total_ops >= 0.85, share
    assert share.time_pct > 0


INFERENCE_SCRIPT = """\
import torch

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
f = torch.compile(model)
with torch.no_grad():
    for _ in range(8):
        f(torch.randn(8, 16)).softmax(-1).argmax(-1)
"""


@pytest.mark.slow
def test_a_script_without_an_optimizer_is_cut_at_its_first_chain(tmp_path, capsys):
    path = _run(str(tmp_path), "infer.py", INFERENCE_SCRIPT, {})
    share = _share(path)
    assert share.measured and share.boundary == "first chain" and share.steps >= 3
    assert "between calls of the first graph" in share.note
    # softmax and argmax ran eagerly, the model's ops in the inference chain
    assert 0 < share.compiled_ops < share.total_ops
    code, out, _ = run_cli(capsys, "ls", path)  # an inference chain's measured memory reads back too
    assert code == 0 and share.text in out


LATE_GRAPH_SCRIPT = """\
import torch

a = torch.nn.Linear(8, 8)
b = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.01)
fa, fb = torch.compile(a), torch.compile(b)
for i in range(6):
    y = fa(torch.randn(4, 8))
    if i >= 1:  # first called in step 0: its second call, measured for memory, is in the profiled step
        y = fb(y)
    y.square().mean().backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.mark.slow
def test_a_chain_measuring_memory_in_the_profiled_step_does_not_fail_the_script(tmp_path):
    from thundervis.compiler.profiling import ProfileSettings
    from thundervis.runner import check_output, run_target
    script = tmp_path / "late.py"
    script.write_text(LATE_GRAPH_SCRIPT)
    result = run_target(script=str(script), module=None, args=[], out=check_output(str(tmp_path / "late.tvrec")),
                        executors=None, profile=ProfileSettings(warmup=2, steps=1))
    assert result.exit_code == 0, result
    share = _share(result.path)
    # the op count's profiler ran through the step: the eager ops (loss, backward seed, SGD) are there
    assert share.measured and share.total_ops > share.compiled_ops > 0


def _event(name, data):
    return SimpleNamespace(event=name, data=data)


def _graphs(ops_per_chain=((0, "forward", 6), (0, "backward", 9))):
    graphs = {}
    for g, kind, n in ops_per_chain:
        graphs.setdefault(g, []).append(SimpleNamespace(kind=kind, passes=(SimpleNamespace(n_symbols=n),)))
    return [SimpleNamespace(id=g, chains=tuple(cs)) for g, cs in graphs.items()]


def _region(file="m.py", function="forward", text="m.py:12-13 LSTM and the rest of forward ran eagerly (x)"):
    return SimpleNamespace(file=file, function=function, text=text, where=text.split(" ran eagerly")[0])


def test_the_event_is_read_and_worded():
    data = {"boundary": "optimizer.step", "instrumented": False, "measured": [[0.010, 0.004], [0.010, 0.006]],
            "op_step": {"step": 1, "wall_s": 0.02, "eager_ops": 45, "chain_calls": [[0, "forward", 1], [0, "backward", 1]],
                        "places": [{"frames": [["m.py", 10, "forward"], ["train.py", 3, "<module>"]], "ops": 40, "us": 8000.0},
                                   {"frames": [["train.py", 3, "<module>"]], "ops": 5, "us": 1000.0}]}}
    s = compiled_share([_event("step_share", data)], _graphs(), [_region()])
    assert s.time_pct == 50.0 and (s.compiled_ops, s.total_ops) == (15, 60)
    assert s.text == "compiled: 50% of step time, 15 of 60 ops; eager: m.py:12-13 LSTM and the rest of forward 40%"
    assert s.regions[0].ops == 40 and s.elsewhere_pct == 5.0
    assert s.short == "compiled 50% of time · 25% of ops" and "2 steps between optimizer.step() calls" in s.note


def test_hostile_fields_are_checked():
    hostile = {"boundary": "<b>", "measured": [["x", 1], [float("nan"), 0.1], [-1, 0], [0.01, 5.0], "no"],
               "op_step": {"eager_ops": "many", "chain_calls": [[0, 7, 1], "x", [0, "forward", -3]],
                           "places": ["x", {"frames": "no", "us": "1"}, {"frames": [[1, 2, 3]], "us": 5.0, "ops": 2}],
                           "wall_s": -1}}
    s = compiled_share([_event("step_share", hostile), _event("step_share", "not a dict")], _graphs(), [_region()])
    assert s.measured and s.steps == 1 and s.time_pct == 100.0  # compiled time capped at the step's wall
    assert s.boundary is None and s.compiled_ops == 0 and s.regions == ()
    assert compiled_share([_event("step_share", {"measured": "x"})], _graphs(), []).measured is False


def test_without_profile_only_the_static_count_and_what_needs_profile():
    s = compiled_share([], _graphs(), [_region()])
    assert not s.measured and s.time_pct is None and s.compiled_ops == 15
    assert s.text == "compiled: 15 ops in 2 chains per call; eager: 1 region Dynamo skipped (time and eager ops need --profile)"
    assert s.short == "compiled share: needs --profile"
    assert compiled_share([], _graphs(), []).short == ""


def test_eager_ops_are_counted_at_autograd_level_outside_compiled_ranges():
    import torch
    from torch.profiler import ProfilerActivity, profile
    from thundervis.step_share import eager_ops
    lin, rnn = torch.nn.Linear(4, 4), torch.nn.LSTM(4, 4)

    def forward(x, chain=True):
        import contextlib
        # the range stands for a chain call
        with torch.autograd.profiler.record_function("thundervis.chain") if chain else contextlib.nullcontext():
            y = lin(x)
        return rnn(y)[0]

    def counted(chain: bool) -> dict:
        x = torch.randn(3, 2, 4)
        forward(x, chain).sum().backward()
        with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
            forward(x, chain).sum().backward()
        return eager_ops(prof.events())

    got = counted(chain=True)
    here = os.path.basename(__file__)
    places = {tuple(tuple(f) for f in p["frames"][:1]): p for p in got["places"]}
    (lstm_place,) = [p for k, p in places.items() if k and k[0][0] == here and k[0][2] == "forward"]
    # the LSTM's forward and its backward (placed by autograd's sequence number) are the forward's
    assert lstm_place["ops"] >= 2 and lstm_place["us"] > 0
    assert got["eager_ops"] >= lstm_place["ops"]
    # the linear's forward inside the stand-in chain is not counted: the same step without the
    # range counts more (places hold frames, not op names, so this is where it shows)
    assert counted(chain=False)["eager_ops"] > got["eager_ops"]


def test_the_meter_cuts_steps_at_optimizer_steps_and_times_chain_calls():
    import time

    import torch
    from thundervis.step_share import StepShareMeter
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([p], lr=0.1)
    meter = StepShareMeter(skip_steps=2).start()
    try:
        for _ in range(7):
            meter.chain_started(0, "forward")  # what compiler.chain_calls tells it
            time.sleep(0.005)
            meter.chain_finished(0, "forward")
            (p * 2).sum().backward()
            time.sleep(0.005)
            opt.step()
    finally:
        data = meter.stop()
    assert data["boundary"] == "optimizer.step" and data["steps_seen"] == 6
    assert data["first_measured"] == 2 and len(data["measured"]) == 4 and not data["instrumented"]
    for wall, compiled in data["measured"]:
        assert compiled >= 0.005 and wall >= compiled + 0.005
    op = data["op_step"]
    assert op["chain_calls"] == [[0, "forward", 1]] and op["eager_ops"] >= 3  # mul, sum, SGD's update
    assert op["wall_s"] >= op["compiled_s"] >= 0.005


BREAKS_OUTSIDE_RUN = """\
import json
import torch, thundervis
from thundervis import session
from thundervis.recording import open_recording

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.rnn = torch.nn.LSTM(4, 4)

    def forward(self, x):
        y = self.lin(x)
        return self.rnn(y)[0]

def g(x):
    y = x.sin()
    print("a break")
    return y.cos()

torch.compile(M(), backend="thundervis")(torch.randn(3, 2, 4))
torch.compile(g, backend="eager")(torch.randn(5))  # not ours: not recorded
thundervis.jit(g)(torch.randn(3))
with open_recording(session.session_recording_path(), check=False) as rec:
    print("BREAKS", json.dumps([[e.data["backend"], e.data["module"], e.data["at_line"]] for e in rec.events("dynamo_graph_break")]))
    print("GRAPHS", len(rec.graphs()))
"""


@pytest.mark.slow
def test_jit_and_the_backend_without_run_record_graph_breaks(tmp_path):
    script = tmp_path / "nb.py"
    script.write_text(BREAKS_OUTSIDE_RUN)
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    (breaks,) = [line for line in out.stdout.splitlines() if line.startswith("BREAKS")]
    got = json.loads(breaks[len("BREAKS "):])
    assert ["thundervis_backend", "LSTM", 14] in got
    assert ["ThundervisCompiler", None, 18] in got
    assert len(got) == 2  # the eager backend's break is not ours
    (graphs,) = [line for line in out.stdout.splitlines() if line.startswith("GRAPHS")]
    assert int(graphs.split()[1]) >= 2  # the backend's graphs are recorded there too


def test_only_profile_runs_get_a_meter_and_it_skips_the_checked_calls():
    """--check-numerics / --compare-eager / --capture-inputs without --profile make a ProfileSettings
    too; their checked calls (float64 references through interpreted kernels) must never be the
    profiled step (it took a ResNet-18 past 20 GB). Under --profile the checked calls are skipped."""
    from thundervis.compiler.profiling import ProfileSettings
    from thundervis.step_share import meter_for, stop_meter
    assert meter_for(None) is None
    assert meter_for(ProfileSettings(timing=False, check_steps=3)) is None
    meter = meter_for(ProfileSettings(timing=True, warmup=2, steps=5, check_steps=3, compare_steps=4))
    try:
        assert meter._skip == 2 + 2 * 5 + 4
    finally:
        stop_meter(meter, lambda name, data: None)


def test_a_region_is_placed_by_its_own_place_not_by_cutting_its_wording():
    """A module or reason that itself says "ran eagerly" must not cut the place short."""
    from thundervis.present.eager_regions import eager_regions
    event = SimpleNamespace(event="dynamo_graph_break", graph=None, chain=None, data={
        "reason": "a step that ran eagerly before", "at_file": "/x/m.py", "at_line": 12, "resumed": True,
        "module": "BlockThat ran eagerly"})
    (r,) = eager_regions([event])
    from thundervis.present.compiled_share import _where
    assert _where(r) == r.where == "m.py:12 BlockThat ran eagerly"
    assert r.text == "m.py:12 BlockThat ran eagerly ran eagerly (a step that ran eagerly before)"
