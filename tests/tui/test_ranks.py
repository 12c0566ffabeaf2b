"""Pilot tests of the group views: the top bar on a group, the rank picker (switching the whole UI
to another rank at the same position), the rank comparison (identical; two variants with the
cross-rank diff of a pass; the kernel skew table) on synthetic groups written through the real
writer and packed by the real ``pack_group``."""
from __future__ import annotations

import os

import pytest
from tui_helpers import open_group_app, screen_text, settle, wait_for

from thundervis.recording.group import open_group

pytestmark = pytest.mark.asyncio


async def _ready(app, pilot) -> None:
    await wait_for(pilot, lambda: app.loaded and app.group_info is not None
                   and not any(w.is_running for w in app.workers if w.group in ("view", "rank")))


async def _open_comparison(app, pilot) -> None:
    await pilot.press("equals_sign")
    await wait_for(pilot, lambda: type(app.screen).__name__ == "RankComparisonScreen" and app.screen.loaded)


def _topbar(app) -> str:
    return str(app.query_one("#topbar").render())


async def test_a_group_opens_on_its_lowest_rank_with_the_group_in_the_top_bar(variant_group):
    app = open_group_app(variant_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        assert app.state.rank == 0 and app.data.path == open_group(variant_group).rank_path(0)
        bar = _topbar(app)
        assert "job.tvgroup" in bar and "rank 0/3 ranks" in bar and " ok" in bar and "2 variants" in bar
        assert app.query_one("LinesView").texts[0].startswith("# graph 0 · forward")


async def test_identical_ranks_say_so_and_a_given_rank_opens_first(identical_group):
    app = open_group_app(identical_group, rank=1)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        assert app.state.rank == 1
        bar = _topbar(app)
        assert "rank 1/2 ranks" in bar and "identical" in bar


async def test_a_failed_rank_shows_the_banner_and_the_group_failed(failed_group):
    app = open_group_app(failed_group, rank=1)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        assert "failed" in _topbar(app).split("│")[0]  # the group's status
        banner = app.query_one("#banner")
        assert banner.has_class("-shown") and "rank 1 lost its peer" in str(banner.render())


async def test_the_rank_picker_lists_every_rank_and_switches_keeping_the_position(variant_group):
    app = open_group_app(variant_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        cse = next(p.index for p in app.current_chain().passes if p.name == "cse")
        app.go_to_pass(cse)
        await settle(app, pilot)
        rank0 = list(app.query_one("LinesView").texts)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RankPicker" and app.screen.loaded)
        rows = [str(o.prompt) for o in app.screen.query_one("OptionList").options]
        assert len(rows) == 3
        host = open_group(variant_group).overview().ranks[0].host
        # compile time 1 s + 0.25 s per rank; step time: 1.5 x the kernels' medians
        for rank, variant, compile_s, step in ((0, "A", "1.00 s", "900.0 µs"), (1, "B", "1.25 s", "1.20 ms"),
                                               (2, "A", "1.50 s", "1.50 ms")):
            fields = rows[rank].lstrip("▶ ").split()
            assert fields[:3] == [str(rank), "ok", variant], rows[rank]
            assert " ".join(fields[4:9]) == f"{host} {compile_s} {step}", rows[rank]
        assert rows[0].startswith("▶")  # the rank shown
        await pilot.press("down", "enter")
        await _ready(app, pilot)
        assert type(app.screen).__name__ != "RankPicker"
        assert app.state.rank == 1 and app.data.path == open_group(variant_group).rank_path(1)
        assert (app.state.chain, app.state.index) == ("forward", cse)  # same graph, chain and pass
        rank1 = list(app.query_one("LinesView").texts)
        assert rank1 != rank0 and len(rank1) > len(rank0)  # rank 1 compiled 4 more ops
        assert "rank 1/3" in _topbar(app)
        # rank 2 compiled what rank 0 did: the same trace, from its own (packed) rank file
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RankPicker" and app.screen.loaded)
        await pilot.press("down", "enter")
        await _ready(app, pilot)
        assert app.state.rank == 2 and app.data.path.endswith(".tvrank") and app.state.index == cse
        assert list(app.query_one("LinesView").texts) == rank0


async def test_the_rank_picker_shows_ranks_it_cannot_open(tmp_path):
    from _synthetic_group import write_group
    group = write_group(str(tmp_path), variants=(0, 1, 1))  # rank 2 stands on rank 1's file
    os.remove(os.path.join(group, "rank-00001.tvrec"))
    app = open_group_app(group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        assert "1 never recorded" in _topbar(app) and "failed" in _topbar(app)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RankPicker" and app.screen.loaded)
        options = app.screen.query_one("OptionList").options
        rows = [str(o.prompt) for o in options]
        assert "never recorded" in rows[1] and options[1].disabled
        assert "rank-00001.tvrec" in rows[2] and "missing" in rows[2] and options[2].disabled
        assert not options[0].disabled


async def test_comparing_identical_ranks(identical_group):
    app = open_group_app(identical_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        await _open_comparison(app, pilot)
        text = screen_text(app)
        assert "traces identical on all 2 ranks" in text
        assert "not profiled" in text and "--profile" in text
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1


async def test_two_variants_list_their_ranks_and_open_the_cross_rank_diff(variant_group):
    app = open_group_app(variant_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        await _open_comparison(app, pilot)
        text = screen_text(app)
        assert "traces differ: 2 variants" in text and "reference rank 0" in text
        rows = [str(o.prompt) for o in app.screen.query_one("OptionList").options]
        assert "variant A" in rows[0] and "ranks 0, 2" in rows[0] and "(the reference)" in rows[0]
        b = next(i for i, r in enumerate(rows) if r.startswith("variant B"))
        assert "ranks 1" in rows[b] and "24 passes differ" in rows[b]
        fwd = next(i for i, r in enumerate(rows) if "forward" in r and " 0 acquire" in r)
        assert "4 added" in rows[fwd]
        app.screen.query_one("OptionList").highlighted = fwd
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RankDiffScreen" and app.screen.loaded)
        title = str(app.screen.query_one("#dtitle").render())
        assert "rank 0 vs rank 1" in title and "acquire" in title and "4 added" in title
        view = app.screen.query_one("LinesView")
        assert view.mode == "unified"
        added = [t for t in view.texts if t.startswith("+")]
        assert any("t43 = aten" in t for t in added), view.texts
        await pilot.press("s")
        await wait_for(pilot, lambda: app.screen.loaded)
        assert view.mode == "side" and any("t43 = aten" in str(t) for t in view.texts)
        await pilot.press("escape")
        await pilot.pause()
        assert type(app.screen).__name__ == "RankComparisonScreen"
        # a pass further down the chain (not diffed by compare_ranks) opens its diff too
        dce = next(i for i, r in enumerate(rows) if "forward" in r and " dce" in r)
        app.screen.query_one("OptionList").highlighted = dce
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "RankDiffScreen" and app.screen.loaded)
        assert "dce" in str(app.screen.query_one("#dtitle").render())
        assert any(t.startswith("+") for t in app.screen.query_one("LinesView").texts)


async def test_the_skew_table_sorts_the_most_skewed_kernel_first(variant_group):
    app = open_group_app(variant_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        await _open_comparison(app, pilot)
        lines = str(app.screen.query_one("#cskewtext").render()).splitlines()
        assert lines[0].startswith("kernel time across ranks: 3 kernels")
        body = [ln.split() for ln in lines[2:5]]
        # kernel k takes 100 (k+1) (1 + k rank / 4) µs: fusion 2 is twice as slow on rank 2 as on rank 0
        assert [r[0] for r in body] == ["fw_fusion_2", "fw_fusion_1", "fw_fusion_0"]
        assert body[0][2:10] == ["rank", "2", "600.0", "µs", "rank", "0", "300.0", "µs"] and body[0][10] == "2.00x"
        assert body[1][-1] == "1.50x" and body[2][-1] == "1.00x"


async def test_rank_keys_are_off_for_a_single_recording(small_rec):
    from tui_helpers import open_app
    app = open_app(small_rec)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+r", "equals_sign")
        await pilot.pause(0.1)
        assert len(app.screen_stack) == 1
        assert app.check_action("pick_rank", ()) is False and app.check_action("compare_ranks", ()) is False
        titles = [c[0] for c in _palette(app)]
        assert "Switch rank" not in titles


def _palette(app):
    from thundervis.tui.palette import palette_entries
    return palette_entries(app)


async def test_the_palette_and_help_list_the_rank_actions(identical_group):
    app = open_group_app(identical_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        titles = [c[0] for c in _palette(app)]
        assert "Switch rank" in titles and "Compare ranks" in titles
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "ctrl+r" in text and "compare ranks" in text


async def test_leaving_the_group_screens_before_their_workers_end_is_harmless(variant_group):
    app = open_group_app(variant_group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        app.group._comparison = None  # compute it again
        await pilot.press("ctrl+r", "escape", "equals_sign", "escape")
        await wait_for(pilot, lambda: not any(w.is_running for w in app.workers))
        await pilot.pause(0.2)
        assert len(app.screen_stack) == 1 and app.state.rank == 0
        await pilot.press("n")  # still alive and responding
        await pilot.pause(0.1)


async def test_a_pass_on_one_side_only_opens_on_the_rank_that_has_it(tmp_path):
    from _synthetic_group import write_group
    group = write_group(str(tmp_path), variants=(0, 0), forward_only=(0,))  # rank 1 alone has a backward
    app = open_group_app(group)
    async with app.run_test(size=(160, 48)) as pilot:
        await _ready(app, pilot)
        assert app.state.rank == 0 and app.state.chain == "forward"
        await _open_comparison(app, pilot)
        rows = [str(o.prompt) for o in app.screen.query_one("OptionList").options]
        pos = next(i for i, r in enumerate(rows) if "backward" in r and " 3 simplify" in r)
        assert "only on the variant" in rows[pos]
        app.screen.query_one("OptionList").highlighted = pos
        await pilot.press("enter")
        await _ready(app, pilot)
        assert len(app.screen_stack) == 1
        assert (app.state.rank, app.state.chain, app.state.index) == (1, "backward", 3)
        assert app.query_one("LinesView").texts[0].startswith('# graph 0 · backward · after "simplify"')
