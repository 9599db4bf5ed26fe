"""Encode RGBA8 images to BCn blocks with etcpak, and decode them back for quality checks.

etcpak only takes images whose sides are multiples of 4, so every image is padded by edge
replication (the padding texels then cost no extra error in the edge blocks) and the block
count always equals ceil(w/4) * ceil(h/4) of the real size, 1x1 and 2x2 levels included.
Block rows are stored top to bottom, so an image split into strips whose heights are
multiples of 4 encodes to the concatenation of the strips' encodings: the baker relies on
this to spread one large level over several processes.

etcpak's BC1 never emits BC1's punch-through (3-colour + transparent) mode, so for BC1_RGBA
the blocks holding texels with alpha < 128 are re-indexed here into that mode.
"""
from __future__ import annotations

import etcpak
import numpy as np

from ..formats import PixelFormat, get

# What etcpak calls each family; RGBA8 needs no encoder. Decoding (for PSNR) goes through
# engine.textures.decode, which matches what the GPU samples.
_ENCODERS = {"BC1": etcpak.compress_bc1, "BC3": etcpak.compress_bc3, "BC4": etcpak.compress_bc4,
             "BC5": etcpak.compress_bc5}
ENCODABLE = ("BC1_RGB", "BC1_RGB_SRGB", "BC1_RGBA", "BC1_RGBA_SRGB", "BC3", "BC3_SRGB", "BC4",
             "BC5", "BC7", "BC7_SRGB", "RGBA8", "RGBA8_SRGB")
PUNCH_THROUGH_ALPHA = 128  # BC1_RGBA texels below this alpha become transparent


def _fmt(fmt: PixelFormat | str) -> PixelFormat:
    f = get(fmt) if isinstance(fmt, str) else fmt
    if f.name not in ENCODABLE:
        raise ValueError(f"cannot encode to {f.name}; encodable: {', '.join(ENCODABLE)}")
    return f


def pad_to_blocks(rgba: np.ndarray) -> np.ndarray:
    """Pad an (H, W, 4) image to multiples of 4 by repeating its last row and column."""
    h, w = rgba.shape[:2]
    ph, pw = -h % 4, -w % 4
    if ph or pw:
        rgba = np.pad(rgba, ((0, ph), (0, pw), (0, 0)), mode="edge")
    return np.ascontiguousarray(rgba)


def _as_blocks(img: np.ndarray) -> np.ndarray:
    """(H, W, 4) with H, W multiples of 4 -> (blocks, 16, 4) in block storage order."""
    h, w = img.shape[:2]
    return img.reshape(h // 4, 4, w // 4, 4, 4).transpose(0, 2, 1, 3, 4).reshape(-1, 16, 4)


def _rgb565_to_rgb(c: np.ndarray) -> np.ndarray:
    r, g, b = (c >> 11) & 31, (c >> 5) & 63, c & 31
    return np.stack([(r << 3) | (r >> 2), (g << 2) | (g >> 4), (b << 3) | (b >> 2)], -1).astype(np.int32)


def _encode_bc1_punch_through(padded: np.ndarray) -> bytes:
    """BC1 with 1-bit alpha: etcpak endpoints, fitted to the opaque texels only, then the
    blocks that hold transparent texels are switched to 3-colour mode (color0 <= color1)
    and re-indexed, index 3 meaning transparent black."""
    blocks = _as_blocks(padded)
    transparent = blocks[..., 3] < PUNCH_THROUGH_ALPHA
    has_holes = transparent.any(axis=1)
    if not has_holes.any():
        return etcpak.compress_bc1(padded.tobytes(), padded.shape[1], padded.shape[0])

    # Replace transparent texels' colour by their block's mean opaque colour so etcpak's
    # endpoints span only what will be seen.
    opaque = ~transparent
    n_opaque = opaque.sum(axis=1, keepdims=True)
    mean = (blocks[..., :3] * opaque[..., None]).sum(axis=1) / np.maximum(n_opaque, 1)
    filled = blocks.copy()
    filled[..., :3] = np.where(transparent[..., None], mean[:, None, :].astype(np.uint8), blocks[..., :3])
    h, w = padded.shape[:2]
    filled_img = filled.reshape(h // 4, w // 4, 4, 4, 4).transpose(0, 2, 1, 3, 4).reshape(h, w, 4)
    out = np.frombuffer(etcpak.compress_bc1(np.ascontiguousarray(filled_img).tobytes(), w, h),
                        dtype=np.uint16).reshape(-1, 4).copy()

    sel = np.flatnonzero(has_holes)
    c0, c1 = out[sel, 0], out[sel, 1]
    lo, hi = np.minimum(c0, c1), np.maximum(c0, c1)
    p0, p1 = _rgb565_to_rgb(lo), _rgb565_to_rgb(hi)
    palette = np.stack([p0, p1, (p0 + p1) // 2], axis=1)  # (n, 3, 3)
    texels = blocks[sel, :, :3].astype(np.int32)  # (n, 16, 3)
    dist = ((texels[:, :, None, :] - palette[:, None, :, :]) ** 2).sum(-1)  # (n, 16, 3)
    index = np.where(transparent[sel], 3, dist.argmin(-1)).astype(np.uint32)
    bits = (index << (2 * np.arange(16, dtype=np.uint32))).sum(axis=1, dtype=np.uint32)
    out[sel, 0], out[sel, 1] = lo, hi
    out[sel, 2], out[sel, 3] = bits & 0xFFFF, bits >> 16
    return out.tobytes()


def encode_image(rgba: np.ndarray, fmt: PixelFormat | str) -> bytes:
    """Encode one (H, W, 4) uint8 RGBA image (a level, or a strip of one) to `fmt`'s blocks.

    BC4 encodes the red channel and BC5 red and green, as their GPU decoders return them.
    """
    f = _fmt(fmt)
    if rgba.ndim != 3 or rgba.shape[2] != 4 or rgba.dtype != np.uint8:
        raise ValueError(f"expected an (H, W, 4) uint8 RGBA image, got {rgba.shape} {rgba.dtype}")
    if f.family == "RGBA8":
        return np.ascontiguousarray(rgba).tobytes()
    padded = pad_to_blocks(rgba)
    h, w = padded.shape[:2]
    if f.family == "BC7":
        return etcpak.compress_bc7(padded.tobytes(), w, h, None)
    if f.family == "BC1" and f.components == 4:
        return _encode_bc1_punch_through(padded)
    return _ENCODERS[f.family](padded.tobytes(), w, h)
