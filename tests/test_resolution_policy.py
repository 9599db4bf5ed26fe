"""Memory-fitted resolution controller, targets spec and frame-time PI. Pure, no GL."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import BudgetError
from engine.memory.sizes import renderbuffer_bytes
from engine.resolution.policy import (
    Decision,
    FrameTimePI,
    ResolutionController,
    ResolutionSettings,
)
from engine.resolution.targets_spec import TargetSpec, TargetsSpec

MiB = 1 << 20
SIZE = (1920, 1080)
SPEC = TargetsSpec((
    TargetSpec("color", "RGBA16F", 4),
    TargetSpec("depth", "DEPTH24_STENCIL8", 4),
    TargetSpec("bloom", "R11G11B10F", 1, 0.5),
    TargetSpec("output", "RGBA8_SRGB", follows_scale=False),
))
GRID = ResolutionSettings().grid()


def cost(scale: float, size: tuple[int, int] = SIZE) -> int:
    return SPEC.bytes_at(*size, scale)


# -- targets spec --------------------------------------------------------------------------
@given(w=st.integers(1, 4000), h=st.integers(1, 4000), scale=st.floats(0.01, 1.0))
@settings(max_examples=100, deadline=None)
def test_spec_bytes_are_the_sum_of_renderbuffer_bytes(w: int, h: int, scale: float) -> None:
    expect = (renderbuffer_bytes("RGBA16F", max(1, round(w * scale)), max(1, round(h * scale)), 4)
              + renderbuffer_bytes("DEPTH24_STENCIL8", max(1, round(w * scale)),
                                   max(1, round(h * scale)), 4)
              + renderbuffer_bytes("R11G11B10F", max(1, round(w * scale * 0.5)),
                                   max(1, round(h * scale * 0.5)))
              + renderbuffer_bytes("RGBA8_SRGB", w, h))
    assert SPEC.bytes_at(w, h, scale) == expect


def test_spec_rejects_bad_targets() -> None:
    with pytest.raises(KeyError):
        TargetSpec("x", "NOPE")
    with pytest.raises(ValueError):
        TargetSpec("x", "RGBA8", samples=0)
    with pytest.raises(ValueError):
        TargetsSpec((TargetSpec("x", "RGBA8"), TargetSpec("x", "R8")))


def test_grid_and_curve() -> None:
    assert GRID[0] == 0.25 and GRID[-1] == 1.0 and len(GRID) == 13
    assert ResolutionSettings(min_scale=0.3, step=0.25).grid() == (0.3, 0.5, 0.75, 1.0)
    curve = ResolutionController(SPEC).target_curve(*SIZE)
    assert [s for s, _ in curve] == list(GRID)
    assert all(b == cost(s) for s, b in curve)


# -- memory fitting ------------------------------------------------------------------------
def run(ctrl: ResolutionController, allowance: int, free: int = 0, **kw: object) -> Decision:
    return ctrl.update(SIZE, allowance, free, **kw)  # type: ignore[arg-type]


def test_first_frame_fits_the_allowance_exactly() -> None:
    for scale in GRID:
        for delta in (0, -1):
            d = run(ResolutionController(SPEC), cost(scale) + delta)
            expect = scale if delta == 0 else max([g for g in GRID if g < scale], default=0.25)
            assert d.scale == expect and d.resize and d.reason.startswith("initial")
            assert d.target_bytes == cost(d.scale)
            assert (d.width, d.height) == (round(1920 * d.scale), round(1080 * d.scale))
            assert not d.release_first  # nothing old to release


@given(st.lists(st.tuples(st.integers(0, 400 * MiB), st.integers(0, 400 * MiB)),
                min_size=1, max_size=120))
@settings(max_examples=120, deadline=None)
def test_never_over_allowance_after_the_decision(frames: list[tuple[int, int]]) -> None:
    """Any budget sequence: on every frame the decided targets fit that frame's allowance
    (or sit at min_scale, flagged), so over-budget is corrected within one frame."""
    ctrl = ResolutionController(SPEC)
    prev_bytes = 0
    for allowance, free in frames:
        d = run(ctrl, allowance, free)
        if cost(0.25) <= allowance:
            assert d.target_bytes <= allowance
            # ...and no more than one grid step below what fits... unless holding for cooldown.
            assert d.scale <= d.memory_scale
        else:
            assert d.scale == 0.25 and "over allowance" in d.reason
        if d.resize and prev_bytes and not d.release_first:
            assert d.target_bytes <= free  # old + new fit together
        if d.release_first:
            assert d.target_bytes > free
        prev_bytes = d.target_bytes


def test_drop_is_immediate_even_right_after_a_change() -> None:
    ctrl = ResolutionController(SPEC)
    run(ctrl, cost(1.0))
    d = run(ctrl, cost(0.5), free=0)
    assert d.scale == 0.5 and d.resize and d.reason == "memory" and d.release_first
    d = run(ctrl, cost(0.25), free=10 * cost(1.0))
    assert d.scale == 0.25 and d.resize and not d.release_first


def test_six_hundred_steady_frames_make_no_resize() -> None:
    ctrl = ResolutionController(SPEC)
    allowance = (cost(0.625) + cost(0.6875)) // 2
    decisions = [run(ctrl, allowance, free=50 * MiB) for _ in range(601)]
    assert decisions[0].resize and decisions[0].scale == 0.625
    assert sum(d.resize for d in decisions[1:]) == 0


@pytest.mark.parametrize("noise", [1, 4096, 1 << 20])
@pytest.mark.parametrize("p_below", [0.25, 0.5, 0.75])
def test_no_oscillation_on_a_boundary(noise: int, p_below: float) -> None:
    """Allowance on the exact byte cost of 0.75 +- noise. Memory forces every dip (it must), but
    the backed-off rise hold (8 -> 32 -> 128 frames) ends it: at most two round trips per
    10 s, over many noise sequences, and only between the two neighbouring scales."""
    boundary = cost(0.75)
    for seed in range(10):
        rng = random.Random(seed)
        ctrl = ResolutionController(SPEC)
        scales = [run(ctrl, boundary + (-noise if rng.random() < p_below else noise)).scale
                  for _ in range(600)]
        changes = sum(a != b for a, b in zip(scales, scales[1:]))
        assert changes <= 4 and set(scales) <= {0.75, 0.6875}


def test_going_up_needs_cooldown_and_a_stable_window() -> None:
    s = ResolutionSettings()
    ctrl = ResolutionController(SPEC, s)
    run(ctrl, cost(0.5))
    ups = [run(ctrl, cost(1.0), free=cost(1.0)) for _ in range(s.cooldown_frames)]
    assert [d.resize for d in ups] == [False] * (s.cooldown_frames - 1) + [True]
    assert ups[-1].scale == 1.0 and ups[-1].reason == "up" and not ups[-1].release_first
    # A frame that wants less than the rise (without forcing a drop) restarts the window, and
    # the rise goes to the lowest scale wanted across it.
    ctrl = ResolutionController(SPEC, s)
    run(ctrl, cost(0.5))
    for allowance in [cost(1.0)] * 5 + [cost(0.5)] + [cost(1.0)] * 7:
        assert not run(ctrl, allowance).resize
    assert run(ctrl, cost(0.75)).scale == 0.75
    # A dip that undoes a recent rise backs the hold off.
    ctrl = ResolutionController(SPEC, s)
    run(ctrl, cost(0.5))
    for _ in range(20):
        run(ctrl, cost(1.0))
    d = run(ctrl, cost(0.5))
    assert d.resize and d.reason == "memory"
    # That dip undid a rise 12 frames old (< 4 holds): the hold backed off to 4 x 8 frames.
    rising = [run(ctrl, cost(1.0)) for _ in range(4 * s.cooldown_frames)]
    assert [d.resize for d in rising].index(True) == 4 * s.cooldown_frames - 1
    # A dip long after a rise is not flapping: the hold is back to cooldown_frames.
    for _ in range(200):
        run(ctrl, cost(1.0))
    run(ctrl, cost(0.5))
    rising = [run(ctrl, cost(1.0)) for _ in range(s.cooldown_frames)]
    assert [d.resize for d in rising].index(True) == s.cooldown_frames - 1


def test_up_threshold_blocks_tiny_steps() -> None:
    fine = ResolutionSettings(step=0.01, up_threshold=0.02)
    ctrl = ResolutionController(SPEC, fine)
    start = ctrl.update(SIZE, cost(0.9), 0).scale
    target = next(g for g in fine.grid() if g > start)  # one 1% step up
    for _ in range(50):
        assert not ctrl.update(SIZE, SPEC.bytes_at(*SIZE, target), 0).resize
    two_up = [g for g in fine.grid() if g > start][2]
    for _ in range(fine.cooldown_frames):
        d = ctrl.update(SIZE, SPEC.bytes_at(*SIZE, two_up), 0)
    assert d.resize and d.scale == two_up


def test_output_size_change_reallocates_and_refits() -> None:
    ctrl = ResolutionController(SPEC)
    allowance = cost(0.75)
    run(ctrl, allowance)
    bigger = ctrl.update((2560, 1440), allowance, 0)
    assert bigger.resize and bigger.target_bytes <= allowance and bigger.scale < 0.75
    smaller = ctrl.update((1280, 720), allowance, 0)
    assert smaller.resize and smaller.scale == bigger.scale and smaller.reason == "output size"


def test_rejects_nan_and_negative() -> None:
    ctrl = ResolutionController(SPEC)
    for bad in (math.nan, -1, math.inf):
        with pytest.raises(BudgetError):
            ctrl.update(SIZE, bad, 0)  # type: ignore[arg-type]
        with pytest.raises(BudgetError):
            ctrl.update(SIZE, 0, bad)  # type: ignore[arg-type]


# -- out of memory -------------------------------------------------------------------------
def test_oom_steps_down_and_holds_a_ceiling() -> None:
    s = ResolutionSettings(oom_hold_frames=50)
    ctrl = ResolutionController(SPEC, s)
    d = run(ctrl, cost(1.0), free=cost(1.0))
    retry = ctrl.on_alloc_failed(d.scale)
    assert retry.scale == 0.9375 and retry.resize and retry.release_first
    assert ctrl.scale_cap == 0.9375
    held = [run(ctrl, cost(1.0), free=cost(1.0)) for _ in range(49)]
    assert all(h.scale == 0.9375 for h in held) and not any(h.resize for h in held)
    after = [run(ctrl, cost(1.0), free=cost(1.0)) for _ in range(s.cooldown_frames)]
    assert after[-1].scale == 1.0 and after[-1].resize and ctrl.scale_cap == 1.0


def test_oom_at_minimum_raises() -> None:
    ctrl = ResolutionController(SPEC)
    run(ctrl, 0)
    with pytest.raises(BudgetError):
        ctrl.on_alloc_failed(0.25)


# -- frame time ------------------------------------------------------------------------------
def plant_ms(scale: float, full_ms: float = 30.0, fixed_ms: float = 2.0) -> float:
    """GPU time grows with pixel count (scale^2) plus a resolution-independent part."""
    return fixed_ms + full_ms * scale * scale


def test_pi_converges_into_the_dead_band() -> None:
    s = ResolutionSettings(target_frame_ms=16.0)
    pi = FrameTimePI(s)
    scale = 1.0
    for _ in range(200):
        scale = pi.update(plant_ms(scale), scale)
    assert abs(plant_ms(scale) - 16.0) / 16.0 <= s.dead_band
    ideal = math.sqrt(14.0 / 30.0)
    assert abs(scale - ideal) < 0.05


def test_pi_dead_band_holds_output_still() -> None:
    s = ResolutionSettings(target_frame_ms=16.0, dead_band=0.05)
    pi = FrameTimePI(s)
    out = pi.update(24.0, 1.0)
    integral = pi.integral
    rng = random.Random(1)
    for _ in range(500):
        assert pi.update(16.0 * (1 + rng.uniform(-0.049, 0.049)), out) == out
    assert pi.integral == integral


def test_pi_does_not_wind_up_while_memory_holds_the_scale() -> None:
    pi = FrameTimePI(ResolutionSettings(target_frame_ms=16.0))
    pi.update(32.0, 1.0)
    integral = pi.integral
    for _ in range(100):
        pi.update(4.0, 0.25)  # fast only because memory forced a tiny scale
    assert pi.integral == integral


def test_controller_with_frame_time_memory_wins() -> None:
    s = ResolutionSettings(target_frame_ms=16.0)
    ctrl = ResolutionController(SPEC, s)
    d = ctrl.update(SIZE, cost(1.0), cost(1.0))
    for _ in range(300):
        d = ctrl.update(SIZE, cost(1.0), cost(1.0), frame_ms=plant_ms(d.scale))
    assert d.time_scale is not None and d.scale == d.time_scale < 1.0
    assert abs(plant_ms(d.scale) - 16.0) / 16.0 < 0.1
    tight = ctrl.update(SIZE, cost(0.5), 0, frame_ms=plant_ms(d.scale))
    assert tight.scale == 0.5 and tight.reason == "memory" and tight.time_scale > 0.5
    assert ctrl.scale_cap == d.time_scale


def test_a_pass_added_later_is_priced_from_then_on() -> None:
    c = ResolutionController(SPEC)
    c.update(SIZE, 10 ** 9, 10 ** 9)
    more = TargetsSpec(SPEC.targets + (TargetSpec("feedback", "RGBA8", relative_size=0.25,
                                                  min_width=64, copies=2),))
    c.set_spec(more)
    assert c.target_curve(*SIZE) == tuple((g, more.bytes_at(*SIZE, g)) for g in GRID)
    assert c.target_curve(*SIZE)[0][1] > cost(GRID[0])
