"""The page cache's slot count adds up: `cache_slots_used` counts slots, never the packed
cells that share one (a report had 396 slots used of 342, the HUD `cache -47/400 slots`)."""
from __future__ import annotations

import pytest
from vt_helpers import chain_file

from engine.streaming.virtual.system import VirtualTextureSystem

pytestmark = [pytest.mark.usefixtures("isolated_cache"), pytest.mark.needs("BC1_RGB sampling")]


def test_slots_used_counts_slots_not_packed_cells(dev, tmp_path):
    """Many small textures: their pinned coarsest levels are more cells than the cache has
    slots, yet they fill only a few slots; used never exceeds the slots, never goes below
    the slots the packed levels take."""
    files = [chain_file(tmp_path, f"t{i}.ktx2", 64, seed=i) for i in range(40)]
    with dev.leak_check():
        vts = VirtualTextureSystem(dev, 1 << 18)  # 25 slots
        try:
            for f in files:
                vts.register(f)
            vts.update()
            assert vts.cache is not None
            assert vts.resident_tiles() > vts.cache.slots  # the count reported before
            assert 1 <= vts.used_slots() <= vts.cache.slots
            assert vts.used_slots() <= vts.tail_slots + vts.policy.occupied
        finally:
            vts.release()
