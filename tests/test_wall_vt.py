"""The wall on virtual textures (issue 22) on llvmpipe: a deterministic flight of the wall
demo through the shipped `StreamingProvider`, every image streamed as tiles, never ends a
frame over its pool, leaks nothing, sends every image through the page cache, and keeps the
screen at its wanted detail while zoomed in; its rows carry what the bench reports."""
from __future__ import annotations

from pathlib import Path

import pytest

from wall_helpers import free_flight

from lab.wall import WallProfile, _efficiency_rows, wall_flight
from lab.wall_vt import use_vt_provider
from engine.gl.device import Device

#: The wall set of test_wall_demo and test_wall_prefetch (24 x 256^2, in the user cache) at
#: their output size.
PROFILE = WallProfile("test-vt", 24, 256, (192, 108), 60, 1, 1, 0, "CI virtual wall test")


@pytest.mark.slow
@pytest.mark.needs("BC3 sampling")  # BC7 tiles or budgets sized for BC7 need BC7 or BC3
def test_virtual_wall_flight_stays_in_its_pool(device: Device, wall_cache: Path) -> None:
    free, peak, tails = free_flight(device, PROFILE, wall_cache)
    pool = tails + (peak - tails) // 4  # the bench's 25% budget
    probe = wall_flight(device, PROFILE, use_vt_provider(pool), pace=False, deterministic=True,
                        cache_dir=wall_cache, virtual=True)
    rows = probe.rows
    assert probe.leaked == 0
    assert probe.virtual == PROFILE.count  # every image went through the page cache
    assert not any(r["over_budget"] for r in rows)
    assert max(r["resident_bytes"] for r in rows) <= pool
    # The page cache follows the screen, not the content: far below the whole levels' peak.
    eff = {r["segment"]: r["efficiency"] for r in _efficiency_rows(probe, PROFILE, "vt")}
    levels = {r["segment"]: r["efficiency"] for r in _efficiency_rows(free, PROFILE, "lv")}
    assert set(eff) >= {"overview", "dive", "hold", "pan", "cut0", "zoom-out"}
    assert eff["pan"] < levels["pan"]
    # Zoomed in, the screen has its detail: the pan and the hold are at their wanted level.
    pan = [r["at_wanted_fraction"] for r in rows if r["segment"] in ("hold", "pan")]
    assert min(pan[len(pan) // 2:]) >= 0.9, pan
    assert max(r["cache_bytes"] + r["table_bytes"] for r in rows) <= \
        max(r["resident_bytes"] for r in rows)


def test_a_fixed_pool_setting_holds_the_pool_whatever_is_granted(device: Device) -> None:
    """`StreamerSettings.fixed_pool_bytes` (what the lab's wall flights run in): the provider
    and a bare whole-level streamer keep the fixed pool against any grant."""
    from engine.streaming.levels.streamer import LevelStreamer
    from engine.streaming.provider import StreamingProvider
    from engine.streaming.settings import StreamerSettings

    cfg = StreamerSettings(virtual="always", fixed_pool_bytes=3 << 20)
    for streamer in (StreamingProvider(device, cfg), LevelStreamer(device, cfg)):
        try:
            streamer.grant(1 << 30)  # the governor's grant does not move the fixed pool
            assert streamer.pool_bytes == 3 << 20
        finally:
            streamer.release()
    with pytest.raises(ValueError, match="fixed_pool_bytes"):
        StreamerSettings(fixed_pool_bytes=-1)


def test_the_walls_default_images_stream_virtually_and_small_ones_by_levels() -> None:
    """The wall by default (its 1024^2 BC7 images, the shipped settings' "auto") is virtual;
    at 512 texels and less its images stream by whole levels."""
    from demos.wall import DEFAULTS
    from demos.wall_assets import FORMAT
    from engine.formats import get as get_format
    from engine.streaming.provider import decide_virtual
    from engine.streaming.settings import StreamerSettings

    cfg = StreamerSettings()
    fmt = get_format(FORMAT)

    def virtual(size: int) -> bool:
        return decide_virtual(cfg.virtual, size, size, fmt, is_2d=True, vt_format=None,
                              min_size=cfg.virtual_min_size)

    assert virtual(DEFAULTS["texture_size"])
    assert virtual(4096)
    assert not virtual(512) and not virtual(256)
