"""Mip chains from an RGBA8 image, filtered the way the GPU will blend them.

Three things make mips look right rather than merely smaller:
- Linear light. sRGB values are not proportional to light; averaging them darkens every
  high-contrast edge (a 1-pixel black/white checker must become 50% light, which is sRGB 188,
  not 128). Colour is decoded to linear float, filtered, and encoded back.
- Alpha weighting. A fully transparent texel's colour is invisible garbage (often black);
  averaging it in makes dark fringes around cut-outs. Colour is premultiplied by alpha before
  filtering and divided back out after.
- Exact footprints at odd sizes. Level i is max(1, w >> i) wide (the GL rule), so 37 -> 18
  covers 2.06 source texels per output texel. The box filter here weights every source texel
  by the fraction of it that each output texel covers, so no row or column is dropped or
  counted twice, and a power-of-two size reduces to the plain 2x2 average.

Everything is vectorised numpy in float32; levels are computed from the previous level kept
in float, so quantisation error does not accumulate down the chain.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from ..memory.sizes import mip_count

ColorSpace = Literal["srgb", "linear", "normal"]


def srgb_to_linear(values: np.ndarray) -> np.ndarray:
    """sRGB-encoded values (uint8, or float in [0, 1]) to linear light, float32 in [0, 1]."""
    if values.dtype == np.uint8:
        return np.take(_SRGB8_TO_LINEAR, values)  # a table lookup is ~10x faster than the power
    v = values.astype(np.float32)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4).astype(np.float32)


_SRGB8_TO_LINEAR = srgb_to_linear(np.arange(256, dtype=np.float32) / 255.0)
# The same table for two bytes at once, indexed by them read as one little-endian uint16:
# half as many lookups, each fetching 8 bytes.
_SRGB8_PAIRS = np.stack(np.meshgrid(_SRGB8_TO_LINEAR, _SRGB8_TO_LINEAR, indexing="xy"),
                        -1).reshape(-1, 2).view(np.uint64).ravel()


def _srgb8_lookup(rgba: np.ndarray) -> np.ndarray:
    """`_SRGB8_TO_LINEAR[rgba]` (every channel, alpha included) for an (..., 4) uint8 array,
    through the pair table."""
    pairs = np.ascontiguousarray(rgba).view(np.uint16)
    return _SRGB8_PAIRS[pairs].view(np.float32).reshape(rgba.shape)


def linear_to_srgb(values: np.ndarray) -> np.ndarray:
    """Linear light float in [0, 1] to sRGB-encoded float in [0, 1]."""
    v = np.clip(values, 0.0, 1.0).astype(np.float32)
    return np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1.0 / 2.4) - 0.055).astype(np.float32)


def _srgb8_exact(values: np.ndarray) -> np.ndarray:
    """Linear float32 values to sRGB bytes the slow way: rint(linear_to_srgb(v) * 255)."""
    return np.clip(np.rint(linear_to_srgb(values) * 255.0), 0, 255).astype(np.uint8)


def _srgb8_tables(shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Tables for `linear_to_srgb8`: per bucket of 2^shift consecutive float32 bit patterns
    in [0, 1], the byte of its first value and the value (if any) where the byte steps up.

    Each step is found by bisection over the bit patterns against the exact conversion;
    buckets are narrower than the sRGB curve's steepest byte step, so none holds two."""
    one = int(np.float32(1.0).view(np.uint32))
    lo = np.zeros(255, np.int64)
    hi = np.full(255, one + 1, np.int64)
    byte = np.arange(1, 256)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        reached = _srgb8_exact(mid.astype(np.uint32).view(np.float32)) >= byte
        hi = np.where(reached, mid, hi)
        lo = np.where(reached, lo, mid + 1)
    steps = hi.astype(np.uint32)
    buckets = (one >> shift) + 1
    base = _srgb8_exact((np.arange(buckets, dtype=np.uint32) << shift).view(np.float32))
    step_at = np.full(buckets, np.inf, np.float32)
    inside = (steps & ((1 << shift) - 1)) != 0  # a step at a bucket's start is in `base`
    step_at[steps[inside] >> shift] = steps[inside].view(np.float32)
    return base, step_at


_SRGB8_SHIFT = 15
_SRGB8_BASE, _SRGB8_STEP = _srgb8_tables(_SRGB8_SHIFT)


def linear_to_srgb8(values: np.ndarray) -> np.ndarray:
    """Linear light float32 to sRGB bytes, exactly rint(linear_to_srgb(v) * 255) but by
    table: the power function is most of a mip chain's time otherwise."""
    v = np.clip(values, 0.0, 1.0, dtype=np.float32)
    v += np.float32(0.0)  # -0.0 (which the clip keeps) to +0.0
    bucket = np.minimum(v.view(np.uint32) >> _SRGB8_SHIFT, len(_SRGB8_BASE) - 1)  # NaN: 255
    out = _SRGB8_BASE[bucket]
    out += v >= _SRGB8_STEP[bucket]
    return out


