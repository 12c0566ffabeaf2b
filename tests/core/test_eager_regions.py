"""Code Dynamo left to eager is recorded and said everywhere: an ``nn.LSTM`` (Dynamo refuses RNNs and
cannot resume, so the rest of ``forward`` runs eagerly too) and an ``nn.TransformerEncoder`` whose
causal-mask check calls ``Tensor.item()`` (the whole encoder runs eagerly, Dynamo resumes after it).
Each is one ``dynamo_graph_break`` event (thundervis.dynamo_breaks) that present.eager_regions words
once, with the line, the module and Dynamo's reason and hint: run's summary, ls (text and --json),
source, the TUI status bar and run summary, and the widget's payload."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from core_helpers import line_of, run_cli
from thundervis.present.eager_regions import (GRAPH_BREAK, NOT_TRACED, EVENTS, eager_head, eager_regions,
                                              explain)

MODEL = """\
import torch

class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.rnn = torch.nn.LSTM(8, 8)
        self.head = torch.nn.Linear(8, 20)

    def forward(self, x):
        e = torch.tanh(self.emb(x))
        y, _ = self.rnn(e)  # LINE_RNN
        return self.head(y)  # LINE_LAST

class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 16)
        layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = torch.nn.Linear(16, 20)

    def forward(self, x, mask):
        e = self.emb(x) * 2
        y = self.encoder(e, mask=mask)  # LINE_ENCODER
        return self.head(y)
"""

SCRIPT = """\
import torch
from eager_model import Encoder, Lstm

torch.manual_seed(0)
for model, extra in ((Lstm(), ()), (Encoder(), (torch.nn.Transformer.generate_square_subsequent_mask(5),))):
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        compiled(torch.randint(0, 20, (5, 3)), *extra).square().mean().backward()
        opt.step()
        opt.zero_grad()
