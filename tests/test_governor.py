"""The one-budget governor: split, coupling, prefer knob, degenerate budgets, external pressure."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import BudgetError
from engine.memory.budget import Budget
from engine.memory.governor import (
    BudgetSplit,
    Governor,
    GovernorInputs,
    GovernorSettings,
    split_usage,
)
from engine.resolution.policy import ResolutionController
from engine.resolution.targets_spec import TargetsSpec

MiB = 1 << 20
W, H = 1920, 1080
CURVE = ResolutionController(TargetsSpec.forward_hdr()).target_curve(W, H)
T_MIN, T_MAX = CURVE[0][1], CURVE[-1][1]


def inputs(budget: int, *, fixed: int = 100 * MiB, wanted: int = 400 * MiB,
           tail: int = 20 * MiB, **kw: object) -> GovernorInputs:
    args: dict[str, object] = dict(budget_bytes=budget, fixed_bytes=fixed, target_bytes=0,
                                   streamed_bytes=0, target_curve=CURVE, stream_wanted=wanted,
                                   stream_min=tail)
    args.update(kw)
    return GovernorInputs(**args)  # type: ignore[arg-type]


def curve_bytes(scale: float) -> int:
    return dict(CURVE)[scale]


def check_invariants(a: BudgetSplit, x: GovernorInputs) -> None:
    assert min(a.targets_allowance, a.pool_allowance, a.free_bytes, a.effective_budget,
               a.external_pressure_bytes) >= 0
    assert a.pool_allowance >= x.stream_min
    assert a.targets_allowance == curve_bytes(a.planned_scale)
    if not a.over_budget:
        assert a.fixed + a.targets_allowance + a.pool_allowance == a.effective_budget


def test_ample_budget_gives_full_scale_and_the_rest_to_the_pool() -> None:
    x = inputs(2048 * MiB)
    a = Governor().decide(x)
    assert a.planned_scale == 1.0 and not a.over_budget and a.reason == "fits"
    assert a.targets_allowance == T_MAX
    assert a.pool_allowance == 2048 * MiB - 100 * MiB - T_MAX
    check_invariants(a, x)


def test_coupling_lower_scale_shrinks_texture_need() -> None:
    """prefer=0 ('keep texture detail') still leaves full resolution when it is the scale, not
    the textures, that has to give: at scale s the screen needs only wanted*s^2 above the tail."""
    room = 100 * MiB
    budget = 100 * MiB + room
    x = inputs(budget, wanted=20 * MiB + 160 * MiB)  # 160 MiB above tail at scale 1.0: never fits
    a = Governor(GovernorSettings(prefer=0.0)).decide(x)
    s = a.planned_scale
    assert 0.25 < s < 1.0
    assert curve_bytes(s) + 20 * MiB + 160 * MiB * s * s <= room
    next_up = CURVE[[c[0] for c in CURVE].index(s) + 1]
    assert next_up[1] + 20 * MiB + 160 * MiB * next_up[0] ** 2 > room
    check_invariants(a, x)


def test_stream_want_measured_at_lower_scale_is_normalised() -> None:
    """The streamer reports its want at the scale it biases for; the governor must undo s^2,
    or a lowered scale would look like lowered demand and the scale would creep back up."""
    g = Governor()
    at_1 = g.decide(inputs(400 * MiB, wanted=20 * MiB + 400 * MiB))
    at_half = Governor().decide(inputs(400 * MiB, wanted=20 * MiB + 100 * MiB,
                                       stream_wanted_scale=0.5))
    assert at_1 == at_half


@given(budget=st.integers(0, 1200 * MiB), wanted=st.integers(0, 800 * MiB),
       p1=st.floats(0, 1), p2=st.floats(0, 1))
@settings(max_examples=150, deadline=None)
def test_prefer_is_monotonic_and_invariants_hold(budget: int, wanted: int, p1: float,
                                                 p2: float) -> None:
    lo, hi = sorted((p1, p2))
    x = inputs(budget, wanted=wanted)
    a_lo = Governor(GovernorSettings(prefer=lo)).decide(x)
    a_hi = Governor(GovernorSettings(prefer=hi)).decide(x)
    assert a_hi.planned_scale >= a_lo.planned_scale
    assert a_hi.pool_allowance <= a_lo.pool_allowance
    check_invariants(a_lo, x)
    check_invariants(a_hi, x)


def test_prefer_extremes() -> None:
    budget = 100 * MiB + T_MAX + 20 * MiB + 50 * MiB  # full res fits with 50 MiB of detail
    keep_res = Governor(GovernorSettings(prefer=1.0)).decide(inputs(budget))
    keep_tex = Governor(GovernorSettings(prefer=0.0)).decide(inputs(budget))
    assert keep_res.planned_scale == 1.0
    assert keep_tex.planned_scale < 1.0 and keep_tex.pool_allowance > keep_res.pool_allowance


@pytest.mark.parametrize("budget", [0, 50 * MiB, 100 * MiB, 100 * MiB + T_MIN])
def test_budget_below_minimums_is_flagged_not_negative(budget: int) -> None:
    x = inputs(budget)
    a = Governor().decide(x)
    assert a.over_budget and a.reason == "over_budget"
    assert a.planned_scale == 0.25
    assert a.targets_allowance == T_MIN and a.pool_allowance == 20 * MiB
    check_invariants(a, x)


def test_minimum_scale_fits_when_detail_reservation_does_not() -> None:
    budget = 100 * MiB + T_MIN + 20 * MiB + 1
    a = Governor(GovernorSettings(prefer=0.0)).decide(inputs(budget, wanted=2000 * MiB))
    assert not a.over_budget and a.planned_scale == 0.25 and a.pool_allowance == 20 * MiB + 1


def test_scale_cap_hands_memory_to_the_pool() -> None:
    full = Governor().decide(inputs(2048 * MiB))
    capped = Governor().decide(inputs(2048 * MiB, scale_cap=0.5))
    assert capped.planned_scale == 0.5
    assert capped.pool_allowance - full.pool_allowance == T_MAX - curve_bytes(0.5)


@pytest.mark.parametrize("field,value", [
    ("budget_bytes", math.nan), ("budget_bytes", -1), ("fixed_bytes", math.inf),
    ("streamed_bytes", -5), ("stream_wanted", math.nan), ("vram_available", -1),
    ("stream_wanted_scale", 0.0), ("scale_cap", math.nan), ("budget_bytes", True),
    ("target_curve", ()), ("target_curve", ((0.5, 10), (0.25, 20))),
    ("target_curve", ((0.25, 20), (0.5, 10))), ("target_curve", ((0.5, math.nan),)),
])
def test_bad_inputs_raise_budget_error(field: str, value: object) -> None:
    with pytest.raises(BudgetError):
        Governor().decide(inputs(1024 * MiB, **{field: value}))


@pytest.mark.parametrize("prefer", [-0.1, 1.5, math.nan])
def test_bad_prefer_raises(prefer: float) -> None:
    with pytest.raises(BudgetError):
        GovernorSettings(prefer=prefer)


def test_split_usage_from_ledger_categories() -> None:
    by_cat = {"texture.streamed": 300, "texture.static": 50, "target": 200, "buffer": 40,
              "staging": 8, "other": 2}
    assert split_usage(by_cat) == (100, 200, 300)
    assert split_usage({}) == (0, 0, 0)


def test_takes_the_budget_objects_bytes() -> None:
    budget = Budget("512MiB")
    g = Governor()
    assert g.decide(inputs(budget.bytes)).effective_budget == 512 * MiB
    budget.set("256MiB")
    assert g.decide(inputs(budget.bytes)).effective_budget == 256 * MiB


# -- external pressure ---------------------------------------------------------------------
GS = GovernorSettings(reserve_bytes=64 * MiB, raise_band_bytes=32 * MiB, raise_frames=10)
USED = 100 * MiB + T_MAX  # fixed + targets


def ext(available: int, budget: int = 4096 * MiB, used_targets: int = T_MAX) -> GovernorInputs:
    return inputs(budget, target_bytes=used_targets, vram_available=available,
                  vram_total=8192 * MiB)


def test_other_programs_lower_the_budget_at_once() -> None:
    g = Governor(GS)
    assert g.decide(ext(6000 * MiB)).external_pressure_bytes == 0
    a = g.decide(ext(1000 * MiB))
    assert a.effective_budget == USED + 1000 * MiB - 64 * MiB
    assert a.external_pressure_bytes == 4096 * MiB - a.effective_budget
    assert any("other programs" in n for n in a.notes)


def test_our_own_allocations_do_not_move_the_cap() -> None:
    """usage + available is constant when only we allocate: freeing our targets must not read
    as 'memory given back' and allocating them must not read as 'pressure'."""
    g = Governor(GS)
    first = g.decide(ext(1000 * MiB))
    for _ in range(30):
        shrunk = g.decide(ext(1000 * MiB + T_MAX, used_targets=0))
        assert shrunk.effective_budget == first.effective_budget


def test_given_back_memory_raises_only_after_the_streak_and_band() -> None:
    g = Governor(GS)
    low = g.decide(ext(1000 * MiB)).effective_budget
    # Noise inside the band never raises.
    for i in range(50):
        assert g.decide(ext(1000 * MiB + (i % 3) * 10 * MiB)).effective_budget == low
    # A real rise: held for raise_frames - 1 frames, then raised to the lowest value seen.
    for i in range(9):
        assert g.decide(ext(1500 * MiB + (i % 2) * 100 * MiB)).effective_budget == low
    raised = g.decide(ext(1600 * MiB)).effective_budget
    assert raised == low + 500 * MiB
    # An interruption of the streak restarts it.
    for _ in range(5):
        g.decide(ext(2000 * MiB))
    g.decide(ext(1500 * MiB))
    for _ in range(9):
        assert g.decide(ext(2000 * MiB)).effective_budget == raised


def test_effective_never_exceeds_user_budget() -> None:
    g = Governor(GS)
    for avail in (8000 * MiB, 100 * MiB, 8000 * MiB):
        for _ in range(20):
            a = g.decide(ext(avail, budget=512 * MiB))
            assert a.effective_budget <= 512 * MiB
    assert a.effective_budget == 512 * MiB


def test_the_staging_ring_is_no_part_of_the_floor() -> None:
    """A budget that holds the floor only without the streamer's ring is not over: the pool
    goes below the tails by the ring's excess, and the streamer gives the ring back."""
    ring = 12 * MiB
    budget = 100 * MiB + T_MIN + 20 * MiB  # the floor, with the ring counted in `fixed`
    x = inputs(budget, fixed=100 * MiB + ring, elastic_bytes=ring)
    a = Governor().decide(x)
    assert not a.over_budget and a.planned_scale == 0.25
    assert a.pool_allowance == 20 * MiB - ring
    floor, _ = Governor.claim(x.validated())
    assert floor == budget
    assert Governor().decide(inputs(budget - 1, fixed=100 * MiB + ring,
                                    elastic_bytes=ring)).over_budget
