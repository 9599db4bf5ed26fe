"""Bake inputs in their own precision, and the deliberate conversion to an 8-bit target.

Every format the baker writes (BC1/3/4/5/7, RGBA8) holds unsigned 8-bit-per-channel data,
while inputs come as 8-bit, 16-bit (PNG, TIFF) or floating point (float TIFF, numpy arrays).
Pillow's own `convert("RGBA")` *clips* 16-bit grayscale to 255 (a 16-bit height map becomes
black and white) and turns a float TIFF black, silently. So the baker reads an image at its
own precision (`read_image`, `from_array`) and converts it on purpose (`to_target`):

- 8-bit: used as is.
- 16-bit integers: scaled to 8 bits with rounding, round(v * 255 / 65535), never clipped. The
  values are taken to be encoded the way the target is (sRGB colour for sRGB targets), as
  8-bit inputs are.
- float: taken to be *linear light* (the convention of EXR, Radiance HDR and float TIFF);
  for an sRGB target it is encoded to sRGB, for a linear target stored as is. Values in
  [0, 1] need no choice. Values the target cannot hold are refused with a
  TextureFormatError, unless the caller chose a tone map (`--tonemap`):
    * values above 1 (HDR): there is no HDR target (etcpak has no BC6H encoder), so an HDR
      input needs an explicit operator: "reinhard" (x / (1 + x) per channel: keeps every
      value, compresses highlights, desaturates the brightest), "aces" (Narkowicz's 2015 fit
      of the ACES filmic curve, per channel, clipped to [0, 1]: more contrast, highlights
      roll off to white) or "clamp" (clip to [0, 1]: keeps [0, 1] exact, loses the rest);
    * negative values: unsigned formats cannot hold them; only "clamp" (which clips them
      to 0) accepts them, except for a normal map (`normal_map=True`) whose components all
      lie in [-1, 1]: those are mapped to [0, 1] by (n + 1) / 2, the usual encoding;
    * NaN or infinity: always refused.
  Alpha is never tone mapped; a float alpha outside [0, 1] is refused unless "clamp".

The conversion also keeps the *reference* PSNR is scored against: the input in its own
precision and range (16-bit values, or linear float after the chosen tone map), so a bake's
PSNR counts the 8-bit quantisation too and is `inf` only when the texture really holds the
input exactly. Nothing here touches GL.

Readers: Pillow for everything it reads exactly (8-bit images, 16-bit grayscale, single-
channel float TIFF). Pillow keeps only the high byte of 16-bit *colour* PNGs and TIFFs and
cannot read multi-channel float TIFFs or Radiance .hdr at all; with the optional extra
`hdr` (imagecodecs: libpng, libtiff and an RGBE codec) those are read at full precision,
without it 16-bit colour is baked from Pillow's 8 bits (with a warning) and the others are
refused. OpenEXR is read by neither (convert it to a float TIFF).
"""
from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import TextureFormatError, install_hint
from .mipgen import linear_to_srgb

log = logging.getLogger(__name__)

Tonemap = Literal["reinhard", "aces", "clamp"]
TONEMAPS: tuple[str, ...] = ("reinhard", "aces", "clamp")
ReferenceSpace = Literal["bytes", "unorm", "linear"]

_SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I;16S")

#: Suffixes of the images Pillow decodes (GIF and WebP: the first frame), for folder walks
#: (`engine bake FOLDER`, `engine view FOLDER`).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".png", ".tif", ".tiff", ".webp", ".bmp", ".gif",
                  ".tga", ".ppm", ".pgm", ".pbm", ".jp2", ".j2k", ".hdr")
#: Largest image a file the user named is read at (Pillow's decompression-bomb guard, meant
#: for files from strangers, stops at 179 Mpx): 2^30 pixels, a 32768 x 32768 image.
NAMED_FILE_MAX_PIXELS = 1 << 30


