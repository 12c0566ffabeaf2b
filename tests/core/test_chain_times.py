"""The line ``ls`` prints under a timed chain (``present.chain_times``)."""
from __future__ import annotations

from thundervis.present.chain_times import chain_time_text
from thundervis.recording.model import ChainTiming


def _ct(clock="host", walls=(), calls=5, median=1550.0, partial=False) -> ChainTiming:
    return ChainTiming(graph=0, chain="forward", clock=clock, device="cuda:0" if clock == "device" else "cpu",
                       calls=calls, median_us=median, min_us=median, max_us=median, total_us=median * calls,
                       partial=partial, walls_us=tuple(walls))


def test_the_wall_time_of_the_untimed_calls_against_the_time_inside_the_symbols():
    assert chain_time_text(_ct(walls=(2000.0, 1900.0, 2100.0))) == \
        "2.00 ms a call (wall, median of 3 untimed calls) · kernels and torch ops 1.55 ms (78%)"
    # On CUDA the untimed calls are synchronized and the time inside is device time.
    assert chain_time_text(_ct("device", walls=(4000.0,))) == \
        "4.00 ms a call (wall, median of 1 untimed call, synchronized) · kernels and torch ops on the device 1.55 ms (39%)"


def test_shown_as_measured_when_the_medians_of_different_calls_cross():
    assert chain_time_text(_ct(walls=(1450.0, 1450.0))).endswith("1.55 ms (107%: nothing measurable between them)")
    assert chain_time_text(_ct(walls=(1550.0,))).endswith("1.55 ms (100%)")
    # Far past it the timed calls were unlike the untimed ones (first calls timed, --warmup 0).
    assert chain_time_text(_ct(walls=(1000.0, 1000.0))).endswith(
        "1.55 ms (155%: the timed calls ran slower than the untimed ones; more --warmup calls time steadier ones)")


def test_without_wall_times_the_time_inside_alone_and_a_partial_run_says_so():
    assert chain_time_text(_ct()) == "kernels and torch ops 1.55 ms a call (median of 5 timed calls) · wall time not recorded"
    assert chain_time_text(_ct(calls=1, partial=True)) == \
        "kernels and torch ops 1.55 ms a call (median of 1 timed call) (the run ended first) · wall time not recorded"
    assert chain_time_text(_ct(walls=(-5.0,))).endswith("wall time not recorded")  # a hostile value is not a time
    assert chain_time_text(None) is None and chain_time_text(_ct(calls=0)) is None
