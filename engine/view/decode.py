"""Decoding the images people have into upright sRGB RGBA8, fast when only a little is needed.

Every reader goes through Pillow: JPEG, PNG, TIFF, WebP, BMP, GIF (the first frame) and
whatever else the installed Pillow opens. The conversions a viewer must get right:

- orientation: the EXIF orientation tag is read before decoding and applied after, so a
  phone picture taken sideways is shown right side up (and its aspect is the upright one);
- colour: an embedded ICC profile (Adobe RGB, CMYK press profiles) is converted to sRGB
  through LittleCMS where Pillow has it; CMYK without a profile uses Pillow's naive
  conversion; palette and grey images become RGBA, palette transparency included;
- precision: 16-bit grey ("I;16*", "I") is scaled to 8 bits with rounding, float images in
  [0, 1] are rounded (a viewer shows; it does not tone map).

Fast low-resolution decodes (`decode_upright(..., max_edge=N)`): JPEG is decoded at 1/2,
1/4 or 1/8 scale by its DCT (Pillow's `draft`), other formats are shrunk by `reduce` and a
final filtered resize, so a 12 Mpx photograph's thumbnail costs a fraction of a full decode.

A JPEG's embedded EXIF thumbnail (`embedded_thumbnail`: the camera's small preview in IFD1
of its APP1 segment) is read without decoding the image: the first picture a cold wall shows
of it, until its own thumbnail is decoded.

Pillow's decompression-bomb guard is meant for files from strangers; a file the user named
on the command line is read up to `max_pixels` (default `MAX_PIXELS`, raise it with
`--max-pixels`), beyond which it is refused with a message saying so.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TextureFormatError
from ..textures.source_image import NAMED_FILE_MAX_PIXELS, open_named
from .jpeg_header import SWAPS_AXES

#: Largest image (pixels) read by default, as `engine bake` reads (2^30, a 32768 x 32768
#: image); --max-pixels raises it.
MAX_PIXELS = NAMED_FILE_MAX_PIXELS

#: EXIF orientation -> the Pillow transposes that make the image upright, in order.
_ORIENT = {2: ("FLIP_LEFT_RIGHT",), 3: ("ROTATE_180",), 4: ("FLIP_TOP_BOTTOM",),
           5: ("TRANSPOSE",), 6: ("ROTATE_270",), 7: ("TRANSVERSE",), 8: ("ROTATE_90",)}


@dataclass(frozen=True)
class ImageInfo:
    """What the header says, upright: size after EXIF orientation, and how it was stored."""

    path: Path
    width: int
    height: int
    orientation: int
    format: str
    mode: str

    @property
    def aspect(self) -> float:
        return self.width / self.height


def _orientation(im) -> int:
    """The EXIF orientation tag (1 when absent). A PNG's is read from the chunks before its
    pixels only: Pillow's getexif() on a PNG decodes the whole image to look for an eXIf
    chunk after the pixel data."""
    from PIL import Image

    try:
        if im.format == "PNG":
            raw = im.info.get("exif")
            if not raw:
                return 1
            exif = Image.Exif()
            exif.load(raw)
        else:
            exif = im.getexif()
        value = int(exif.get(0x0112, 1))
    except (ValueError, TypeError, OSError, SyntaxError):
        return 1
    return value if value in range(1, 9) else 1


def probe(path: str | os.PathLike[str], max_pixels: int = MAX_PIXELS) -> ImageInfo:
    """The upright size and kind of an image from its header, decoding no pixels.
    TextureFormatError naming the file when Pillow cannot open it."""
    path = Path(path)
    with opened_header(path, max_pixels) as im:
        return header_info(path, im)


@contextmanager
def opened_header(path: Path, max_pixels: int = MAX_PIXELS) -> Iterator[Any]:
    """The image at `path` opened by Pillow (no pixels decoded); whatever fails while it is
    read is a TextureFormatError naming the file."""
    try:
        with open_named(path, max_pixels) as im:
            yield im
    except TextureFormatError:
        raise
    except (OSError, ValueError, SyntaxError) as exc:
        raise TextureFormatError(path, f"cannot read image: {exc}") from exc


def header_info(path: Path, im) -> ImageInfo:
    """`probe`'s answer from an image Pillow has open (a caller that reads more of the
    header, as a placeholder does, opens the file once)."""
    w, h = im.size
    o = _orientation(im)
    if o in SWAPS_AXES:
        w, h = h, w
    return ImageInfo(path, w, h, o, str(im.format), im.mode)


#: Modes `Image.reduce` and the ICC conversion take as they are; every other mode is first
#: brought to one of them (`_to_8bit`).
_EIGHT_BIT = ("L", "LA", "RGB", "RGBA", "CMYK")


def _to_8bit(im):
    """Any Pillow mode -> one of `_EIGHT_BIT`, keeping alpha: 16-bit and 32-bit grey scaled
    to 8 bits with rounding, float clipped to [0, 1], palette (with its transparency) and
    the rest converted by Pillow. Done before `reduce`, which refuses I;16 and P."""
    from PIL import Image

    mode = im.mode
    if mode in _EIGHT_BIT:
        return im
    if mode.startswith("I;16") or mode == "I":
        a = np.asarray(im).astype(np.int64)
        a = ((np.clip(a, 0, 65535) * 255 + 32767) // 65535).astype(np.uint8)
        out = Image.fromarray(a, "L")
    elif mode == "F":
        a = np.asarray(im, np.float32)
        out = Image.fromarray(np.rint(np.clip(np.nan_to_num(a), 0.0, 1.0) * 255).astype(
            np.uint8), "L")
    elif mode in ("P", "PA"):
        out = im.convert("RGBA")
    elif mode in ("La", "RGBa"):  # premultiplied: Pillow un-premultiplies
        out = im.convert("RGBA")
    else:  # "1", "RGBX", "YCbCr", "LAB", "HSV", ...
        out = im.convert("RGB")
    out.info = im.info  # the ICC profile, for the conversion
    return out


def _to_srgb_rgba(im):
    """Any Pillow mode -> RGBA, through the ICC profile to sRGB when there is one."""
    im = _to_8bit(im)
    icc = im.info.get("icc_profile")
    if icc and im.mode in ("RGB", "RGBA", "CMYK", "L", "LA"):
        try:
            from io import BytesIO

            from PIL import ImageCms

            src = ImageCms.ImageCmsProfile(BytesIO(icc))
            out_mode = "RGBA" if im.mode in ("RGBA", "LA") else "RGB"
            if im.mode == "LA":
                im = im.convert("RGBA")
            im = ImageCms.profileToProfile(im, src, ImageCms.createProfile("sRGB"),
                                           outputMode=out_mode)
        except (ImportError, OSError, ValueError, TypeError, ImageCms.PyCMSError):
            pass  # a broken or unsupported profile: Pillow's own conversion below
    return im if im.mode == "RGBA" else im.convert("RGBA")


def _upright(im, orientation: int):
    from PIL import Image

    for name in _ORIENT.get(orientation, ()):
        im = im.transpose(getattr(Image.Transpose, name))
    return im


#: EXIF IFD1 tags: where the embedded JPEG thumbnail starts (from the TIFF header) and its
#: length in bytes.
_THUMB_OFFSET, _THUMB_LENGTH = 0x0201, 0x0202
#: How far (a fraction) an embedded thumbnail's aspect may be from its image's.
ASPECT_TOLERANCE = 0.02


def same_aspect(thumb: tuple[int, int], image: tuple[int, int]) -> bool:
    """Whether a thumbnail of `thumb` pixels (width, height) shows all of an `image`: an
    editor that cropped the image may have kept the camera's preview."""
    (w, h), (tw, th) = image, thumb
    return abs(tw / th - w / h) <= ASPECT_TOLERANCE * (w / h)