def image_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The images in `folder` and its subfolders, sorted, hidden files and folders skipped."""
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [Path(root) / f for f in sorted(files)
                if not f.startswith(".") and Path(f).suffix.lower() in IMAGE_SUFFIXES]
    return out


#: Pillow's decompression-bomb guard is a module global: set and restored under this lock so
#: threads opening other files keep theirs.
_LIMIT_LOCK = threading.Lock()


def open_named(path, max_pixels: int | None = None):
    """Image.open of a file the user named, with the decompression-bomb guard at `max_pixels`
    (None: NAMED_FILE_MAX_PIXELS) instead of Pillow's 179 Mpx; over it, a TextureFormatError
    that names the option to raise it."""
    from PIL import Image

    if max_pixels is None:
        max_pixels = NAMED_FILE_MAX_PIXELS
    with _LIMIT_LOCK:
        saved = Image.MAX_IMAGE_PIXELS
        # Pillow raises at twice its limit (and warns above it); the check below refuses
        # anything over the limit itself.
        Image.MAX_IMAGE_PIXELS = max_pixels
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                im = Image.open(path)
        except Image.DecompressionBombError as exc:
            raise TextureFormatError(path, f"{exc}; raise the limit with --max-pixels") from exc
        finally:
            Image.MAX_IMAGE_PIXELS = saved
    w, h = im.size
    if w * h > max_pixels:
        im.close()
        raise TextureFormatError(path, f"{w}x{h} = {w * h} pixels is over the limit of "
                                       f"{max_pixels}; raise it with --max-pixels")
    return im


@dataclass(frozen=True)
class SourceImage:
    """An input image at its own precision: (H, W, 4) RGBA of uint8, uint16 or float32."""

    pixels: np.ndarray
    name: str

    @property
    def kind(self) -> str:
        return {np.dtype(np.uint8): "8-bit", np.dtype(np.uint16): "16-bit"}.get(
            self.pixels.dtype, "float")


@dataclass(frozen=True)
class TargetInput:
    """What the mip generator and the PSNR scorer get from a converted input.

    `signal`: (H, W, 4) uint8, or float32 in [0, 1], in the target's encoding (sRGB-encoded
    colour for sRGB targets); the mip generator filters it and rounds level 0 to bytes.
    `reference`: what PSNR compares the decoded texture with, in the input's own precision:
    None when the input was 8-bit (the bytes are the reference), (H, W, 4) uint16 for 16-bit
    inputs, float32 for float inputs. `space`: how decoded bytes map onto the reference
    ("bytes": as they are; "unorm": b / 255, or b * 257 against uint16; "linear": sRGB bytes
    decoded to linear light, alpha as unorm).
    """

    signal: np.ndarray
    reference: np.ndarray | None
    space: ReferenceSpace


def _expand_channels(a: np.ndarray, opaque: float | int, name: str) -> np.ndarray:
    """(H, W), (H, W, 1..4) -> (H, W, 4): gray to RGB, (gray, alpha), RGB + opaque alpha."""
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim != 3 or a.shape[2] not in (1, 2, 3, 4) or 0 in a.shape:
        raise TextureFormatError(name, f"expected an (H, W) or (H, W, 1-4) image, got {a.shape}")
    c = a.shape[2]
    if c == 4:
        return np.ascontiguousarray(a)
    out = np.empty(a.shape[:2] + (4,), a.dtype)
    if c in (1, 2):
        out[..., :3] = a[..., :1]
    else:
        out[..., :3] = a
    out[..., 3] = a[..., 1] if c == 2 else opaque
    return out


def from_array(array: np.ndarray, name: str = "<array>") -> SourceImage:
    """A SourceImage from a numpy array: uint8, uint16 or floating point; (H, W) gray,
    (H, W, 2) gray + alpha, (H, W, 3) RGB or (H, W, 4) RGBA."""
    a = np.asarray(array)
    if a.dtype == np.uint8:
        return SourceImage(_expand_channels(a, 255, name), name)
    if a.dtype == np.uint16:
        return SourceImage(_expand_channels(a, 65535, name), name)
    if np.issubdtype(a.dtype, np.floating):
        return SourceImage(_expand_channels(a.astype(np.float32), 1.0, name), name)
    raise TextureFormatError(name, f"unsupported pixel type {a.dtype}: give uint8, uint16 or "
                                   "float values")


def _imagecodecs():
    try:
        import imagecodecs
    except ImportError:
        return None
    return imagecodecs


def _from_codec(decode, path: str, data: bytes, what: str) -> SourceImage:
    """Decode with an imagecodecs function; its errors (several types) become one typed
    error naming the file."""
    try:
        a = np.asarray(decode(data))
    except Exception as exc:  # imagecodecs raises its own error class per codec
        raise TextureFormatError(path, f"cannot read {what}: {exc}") from exc
    if a.ndim == 3 and a.shape[2] > 4:
        a = a[..., :4]
    if a.dtype not in (np.uint8, np.uint16) and not np.issubdtype(a.dtype, np.floating):
        raise TextureFormatError(path, f"{what}: unsupported pixel type {a.dtype}")
    return from_array(a, path)


def _read_radiance(path: str) -> SourceImage:
    """A Radiance .hdr (RGBE) file as float32 linear light, its size checked before decoding
    against Pillow's decompression-bomb limit."""
    from PIL import Image

    codecs = _imagecodecs()
    if codecs is None:
        raise TextureFormatError(path, "Radiance HDR needs the optional 'hdr' extra "
                                       f"(imagecodecs: {install_hint('hdr')})")
    data = Path(path).read_bytes()
    m = re.search(rb"\n[-+]Y (\d+) [-+]X (\d+)\n", data[:4096])
    if not data.startswith((b"#?RADIANCE", b"#?RGBE")) or m is None:
        raise TextureFormatError(path, "not a Radiance HDR file (no #?RADIANCE header and "
                                       "resolution line)")
    h, w = int(m.group(1)), int(m.group(2))
    limit = Image.MAX_IMAGE_PIXELS
    if not h or not w or (limit and h * w > 2 * limit):
        raise TextureFormatError(path, f"resolution {w}x{h} refused (limit {limit} pixels)")
    return _from_codec(codecs.rgbe_decode, path, data, "Radiance HDR")


