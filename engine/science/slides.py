"""Whole-slide formats tifffile cannot read (MIRAX .mrxs, Hamamatsu .vms/.vmu, Sakura
.svslide, DICOM WSI .dcm), through OpenSlide (the `slides` extra: openslide-python with the
openslide-bin library), as an `ArraySource` of three uint8 channels.

Why OpenSlide only for these: the TIFF-based slides (Aperio SVS, NDPI, Leica SCN, Philips,
Ventana) are read tile by tile through tifffile already, from their own tile tables and
over HTTP; OpenSlide reads local files only, and composites a region rather than handing out
the file's tiles. For these other formats it is the one well-kept reader. A region is read
at the level's own resolution and, where the slide has no scanned data (alpha 0), shows the
slide's background colour, as OpenSlide's own viewers do.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import ImageSourceError, install_hint
from .source import ArraySource, Axes

#: files `open_image_source` hands to OpenSlide
OPENSLIDE_SUFFIXES = (".mrxs", ".vms", ".vmu", ".svslide", ".dcm")
#: a slide's background where it names none
WHITE = "FFFFFF"


class SlideLevel:
    """One OpenSlide level as the array-like `ArraySource` slices: (height, width, 3) uint8,
    RGB composited over the slide's background. Each read is one `read_region` of the tile
    (OpenSlide's own tile cache serves the other channels of the same tile)."""

    def __init__(self, location: str, slide: Any, level: int, background: np.ndarray) -> None:
        w, h = slide.level_dimensions[level]
        self.shape = (int(h), int(w), 3)
        self.dtype = np.dtype(np.uint8)
        self.chunks = None
        self._location, self._slide, self._level = location, slide, level
        self._downsample = float(slide.level_downsamples[level])
        self._background = background

    def __getitem__(self, index: tuple[slice, slice, int]) -> np.ndarray:
        import openslide

        ys, xs, channel = index
        at = (round(xs.start * self._downsample), round(ys.start * self._downsample))
        try:
            region = self._slide.read_region(at, self._level, (xs.stop - xs.start,
                                                              ys.stop - ys.start))
        except openslide.OpenSlideError as exc:
            raise ImageSourceError(self._location, f"level {self._level} region at {at}: "
                                                   f"{exc}") from exc
        rgba = np.asarray(region)
        alpha = rgba[..., 3].astype(np.uint32)
        mixed = (rgba[..., channel] * alpha + int(self._background[channel]) * (255 - alpha)
                 + 127) // 255
        return mixed.astype(np.uint8)


def background_of(properties: Any) -> np.ndarray:
    """The slide's background colour (OpenSlide's `openslide.background-color`, RRGGBB),
    white where it names none or names it badly."""
    text = str(properties.get("openslide.background-color") or WHITE)
    try:
        value = bytes.fromhex(text)
    except ValueError:
        value = b""
    return np.frombuffer(value if len(value) == 3 else bytes.fromhex(WHITE), np.uint8)


def open_slide(location: str) -> ArraySource:
    """A slide OpenSlide reads, its levels finest first, red, green and blue channels."""
    if location.startswith(("http://", "https://")):
        raise ImageSourceError(location, "OpenSlide reads local files only")
    try:
        import openslide
    except ImportError as exc:
        raise ImageSourceError(location, f"reading it needs OpenSlide: "
                                         f"{install_hint('slides')}") from exc
    try:
        slide = openslide.OpenSlide(os.fspath(location))
    except (openslide.OpenSlideError, OSError) as exc:
        raise ImageSourceError(location, f"not a slide OpenSlide reads: {exc}") from exc
    try:
        background = background_of(slide.properties)
        levels = [SlideLevel(location, slide, i, background) for i in range(slide.level_count)]
        return ArraySource(location, levels, Axes.parse(location, "yxs", 3),
                           channel_names=("red", "green", "blue"), on_close=slide.close)
    except BaseException:
        slide.close()
        raise