def embedded_thumbnail(im, orientation: int):
    """The EXIF thumbnail embedded in the JPEG `im` (open, not decoded), upright RGB; None
    when it has none, or one that does not parse or is not of the image's aspect (an
    editor that cropped the image and kept the camera's preview)."""
    from io import BytesIO

    from PIL import ExifTags, Image

    raw = im.info.get("exif") if im.format == "JPEG" else None
    if not raw:
        return None
    try:
        ifd1 = im.getexif().get_ifd(ExifTags.IFD.IFD1)
        start, length = int(ifd1[_THUMB_OFFSET]), int(ifd1[_THUMB_LENGTH])
        start += 6 if raw.startswith(b"Exif\x00\x00") else 0  # offsets count from the TIFF header
        with Image.open(BytesIO(raw[start:start + length])) as thumb:
            thumb = thumb.convert("RGB")
    except (KeyError, ValueError, TypeError, OSError, SyntaxError, EOFError):
        return None
    if not same_aspect(thumb.size, im.size):
        return None
    return _upright(thumb, orientation)


def decode_upright(path: str | os.PathLike[str], max_edge: int | None = None, *,
                   max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """(H, W, 4) uint8 sRGB RGBA of the image, upright; with `max_edge`, shrunk (aspect kept)
    so its longer edge is at most that, decoding as little as the format allows.
    TextureFormatError naming the file for anything unreadable."""
    from PIL import Image

    path = Path(path)
    try:
        with open_named(path, max_pixels) as im:
            orientation = _orientation(im)
            if max_edge is not None and max(im.size) > max_edge:
                w, h = im.size
                s = max_edge / max(w, h)
                want = (max(1, round(w * s)), max(1, round(h * s)))
                if im.format == "JPEG":
                    im.draft(None, want)  # DCT scaling: decodes at >= want, 1/8 at best
                im.load()
                factor = min(im.size[0] // want[0], im.size[1] // want[1])
                # reduce() box-averages integer factors (cheap); the last step is filtered.
                flat = _to_8bit(im)
                reduced = flat.reduce(factor // 2) if factor >= 4 else flat
                reduced.info = im.info  # the ICC profile, for the conversion
                out = _to_srgb_rgba(reduced).resize(want, Image.Resampling.LANCZOS)
            else:
                im.load()
                out = _to_srgb_rgba(im)
            out = _upright(out, orientation)
            return np.asarray(out, np.uint8).copy()
    except TextureFormatError:
        raise
    except Image.DecompressionBombError as exc:
        raise TextureFormatError(path, f"{exc}; raise the limit with --max-pixels") from exc
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise TextureFormatError(path, f"cannot read image: {exc}") from exc
