"""The virtual-texture benchmark runs end to end at a tiny size and reports real figures."""
from __future__ import annotations

import math

import pytest
from vt_helpers import headless_device

from lab.virtual import VirtualProfile, run_profile

# Tile-contiguous copies (the default storage) go to a cache folder of each test's own.
pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.mark.slow
@pytest.mark.needs("BC3 sampling")  # BC7 tiles or budgets sized for BC7 need BC7 or BC3
def test_tiny_virtual_bench(tmp_path, user_cache):
    gallery_assets = pytest.importorskip("demos.gallery_assets")
    # The bench's own gallery files (4 x 512^2 BC7), from the user's cache that the gallery
    # tests share rather than made again in this test's cache.
    files = gallery_assets.gallery_textures(4, 512, "bc7", progress=False,
                                            cache_dir=user_cache / "gallery").paths
    dev = headless_device()
    try:
        prof = VirtualProfile(textures=4, size=512, allowance=512 << 10, output=(160, 90),
                              stops=2, hold=8, files=tuple(str(p) for p in files))
        with dev.leak_check():
            res = run_profile(dev, prof)
    finally:
        dev.shutdown()
    row = res.rows[0]
    assert row["frames"] == 16 and row["frames_over_budget"] == 0
    assert row["content_to_budget"] > 1
    assert row["psnr_settled_min_db"] > 20  # a real comparison, not a placeholder
    assert row["raw_upload_MBps"] > 0 and math.isfinite(row["cpu_feedback_table_ms_p50"])
    assert any("goals" in n for n in res.notes)
