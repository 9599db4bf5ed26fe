"""BC4 (RGTC1) tiles of one channel's values: a quarter of a 16-bit cache's bytes, for a view
that asks for it (`ScienceView(encoding="bc4")`; values are exact otherwise).

Why each tile is scaled to its own range first: BC4 keeps two 8-bit endpoints a 4x4 block,
so over a uint16 channel's whole range it would keep 256 levels of 65,536. A tile is mapped
to [0, 1] by its own finite minimum and span (kept beside its slot and undone in the shader),
and each block's endpoints are the floor and ceiling of its values in 255ths, with the
eight-step mode between them: a block of close values keeps steps finer than a 255th.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: texels a side of a BC4 block, and its bytes
BLOCK = 4
BLOCK_BYTES = 8
#: the BC4 index of the k-th of eight steps from red_1 (k = 0) to red_0 (k = 7), in the mode
#: red_0 > red_1: index 0 is red_0, 1 is red_1, i = 2..7 is ((8 - i) red_0 + (i - 1) red_1) / 7
_INDEX_OF_STEP = np.array([1, 7, 6, 5, 4, 3, 2, 0], np.uint32)
#: texel (y, x) of a block keeps its index at bit 3 (4y + x) of the 48 after the endpoints:
#: rows 0-1 in the first 24, rows 2-3 in the next, each half built in uint32 against a tile
#: viewed as (block row, y, block column, x)
_HALF_SHIFTS = (np.uint32(3) * (np.arange(4, dtype=np.uint32)[:, None] % 2 * 4
                                + np.arange(4, dtype=np.uint32))).reshape(1, 4, 1, 4)


@dataclass(frozen=True)
class EncodedTile:
    """A tile as BC4 blocks over a `pitch`^2 slot (edges repeated past the tile), and the
    map back to values: value = low + decoded * span."""

    data: bytes
    low: float
    span: float


def pitch_for(tile: int) -> int:
    """The slot side holding a `tile`-texel tile in whole blocks."""
    return -(-int(tile) // BLOCK) * BLOCK


def _blockwise(t: np.ndarray, op: np.ufunc) -> np.ndarray:
    """`op` (minimum or maximum) over each 4x4 block of a 2D array whose sides are whole
    blocks, as (rows, cols) of blocks: row slices, then column slices (a reduction over an
    axis of four is many times slower)."""
    r = op(op(t[0::4], t[1::4]), op(t[2::4], t[3::4]))
    return op(op(r[:, 0::4], r[:, 1::4]), op(r[:, 2::4], r[:, 3::4]))


def tile_range(values: np.ndarray) -> tuple[float, float]:
    """A tile's low and span over its finite values (span 1 when they are all one value or
    there are none): the map both encoders use, and the shader undoes."""
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    return low, (high - low if high > low else 1.0)


def encode_tile(values: np.ndarray, pitch: int) -> EncodedTile:
    """BC4 blocks of a 2D tile of values (at most pitch x pitch; NaN and infinities are
    stored as the tile's minimum: BC4 has no such values)."""
    h, w = values.shape
    if pitch % BLOCK or h > pitch or w > pitch or not h or not w:
        raise ValueError(f"a {h}x{w} tile in a {pitch}-texel BC4 slot")
    low, span = tile_range(values)
    t = (values.astype(np.float32) - np.float32(low)) * np.float32(255.0 / span)  # 255ths
    if values.dtype.kind == "f":
        t[~np.isfinite(values)] = 0.0
    if (h, w) != (pitch, pitch):
        t = np.pad(t, ((0, pitch - h), (0, pitch - w)), mode="edge")
    lo = np.clip(np.floor(_blockwise(t, np.minimum)), 0, 255)
    hi = np.clip(np.ceil(_blockwise(t, np.maximum)), 0, 255)
    n = pitch // BLOCK
    scale = np.float32(7.0) / np.maximum(hi - lo, np.float32(1.0))
    t4 = t.reshape(n, BLOCK, n, BLOCK)  # (block row, y, block column, x): no copy
    steps = np.rint((t4 - lo[:, None, :, None]) * scale[:, None, :, None]).astype(np.uint8)
    np.minimum(steps, 7, out=steps)  # values are within [lo, hi]: only rounding reaches 8
    placed = _INDEX_OF_STEP.take(steps) << _HALF_SHIFTS
    rows = placed[..., 0] | placed[..., 1] | placed[..., 2] | placed[..., 3]  # (n, y, n)
    first = (rows[:, 0] | rows[:, 1]).astype(np.uint64)
    second = (rows[:, 2] | rows[:, 3]).astype(np.uint64)
    words = (hi.astype(np.uint64) | (lo.astype(np.uint64) << np.uint64(8))
             | (first << np.uint64(16)) | (second << np.uint64(40)))
    return EncodedTile(words.reshape(-1).astype("<u8").tobytes(), low, span)


def decode_tile(tile: EncodedTile, pitch: int) -> np.ndarray:
    """The values a BC4 slot holds (pitch x pitch, float64), decoded as the format defines
    it: the reference tests hold the encoder and the GPU's picture to."""
    n = pitch // BLOCK
    words = np.frombuffer(tile.data, "<u8")
    if words.size != n * n:
        raise ValueError(f"{len(tile.data)} bytes for a {pitch}^2 BC4 slot")
    r0 = (words & np.uint64(0xFF)).astype(np.float64)
    r1 = ((words >> np.uint64(8)) & np.uint64(0xFF)).astype(np.float64)
    shifts = np.uint64(16) + np.arange(16, dtype=np.uint64) * np.uint64(3)
    index = ((words[:, None] >> shifts) & np.uint64(7)).astype(np.intp)
    i = np.arange(8, dtype=np.float64)
    eight = np.where(i[None] >= 2, ((8 - i) * r0[:, None] + (i - 1) * r1[:, None]) / 7, 0)
    six = np.where(i[None] >= 2, ((6 - i) * r0[:, None] + (i - 1) * r1[:, None]) / 5, 0)
    six[:, 6], six[:, 7] = 0.0, 255.0
    palette = np.where((r0 > r1)[:, None], eight, six)
    palette[:, 0], palette[:, 1] = r0, r1
    texels = np.take_along_axis(palette, index, axis=1) / 255.0
    out = texels.reshape(n, n, BLOCK, BLOCK).transpose(0, 2, 1, 3).reshape(pitch, pitch)
    return tile.low + out * tile.span
