"""Transparent pixels shown over a checkerboard, as image viewers and editors show them.

Why when decoding, not when drawing: the renderer draws pictures opaque (its shaders do not
blend a material's alpha) and the wall's textures stay one opaque format (BC1, half of BC7's
memory, and one format per thumbnail atlas page), so transparency is resolved before a
texture is encoded. Without this, BC1's transparent texels decode to black. The squares are
fixed to the image (`CHECKS` along its longer edge), so a thumbnail and its full-detail
chunks show the same squares at every zoom and a chunk's squares continue its neighbour's.
"""
from __future__ import annotations

import numpy as np

#: The two greys of the squares (sRGB), the pair most viewers use.
LIGHT = 204
DARK = 153
#: Squares along the image's longer edge.
CHECKS = 16
#: Rows composited at a time: a 4096-wide chunk's temporaries stay a few MiB.
_BAND = 256


def checker(shape: tuple[int, int], size: tuple[int, int], origin: tuple[float, float] = (0, 0),
            scale: float = 1.0) -> np.ndarray:
    """(H, W) uint8 greys of the checkerboard under `shape` pixels of an image of `size`
    (w, h) whose top-left lies at `origin` (image pixels), each `scale` image pixels wide."""
    square = max(size) / CHECKS
    h, w = shape
    ys = ((origin[1] + (np.arange(h) + 0.5) * scale) // square).astype(np.int64)
    xs = ((origin[0] + (np.arange(w) + 0.5) * scale) // square).astype(np.int64)
    return np.where((ys[:, None] + xs[None, :]) % 2 == 0, LIGHT, DARK).astype(np.uint8)


def over_checkerboard(rgba: np.ndarray, size: tuple[int, int],
                      origin: tuple[float, float] = (0, 0), scale: float = 1.0) -> np.ndarray:
    """`rgba` ((H, W, 4) uint8, part of an image as `checker` says) composited over the
    checkerboard, opaque; an opaque `rgba` is returned as it is (no copy)."""
    alpha = rgba[..., 3]
    if alpha.size == 0 or int(alpha.min()) == 255:
        return rgba
    out = np.empty_like(rgba)
    for y in range(0, rgba.shape[0], _BAND):
        part = rgba[y:y + _BAND]
        a = part[..., 3:4].astype(np.uint16)
        board = checker(part.shape[:2], size, (origin[0], origin[1] + y * scale), scale)
        mixed = part[..., :3] * a + board[..., None].astype(np.uint16) * (255 - a)
        out[y:y + _BAND, :, :3] = (mixed + 127) // 255  # <= 255 * 255: fits uint16
        out[y:y + _BAND, :, 3] = 255
    return out
