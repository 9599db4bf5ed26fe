"""The tile key: one 64-bit integer naming a tile of a virtual texture, and the only place
that knows its bit layout.

Why a packed integer: it is the very value the feedback pass writes per pixel (two words of
an RG32UI target, read back as one little-endian uint64), so a frame's requests stay numpy
arrays from the readback through the policy to the I/O without ever becoming Python
objects. Layout, high to low: texture id + 1 (24 bits, the high word; 0 means "no virtual
texture here"), then in the low word level (4 bits at 24), tile y (12 bits at 12), tile x
(12 bits at 0). So a key names one of 16,777,215 textures and 4,096 tiles a side (524,288
texels at 128 a tile). `shaders/vt_sample.glsl` (`vt_feedback_key_at`) writes the same
layout; tests/test_vt_flight.py checks the two agree.

Every function takes a Python int or a numpy array (element-wise); `pack_one` and the
`*_of` helpers on ints are plain integer arithmetic, for the per-key paths that run on
every missing tile every frame.
"""
from __future__ import annotations

import numpy as np

#: The numpy type of keys.
DTYPE = np.uint64
VT_BITS, LEVEL_BITS, Y_BITS, X_BITS = 24, 4, 12, 12
X_SHIFT, Y_SHIFT = 0, X_BITS
LEVEL_SHIFT = Y_SHIFT + Y_BITS
VT_SHIFT = 32  # the high word: what the shader writes in the second channel
#: Textures, levels and tiles per axis a key can name.
MAX_TEXTURES = (1 << VT_BITS) - 1
MAX_LEVELS = 1 << LEVEL_BITS
MAX_TILES_PER_AXIS = 1 << X_BITS
_LEVEL_MASK, _Y_MASK, _X_MASK = MAX_LEVELS - 1, (1 << Y_BITS) - 1, (1 << X_BITS) - 1
_U = np.uint64


def _k(keys) -> np.ndarray:
    return np.asarray(keys, DTYPE)


def pack(vt, level, x, y) -> np.ndarray:
    """Keys of tiles (vt, level, x, y), element-wise, as uint64."""
    return ((np.asarray(vt, DTYPE) + _U(1)) << _U(VT_SHIFT)
            | np.asarray(level, DTYPE) << _U(LEVEL_SHIFT)
            | np.asarray(y, DTYPE) << _U(Y_SHIFT)
            | np.asarray(x, DTYPE) << _U(X_SHIFT)).astype(DTYPE)


def pack_one(vt: int, level: int, x: int, y: int) -> int:
    """One key as a Python int (no array round trip)."""
    return ((int(vt) + 1) << VT_SHIFT | int(level) << LEVEL_SHIFT | int(y) << Y_SHIFT
            | int(x) << X_SHIFT)


def from_words(words: np.ndarray) -> np.ndarray:
    """Keys of a feedback image read back as uint32 word pairs (..., 2): low word, then
    high word, which is a little-endian uint64 as it lies in memory."""
    w = np.ascontiguousarray(words, np.uint32)
    if w.shape[-1] != 2:
        raise ValueError(f"feedback words of shape {w.shape}: two words a pixel expected")
    if np.little_endian:
        return w.view(DTYPE)[..., 0]
    return w[..., 0].astype(DTYPE) | w[..., 1].astype(DTYPE) << _U(32)


def unpack(keys) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(vt, level, x, y) of keys as int64 arrays (vt -1 for the empty key 0)."""
    k = _k(keys)
    return ((k >> _U(VT_SHIFT)).astype(np.int64) - 1,
            (k >> _U(LEVEL_SHIFT) & _U(_LEVEL_MASK)).astype(np.int64),
            (k >> _U(X_SHIFT) & _U(_X_MASK)).astype(np.int64),
            (k >> _U(Y_SHIFT) & _U(_Y_MASK)).astype(np.int64))


def unpack_one(key: int) -> tuple[int, int, int, int]:
    k = int(key)
    return ((k >> VT_SHIFT) - 1, k >> LEVEL_SHIFT & _LEVEL_MASK, k >> X_SHIFT & _X_MASK,
            k >> Y_SHIFT & _Y_MASK)


def vt_of(keys):
    """Texture id of keys: an int for an int, an int64 array for an array."""
    if isinstance(keys, (int, np.integer)):
        return (int(keys) >> VT_SHIFT) - 1
    return (_k(keys) >> _U(VT_SHIFT)).astype(np.int64) - 1


def level_of(keys):
    """Level of keys: an int for an int, an int64 array for an array."""
    if isinstance(keys, (int, np.integer)):
        return int(keys) >> LEVEL_SHIFT & _LEVEL_MASK
    return (_k(keys) >> _U(LEVEL_SHIFT) & _U(_LEVEL_MASK)).astype(np.int64)


def ancestors(keys: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Key of the ancestor `up` levels coarser of each key (broadcasting: `up` may be a
    column of distances against a row of keys). The caller keeps level + up within the
    texture's levels; the texture id bits are untouched."""
    k = _k(keys)
    u = np.asarray(up, DTYPE)
    x, y = k >> _U(X_SHIFT) & _U(_X_MASK), k >> _U(Y_SHIFT) & _U(_Y_MASK)
    vt_level = k & ~_U((1 << LEVEL_SHIFT) - 1)
    return ((vt_level + (u << _U(LEVEL_SHIFT))) | (y >> u) << _U(Y_SHIFT)
            | (x >> u) << _U(X_SHIFT)).astype(DTYPE)


def fine_first(keys):
    """A total order among tiles, larger = finer level, then larger key: the fixed order a
    full cache uses to keep the coarser tiles of everything before anyone's finer detail
    (int64, below 2**56: the level, then the texture id, tile y and x)."""
    k = np.asarray(keys, DTYPE).astype(np.int64)
    return ((MAX_LEVELS - 1 - (k >> LEVEL_SHIFT & _LEVEL_MASK)) << 52
            | (k >> VT_SHIFT) << LEVEL_SHIFT | (k & ((1 << LEVEL_SHIFT) - 1)))
