"""Slides only OpenSlide reads (engine.science.slides): routed by suffix, read tile by tile
exactly, shown and picked like any source; a transparent region shows the slide's
background; a damaged file, a URL or a missing OpenSlide is a typed error."""
from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
from science_helpers import picture_difference, pyramid, settled_stops

from engine.errors import ImageSourceError
from engine.science.readers import open_image_source
from engine.science.slides import SlideLevel, background_of
from engine.science.view import ScienceView


@pytest.fixture(scope="module")
def slide(tmp_path_factory):
    """A generic tiled RGB TIFF (zlib, two levels) named as a Sakura slide: OpenSlide reads
    it by its content; (y, x, 3) levels."""
    pytest.importorskip("openslide")
    tifffile = pytest.importorskip("tifffile")
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:520, 0:600]
    base = np.stack([np.sin(xx / (11 + 4 * k)) * np.cos(yy / (13 + 3 * k)) for k in range(3)],
                    axis=-1)
    rgb = np.clip((base + 1.2 + rng.normal(0, 0.1, base.shape)) * 100, 0, 255).astype(np.uint8)
    levels = [rgb, np.ascontiguousarray(rgb[::2, ::2])]
    root = tmp_path_factory.mktemp("slides")
    with tifffile.TiffWriter(root / "s.tiff") as tw:
        for i, lv in enumerate(levels):
            tw.write(lv, tile=(128, 128), photometric="rgb", compression="zlib",
                     subfiletype=int(i > 0))
    path = root / "s.svslide"
    shutil.copy(root / "s.tiff", path)
    return path, levels


def test_a_slide_is_read_through_openslide_tile_by_tile_exactly(slide):
    path, levels = slide
    src = open_image_source(str(path))
    try:
        assert (src.channels, src.dtype.name, src.channel_names) == (3, "uint8",
                                                                     ("red", "green", "blue"))
        assert [lv.shape for lv in src.levels[:2]] == [(520, 600), (260, 300)]
        assert [lv.stored for lv in src.levels] == [True, True, False]  # down to one tile
        t = src.tile
        for level, (ty, tx) in ((0, (0, 0)), (0, (2, 2)), (1, (1, 1))):
            for c in range(3):
                want = levels[level][ty * t:(ty + 1) * t, tx * t:(tx + 1) * t, c]
                assert np.array_equal(src.read_tile(level, c, ty, tx), want)
    finally:
        src.close()


def test_a_slide_views_and_picks_like_any_source(dev, slide):
    path, levels = slide
    chw = [np.moveaxis(lv, -1, 0) for lv in levels]
    chw += pyramid(chw[1], 2)[1:]  # the level made from the coarsest stored one
    with dev.leak_check():
        view = ScienceView(str(path), dev, size=(200, 150), budget=32 << 20)
        try:
            for stats in settled_stops(view, chw):
                assert np.mean(picture_difference(view, chw, stats.level) > 4) < 0.001
                got = view.pick(100, 75)
                assert np.array_equal(np.array(got.values), levels[0][got.y, got.x])
        finally:
            view.release()


class _Slide:
    """What SlideLevel asks of an OpenSlide: one level, a region of given RGBA."""

    level_dimensions = [(8, 4)]
    level_downsamples = [1.0]

    def __init__(self, rgba: np.ndarray) -> None:
        self.rgba, self.asked = rgba, []

    def read_region(self, at, level, size):
        self.asked.append((at, level, size))
        return self.rgba


def test_where_a_slide_has_no_data_its_background_shows():
    pytest.importorskip("openslide")
    rgba = np.zeros((4, 8, 4), np.uint8)
    rgba[:, :4] = (10, 20, 30, 255)  # scanned
    rgba[:, 4:6] = (200, 100, 0, 128)  # half covered
    level = SlideLevel("x.mrxs", _Slide(rgba), 0, background_of(
        {"openslide.background-color": "F0E0D0"}))
    assert level.shape == (4, 8, 3)
    red = level[slice(0, 4), slice(0, 8), 0]
    assert list(red[0]) == [10] * 4 + [(200 * 128 + 0xF0 * 127 + 127) // 255] * 2 + [0xF0] * 2
    assert list(background_of({})) == list(background_of({"openslide.background-color": "zz"}))
    assert list(background_of({})) == [255, 255, 255]


def test_bad_slides_are_typed_errors(tmp_path, monkeypatch):
    pytest.importorskip("openslide")
    bad = tmp_path / "broken.mrxs"
    bad.write_bytes(b"not a slide at all")
    with pytest.raises(ImageSourceError, match="not a slide OpenSlide reads"):
        open_image_source(str(bad))
    with pytest.raises(ImageSourceError, match="local files only"):
        open_image_source("http://127.0.0.1:9/slide.mrxs")
    monkeypatch.setitem(sys.modules, "openslide", None)
    with pytest.raises(ImageSourceError, match=r"\[slides\]"):
        open_image_source(str(bad))


def test_engine_view_opens_a_slide(slide, capsys):
    from engine.cli import main

    path, _ = slide
    assert main(["view", str(path), "--size", "120x90", "--headless"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["complete"] and summary["channels"] == 3 and summary["dtype"] == "uint8"
    # a mistyped path is the user's mistake, one line and status 2, as for a picture
    assert main(["view", str(path.with_name("typo.svslide")), "--headless"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {path.with_name('typo.svslide')}: no such file or folder"]