def read_image(path: str | os.PathLike[str],
               max_pixels: int | None = None) -> SourceImage:
    """Read an image file at its own precision, upright per its EXIF orientation, if it
    has at most `max_pixels` pixels (None: NAMED_FILE_MAX_PIXELS).

    Pillow's 16-bit grayscale modes ("I;16*") become uint16; 32-bit integer images ("I")
    uint16 when their values fit 0..65535 (Pillow reads some 16-bit files that way), else
    they are refused; float images ("F") float32; everything else RGBA8. Pillow itself
    reduces 16-bit *colour* PNGs to their high bytes while decoding; those are logged.
    Raises TextureFormatError naming the file for anything Pillow cannot read.
    """
    from PIL import Image, ImageOps

    name = os.fspath(path)
    if Path(name).suffix.lower() in (".hdr", ".pic", ".rgbe"):
        try:
            return _read_radiance(name)
        except OSError as exc:
            raise TextureFormatError(path, f"cannot read image: {exc}") from exc
    try:
        with open_named(path, max_pixels) as im:
            rawmode = _rawmode(im)
            wide_colour = im.mode in ("RGB", "RGBA", "LA") and ";16" in rawmode
            multi_float = im.format == "TIFF" and im.mode == "F" and \
                int(im.tag_v2.get(277, 1)) > 1  # SamplesPerPixel
            if wide_colour or multi_float:
                codecs = _imagecodecs()
                what = "16-bit colour" if wide_colour else "multi-channel float TIFF"
                if codecs is not None:
                    decode = codecs.png_decode if im.format == "PNG" else codecs.tiff_decode
                    return _from_codec(decode, name, Path(name).read_bytes(), what)
                if multi_float:
                    raise TextureFormatError(path, f"{what}: Pillow cannot read it; install "
                                                   "the optional 'hdr' extra (imagecodecs)")
                log.warning("%s: Pillow reads 16-bit colour at 8 bits (high byte); baking "
                            "those 8 bits (the 'hdr' extra, imagecodecs, reads all 16)", name)
            upright = ImageOps.exif_transpose(im)
            mode = upright.mode
            if mode in _SIXTEEN_BIT_MODES:
                a = np.asarray(upright).astype(np.uint16)
                return SourceImage(_expand_channels(a, 65535, name), name)
            if mode == "I":
                a = np.asarray(upright)
                if a.size and (a.min() < 0 or a.max() > 65535):
                    raise TextureFormatError(name, f"32-bit integer pixels {a.min()}..{a.max()} "
                                                   "do not fit 16 bits; convert to float")
                return SourceImage(_expand_channels(a.astype(np.uint16), 65535, name), name)
            if mode == "F":
                a = np.asarray(upright, dtype=np.float32)
                return SourceImage(_expand_channels(a, 1.0, name), name)
            return SourceImage(np.asarray(upright.convert("RGBA"), dtype=np.uint8).copy(), name)
    except TextureFormatError:
        raise
    except Image.DecompressionBombError as exc:
        raise TextureFormatError(path, f"cannot read image: {exc}") from exc
    except (OSError, ValueError, SyntaxError) as exc:
        codecs = _imagecodecs()
        if codecs is not None and Path(name).suffix.lower() in (".tif", ".tiff"):
            # Pillow identifies no multi-channel float TIFF; libtiff reads them.
            try:
                data = Path(name).read_bytes()
            except OSError as io_exc:
                raise TextureFormatError(path, f"cannot read image: {io_exc}") from io_exc
            return _from_codec(codecs.tiff_decode, name, data, "TIFF")
        raise TextureFormatError(path, f"cannot read image: {exc}") from exc