def _box_weights(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Source indices (k, n_out) and weights (k, n_out) of an area-weighted box filter.

    Output texel i covers source interval [i*s, (i+1)*s) with s = n_in / n_out >= 1; each
    source texel j contributes the length of its overlap with that interval, divided by s.
    k = ceil(s) + 1 taps are always enough.
    """
    scale = n_in / n_out
    taps = int(np.ceil(scale)) + 1
    start = np.arange(n_out, dtype=np.float64) * scale
    stop = start + scale
    first = np.floor(start).astype(np.int64)
    idx = first[None, :] + np.arange(taps)[:, None]
    overlap = np.minimum(stop[None, :], idx + 1) - np.maximum(start[None, :], idx)
    weights = np.clip(overlap, 0.0, None) / scale
    used = weights.any(axis=1)  # an exact 2:1 reduction never needs its third tap
    return np.minimum(idx[used], n_in - 1), weights[used].astype(np.float32)


def _downsample_axis(img: np.ndarray, n_out: int, axis: int) -> np.ndarray:
    n_in = img.shape[axis]
    if n_in == n_out:
        return img
    if n_in == 2 * n_out:  # the common exact halving: strided halves, no gather (same sums)
        lo = img[(slice(None),) * axis + (slice(0, None, 2),)]
        hi = img[(slice(None),) * axis + (slice(1, None, 2),)]
        out = lo * np.float32(0.5)
        out += hi * np.float32(0.5)
        return out
    idx, weights = _box_weights(n_in, n_out)
    shape = [1] * img.ndim
    shape[axis] = n_out
    out = np.zeros(img.shape[:axis] + (n_out,) + img.shape[axis + 1:], dtype=np.float32)
    for k in range(idx.shape[0]):
        out += np.take(img, idx[k], axis=axis) * weights[k].reshape(shape)
    return out


def downsample(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Area-weighted box downsample of a float (H, W, C) image to (height, width, C)."""
    return _downsample_axis(_downsample_axis(img, height, 0), width, 1)


def _to_working(rgba: np.ndarray, colorspace: ColorSpace, weight_alpha: bool) -> np.ndarray:
    """RGBA8 (or float RGBA in [0, 1], the same values / 255) to the float space filtering happens in: linear light (or raw values, or unit
    vectors in [-1, 1] for normals), colour premultiplied by alpha when asked."""
    unit = np.float32(1.0 / 255.0) if rgba.dtype == np.uint8 else np.float32(1.0)
    if colorspace == "srgb" and rgba.dtype == np.uint8:
        # one table lookup over the contiguous image (alpha overwritten below): a lookup
        # of the strided RGB view alone costs several times more
        work = _srgb8_lookup(rgba)
    else:
        work = np.empty(rgba.shape, np.float32)
    np.multiply(rgba[..., 3], unit, out=work[..., 3], dtype=np.float32)
    if colorspace == "srgb":
        if rgba.dtype != np.uint8:
            work[..., :3] = srgb_to_linear(rgba[..., :3])
    elif colorspace == "normal":
        np.multiply(rgba[..., :3], 2 * unit, out=work[..., :3], dtype=np.float32)
        work[..., :3] -= 1.0
    else:
        np.multiply(rgba[..., :3], unit, out=work[..., :3], dtype=np.float32)
    if weight_alpha:
        work[..., :3] *= work[..., 3:4]
    return work


def _to_rgba8(work: np.ndarray, colorspace: ColorSpace, weight_alpha: bool) -> np.ndarray:
    """The inverse of `_to_working` for one filtered level, rounded to uint8."""
    if colorspace == "srgb":
        rgb = work[..., :3]
        if weight_alpha:
            alpha = work[..., 3:4]
            rgb = np.where(alpha > 0, rgb / np.maximum(alpha, 1e-12), 0.0)
        out8 = np.empty(work.shape, np.uint8)
        out8[..., :3] = linear_to_srgb8(rgb)
        out8[..., 3] = quantize_unorm8(work[..., 3])
        return out8
    out = work.copy()
    if weight_alpha:
        alpha = out[..., 3:4]
        out[..., :3] = np.where(alpha > 0, out[..., :3] / np.maximum(alpha, 1e-12), 0.0)
    if colorspace == "normal":
        length = np.linalg.norm(out[..., :3], axis=-1, keepdims=True)
        out[..., :3] = np.where(length > 1e-6, out[..., :3] / np.maximum(length, 1e-6), out[..., :3])
        out[..., :3] = out[..., :3] * 0.5 + 0.5
    elif colorspace == "srgb":
        out[..., :3] = linear_to_srgb(out[..., :3])
    return np.clip(np.rint(out * 255.0), 0, 255).astype(np.uint8)


def quantize_unorm8(values: np.ndarray) -> np.ndarray:
    """Float values in [0, 1] to bytes by rounding (round(v * 255)), clipped to the range."""
    return np.clip(np.rint(values * np.float32(255.0)), 0, 255).astype(np.uint8)


def generate_mips(rgba: np.ndarray, *, colorspace: ColorSpace = "srgb",
                  alpha_weighted: bool = True, max_levels: int | None = None) -> list[np.ndarray]:
    """Full mip chain of an (H, W, 4) RGBA image, level 0 first, every level uint8.

    The input is uint8, or float32 in [0, 1] holding the same encoded values / 255 at a
    higher precision (a 16-bit or float bake input, see engine.textures.source_image): level
    0 is then the input rounded to bytes and the coarser levels are filtered from the float
    values, so the input's extra precision is not lost before filtering.
    `colorspace`: "srgb" for colour textures (filtered in linear light), "linear" for data
    (roughness, masks, BC4/BC5 sources), "normal" for tangent-space normal maps (filtered as
    vectors and renormalised). `alpha_weighted` premultiplies colour by alpha while filtering;
    it is skipped for fully opaque images (a no-op there) and for normal maps, whose alpha
    channel is not coverage. The chain ends at 1x1 unless `max_levels` stops it earlier.
    """
    if (rgba.ndim != 3 or rgba.shape[2] != 4 or rgba.dtype not in (np.uint8, np.float32)
            or 0 in rgba.shape):
        raise ValueError(f"expected an (H, W, 4) uint8 or float32 RGBA image, got {rgba.shape} "
                         f"{rgba.dtype}")
    height, width = rgba.shape[:2]
    count = mip_count(width, height)
    if max_levels is not None:
        count = max(1, min(count, max_levels))
    level0 = rgba if rgba.dtype == np.uint8 else quantize_unorm8(rgba)
    weight_alpha = alpha_weighted and colorspace != "normal" and bool((level0[..., 3] < 255).any())

    levels = [level0]
    if count == 1:
        return levels
    if height % 2 == 0 and height > BAND_ROWS:
        work = _first_level_by_bands(rgba, colorspace, weight_alpha)
        levels.append(_to_rgba8(work, colorspace, weight_alpha))
        first = 2
    else:
        work = _to_working(rgba, colorspace, weight_alpha)
        first = 1
    for level in range(first, count):
        w, h = max(1, width >> level), max(1, height >> level)
        work = downsample(work, w, h)
        levels.append(_to_rgba8(work, colorspace, weight_alpha))
    return levels


#: Rows of level 0 taken into float at a time for level 1 (an even number).
BAND_ROWS = 256


def _first_level_by_bands(rgba: np.ndarray, colorspace: ColorSpace,
                          weight_alpha: bool) -> np.ndarray:
    """Level 1 in the working float space, computed BAND_ROWS rows of level 0 at a time:
    the conversion is per texel and an even height halves by row pairs, so the result is the
    same floats as converting the whole image first, while holding a quarter of its floats
    (level 0 of a 4096^2 chunk in float alone is 256 MiB)."""
    height, width = rgba.shape[:2]
    w1 = max(1, width >> 1)
    out = np.empty((height // 2, w1, 4), np.float32)
    for y in range(0, height, BAND_ROWS):
        band = rgba[y:y + BAND_ROWS]
        out[y // 2:(y + band.shape[0]) // 2] = halve_rows(band, colorspace, weight_alpha)
    return out


def halve_rows(rgba: np.ndarray, colorspace: ColorSpace, weight_alpha: bool) -> np.ndarray:
    """Level-1 rows in the working space from an even number of level-0 rows.

    For 8-bit sRGB without alpha weighting at an even width, the 2x2 box is summed straight
    from the lookup table: ((a + b) + (c + d)) / 4 is the same float32 value as halving
    down then across (a halving multiplies by 0.5, which is exact), without a full-size
    float image's extra passes."""
    rows, width = rgba.shape[:2]
    if rgba.dtype == np.uint8 and colorspace == "srgb" and not weight_alpha and width % 2 == 0:
        lin = _srgb8_lookup(rgba)
        down = lin[0::2]
        down += lin[1::2]
        out = down[:, 0::2] + down[:, 1::2]
        out *= np.float32(0.25)
        alpha = rgba[..., 3].astype(np.float32)
        alpha *= np.float32(1.0 / 255.0)
        a_down = alpha[0::2] + alpha[1::2]
        out[..., 3] = a_down[:, 0::2] + a_down[:, 1::2]
        out[..., 3] *= np.float32(0.25)
        return out
    work = _to_working(rgba, colorspace, weight_alpha)
    return downsample(work, max(1, width >> 1), rows // 2)
