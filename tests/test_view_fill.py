"""How a cold wall fills in: placeholders in the first frame, thumbnails in screen order,
embedded EXIF thumbnails, and a pool on every core. Policy is tested without GL."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

from engine.hosts.run import run_scene
from engine.view import cache
from engine.view.decode import embedded_thumbnail
from engine.view.encoder import default_workers
from engine.view.layout import Rect
from engine.view.placeholder import GREY, Placeholder, placeholder
from engine.view.priority import EMBEDDED, THUMB, ViewRect, fill_order
from engine.view.wall import ImageWall
from view_helpers import CORNERS, corners_match, jpeg_with_thumbnail, marked, screen_of


def test_the_pool_takes_every_core(tmp_path):
    assert [default_workers(n) for n in (None, 1, 2, 16)] == [1, 1, 2, 16]
    Image.new("RGB", (8, 6), (10, 20, 30)).save(tmp_path / "a.png")
    wall = ImageWall([tmp_path], progress=False, cache_dir=tmp_path / "c")
    assert wall.workers == (os.cpu_count() or 1)
    assert ImageWall([tmp_path], workers=3, progress=False,
                     cache_dir=tmp_path / "c").workers == 3


def test_the_queue_fills_the_screen_in_reading_order_then_the_nearest():
    # a 3x3 grid of unit images two apart, the view over the top-left four
    rects = [Rect(2 * c, -2 * r, 2 * c + 1, -2 * r + 1) for r in range(3) for c in range(3)]
    view = ViewRect(-0.5, -2.5, 3.5, 1.5, 400)
    parts = [THUMB] * 9 + [0] * 9 + [EMBEDDED]
    order = fill_order(parts, rects + rects + [rects[8]], view)
    assert order[:4] == [0, 1, 3, 4]  # visible thumbnails: rows top down, left to right
    assert order[4:8] == [9, 10, 12, 13]  # then visible detail (all drawn the same size)
    # off screen: first pictures before detail, nearest first, embedded before thumbnail
    assert set(order[8:12]) == {2, 5, 6, 7} and order[12:14] == [18, 8]
    assert set(order[14:]) == {11, 14, 15, 16, 17}
    # the view moves to the bottom right: that corner first
    moved = ViewRect(3.5, -4.5, 5.5, -2.5, 400)
    assert fill_order(parts, rects + rects + [rects[8]], moved)[:3] == [18, 8, 17]


def _cold_folder(folder: Path) -> None:
    """A JPEG with an embedded thumbnail (its own pixels a red-cornered marked image, its
    thumbnail solid orange: what a placeholder and the embedded picture show), a PNG (no
    embedded thumbnail: grey) and a tall JPEG turned by EXIF."""
    folder.mkdir()
    jpeg_with_thumbnail(folder / "a.jpg", marked(240, 160), np.full((40, 60, 3), (220, 120, 20),
                                                                     np.uint8))
    Image.fromarray(marked(120, 160)).save(folder / "b.png")
    jpeg_with_thumbnail(folder / "c.jpg", np.ascontiguousarray(np.rot90(marked(160, 120))),
                        np.ascontiguousarray(np.rot90(marked(64, 48))), orientation=6)


def _centre(image: np.ndarray, nav, rect) -> np.ndarray:
    x, y = screen_of(nav, rect, (image.shape[1], image.shape[0]), 0.5, 0.5)
    return image[y, x, :3].astype(int)


def test_the_embedded_thumbnail_is_read_upright_and_gives_the_mean(tmp_path):
    _cold_folder(tmp_path / "f")
    ph = placeholder(tmp_path / "f" / "a.jpg")
    assert (ph.width, ph.height, ph.embedded) == (240, 160, True)
    assert np.abs(np.subtract(ph.rgb, (220, 120, 20))).max() <= 3
    assert placeholder(tmp_path / "f" / "b.png") == Placeholder(120, 160, GREY, False)
    turned = placeholder(tmp_path / "f" / "c.jpg")
    assert (turned.width, turned.height, turned.embedded) == (160, 120, True)
    with Image.open(tmp_path / "f" / "c.jpg") as im:
        up = np.asarray(embedded_thumbnail(im, 6))
    assert up.shape == (48, 64, 3)  # upright: red top-left, green top-right
    assert np.abs(up[2, 2].astype(int) - CORNERS["tl"]).max() < 40
    assert np.abs(up[2, -3].astype(int) - CORNERS["tr"]).max() < 40


def test_a_cold_first_frame_draws_placeholders_then_fills_in(device, tmp_path,
                                                              isolated_cache):
    _cold_folder(tmp_path / "f")
    wall = ImageWall([tmp_path / "f"], detail=False, workers=1, progress=False)
    assert all(it.placeholder is not None for it in wall.items)
    assert not list(isolated_cache.rglob("thumb*.ktx2"))  # nothing decoded before frame 0
    first = run_scene(wall, device=device, frames=1, size=(320, 180), provider="streaming",
                      budget="64MiB", on_frame=wall.hooks())
    assert first.frames[0]["view_placeholders"] == 3 and not first.frames[0]["settled"]
    a, b, c = wall.items
    assert np.abs(_centre(first.image, wall.navigator, a.rect) - (220, 120, 20)).max() <= 6
    assert np.abs(_centre(first.image, wall.navigator, b.rect) - GREY).max() <= 2
    for it in wall.items:  # every box at its place and aspect: a placeholder's colour
        inside = [first.image[y, x, :3].astype(int) for x, y in (
            screen_of(wall.navigator, it.rect, (320, 180), fx, fy)
            for fx, fy in ((0.05, 0.05), (0.95, 0.95)))]
        assert np.abs(inside[0] - inside[1]).max() <= 2, it.source.name
    # the visible thumbnails are waited for: the picture is each image's, upright
    wall.wait_detail = True
    filled = run_scene(wall, device=device, frames=2, size=(320, 180), provider="streaming",
                       budget="64MiB", on_frame=wall.hooks())
    assert filled.frames[-1]["view_placeholders"] == 0
    assert cache.embedded_path(a.entry).is_file() and cache.thumb_path(
        a.entry, wall.thumb_edge).is_file()
    for it in wall.items:
        assert not corners_match(filled.image, wall.navigator, it.rect), it.source.name


def test_many_placeholders_are_read_over_a_pool_alike(tmp_path, monkeypatch):
    """Above PARALLEL_PLACEHOLDERS the headers are read over a pool: the same items, sizes,
    colours and problems (a file that is not an image) as one by one."""
    from engine.view import wall as wall_mod

    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(6):
        Image.fromarray(marked(40 + 8 * i, 30)).save(folder / f"p{i}.png")
    jpeg_with_thumbnail(folder / "e.jpg", marked(96, 64), np.full((32, 48, 3), (200, 40, 40),
                                                           np.uint8))
    (folder / "bad.jpg").write_bytes(b"not a jpeg")

    def load(cache_dir):
        w = ImageWall([folder], workers=2, detail=False, progress=False, cache_dir=cache_dir)
        return ([(it.source.name, it.width, it.height, it.placeholder) for it in w.items],
                sorted(Path(p).name for p, _ in w.problems))

    alone = load(tmp_path / "a")
    monkeypatch.setattr(wall_mod, "PARALLEL_PLACEHOLDERS", 2)
    pooled = load(tmp_path / "b")
    assert pooled == alone and len(alone[0]) == 7 and alone[1] == ["bad.jpg"]
    assert any(ph is not None and ph.embedded for *_, ph in alone[0])