def _rawmode(im) -> str:
    """The decoder's raw mode of an opened Pillow image ("RGB;16B" for a 16-bit colour PNG)."""
    if not im.tile:
        return ""
    args = im.tile[0][3]
    if isinstance(args, tuple):
        args = args[0] if args else ""
    return args if isinstance(args, str) else ""


def scale_16_to_8(values: np.ndarray) -> np.ndarray:
    """uint16 -> uint8 by round(v * 255 / 65535), exact in integers (no float rounding)."""
    return ((values.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)


def tonemap(values: np.ndarray, operator: Tonemap) -> np.ndarray:
    """Apply a tone map operator (see the module docstring) to linear float values."""
    v = values.astype(np.float32)
    if operator == "clamp":
        return np.clip(v, 0.0, 1.0)
    if operator == "reinhard":
        return v / (1.0 + v)
    if operator == "aces":
        return np.clip((v * (2.51 * v + 0.03)) / (v * (2.43 * v + 0.59) + 0.14), 0.0, 1.0)
    raise ValueError(f"unknown tone map {operator!r}; choose from {', '.join(TONEMAPS)}")


def _float_linear(src: SourceImage, fmt_name: str, operator: Tonemap | None,
                  normal_map: bool) -> tuple[np.ndarray, bool]:
    """Float RGBA in [0, 1] (colour in linear light unless it is a mapped normal map), and
    whether it is a normal map mapped from [-1, 1]."""
    px = src.pixels
    if not np.isfinite(px).all():
        raise TextureFormatError(src.name, "pixels hold NaN or infinity; no format can store "
                                           "them")
    rgb, alpha = px[..., :3], px[..., 3]
    lo, hi = float(rgb.min()), float(rgb.max())
    if operator != "clamp" and (alpha.min() < 0.0 or alpha.max() > 1.0):
        raise TextureFormatError(src.name, f"float alpha {alpha.min():g}..{alpha.max():g} is "
                                           "outside [0, 1]; use --tonemap clamp to clip it")
    out = np.empty_like(px)
    out[..., 3] = np.clip(alpha, 0.0, 1.0)
    if normal_map and operator is None and lo >= -1.0 and hi <= 1.0 and lo < 0.0:
        out[..., :3] = rgb * 0.5 + 0.5
        return out, True
    if operator is None:
        if lo < 0.0:
            raise TextureFormatError(
                src.name, f"negative values (min {lo:g}) cannot be stored in unsigned "
                          f"{fmt_name}; use --tonemap clamp to clip them")
        if hi > 1.0:
            raise TextureFormatError(
                src.name, f"HDR values up to {hi:g} exceed what 8-bit {fmt_name} holds "
                          f"(no BC6H encoder): choose --tonemap {'|'.join(TONEMAPS)}")
        out[..., :3] = rgb
        return out, False
    if lo < 0.0 and operator != "clamp":
        raise TextureFormatError(src.name, f"negative values (min {lo:g}): the {operator} tone "
                                           "map is for light (>= 0); use --tonemap clamp")
    out[..., :3] = tonemap(rgb, operator)
    return out, False


def to_target(src: SourceImage, fmt_name: str, *, srgb: bool, tonemap_op: Tonemap | None = None,
              normal_map: bool = False) -> TargetInput:
    """Convert an input for an 8-bit target of format `fmt_name` (sRGB when `srgb`), as the
    module docstring says. `tonemap_op` applies to float inputs only."""
    if tonemap_op is not None and tonemap_op not in TONEMAPS:
        raise ValueError(f"unknown tone map {tonemap_op!r}; choose from {', '.join(TONEMAPS)}")
    px = src.pixels
    if px.dtype == np.uint8:
        return TargetInput(px, None, "bytes")
    if px.dtype == np.uint16:
        return TargetInput(px.astype(np.float32) / np.float32(65535.0), px, "unorm")
    linear, mapped_normal = _float_linear(src, fmt_name, tonemap_op, normal_map)
    if srgb and not mapped_normal and not normal_map:
        signal = linear.copy()
        signal[..., :3] = linear_to_srgb(linear[..., :3])
        return TargetInput(signal, linear, "linear")
    return TargetInput(linear, linear, "unorm")
