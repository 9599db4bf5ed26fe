"""The tile key: one uint32 naming a tile of a virtual texture, and the only place that
knows its bit layout.

Why a packed integer: it is the very value the feedback pass writes per pixel (R32UI), so a
frame's requests stay numpy arrays from the readback through the policy to the I/O without
ever becoming Python objects. Layout, high to low: texture id + 1 (12 bits; 0 means "no
virtual texture here"), level (4), tile y (8), tile x (8). `shaders/vt_sample.glsl`
(`vt_feedback_key_at`) writes the same layout; tests/test_vt_flight.py checks the two agree.

Every function takes a Python int or a numpy array (element-wise); `pack_one` and the
`*_of` helpers on ints are plain integer arithmetic, for the per-key paths that run on
every missing tile every frame.
"""
from __future__ import annotations

import numpy as np

VT_BITS, LEVEL_BITS, Y_BITS, X_BITS = 12, 4, 8, 8
X_SHIFT, Y_SHIFT = 0, X_BITS
LEVEL_SHIFT = Y_SHIFT + Y_BITS
VT_SHIFT = LEVEL_SHIFT + LEVEL_BITS
#: Textures, levels and tiles per axis a key can name.
MAX_TEXTURES = (1 << VT_BITS) - 1
MAX_LEVELS = 1 << LEVEL_BITS
MAX_TILES_PER_AXIS = 1 << X_BITS
_LEVEL_MASK, _Y_MASK, _X_MASK = MAX_LEVELS - 1, (1 << Y_BITS) - 1, (1 << X_BITS) - 1
#: The bits shared by a tile and its ancestors (texture id) with the level bits.
_VT_LEVEL = np.uint32(~((1 << LEVEL_SHIFT) - 1) & 0xFFFFFFFF)


def pack(vt, level, x, y) -> np.ndarray:
    """Keys of tiles (vt, level, x, y), element-wise, as uint32."""
    return ((np.asarray(vt, np.uint32) + 1) << VT_SHIFT
            | np.asarray(level, np.uint32) << LEVEL_SHIFT
            | np.asarray(y, np.uint32) << Y_SHIFT
            | np.asarray(x, np.uint32) << X_SHIFT).astype(np.uint32)


def pack_one(vt: int, level: int, x: int, y: int) -> int:
    """One key as a Python int (no array round trip)."""
    return ((int(vt) + 1) << VT_SHIFT | int(level) << LEVEL_SHIFT | int(y) << Y_SHIFT
            | int(x) << X_SHIFT)


def unpack(keys) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(vt, level, x, y) of keys as int64 arrays (vt -1 for the empty key 0)."""
    k = np.asarray(keys, np.uint32)
    return ((k >> VT_SHIFT).astype(np.int64) - 1, (k >> LEVEL_SHIFT & _LEVEL_MASK).astype(
        np.int64), (k >> X_SHIFT & _X_MASK).astype(np.int64),
        (k >> Y_SHIFT & _Y_MASK).astype(np.int64))


def unpack_one(key: int) -> tuple[int, int, int, int]:
    k = int(key)
    return ((k >> VT_SHIFT) - 1, k >> LEVEL_SHIFT & _LEVEL_MASK, k >> X_SHIFT & _X_MASK,
            k >> Y_SHIFT & _Y_MASK)


def vt_of(keys):
    """Texture id of keys: an int for an int, an int64 array for an array."""
    if isinstance(keys, (int, np.integer)):
        return (int(keys) >> VT_SHIFT) - 1
    return (np.asarray(keys, np.uint32) >> VT_SHIFT).astype(np.int64) - 1


def level_of(keys):
    """Level of keys: an int for an int, an int64 array for an array."""
    if isinstance(keys, (int, np.integer)):
        return int(keys) >> LEVEL_SHIFT & _LEVEL_MASK
    return (np.asarray(keys, np.uint32) >> LEVEL_SHIFT & _LEVEL_MASK).astype(np.int64)


def ancestors(keys: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Key of the ancestor `up` levels coarser of each key (broadcasting: `up` may be a
    column of distances against a row of keys). The caller keeps level + up within the
    texture's levels; the texture id bits are untouched."""
    k = np.asarray(keys, np.uint32)
    u = np.asarray(up, np.uint32)
    x, y = k >> X_SHIFT & np.uint32(_X_MASK), k >> Y_SHIFT & np.uint32(_Y_MASK)
    return ((k & _VT_LEVEL) + (u << LEVEL_SHIFT) | (y >> u) << Y_SHIFT
            | (x >> u) << X_SHIFT).astype(np.uint32)


def fine_first(keys):
    """A total order among tiles, larger = finer level, then larger key: the fixed order a
    full cache uses to keep the coarser tiles of everything before anyone's finer detail
    (int64; below 2**36)."""
    k = np.asarray(keys, np.int64)
    return ((MAX_LEVELS - 1 - (k >> LEVEL_SHIFT & _LEVEL_MASK)) << 32) | k
