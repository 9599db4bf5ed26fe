"""Tiled TIFF regions (engine.textures.tiff_tiles): a chunk of a huge tiled TIFF is read from
the tiles under it, the same pixels as the whole-image decode, and the viewer then skips the
staging decode of the whole image before its first chunk."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import TextureFormatError
from engine.textures.tiff_tiles import open_tiled, read_region
from engine.view import cache
from engine.view.backdrop import over_checkerboard
from engine.view.decode import decode_upright

tifffile = pytest.importorskip("tifffile")

BOXES = [(0, 0, 600, 400), (100, 37, 377, 399), (512, 256, 600, 400), (255, 255, 257, 257)]


@pytest.mark.parametrize("samples", [1, 3, 4])
def test_regions_equal_the_whole_decode(tmp_path, samples):
    rng = np.random.default_rng(samples)
    shape = (400, 600) if samples == 1 else (400, 600, samples)
    path = tmp_path / "t.tif"
    tifffile.imwrite(path, rng.integers(0, 256, shape, dtype=np.uint8), tile=(128, 128),
                     compression="zlib", photometric="minisblack" if samples == 1 else "rgb",
                     extrasamples=("unassalpha",) if samples == 4 else None)
    tiled = open_tiled(path)
    assert tiled is not None and (tiled.width, tiled.height) == (600, 400)
    whole = decode_upright(path)
    for x0, y0, x1, y1 in BOXES:
        assert np.array_equal(read_region(tiled, (x0, y0, x1, y1)), whole[y0:y1, x0:x1])
    assert cache.reads_by_tiles(path)
    pixels = cache.chunk_pixels(str(path), str(tmp_path / "e"), "bc1", 256, 1,
                                (256, 0, 512, 256), False)
    # a chunk's transparency is over the checkerboard, continued from the whole image's
    assert np.array_equal(pixels, over_checkerboard(whole, (600, 400))[0:256, 256:512])


def test_what_the_tile_path_does_not_take_goes_the_usual_way(tmp_path):
    rng = np.random.default_rng(0)
    striped = tmp_path / "s.tif"
    tifffile.imwrite(striped, rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    deep = tmp_path / "d.tif"
    tifffile.imwrite(deep, rng.integers(0, 65535, (64, 64, 3), dtype=np.uint16), tile=(32, 32))
    png = tmp_path / "p.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    assert open_tiled(striped) is None and open_tiled(deep) is None and open_tiled(png) is None
    assert not cache.reads_by_tiles(striped)


def test_a_damaged_tile_and_a_box_outside(tmp_path):
    path = tmp_path / "t.tif"
    tifffile.imwrite(path, np.zeros((256, 256, 3), np.uint8), tile=(128, 128),
                     compression="zlib")
    tiled = open_tiled(path)
    with pytest.raises(ValueError):
        read_region(tiled, (0, 0, 300, 10))
    with tifffile.TiffFile(path) as tf:
        at = tf.pages[0].dataoffsets[3]
    data = bytearray(path.read_bytes())
    data[at:at + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    with pytest.raises(TextureFormatError):
        read_region(tiled, (128, 128, 256, 256))
