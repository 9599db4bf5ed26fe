"""How a cold wall fills in: placeholders in the first frame, thumbnails in screen order,
embedded EXIF thumbnails, and a pool on every core. Policy is tested without GL."""
from __future__ import annotations

import os

from engine.view.encoder import default_workers
from engine.view.wall import ImageWall


def test_the_pool_takes_every_core(tmp_path):
    assert [default_workers(n) for n in (None, 1, 2, 16)] == [1, 1, 2, 16]
    from PIL import Image

    Image.new("RGB", (8, 6), (10, 20, 30)).save(tmp_path / "a.png")
    wall = ImageWall([tmp_path], progress=False, cache_dir=tmp_path / "c")
    assert wall.workers == (os.cpu_count() or 1)
    assert ImageWall([tmp_path], workers=3, progress=False,
                     cache_dir=tmp_path / "c").workers == 3