"""


@pytest.fixture(scope="module")
def eager_run(tmp_path_factory):
    """One recorded run training both models with torch.compile; returns (path, model file)."""
    from thundervis.runner import check_output, run_target
    folder = str(tmp_path_factory.mktemp("eager"))
    model = os.path.join(folder, "eager_model.py")
    with open(model, "w") as f:
        f.write(MODEL)
    script = os.path.join(folder, "train_eager.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(folder, "e.tvrec")),
                        executors=None)
    assert result.exit_code == 0, result
    return result.path, model


def _regions(path):
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        return eager_regions([e for name in EVENTS for e in rec.events(name)])


def test_both_regions_are_recorded_with_line_module_and_reason(eager_run):
    path, model = eager_run
    lstm, enc = _regions(path)
    assert (lstm.kind, lstm.module, lstm.function, lstm.resumed) == (GRAPH_BREAK, "LSTM", "forward", False)
    assert (lstm.line, lstm.last_line) == (line_of(model, "LINE_RNN"), line_of(model, "LINE_LAST"))
    assert lstm.setting == "torch._dynamo.config.allow_rnn=True" and "Dynamo does not support RNN" in lstm.why
    assert lstm.text == (f"eager_model.py:{lstm.line}-{lstm.last_line} LSTM and the rest of forward ran eagerly "
                         "(Dynamo does not support RNN, GRU, or LSTM: torch._dynamo.config.allow_rnn=True)")
    assert (enc.module, enc.resumed, enc.line) == ("TransformerEncoder", True, line_of(model, "LINE_ENCODER"))
    assert "Tensor.item()" in enc.why and enc.setting == "torch._dynamo.config.capture_scalar_outputs=True"
    assert enc.stopped_at and enc.stopped_at.startswith("transformer.py:")  # in _detect_is_causal_mask
    assert "Hint:" in enc.reason  # Dynamo's full text is kept


def test_ls_and_run_summary_say_it(eager_run, capsys):
    path, model = eager_run
    code, out, _ = run_cli(capsys, "ls", path, "--brief")
    assert code == 0
    assert "· 2 code regions Dynamo skipped ran eagerly" in out
    assert f"  eager_model.py:{line_of(model, 'LINE_RNN')}-{line_of(model, 'LINE_LAST')} LSTM and the rest" in out
    assert f"  eager_model.py:{line_of(model, 'LINE_ENCODER')} TransformerEncoder ran eagerly (" in out
    # The graph the LSTM's break ends says Dynamo's reason, not its internal "step_unsupported".
    assert ("graph break: Attempted to wrap RNN, GRU, or LSTM (not resumed: the rest of the function ran "
            f"eagerly) at {model}:{line_of(model, 'LINE_RNN')}") in out and "step_unsupported" not in out
    doc = json.loads(run_cli(capsys, "ls", path, "--json")[1])
    assert [r["module"] for r in doc["eager_regions"]] == ["LSTM", "TransformerEncoder"]
    assert doc["eager_head"].endswith("2 code regions Dynamo skipped ran eagerly")
    from thundervis.commands.run import _print_fallbacks
    _print_fallbacks(path)
    assert "thundervis:   eager_model.py:" in capsys.readouterr().out


def test_source_marks_the_eager_lines(eager_run, capsys):
    path, model = eager_run
    code, out, _ = run_cli(capsys, "source", path, "eager_model.py", "--annotated")
    assert code == 0
    rnn, last = line_of(model, "LINE_RNN"), line_of(model, "LINE_LAST")
    assert f"{rnn} ○" in out and "LSTM and the rest of forward ran eagerly" in out
    assert f"{last} ○" in out and f"ran eagerly (see line {rnn})" in out
    doc = json.loads(run_cli(capsys, "source", path, "eager_model.py", "--json")[1])
    (row,) = [x for x in doc["lines"] if x["line"] == line_of(model, "LINE_ENCODER")]
    assert "TransformerEncoder ran eagerly" in row["eager"][0]


def test_widget_payload_says_it(eager_run):
    path, _ = eager_run
    from notebook_ext.data import RecordingData
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        payload = RecordingData(rec).payload()
    assert [r["module"] for r in payload["eager_regions"]] == ["LSTM", "TransformerEncoder"]
    assert all(f["kind"] != NOT_TRACED for f in payload["dynamo_rest"])


def test_tui_says_it(eager_run):
    path, _ = eager_run
    from thundervis.present.overview import read_overview
    from thundervis.recording import open_recording
    with open_recording(path) as rec:
        view = read_overview(rec)
    pytest.importorskip("textual")
    from tui.panels import run_summary, topbar
    assert "2 regions eager (Dynamo)" in topbar(view).plain
    assert "TransformerEncoder ran eagerly (Dynamo does not support tracing" in run_summary(view).plain


def _event(name, data):
    return SimpleNamespace(event=name, data=data)


def test_recorded_fields_are_checked_and_duplicates_merge():
    hostile = _event("dynamo_graph_break", {"at_file": 5, "at_line": "x", "reason": ["no"], "module": {"a": 1},
                                             "resumed": "yes", "inner": "nope"})
    (r,) = eager_regions([hostile, _event("other", None), _event("dynamo_graph_break", "not a dict")])
    assert r.kind == GRAPH_BREAK and r.file is None and r.line is None and r.module is None
    assert r.text == "? this call ran eagerly (Dynamo could not trace it)"
    # A break at the line where a function failed whole is one region, named by its module.
    reason = "Attempted to wrap RNN, GRU, or LSTM\n  Explanation: Dynamo does not support RNN.\n  Hint: Set torch._dynamo.config.allow_rnn=True to enable"
    brk = _event("dynamo_graph_break", {"at_file": "/a/m.py", "at_line": 7, "reason": reason, "module": "GRU",
                                         "frame_function": "forward", "resumed": True})
    failed = _event("dynamo_frame_failed", {"function": "forward", "file": "/a/m.py", "line": 5, "at_file": "/a/m.py",
                                            "at_line": 7, "fail_type": "Unsupported", "reason": reason})
    (merged,) = eager_regions([brk, failed])
    assert merged.text == "m.py:7 GRU (all of forward) ran eagerly (Dynamo does not support RNN: torch._dynamo.config.allow_rnn=True)"
    # With fullgraph=True the failure is the script's error, not eager code.
    raised = _event("dynamo_raised", {"fail_type": "Unsupported", "reason": reason})
    assert [x.kind for x in eager_regions([failed, raised])] == []
    assert [x.kind for x in eager_regions([failed])] == [NOT_TRACED]
    assert eager_head(0, 6, ()) == "0 of 6 chains ran eagerly"
    assert explain("plain words") == ("plain words", None)


def test_the_watcher_reads_the_log_text_alone_and_leaves_the_logger_as_it_was(tmp_path):
    """Without Dynamo's frame on the stack (another torch), the record's own text still gives the
    line and the reason; entering and leaving the watcher puts the logger's level and propagation
    back, so Dynamo's graph-break log stays as quiet (or as loud) as the user set it."""
    import logging
    from thundervis.dynamo_breaks import _LOGGER, GraphBreakWatcher, describe
    src = tmp_path / "m.py"
    src.write_text("def f(x):\n    y = x + 1\n    return y.item()\n")
    text = (f"Graph break in user code at {src}:3\nGraph Break Reason: Unsupported Tensor.item() call\n"
            "  Explanation: Dynamo does not support tracing `Tensor.item()`.\n\nUser code traceback:\n")
    record = logging.LogRecord(_LOGGER, logging.DEBUG, __file__, 1, text, None, None)
    d = describe(record)
    assert (d["at_file"], d["at_line"], d["code"], d["resumed"]) == (str(src), 3, "return y.item()", True)
    assert (d["first_line"], d["last_line"]) == (3, 3) and "Explanation" in d["reason"]
    assert describe(logging.LogRecord(_LOGGER, logging.DEBUG, __file__, 1, "something else", None, None)) is None
    log = logging.getLogger(_LOGGER)
    before = (log.level, log.propagate, list(log.handlers))
    notes = []
    with GraphBreakWatcher(lambda event, data: notes.append((event, data))) as w:
        assert log.isEnabledFor(logging.DEBUG) and w in log.handlers
        log.debug(text)
        log.debug(text)  # the same break again (a recompile): recorded once
    assert (log.level, log.propagate, list(log.handlers)) == before
    assert [e for e, _ in notes] == ["dynamo_graph_break"]


def test_a_run_listens_for_graph_breaks_once(tmp_path):
    """Under ``thundervis run`` only the run's watcher parses a graph break; the session watcher
    (for compiles outside a run) stands aside while the run records, and the break is recorded once."""
    import subprocess
    import sys
    script = tmp_path / "brk.py"
    script.write_text("import torch\n"
                      "def f(x):\n"
                      "    y = x.sin()\n"
                      "    print('break')\n"
                      "    return y.cos()\n"
                      "torch.compile(f, backend='thundervis')(torch.randn(3))\n"
                      "from thundervis import dynamo_breaks\n"
                      "print('session watchers reading', sum(w._active() for w in dynamo_breaks._session_watcher))\n")
    out = tmp_path / "brk.tvrec"
    done = subprocess.run([sys.executable, "-m", "thundervis", "run", "--no-view", "-o", str(out), str(script)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "session watchers reading 0" in done.stdout, done.stdout
    from thundervis.recording import open_recording
    with open_recording(str(out)) as rec:
        breaks = [e for e in rec.events() if e.event == "dynamo_graph_break"]
    assert len(breaks) == 1, breaks
