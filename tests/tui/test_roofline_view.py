"""The kernels screen's roofline columns: roofline µs next to the measured median, and % of
roofline only for a time measured on a GPU."""
from __future__ import annotations

import pytest
from roofline_fixtures import FUSION, roofline_recording
from tui_helpers import open_app, settle

from thundervis.gpus import GPUS

pytestmark = pytest.mark.asyncio




@pytest.mark.parametrize("clock", ["device", "host", None])
async def test_kernels_table_shows_roofline_and_pct_only_for_gpu_times(tmp_path, clock):
    path = roofline_recording(str(tmp_path / "r.tvrec"), clock, fusion_us=5.0)
    app = open_app(path)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("k")
        await pilot.pause()
        screen = app.screen
        for _ in range(100):  # the roofline is modelled in a worker
            await pilot.pause(0.05)
            if screen.roofline_loaded:
                break
        table = screen.query_one("DataTable")
        cols = [c.key.value for c in table.columns.values()]
        assert cols.index("roofline µs") == cols.index("median") + 1 and "% roof" in cols
        # the measured time's column and the kernel's details say which clock measured it
        label = str(list(table.columns.values())[cols.index("median")].label)
        clock_name = {"device": "GPU", "host": "CPU"}.get(clock)
        assert label == (f"median {clock_name}" if clock_name else "median")
        assert ("GPU" in label) == (clock == "device")
        (k,) = screen.kernels
        roof = (FUSION[1] + FUSION[2]) / GPUS["h100"].hbm_bytes_per_s * 1e6
        assert k.roofline_us == pytest.approx(roof) and k.roofline_bound == "memory" and k.flops == FUSION[0]
        row = [str(v) for v in table.get_row_at(0)]
        assert row[cols.index("roofline µs")] == f"{roof:.3g}"
        title = str(screen.query_one("#ktitle").render())
        assert "roofline on sm_90 H100 SXM" in title and "sm_90 assumed" in title
        info = str(screen.query_one("#kinfo").render())
        assert f"roofline {roof:.3g} µs (memory-bound)" in info
        if clock_name:
            assert f"({clock_name} time)" in info and f"{clock_name} times" in title
            # its chain's wall time per call against its kernels (present.chain_times)
            synced = ", synchronized" if clock == "device" else ""
            assert f"forward chain: 26.0 µs a call (wall, median of 2 untimed calls{synced})" in info
        else:
            assert "chain:" not in info
        if clock == "device":
            assert row[cols.index("% roof")] == f"{roof / 5.0 * 100:.0f}%" and "% of roofline" in info
        else:
            assert row[cols.index("% roof")] == "-"
            assert ("not a GPU time" in info) == (clock == "host")
