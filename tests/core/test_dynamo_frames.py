"""Functions Dynamo could not trace at all run eagerly with no graph reaching the backend; the
writer records each one (``recording/dynamo_info.FrameFailures``, from Dynamo's compilation
metrics) and every view says so (``present.status.dynamo_fallbacks``): ``run``'s end, ``ls`` (text
and JSON), the TUI's run summary and the widget's banner."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

import thundervis.recording.dynamo_info as dynamo_info
from thundervis.present.status import NOT_TRACED, RECOMPILE_LIMIT, dynamo_fallbacks, dynamo_reason
from thundervis.recording.model_runs import Event

from core_helpers import run_cli

RNN_REASON = ("Attempted to wrap RNN, GRU, or LSTM\n  Explanation: Dynamo does not support RNN, GRU, or LSTM.\n"
              "  Hint: Set torch._dynamo.config.allow_rnn=True to enable experimental support\n"
              "  Hint: It may be possible to write Dynamo tracing rules for this code.")


def _entry(start: int, name="forward", fail_type="Unsupported", reason=RNN_REASON, **kw):
    """A compilation-metrics entry as Dynamo keeps it (only the fields the reader reads)."""
    return SimpleNamespace(compile_id=f"{start}/0", start_time_us=start, co_name=name, co_filename="/w/train.py",
                           co_firstlineno=5, fail_type=fail_type, fail_reason=reason,
                           fail_user_frame_filename=kw.get("at_file", "/w/train.py"),
                           fail_user_frame_lineno=kw.get("at_line", 7))


def test_each_failed_frame_is_read_once_and_compiled_or_limit_entries_are_not(monkeypatch):
    entries = [_entry(1)]
    monkeypatch.setattr(dynamo_info, "_metrics", lambda: list(entries))
    frames = dynamo_info.FrameFailures()  # what failed before the recording started is not its
    assert frames.new_failures() == []
    entries += [_entry(2, name="step"), _entry(3, fail_type=None, reason=None),
                _entry(4, name=None, reason="Dynamo recompile limit exceeded"),
                _entry(5, name="g", reason="Dynamo recompile limit exceeded\n  Explanation: ..."),
                _entry(6, name="h", at_file=None, at_line="x")]
    got = frames.new_failures()
    assert [f["function"] for f in got] == ["step", "h"]
    assert got[0] == {"function": "step", "file": "/w/train.py", "line": 5, "fail_type": "Unsupported",
                      "reason": RNN_REASON, "at_file": "/w/train.py", "at_line": 7}
    assert got[1]["at_file"] is None and got[1]["at_line"] is None
    assert frames.new_failures() == []  # read once
    del entries[:3]  # Dynamo keeps its last entries only: what is left is not new
    entries.append(_entry(7, name="later"))
    assert [f["function"] for f in frames.new_failures()] == ["later"]


def test_a_torch_without_the_metrics_reads_nothing(monkeypatch):
    import torch._dynamo.utils as dutils
    monkeypatch.delattr(dutils, "get_compilation_metrics", raising=False)
    assert dynamo_info._metrics() == [] and dynamo_info.FrameFailures().new_failures() == []


def test_dynamos_reason_reads_as_one_line():
    assert dynamo_reason(RNN_REASON) == ("Attempted to wrap RNN, GRU, or LSTM: Dynamo does not support RNN, GRU, "
                                         "or LSTM. Hint: Set torch._dynamo.config.allow_rnn=True to enable "
                                         "experimental support")
    assert dynamo_reason("shape mismatch\nmore") == "shape mismatch"
    assert dynamo_reason("", "TorchRuntimeError") == "TorchRuntimeError"
    assert dynamo_reason(None) == "Dynamo could not trace it"


def test_recorded_events_are_validated():
    """A recording is untrusted: wrong types read as unknown, never as a crash."""
    events = [Event(None, None, "dynamo_frame_failed", [1, 2], 0.0),
              Event(None, None, "dynamo_frame_failed", {"function": 3, "line": "7", "at_line": True,
                                                         "reason": ["x"], "file": None}, 0.0),
              Event(None, None, "dynamo_frame_failed", {"function": "f", "file": "/a/m.py", "line": 9,
                                                         "at_file": "/a/n.py", "at_line": 2, "reason": RNN_REASON}, 0.0),
              Event(None, None, "dynamo_recompile_limit", {"limit_type": "recompile_limit", "limit": 8,
                                                            "function": "g", "file": "/a/m.py", "line": 4}, 0.0),
              Event(None, None, "something_else", {"function": "x"}, 0.0)]
    got = dynamo_fallbacks(events)
    assert [f.kind for f in got] == [NOT_TRACED, NOT_TRACED, NOT_TRACED, RECOMPILE_LIMIT]
    assert got[0].what == "Dynamo runs None eagerly" and got[0].source is None
    assert got[1].what == "Dynamo runs 3 eagerly" and got[1].source is None and got[1].reason == "['x']"
    assert got[2].source == "n.py:2" and got[2].reason.startswith("Attempted to wrap RNN, GRU, or LSTM: Dynamo")
    assert got[3].source == "m.py:4" and got[3].reason == "hit recompile_limit (8)"


def test_a_failure_the_script_died_of_is_not_a_function_that_ran_eagerly():
    """fullgraph=True makes Dynamo raise instead of running the function eagerly: the runner
    records the error (``dynamo_raised``) and the matching failed frame is not listed."""
    failed = {"function": "f", "file": "/a/m.py", "line": 9, "fail_type": "Unsupported", "reason": RNN_REASON}
    other = dict(failed, function="g", reason="Failed to trace builtin operator")
    events = [Event(None, None, "dynamo_frame_failed", failed, 0.0),
              Event(None, None, "dynamo_frame_failed", other, 0.0),
              Event(None, None, "dynamo_raised", {"fail_type": "Unsupported", "reason": RNN_REASON}, 0.0),
              Event(None, None, "dynamo_raised", "not a dict", 0.0)]
    assert [f.what for f in dynamo_fallbacks(events)] == ["Dynamo runs g eagerly"]


def test_fullgraph_on_a_function_dynamo_cannot_trace_is_the_scripts_error(tmp_path, capsys):
    from core_helpers import write_script
    script = write_script(tmp_path, "fg.py", """
        import torch
        lstm = torch.nn.LSTM(4, 4)
        f = torch.compile(lambda x: lstm(x)[0].sum(), fullgraph=True)
        f(torch.randn(3, 2, 4))
    """, with_model=False)
    out = tmp_path / "fg.tvrec"
    code, stdout, err = run_cli(capsys, "run", "--no-view", "-o", out, script)
    assert code == 1 and "Attempted to wrap RNN" in err
    assert "thundervis: no chain was compiled\n" in stdout and "not traced" not in stdout, stdout


SCRIPT = """\
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(8, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 2)

    def forward(self, x):
        y, _ = self.rnn(x)  # LINE_RNN
        return self.head(y[:, -1])

