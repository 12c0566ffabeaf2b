"""Pilot tests: every action of the TUI, driven with the keyboard (and the mouse where it matters)
on small synthetic recordings written through the real writer."""
from __future__ import annotations

import os

import pytest
from tui_helpers import details_for, open_app, screen_text, settle

from thundervis.recording import open_recording

pytestmark = pytest.mark.asyncio


def _chain(path, kind="forward"):
    with open_recording(path) as rec:
        g = rec.graphs()[0]
        return g, g.chain(kind)


def _fusion_pass(chain):
    """The first pass whose symbol count drops sharply (where ops were fused), from the recording."""
    return next(p for p in chain.passes if p.name == "fuse")


async def test_opens_on_the_last_pass_of_the_forward_chain(small_rec):
    g, fwd = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        assert (app.state.graph, app.state.chain, app.state.index) == (g.id, "forward", fwd.passes[-1].index)
        view = app.query_one("LinesView")
        assert view.mode == "trace"
        assert view.texts[0].startswith("# graph 0 · forward")
        # every statement line is mapped to its symbol
        with open_recording(small_rec) as rec:
            uids = {s.uid for s in rec.symbols(g.id, "forward", fwd.passes[-1].index)}
        mapped = {ln.uid for ln in app.trace.lines if ln.uid}
        assert mapped and mapped <= uids
        assert len(app.query_one("#passes").options) == len(fwd.passes)
        text = screen_text(app)
        assert "synthetic_model.py" in text and "ok" in text


async def test_step_next_and_previous_pass(small_rec):
    _, fwd = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        last = fwd.passes[-1]
        await pilot.press("p")
        await settle(app, pilot)
        assert app.state.index == fwd.passes[-2].index
        assert f'after "{fwd.passes[-2].name}"' in app.query_one("LinesView").texts[0]
        await pilot.press("n")
        await settle(app, pilot)
        assert app.state.index == last.index
        title = str(app.query_one("#tracetitle").render())
        assert last.name in title and str(last.n_symbols) in title


async def test_jump_to_a_pass_with_the_picker(small_rec):
    _, fwd = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("j")
        await pilot.pause()
        assert type(app.screen).__name__ == "PassPicker"
        await pilot.press("home", "down", "enter")
        await settle(app, pilot)
        assert app.state.index == fwd.passes[1].index


