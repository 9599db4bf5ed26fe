"""CPU decode of one texture image to RGBA8, held to what GL sampling returns.

Channel conventions (what a GL shader's texture() gives, stored as bytes):
- BC1_RGB*: alpha 255 everywhere; punch-through texels read as opaque black.
  BC1_RGBA*: punch-through texels are (0, 0, 0, 0).
- BC4 -> (r, 0, 0, 255), BC5 -> (r, g, 0, 255), R8 / RG8 likewise (RED_RGTC1 / RG_RGTC2).
- Bit-field formats (5:6:5, 5:5:5:1, 4:4:4:4, 10:10:10:2, 16-bit, luminance, alpha-only):
  each n-bit channel becomes round(v * 255 / (2^n - 1)), what sampling it as a float and
  writing it to an 8-bit target gives; the format's swizzle is applied ("RRR1" luminance,
  "000R" alpha-only, "RGB1" for layouts whose alpha bits are unused).
- SNORM (BC4_SNORM, BC5_SNORM) is a display mapping: f in [-1, 1] -> round((f + 1) / 2 * 255).
- sRGB formats return the stored (encoded) bytes; no linearisation.
- BC6H_UF and float formats clamp to [0, 1] before scaling to bytes. BC6H_SF raises
  UnsupportedFormatError: texture2ddecoder 1.0.6 only decodes unsigned BC6H.
- 3D textures: pick the depth slice with `z`.
"""
from __future__ import annotations

import numpy as np
import texture2ddecoder

from ..errors import UnsupportedFormatError
from ..formats import BY_NAME
from . import bcn, layouts
from .container import TextureFile


def _crop(img: np.ndarray, w: int, h: int) -> np.ndarray:
    return np.ascontiguousarray(img[:h, :w])


def _bgra_to_rgba(raw: bytes, w: int, h: int) -> np.ndarray:
    return np.frombuffer(raw, np.uint8).reshape(h, w, 4)[..., [2, 1, 0, 3]].copy()


def _float_to_rgba(values: np.ndarray, components: int, w: int, h: int) -> np.ndarray:
    v = np.clip(values.astype(np.float32).reshape(h, w, components), 0.0, 1.0)
    out = np.zeros((h, w, 4), np.uint8)
    out[..., 3] = 255
    out[..., :components] = np.rint(v * 255.0).astype(np.uint8)
    return out


def decode_image(fmt_name: str, data: bytes, w: int, h: int,
                 path: object = "<memory>") -> np.ndarray:
    """Decode one w x h image of format `fmt_name` (our name) to (h, w, 4) uint8 RGBA.

    `path` only names the source in errors."""
    cols, rows = -(-w // 4), -(-h // 4)
    if fmt_name.startswith("BC1_RGBA"):
        return _crop(bcn.decode_bc1(data, cols, rows, alpha=True), w, h)
    if fmt_name.startswith("BC1_RGB"):
        return _crop(bcn.decode_bc1(data, cols, rows, alpha=False), w, h)
    if fmt_name.startswith("BC2"):
        return _crop(bcn.decode_bc2(data, cols, rows), w, h)
    if fmt_name.startswith("BC3"):
        return _crop(bcn.decode_bc3(data, cols, rows), w, h)
    if fmt_name.startswith(("BC4", "BC5")):
        channels = 1 if fmt_name.startswith("BC4") else 2
        img = bcn.decode_rgtc(data, cols, rows, channels, signed=fmt_name.endswith("SNORM"))
        return _crop(img, w, h)
    if fmt_name == "BC6H_UF":
        # BC6H has no alpha: GL samples 1.0, also for reserved modes that texture2ddecoder
        # returns as (0, 0, 0, 0).
        img = _bgra_to_rgba(texture2ddecoder.decode_bc6(data, w, h), w, h)
        img[..., 3] = 255
        return img
    if fmt_name == "BC6H_SF":
        raise UnsupportedFormatError(path, fmt_name, "no CPU decode: texture2ddecoder 1.0.6 "
                                                    "decodes unsigned BC6H only")
    if fmt_name.startswith("BC7"):
        return _bgra_to_rgba(texture2ddecoder.decode_bc7(data, w, h), w, h)
    return _decode_uncompressed(fmt_name, data, w, h, path)


def _decode_uncompressed(fmt_name: str, data: bytes, w: int, h: int,
                         path: object) -> np.ndarray:
    if fmt_name.startswith("RGBA8"):
        return np.frombuffer(data, np.uint8, w * h * 4).reshape(h, w, 4).copy()
    if fmt_name.startswith("BGRA8"):
        return _bgra_to_rgba(data[:w * h * 4], w, h)
    if fmt_name in ("R8", "RG8"):
        n = 1 if fmt_name == "R8" else 2
        out = np.zeros((h, w, 4), np.uint8)
        out[..., 3] = 255
        out[..., :n] = np.frombuffer(data, np.uint8, w * h * n).reshape(h, w, n)
        return out
    fmt = BY_NAME.get(fmt_name)
    if fmt is not None and layouts.sampled(fmt) is not None:
        return layouts.decode(fmt, data, w, h)
    floats = {"RGBA16F": ("<f2", 4), "RG16F": ("<f2", 2), "RGBA32F": ("<f4", 4),
              "R32F": ("<f4", 1)}
    if fmt_name in floats:
        dtype, n = floats[fmt_name]
        return _float_to_rgba(np.frombuffer(data, dtype, w * h * n), n, w, h)
    raise UnsupportedFormatError(path, fmt_name, "no CPU decoder")


def decode_rgba(tex: TextureFile, level: int = 0, layer: int = 0, face: int = 0, *,
                z: int = 0) -> np.ndarray:
    """Read and decode one image of `tex` to an (H, W, 4) uint8 RGBA array."""
    lv = tex.level(level)
    if not 0 <= z < lv.depth:
        raise ValueError(f"{tex.path}: slice z={z} out of range 0..{lv.depth - 1}")
    data = tex.read_level(level, layer, face)
    slice_bytes = lv.image_nbytes // lv.depth
    data = data[z * slice_bytes:(z + 1) * slice_bytes]
    return decode_image(tex.format, data, lv.width, lv.height, tex.path)
