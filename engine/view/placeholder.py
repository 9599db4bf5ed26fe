"""What a wall draws of an image before its thumbnail exists: a box of its upright aspect
filled with its mean colour.

Why: decoding thumbnails is the slow part of a cold start; the header gives the aspect at
once and a JPEG's embedded EXIF thumbnail gives the colour for about a millisecond, so the
first frame of any folder is fitted and shows every image's place without waiting for a
decode. An image without an embedded thumbnail is neutral grey until its thumbnail comes.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import numpy as np

from ..textures.mipgen import srgb_to_linear
from ..errors import TextureFormatError
from .decode import (
    MAX_PIXELS,
    embedded_thumbnail,
    header_info,
    opened_header,
    same_aspect,
)
from .jpeg_header import SWAPS_AXES, read_jpeg_header

#: The colour (sRGB) of a placeholder whose image has no embedded thumbnail.
GREY = (128, 128, 128)
#: Edge the embedded thumbnail is drafted down to for its mean (DCT scaling: nearly free).
_MEAN_EDGE = 16


@dataclass(frozen=True)
class Placeholder:
    """An image's upright size and mean colour (sRGB 0..255); `embedded`: the file has an
    EXIF thumbnail of its aspect, which a worker can show before the image's own; `cached`:
    its own thumbnail is cached already (a wall whose atlas is still to make), shown from
    that file within a few frames, with no decode."""

    width: int
    height: int
    rgb: tuple[int, int, int]
    embedded: bool
    cached: bool = False

    def albedo_factor(self) -> tuple[float, float, float, float]:
        """The material factor that draws the box: its colour in linear light, as a texel
        of an sRGB texture is sampled."""
        return _linear_factor(self.rgb)


@functools.lru_cache(maxsize=4096)
def _linear_factor(rgb: tuple[int, int, int]) -> tuple[float, float, float, float]:
    """`Placeholder.albedo_factor`, once per colour: a wall of thousands of placeholders
    has few colours (most are grey)."""
    r, g, b = (float(v) for v in srgb_to_linear(np.asarray(rgb, np.uint8)))
    return (r, g, b, 1.0)


def placeholder(path: str | os.PathLike[str], max_pixels: int = MAX_PIXELS) -> Placeholder:
    """The placeholder of the image at `path`, from its header and embedded thumbnail only:
    a JPEG's from its markers (engine.view.jpeg_header), any other file (or a JPEG that
    reader does not follow) through Pillow. engine.errors.TextureFormatError naming the
    file when Pillow cannot open it."""
    head = read_jpeg_header(path)
    if head is not None and head.width * head.height <= max_pixels:
        stored = (head.height, head.width) if head.orientation in SWAPS_AXES else \
            (head.width, head.height)
        rgb = _embedded_mean(head.thumbnail, stored) if head.thumbnail else None
        return Placeholder(head.width, head.height, rgb or GREY, rgb is not None)
    path = Path(path)
    rgb = None
    with opened_header(path, max_pixels) as im:
        info = header_info(path, im)
        thumb = embedded_thumbnail(im, info.orientation) if info.format == "JPEG" else None
    if thumb is not None:
        rgb = _mean(thumb)
    return Placeholder(info.width, info.height, rgb or GREY, rgb is not None)


def header_placeholder(path: str | os.PathLike[str], max_pixels: int = MAX_PIXELS
                       ) -> Placeholder | None:
    """The placeholder of a JPEG without an embedded thumbnail, from its markers alone (a
    few tens of microseconds); None for any other file, which `placeholder` reads."""
    head = read_jpeg_header(path)
    if head is None or head.thumbnail is not None or head.width * head.height > max_pixels:
        return None
    return Placeholder(head.width, head.height, GREY, False)


def _embedded_mean(data: bytes, size: tuple[int, int]) -> tuple[int, int, int] | None:
    """The mean colour of the embedded thumbnail `data` (JPEG bytes) when it has the aspect
    of `size` (the image's, as stored), decoded at the smallest DCT scale Pillow offers
    (its mean is its blocks' DC terms); None when it does not parse or has another aspect."""
    from PIL import Image

    try:
        with Image.open(BytesIO(data), formats=("JPEG",)) as thumb:
            if not same_aspect(thumb.size, size):
                return None
            thumb.draft("RGB", (_MEAN_EDGE, _MEAN_EDGE))
            return _mean_rgb(thumb.convert("RGB"))
    except (ValueError, TypeError, OSError, SyntaxError, EOFError, ZeroDivisionError):
        return None


def _mean(thumb) -> tuple[int, int, int]:
    thumb.thumbnail((_MEAN_EDGE, _MEAN_EDGE))
    return _mean_rgb(thumb)


def _mean_rgb(rgb_image) -> tuple[int, int, int]:
    mean = np.asarray(rgb_image, np.float32).reshape(-1, 3).mean(axis=0)
    return tuple(int(round(float(v))) for v in mean)  # type: ignore[return-value]


def placeholder_or_problem(path: str, max_pixels: int = MAX_PIXELS) -> Placeholder | str:
    """`placeholder`, or the problem of a file whose header cannot be read (a pool worker's
    job: the answer crosses the process boundary as plain data)."""
    try:
        return placeholder(path, max_pixels)
    except TextureFormatError as exc:
        return exc.problem
