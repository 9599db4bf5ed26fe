"""The wall demo on llvmpipe (issue 12): a CI-sized wall under a budget that binds never ends
a frame over its pool, leaks nothing, and brings detail back after every camera cut within a
bound. The demand is measured by a deterministic flight (frame clock, inline reads); the
flight under the budget reads with the I/O threads, as an application does, so its cut times
are wall-clock times and the bound is generous (a shared 2-core CI machine)."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.bench.streaming import WallProfile, use_wall_streamer, wall_flight
from engine.gl.device import Device

PROFILE = WallProfile("test", 24, 256, (192, 108), 160, 2, 2, 0, "CI wall test")
CUT_SECONDS = 2.0  # from a cut until 95% of the screen has its wanted level resident


@pytest.fixture(scope="module")
def wall_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wall")


@pytest.mark.slow
def test_wall_under_a_binding_budget(device: Device, wall_cache: Path) -> None:
    free = wall_flight(device, PROFILE, use_wall_streamer("tiered", 1 << 40), pace=False,
                       deterministic=True, cache_dir=wall_cache)
    peak = max(r["wanted_bytes"] for r in free.rows)
    tails = max(r["min_bytes"] for r in free.rows)
    assert peak > 2 * tails  # the flight wants real detail, not only tails
    pool = tails + (peak - tails) // 2
    probe = wall_flight(device, PROFILE, use_wall_streamer("tiered", pool), pace=True,
                        cache_dir=wall_cache)
    rows = probe.rows
    assert getattr(probe, "leaked") == 0
    assert not any(r["over_budget"] for r in rows)
    assert max(r["resident_bytes"] for r in rows) <= pool
    # The budget binds: detail was evicted and some frames had less than the screen wanted.
    assert rows[-1]["evictions"] > 0
    assert any(r["resident_bytes"] < r["wanted_bytes"] for r in rows)
    # Every cut brought its detail back, and quickly.
    print("cut seconds", probe.tracker.times, "frames", probe.frame_tracker.times)
    assert len(probe.tracker.times) == PROFILE.cuts
    assert all(t is not None and t <= CUT_SECONDS for t in probe.tracker.times), \
        probe.tracker.times
    assert any(t > 0 for t in probe.frame_tracker.times)  # detail really had to arrive
    segments = {r["segment"] for r in rows}
    assert {"overview", "dive", "pan", "cut0", "cut1", "zoom-out"} <= segments