async def test_chain_and_graph_switching(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await settle(app, pilot)
        assert app.state.chain == "backward"
        assert app.query_one("LinesView").texts[0].startswith("# graph 0 · backward")
        await pilot.press("g")  # one graph: stays on it
        await settle(app, pilot)
        assert app.state.graph == 0


async def test_hide_unchanged_passes(small_rec):
    _, fwd = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("u")
        await pilot.pause()
        shown = [p.index for p in app.visible_passes()]
        expected = [p.index for p in fwd.passes if p.changed or p.index in (app.state.index, fwd.passes[0].index)]
        assert shown == expected and len(shown) < len(fwd.passes)
        assert len(app.query_one("#passes").options) == len(shown)
        await pilot.press("u")
        await pilot.pause()
        assert len(app.visible_passes()) == len(fwd.passes)


async def test_diff_against_previous_shows_fused_into_markers(small_rec):
    g, fwd = _chain(small_rec)
    fuse = _fusion_pass(fwd)
    kernels = {k.name for k in g.kernels if k.chain == "forward"}
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.go_to_pass(fuse.index)
        await settle(app, pilot)
        await pilot.press("d")
        await settle(app, pilot)
        view = app.query_one("LinesView")
        assert view.mode == "unified" and app.diff_base() == fuse.index - 1
        fused = [t for t in view.texts if "→ fused into" in t]
        assert fused and {t.rsplit("fused into ", 1)[1].split()[0] for t in fused} <= kernels
        assert any(t.startswith("+") and "fuses" in t for t in view.texts)
        title = str(app.query_one("#tracetitle").render())
        assert f"vs {fuse.index - 1}" in title and "fused-into" in title
        # stepping keeps the diff on, against the new previous pass
        await pilot.press("n")
        await settle(app, pilot)
        assert view.mode == "unified" and app.diff_base() == fuse.index
        await pilot.press("d")
        await settle(app, pilot)
        assert view.mode == "trace"


async def test_diff_against_a_chosen_pass_side_by_side_and_folding(small_rec):
    _, fwd = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("D")
        await pilot.pause()
        await pilot.press("home", "enter")
        await settle(app, pilot)
        assert app.diff_base() == fwd.passes[0].index
        view = app.query_one("LinesView")
        folded = view.line_count()
        await pilot.press("f")
        await settle(app, pilot)
        assert view.line_count() >= folded and not any("unchanged line" in t for t in view.texts)
        await pilot.press("s")
        await settle(app, pilot)
        assert view.mode == "side"
        assert any(" | " in t for t in view.texts)
        # intra-line highlights: changed rows carry spans
        await pilot.press("s")
        await settle(app, pilot)
        assert view.mode == "unified"


async def test_intraline_spans_reach_the_screen(small_rec):
    _, fwd = _chain(small_rec)
    claim = next(p for p in fwd.passes if p.name == "claim")
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.go_to_pass(claim.index)
        await pilot.press("d")
        await settle(app, pilot)
        rows, counts = app.data.diff_rows(0, "forward", app.diff_base(), claim.index, False, 3)
        assert counts["changed"] > 0
        assert any(r.spans for r in rows if r.status == "changed")


async def test_selecting_a_line_shows_its_details(small_rec):
    g, fwd = _chain(small_rec)
    fuse = _fusion_pass(fwd)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.go_to_pass(fuse.index - 1)  # before fusion: plain prims
        await settle(app, pilot)
        view = app.query_one("LinesView")
        target = next(i for i, ln in enumerate(app.trace.lines) if ln.kind == "stmt")
        view.move_cursor(target)
        text = await details_for(app, pilot)
        uid = app.trace.lines[target].uid
        with open_recording(small_rec) as rec:
            sym = next(s for s in rec.symbols(g.id, "forward", fuse.index - 1) if s.uid == uid)
        assert f"{os.path.basename(sym.source.file)}:{sym.source.line}" in text
        assert sym.source.module in text
        assert "lineage" in text and "ends in" in text
        kernel = next(k.name for k in g.kernels if k.chain == "forward" and uid in k.members)
        assert kernel in text
        assert "twins" in text and "backward" in text  # linked by seq_nr
        assert app.selected_source == (sym.source.file, sym.source.line)


async def test_mouse_click_selects_pass_and_line(small_rec):
    _, fwd = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        passes = app.query_one("#passes")
        await pilot.click("#passes", offset=(5, 2))
        await settle(app, pilot)
        assert app.state.index == fwd.passes[2].index
        assert passes.highlighted == 2
        await pilot.click("LinesView", offset=(10, 4))
        await pilot.pause()
        assert app.query_one("LinesView").cursor == 4


async def test_editor_opens_the_source_line(small_rec, monkeypatch, tmp_path):
    import contextlib
    import subprocess
    src = tmp_path / "synthetic_model.py"
    src.write_text("".join(f"line {i}\n" for i in range(1, 80)))
    app = open_app(small_rec)
    calls = []
    monkeypatch.setenv("EDITOR", "myeditor --wait")
    monkeypatch.setattr(subprocess, "run", lambda cmd, check=False: calls.append(cmd))
    async with app.run_test(size=(160, 48)) as pilot:
        monkeypatch.setattr(app, "suspend", contextlib.nullcontext)
        await settle(app, pilot)
        app.query_one("#details").source = (str(src), 12)
        await pilot.press("e")
        await pilot.pause()
        assert calls == [["myeditor", "--wait", "+12", str(src)]]
        app.query_one("#details").source = ("/nonexistent/file.py", 3)
        await pilot.press("e")
        await pilot.pause()
        assert len(calls) == 1  # not on this machine: a notice, no editor


async def test_kernels_table_sorts_and_shows_code(small_rec):
    g, _ = _chain(small_rec)
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await pilot.pause()
        screen = app.screen
        assert type(screen).__name__ == "KernelsScreen"
        table = screen.query_one("DataTable")
        assert table.row_count == len(g.kernels)
        before = [k.id for k in screen.kernels]
        await pilot.press("s")
        await pilot.pause()
        assert screen.sort != "chain" or [k.id for k in screen.kernels] != before
        screen.sort = "ops"
        screen.fill()
        ops = [k.n_ops for k in screen.kernels]
        assert ops == sorted(ops, reverse=True)
        await pilot.click("DataTable", offset=(2, 0))  # the "kernel" header
        await pilot.pause()
        assert screen.sort == "kernel"
        k = screen.selected()
        code = str(screen.query_one("#kinfo").render())
        assert k.name in code and f"{k.n_ops} ops" in code
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "Screen"


async def test_failing_rerun_shows_its_error_without_crashing(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await pilot.pause()
        screen = app.screen
        await pilot.press("r")
        for _ in range(400):
            await pilot.pause(0.05)
            if not screen.busy:
                break
        text = str(screen.query_one("#krerun").render())
        assert "re-run failed" in text and "no recorded IR" in text
        await pilot.press("R")  # a repro of a kernel without IR: an error notice, no crash
        await pilot.pause(1.0)
        assert app.is_running


async def test_search_jumps_to_symbols_and_kernels(small_rec):
    g, _ = _chain(small_rec)
    app = open_app(small_rec)
    kernel = g.kernels[0].name
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("slash")
        await pilot.pause()
        target = next(ln for ln in app.trace.lines[5:] if ln.kind == "stmt")
        name = target.text.split("=")[0].strip()
        await pilot.press(*list(name + " ="))
        await pilot.pause()
        await pilot.press("enter")
        await settle(app, pilot)
        view = app.query_one("LinesView")
        assert view.uid_at(view.cursor) == target.uid  # (the view's lines: the signature folded)
        await pilot.press("slash")
        await pilot.pause()
        await pilot.press(*list(kernel))
        await pilot.pause()
        hits = app.screen.hits
        assert any(h.kind == "kernel" for h in hits)
        app.screen.dismiss(next(h for h in hits if h.kind == "kernel"))
        await pilot.pause(0.3)
        assert type(app.screen).__name__ == "KernelsScreen"


async def test_help_screen_and_footer(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        footer_keys = {key for key, b in app.active_bindings.items() if b.binding.show}
        assert {"q", "n", "p", "d", "k", "slash", "question_mark"} <= footer_keys
        await pilot.press("question_mark")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
        assert "diff against the previous pass" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "Screen"


async def test_command_palette_has_every_action(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        for title in ("Next pass", "Previous pass", "Jump to pass", "Next chain", "Next graph", "Toggle diff",
                      "Diff against pass", "Toggle side by side", "Toggle folding", "Hide unchanged passes",
                      "Kernels", "Search", "Open in editor", "Toggle details", "Run info", "Keys"):
            assert title in commands
        index = app.state.index
        commands["Previous pass"].callback()
        await settle(app, pilot)
        assert app.state.index < index
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert type(app.screen).__name__ == "CommandPalette"


async def test_details_pane_toggles(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("i")
        await pilot.pause()
        assert not app.query_one("#details").display
        await pilot.press("i")
        await pilot.pause()
        assert app.query_one("#details").display


async def test_narrow_terminal_puts_details_below(small_rec):
    app = open_app(small_rec)
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(app, pilot)
        assert app.screen.has_class("-narrow") and not app.screen.has_class("-short")
        details, lines = app.query_one("#details"), app.query_one("LinesView")
        assert details.region.y > lines.region.y and details.region.width >= 90
    app = open_app(small_rec)
    async with app.run_test(size=(80, 24)) as pilot:  # small: the trace gets the rows, i shows details
        await settle(app, pilot)
        assert app.screen.has_class("-short") and not app.query_one("#details").display
        assert app.query_one("LinesView").region.height >= 12
        await pilot.press("i")
        await pilot.pause()
        details, lines = app.query_one("#details"), app.query_one("LinesView")
        assert details.display and details.region.y > lines.region.y


async def test_failed_run_shows_banner_and_traceback(failed_rec):
    app = open_app(failed_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        banner = str(app.query_one("#banner").render())
        assert "failed" in banner and "ZeroDivisionError" in banner
        await pilot.press("t")
        await pilot.pause()
        text = screen_text(app)
        assert "Traceback (most recent call last)" in text and "loss = step()" in text
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "Screen"


async def test_live_recording_grows_while_viewed(tmp_path):
    import sys
    from tui_helpers import ROOT
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from _synthetic_recording import SCRIPT, chain_passes

    from thundervis.recording import RecordingObserver
    path = str(tmp_path / "live.tvrec")
    obs = RecordingObserver(path)
    obs.start_run(script=SCRIPT, module=None, argv=[SCRIPT], cwd="/", executors=["torch"])
    obs.graph_started(0, {"n_inputs": 2, "n_nodes": 10})
    passes = list(chain_passes(16, 8, "forward", "f", SCRIPT))
    for i, (name, trace, changed, _) in enumerate(passes[:3]):
        obs.pass_done(0, "forward", i, name, trace, 0.001, changed)
    try:
        app = open_app(path, poll_s=0.1)
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(app, pilot)
            assert len(app.query_one("#passes").options) == 3 and app.state.index == 2
            assert "running" in str(app.query_one("#topbar").render())
            for i, (name, trace, changed, _) in enumerate(passes[3:6], start=3):
                obs.pass_done(0, "forward", i, name, trace, 0.001, changed)
            for _ in range(100):
                await pilot.pause(0.05)
                if len(app.query_one("#passes").options) == 6:
                    break
            assert len(app.query_one("#passes").options) == 6
            await settle(app, pilot)
            assert app.state.index == 5  # it follows the newest pass when the user was on the last one
            assert f'after "{passes[5][0]}"' in app.query_one("LinesView").texts[0]
            obs.finish_run("interrupted", 130, "Traceback (most recent call last):\nKeyboardInterrupt\n")
            for _ in range(100):
                await pilot.pause(0.05)
                if "interrupted" in str(app.query_one("#topbar").render()):
                    break
            assert "interrupted" in str(app.query_one("#banner").render())
            assert "KeyboardInterrupt" in str(app.query_one("#banner").render())
    finally:
        obs.close()


async def test_control_characters_are_shown_escaped(tmp_path):
    from tui_helpers import write_recording
    evil = "evil\x1b]0;pwned\x07\u202e.py"
    path = write_recording(str(tmp_path / "evil.tvrec"), n_symbols=12, backward=False, script=evil,
                           status="failed", traceback_text="Boom\x1b[2J\n")
    app = open_app(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        top = str(app.query_one("#topbar").render())
        assert "\\x1b]0;pwned\\x07\\u202e.py" in top and "\x1b" not in top
        assert any("\\x1b" in t for t in app.query_one("LinesView").texts) is False  # texts are raw
        strip = app.query_one("LinesView").render_line(3)
        assert "\x1b" not in strip.text
        await pilot.press("t")
        await pilot.pause()
        text = screen_text(app)
        assert "Boom\\x1b[2J" in text and "\x1b" not in text


async def test_empty_recording_opens(tmp_path):
    from thundervis.recording import RecordingObserver
    path = str(tmp_path / "empty.tvrec")
    with RecordingObserver(path) as obs:
        obs.start_run(script="x.py", module=None, argv=["x.py"], cwd="/")
        obs.finish_run("failed", 1, "Traceback (most recent call last):\nValueError: before any compile\n")
    app = open_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert app.query_one("LinesView").texts[0] == "no graph was compiled in this run"  # the run ended
        await pilot.press("n", "d", "c", "k")
        await pilot.pause()
        assert app.is_running


async def test_eager_chains_and_fallen_back_kernels_are_marked(tmp_path):
    from tui_helpers import write_recording
    name = {}

    def also(obs):
        with open_recording(obs.path, check=False) as rec:  # the second forward kernel, as recorded
            name["kernel"] = [k.name for k in rec.kernels() if k.chain == "forward"][1]
        obs.chain_failed(0, "backward", "NotImplementedError: no lowering for aten.weird", "Traceback ...\n")
        obs.note("kernel_fallback", {"kernel": name["kernel"], "executor": "triton",
                                     "error": "CompilationError: out of shared memory"}, graph=0, chain="forward")
    path = write_recording(str(tmp_path / "fallbacks.tvrec"), n_symbols=30, also=also)
    with open_recording(path) as rec:
        fell = next(k for k in rec.kernels() if k.name == name["kernel"] and k.chain == "forward")
    app = open_app(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        top = str(app.query_one("#topbar").render())
        assert "1 eager" in top and "1 fell back" in top
        chains = [str(o.prompt) for o in app.query_one("#chains").options]
        assert any("backward" in c and "eager" in c for c in chains)
        assert not any("forward" in c and "eager" in c for c in chains)
        await pilot.press("t")
        await pilot.pause()
        text = screen_text(app)
        assert "backward ran eagerly: NotImplementedError: no lowering for aten.weird" in text
        # present's wording (KernelRow.fallback_text), as the trace's note and the widget say it
        assert f"{fell.name} ran in torch at run time: CompilationError: out of shared memory" in text
        await pilot.press("escape", "k")
        await pilot.pause(0.3)
        screen = app.screen
        row = next(i for i, k in enumerate(screen.kernels) if k.id == fell.id)
        screen.query_one("DataTable").move_cursor(row=row)
        await pilot.pause(0.3)
        assert "out of shared memory" in str(screen.query_one("#kinfo").render())
