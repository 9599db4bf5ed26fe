"""Reading images too large to decode whole, by strips, through libvips (the optional extra
`huge`: pyvips and its binary wheel), so memory does not grow with the image.

libvips decodes JPEG, PNG, TIFF (tiled and pyramidal included), WebP and more in sequential
strips, converts them to sRGB (through an embedded ICC profile where there is one) and
shrinks on load (JPEG's DCT scaling, a pyramidal TIFF's own levels), so both the thumbnail
of a huge image and its staging copy for chunk encoding hold a strip at a time, and so does
the strip bake (engine.textures.strip_bake). Without pyvips the viewer falls back to Pillow, which decodes such an image whole
(engine.view.decode). Orientation: images whose EXIF orientation is not 1 are rotated by
libvips, which then needs the whole image; those go through Pillow too.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TextureFormatError

log = logging.getLogger(__name__)

#: Rows per strip read: small enough to bound memory, large enough for libvips's own tiles.
STRIP_ROWS = 256


def _vips() -> Any | None:
    try:
        import pyvips
    except (ImportError, OSError):  # OSError: the wheel without its libvips binary
        return None
    return pyvips


def available() -> bool:
    return _vips() is not None


def _rgba8(img: Any) -> Any:
    """A pyvips image as 8-bit sRGB with alpha."""
    if img.interpretation not in ("srgb",) or img.format != "uchar":
        try:
            img = img.icc_transform("srgb") if img.get_typeof("icc-profile-data") else img
        except Exception:  # noqa: BLE001 - a broken profile: the plain conversion below
            pass
        img = img.colourspace("srgb")
    if img.format != "uchar":
        img = img.cast("uchar")
    if img.bands == 1:
        img = img.bandjoin([img, img])
    if img.bands == 2:  # grey + alpha after colourspace is 4; a stray 2-band image
        img = img[0].bandjoin([img[0], img[0], img[1]])
    if img.bands == 3:
        img = img.bandjoin(255)
    return img[:4] if img.bands > 4 else img


def _open(path: os.PathLike[str] | str, max_pixels: int) -> Any:
    vips = _vips()
    assert vips is not None
    # TIFF strips and tiles are read on demand at any row; other formats stream in order.
    # A truncated or corrupt file is an error (libvips would otherwise fill in the rest).
    tiff = os.fspath(path).lower().endswith((".tif", ".tiff"))
    try:
        img = vips.Image.new_from_file(os.fspath(path), fail_on="truncated",
                                       access="random" if tiff else "sequential")
    except vips.Error as exc:
        raise TextureFormatError(path, f"cannot read image: {str(exc).splitlines()[0]}") from exc
    if img.width * img.height > max_pixels:
        raise TextureFormatError(path, f"{img.width}x{img.height} = {img.width * img.height} "
                                       f"pixels is over the limit of {max_pixels}; raise it "
                                       f"with --max-pixels")
    if img.get_typeof("orientation") and int(img.get("orientation")) not in (0, 1):
        raise TextureFormatError(path, "rotated by EXIF: not readable by strips")
    return img


@dataclass(frozen=True)
class StripInfo:
    """What a strip reader sees of a file before decoding it."""

    width: int
    height: int
    #: 8 bits a sample, sRGB or grey, no ICC profile: libvips's strips then hold the same
    #: RGBA8 bytes as Pillow's whole decode.
    plain8: bool
    has_alpha: bool


def info(path: os.PathLike[str] | str, max_pixels: int) -> StripInfo:
    """The size and kind of `path` (a header read). TextureFormatError as for `strips`."""
    img = _open(path, max_pixels)
    plain = (img.format == "uchar" and img.interpretation in ("srgb", "b-w")
             and not img.get_typeof("icc-profile-data") and img.bands in (1, 2, 3, 4))
    return StripInfo(img.width, img.height, plain, img.hasalpha())


def alpha_min(path: os.PathLike[str] | str, max_pixels: int) -> int:
    """The smallest alpha in `path` (255 without an alpha band): a pass over the file by
    strips, which bakes need before the first strip (an opaque BC1 is BC1_RGB)."""
    vips = _vips()
    img = _open(path, max_pixels)
    if not img.hasalpha():
        return 255
    try:
        return int(_rgba8(img)[3].min())
    except vips.Error as exc:
        raise TextureFormatError(path, f"cannot read image: {str(exc).splitlines()[0]}") from exc


def strips(path: os.PathLike[str] | str, max_pixels: int, rows: int = STRIP_ROWS
           ) -> tuple[int, int, Iterator[tuple[int, np.ndarray]]]:
    """(width, height, iterator of (first row, (n, width, 4) uint8 sRGB RGBA)) top to bottom.
    TextureFormatError when libvips cannot read the file this way."""
    vips = _vips()
    img = _rgba8(_open(path, max_pixels))
    w, h = img.width, img.height

    def gen() -> Iterator[tuple[int, np.ndarray]]:
        # One region over one pipeline, fetched top to bottom: the loader decodes each
        # strip once and keeps only its small line cache (a crop per strip would start
        # a new pipeline each time, which makes libvips decode the whole image to memory).
        region = vips.Region.new(img)
        for y in range(0, h, rows):
            n = min(rows, h - y)
            try:
                data = region.fetch(0, y, w, n)
            except vips.Error as exc:
                raise TextureFormatError(path, f"cannot read rows {y}-{y + n}: "
                                               f"{str(exc).splitlines()[0]}") from exc
            yield y, np.frombuffer(data, np.uint8).reshape(n, w, 4)

    return w, h, gen()


def thumbnail(path: os.PathLike[str] | str, edge: int, max_pixels: int) -> np.ndarray:
    """(H, W, 4) uint8 sRGB RGBA whose longer side is at most `edge`, upright, shrunk on load."""
    vips = _vips()
    assert vips is not None
    _open(path, max_pixels)  # the size limit, before any decoding
    try:
        img = vips.Image.thumbnail(os.fspath(path), edge, size="down")
        img = _rgba8(img)
        return np.frombuffer(img.write_to_memory(), np.uint8).reshape(img.height, img.width, 4)
    except vips.Error as exc:
        raise TextureFormatError(path, f"cannot read image: {str(exc).splitlines()[0]}") from exc
