"""Regions of a tiled TIFF, read tile by tile through tifffile.

Why: a viewer zooming onto part of a huge image needs only that part's pixels. Decoding the
whole image first (by strips, as for any other file) makes the first zoom wait for the whole
file; a tiled TIFF stores its pixels in independently compressed tiles, so a region costs
the tiles it covers. Only what the region path can read exactly as the whole-image path does
is taken: the first page, 8-bit grey, RGB or RGBA, top-left orientation, chunky samples,
no ICC profile;
anything else returns None and goes the usual way.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TextureFormatError

log = logging.getLogger(__name__)

SUFFIXES = (".tif", ".tiff")


@dataclass(frozen=True)
class TiledTiff:
    """The first page's geometry: where to read region pixels from."""

    path: Path
    width: int
    height: int
    tile_w: int
    tile_h: int
    samples: int


def open_tiled(path: str | os.PathLike[str]) -> TiledTiff | None:
    """The file's tile geometry when its regions can be read tile by tile, else None
    (not a TIFF, not tiled, another layout or depth, or tifffile not installed)."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        return None
    try:
        import tifffile
    except ImportError:
        return None
    try:
        with tifffile.TiffFile(path) as tf:
            page = tf.pages[0]
            orientation = int(getattr(page, "orientation", 1) or 1)
            ok = (page.is_tiled and page.dtype == np.uint8 and page.samplesperpixel in (1, 3, 4)
                  and int(page.photometric) in (1, 2) and orientation == 1
                  and int(page.planarconfig) == 1 and page.imagedepth == 1
                  and page.tiledepth == 1
                  and "InterColorProfile" not in page.tags)  # Pillow's path converts those
            if not ok:
                return None
            return TiledTiff(path, int(page.imagewidth), int(page.imagelength),
                             int(page.tilewidth), int(page.tilelength),
                             int(page.samplesperpixel))
    except Exception as exc:  # noqa: BLE001 - any reader failure: the usual path decides
        log.debug("%s: not read by tiles (%s)", path, exc)
        return None


def read_region(tiff: TiledTiff, box: tuple[int, int, int, int]) -> np.ndarray:
    """The (y1 - y0, x1 - x0, 4) RGBA8 pixels of `box` = (x0, y0, x1, y1): the tiles it
    covers, decoded one by one. TextureFormatError naming the file for a damaged tile."""
    import tifffile

    x0, y0, x1, y1 = box
    if not (0 <= x0 < x1 <= tiff.width and 0 <= y0 < y1 <= tiff.height):
        raise ValueError(f"box {box} outside the {tiff.width}x{tiff.height} image")
    out = np.empty((y1 - y0, x1 - x0, 4), np.uint8)
    out[..., 3] = 255
    across = -(-tiff.width // tiff.tile_w)
    try:
        with tifffile.TiffFile(tiff.path) as tf:
            page, fh = tf.pages[0], tf.filehandle
            for ty in range(y0 // tiff.tile_h, (y1 - 1) // tiff.tile_h + 1):
                for tx in range(x0 // tiff.tile_w, (x1 - 1) // tiff.tile_w + 1):
                    i = ty * across + tx
                    fh.seek(page.dataoffsets[i])
                    seg, _, _ = page.decode(fh.read(page.databytecounts[i]), i)
                    tile = seg.reshape(tiff.tile_h, tiff.tile_w, tiff.samples)
                    # the part of this tile inside the box, in tile and in box coordinates
                    ax, ay = max(x0, tx * tiff.tile_w), max(y0, ty * tiff.tile_h)
                    bx = min(x1, (tx + 1) * tiff.tile_w)
                    by = min(y1, (ty + 1) * tiff.tile_h)
                    part = tile[ay - ty * tiff.tile_h:by - ty * tiff.tile_h,
                                ax - tx * tiff.tile_w:bx - tx * tiff.tile_w]
                    dst = out[ay - y0:by - y0, ax - x0:bx - x0]
                    if tiff.samples == 1:
                        dst[..., :3] = part
                    else:
                        dst[..., :tiff.samples] = part
    except Exception as exc:  # noqa: BLE001 - codecs raise their own types (DeflateError...)
        raise TextureFormatError(tiff.path, f"cannot read its tiles: {exc}") from exc
    return out