torch.manual_seed(0)
model = torch.compile(M())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(4, 5, 8)).square().mean().backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.fixture(scope="module")
def rnn_run(tmp_path_factory):
    """A script whose only compiled model Dynamo cannot trace (an LSTM): no graph is compiled."""
    from core_helpers import line_of
    from thundervis.runner import check_output, run_target
    folder = str(tmp_path_factory.mktemp("rnn"))
    script = os.path.join(folder, "train_rnn.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    result = run_target(script=script, module=None, args=[], out=check_output(os.path.join(folder, "rnn.tvrec")),
                        executors=None)
    assert result.exit_code == 0, result
    return result.path, line_of(script, "LINE_RNN")


def test_a_run_that_dynamo_could_not_trace_says_why_in_ls(rnn_run, capsys):
    path, line = rnn_run
    code, out, _ = run_cli(capsys, "ls", path)
    assert code == 0
    assert "no chain was compiled · 1 code region Dynamo skipped ran eagerly" in out
    assert (f"  train_rnn.py:{line} LSTM (all of forward) ran eagerly (Dynamo does not support RNN, GRU, or "
            "LSTM: torch._dynamo.config.allow_rnn=True)") in out
    import json
    doc = json.loads(run_cli(capsys, "ls", path, "--json")[1])
    (f,) = doc["fallbacks"]
    assert f["kind"] == NOT_TRACED and f["source"] == f"train_rnn.py:{line}" and f["graph"] is None


def test_the_tui_run_summary_and_the_widget_payload_say_it(rnn_run):
    path, line = rnn_run
    from thundervis.recording import open_recording
    from thundervis.present.overview import read_overview
    from notebook_ext.data import RecordingData
    with open_recording(path) as rec:
        view = read_overview(rec)
        payload = RecordingData(rec).payload()
    assert [f.kind for f in view.dynamo_fallbacks] == [NOT_TRACED]
    assert view.as_json()["dynamo_fallbacks"][0]["what"] == "Dynamo runs forward eagerly"
    assert payload["graphs"] == [] and payload["dynamo_fallbacks"][0]["source"] == f"train_rnn.py:{line}"
    pytest.importorskip("textual")
    from tui.panels import run_summary
    text = run_summary(view).plain
    assert "no graph was compiled" in text
    assert f"train_rnn.py:{line} LSTM (all of forward) ran eagerly (Dynamo does not support RNN" in text
