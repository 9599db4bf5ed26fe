"""Thumbnail atlases (engine.view.atlas): a wall of many images draws its thumbnails from a
few shared pages whose blocks are the thumbnails' own, and shows the same picture as one
texture per thumbnail, upright, in budget, with no leaks."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine.hosts.run import run_scene
from engine.textures.reader import open_texture
from engine.view import atlas, cache, wall as wall_mod
from engine.view.wall import ImageWall
from view_helpers import corners_match, marked, screen_of

SIZES = [(320, 200), (200, 300), (256, 256), (300, 120), (90, 160)]


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("atlas-photos")
    for i in range(24):
        w, h = SIZES[i % len(SIZES)]
        img = marked(w, h)
        img[h // 3: 2 * h // 3, w // 3: 2 * w // 3] = (10 * i, 255 - 10 * i, 128)
        Image.fromarray(img).save(folder / f"p{i:02d}.png")
    return folder


def _thumbs(folder: Path, cache_dir: Path, count: int) -> list[Path]:
    wall = ImageWall([folder], workers=1, detail=False, progress=False, cache_dir=cache_dir)
    wall.make_thumbnails()
    return [cache.thumb_path(it.entry, wall.thumb_edge) for it in wall.items][:count]


def test_pages_hold_the_thumbnails_blocks_and_are_found_again(photos, tmp_path):
    thumbs = _thumbs(photos, tmp_path / "c", 24)
    cell, edge = 256, 1024  # 16 cells a page: two pages
    folder = atlas.atlas_dir(tmp_path, [t.parent.name for t in thumbs], cell, edge)
    made = atlas.build(folder, thumbs, cell, edge)
    assert made is not None and len(made.pages) == 2 and all(made.slots)
    for path, slot in zip(thumbs, made.slots):
        tf, page = open_texture(path), open_texture(made.pages[slot.page])
        assert (slot.width, slot.height) == (tf.width, tf.height)
        for level in (0, 3, 6):  # copied blocks: the thumbnail's own, byte for byte
            w = max(1, tf.width >> level)
            h = max(1, tf.height >> level)
            cols, rows = -(-w // 4), -(-h // 4)
            mine = np.frombuffer(tf.read_level(level), np.uint8).reshape(rows, cols, 8)
            pe = edge >> level
            blocks = np.frombuffer(page.read_level(level), np.uint8).reshape(pe // 4, pe // 4, 8)
            x0, y0 = (slot.x >> level) // 4, (slot.y >> level) // 4
            assert np.array_equal(blocks[y0:y0 + rows, x0:x0 + cols], mine)
        assert len(page.levels) == 11  # down to 1x1, filtered below the 4-texel cells
    again = atlas.load(folder, 24)
    assert again is not None and again.slots == made.slots
    assert atlas.load(folder, 23) is None  # another wall
    (folder / "page1.ktx2").unlink()
    assert atlas.load(folder, 24) is None  # incomplete: made again by the caller


def test_a_thumbnail_that_cannot_be_read_is_left_out(photos, tmp_path):
    thumbs = _thumbs(photos, tmp_path / "c", 5)
    thumbs[2].write_bytes(b"not a texture")
    made = atlas.build(tmp_path / "a", thumbs, 256, 1024)
    assert made is not None and made.slots[2] is None
    assert sum(s is not None for s in made.slots) == 4


def test_uv_of_a_slot_maps_the_quad_onto_its_cell():
    slot = atlas.Slot(0, 512, 256, 256, 192)
    (a, _, c), (_, d, f) = slot.uv(4096)
    assert (a * 0 + c, a * 1 + c) == (512 / 4096, 768 / 4096)
    assert (d * 0 + f, d * 1 + f) == (256 / 4096, 448 / 4096)


def _run(device, photos, cache_dir):
    view = ImageWall([photos], workers=1, detail=False, progress=False, cache_dir=cache_dir,
                     wait_detail=True)  # the picture compared is the settled one
    view.make_thumbnails()
    result = run_scene(view, device=device, frames=20, size=(480, 270), provider="streaming",
                       budget="64MiB", on_frame=view.hooks())
    return view, result


@pytest.mark.slow
@pytest.mark.needs("GLSL 4.00")  # equal to GL's own trilinear filtering
@pytest.mark.needs("BC1_RGB sampling")  # virtual tiles of BC1 files
def test_an_atlas_wall_shows_the_picture_of_one_texture_per_thumbnail(
        device, photos, tmp_path, monkeypatch):
    with_atlas, a = _run(device, photos, tmp_path / "c")
    assert with_atlas.atlas is not None and len(with_atlas.atlas.pages) == 1
    monkeypatch.setattr(wall_mod, "ATLAS_MIN", 10**9)
    alone, b = _run(device, photos, tmp_path / "c")
    assert alone.atlas is None
    for r in (a, b):
        assert r.summary["leaked_objects"] == 0 and r.summary["over_budget_frames"] == 0
    textures = [len({c.material.albedo for it in v.items for c in it.chunks})
                for v in (with_atlas, alone)]
    assert textures == [1, 24]
    for it in with_atlas.items:
        assert not corners_match(a.image, with_atlas.navigator, it.rect), it.source.name
    # Inside each image: a thumbnail whose sides halve exactly down the levels in use is the
    # same picture; an odd side's levels fill their cell to within a texel of rounding.
    h, w = a.image.shape[:2]
    for it in with_atlas.items:
        x0, y0 = screen_of(with_atlas.navigator, it.rect, (w, h), 0, 0)
        x1, y1 = screen_of(with_atlas.navigator, it.rect, (w, h), 1, 1)
        mine, theirs = (r.image[y0 + 3:y1 - 3, x0 + 3:x1 - 3, :3].astype(int) for r in (a, b))
        mse = float(((mine - theirs) ** 2).mean())
        if it.width == it.height:
            assert mse == 0, it.source.name
        assert mse == 0 or 10 * np.log10(255 ** 2 / mse) > 30, (it.source.name, mse)


def test_a_warm_wall_needs_no_thumbnail_file_and_remakes_the_lost_ones(photos, tmp_path):
    first = ImageWall([photos], workers=1, detail=False, progress=False,
                      cache_dir=tmp_path / "c")
    assert first.atlas is None  # cold: every image a placeholder, no thumbnail decoded
    first.make_thumbnails()
    assert first.atlas is not None and all(first.atlas.slots)
    thumbs = [cache.thumb_path(it.entry, first.thumb_edge) for it in first.items]
    for t in thumbs:  # the atlas holds them all: a warm start looks for none of them
        t.unlink()
    warm = ImageWall([photos], workers=1, detail=False, progress=False,
                     cache_dir=tmp_path / "c")
    assert warm.atlas is not None and all(warm.atlas.slots)
    assert not any(it.placeholder for it in warm.items)
    for page in warm.atlas.pages:  # without the atlas they are missing: placeholders
        page.unlink()
    again = ImageWall([photos], workers=1, detail=False, progress=False,
                      cache_dir=tmp_path / "c")
    assert all(it.placeholder for it in again.items) and again.atlas is None
    again.make_thumbnails()
    assert all(t.is_file() for t in thumbs) and len(again.items) == 24
    assert again.atlas is not None and all(again.atlas.slots)


def test_pages_made_on_an_executor_equal_those_made_in_process(photos, tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    thumbs = _thumbs(photos, tmp_path / "c", 24)
    here = atlas.build(tmp_path / "here", thumbs, 256, 1024)
    with ProcessPoolExecutor(2) as pool:
        there = atlas.build(tmp_path / "there", thumbs, 256, 1024, pool)
    assert here is not None and there is not None and here.slots == there.slots
    assert [p.read_bytes() for p in here.pages] == [p.read_bytes() for p in there.pages]
