"""Encode RGBA8 images to BCn blocks with etcpak, and decode them back for quality checks.

etcpak only takes images whose sides are multiples of 4, so every image is padded by edge
replication (the padding texels then cost no extra error in the edge blocks) and the block
count always equals ceil(w/4) * ceil(h/4) of the real size, 1x1 and 2x2 levels included.
Block rows are stored top to bottom, so an image split into strips whose heights are
multiples of 4 encodes to the concatenation of the strips' encodings: the baker relies on
this to spread one large level over several processes.

etcpak's BC1 never emits BC1's punch-through (3-colour + transparent) mode, so for BC1_RGBA
the blocks holding texels with alpha < 128 are re-indexed here into that mode.

Opaque stays opaque: etcpak's BC7 (bc7enc) encodes opaque blocks in mode 1 (RGB only, alpha
255) or mode 6 (RGBA 7.7.7.7 endpoints plus one p-bit per endpoint shared by all four
channels). In mode 6 it stores the opaque alpha as 127 and picks each p-bit for the colour
alone, so an endpoint with p-bit 0 decodes alpha (127 << 1) | 0 = 254: about a third of an
opaque photograph's texels came back with alpha 254. `_bc7_keep_opaque` fixes the mode-6
blocks whose source texels are all opaque. Three candidates, all decoding alpha 255, and
the one closest to the source colour wins per block: both p-bits set (every colour endpoint
moves one 8-bit step), the same with the colour endpoints refitted to the block's own
indices by least squares (`_bc7_mode6_refit`), or the block re-encoded by etcpak in the
RGB-only mode 1. Measured against etcpak's own (alpha-254) blocks: -0.04..+0.15 dB on four
photographs, -0.56 dB on a smooth 2048x2048 upscale (p-bits alone cost up to 1.9 dB, mode 1
alone up to 1.1 dB), for about twice etcpak's CPU time on such an image. Any other
opaque block that still decodes alpha below 255 (modes 4, 5, 7, reserved; none seen from
etcpak's default settings) is re-encoded in mode 1. The check is what guarantees it.
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
        return _bc7_keep_opaque(etcpak.compress_bc7(padded.tobytes(), w, h, None), padded)
    if f.family == "BC1" and f.components == 4:
        return _encode_bc1_punch_through(padded)
    return _ENCODERS[f.family](padded.tobytes(), w, h)


_BC7_MODE6 = 0x40  # mode bits: mode m is m zero bits then a one, from bit 0



def _bc7_modes(blocks: np.ndarray) -> np.ndarray:
    """Mode (0-7, 8 for the reserved all-zero byte) of each (n, 16) uint8 BC7 block."""
    first = blocks[:, 0]
    modes = np.full(len(first), 8, np.int8)
    for m in range(7, -1, -1):
        modes[(first >> m) & 1 == 1] = m
    return modes


def _blocks_strip(blocks: np.ndarray) -> np.ndarray:
    """(k, 16, 4) texel blocks -> one (4, 4k, 4) image strip holding them left to right."""
    k = blocks.shape[0]
    return np.ascontiguousarray(blocks.reshape(k, 4, 4, 4).transpose(1, 0, 2, 3).reshape(4, 4 * k, 4))


def _bc7_decode_blocks(blocks: np.ndarray) -> np.ndarray:
    """(k, 16) BC7 blocks -> (k, 16, 4) decoded texels (the GPU-matched decoder)."""
    from .decode import decode_image

    k = blocks.shape[0]
    img = decode_image("BC7", blocks.tobytes(), 4 * k, 4)
    return _as_blocks(img)


def _bc7_mode1(texels: np.ndarray) -> np.ndarray:
    """(k, 16, 4) opaque texel blocks encoded by etcpak in mode 1 only: (k, 16) blocks."""
    params = etcpak.BC7CompressBlockParams()
    params.m_mode_mask = 1 << 1
    k = texels.shape[0]
    out = etcpak.compress_bc7(_blocks_strip(texels).tobytes(), 4 * k, 4, params)
    return np.frombuffer(out, np.uint8).reshape(k, 16)


# BC7's 4-bit interpolation weights (of 64) for modes 6 and others with 4-bit indices.
_WEIGHTS4 = np.array([0, 4, 9, 13, 17, 21, 26, 30, 34, 38, 43, 47, 51, 55, 60, 64], np.float64)


def _bc7_mode6_refit(blocks: np.ndarray, texels: np.ndarray) -> np.ndarray:
    """Mode-6 blocks made opaque (A0 = A1 = 127, both p-bits 1) with their RGB endpoints
    refitted to `texels` (k, 16, 4) by least squares for the blocks' own indices, each
    endpoint then rounded to the nearest odd 8-bit value (7 bits + p-bit 1).

    Layout (LSB first): mode bits 0-6, R0 R1 G0 G1 B0 B1 (7 bits each, 7-48), A0 A1 (49-62),
    P0 63, P1 64, index 0 in 3 bits (65-67: its top bit is implied 0), indices 1-15 in 4 bits.
    """
    lo, hi = _u64_halves(blocks)
    index = np.empty((len(lo), 16), np.int64)
    index[:, 0] = ((hi >> np.uint64(1)) & np.uint64(7)).astype(np.int64)
    for i in range(1, 16):
        index[:, i] = ((hi >> np.uint64(4 * i)) & np.uint64(15)).astype(np.int64)
    b = _WEIGHTS4[index] / 64.0
    a = 1.0 - b
    saa, sab, sbb = (a * a).sum(1), (a * b).sum(1), (b * b).sum(1)
    det = saa * sbb - sab * sab
    solvable = np.abs(det) > 1e-9  # else every texel has one index: keep the endpoints
    safe = np.where(solvable, det, 1.0)
    out = lo & np.uint64(0x7F)  # the mode bits
    for c in range(3):
        shift0, shift1 = np.uint64(7 + 14 * c), np.uint64(14 + 14 * c)
        old0 = ((lo >> shift0) & np.uint64(127)).astype(np.float64) * 2
        old1 = ((lo >> shift1) & np.uint64(127)).astype(np.float64) * 2
        s = texels[..., c].astype(np.float64)
        sa, sb = (a * s).sum(1), (b * s).sum(1)
        e0 = np.where(solvable, (sbb * sa - sab * sb) / safe, old0)
        e1 = np.where(solvable, (saa * sb - sab * sa) / safe, old1)
        out |= np.clip(np.rint((e0 - 1) / 2), 0, 127).astype(np.uint64) << shift0
        out |= np.clip(np.rint((e1 - 1) / 2), 0, 127).astype(np.uint64) << shift1
    out |= np.uint64(0x7FFF) << np.uint64(49)  # A0 = A1 = 127, P0 = 1
    return np.stack([out, hi | np.uint64(1)], axis=1).view(np.uint8).reshape(-1, 16).copy()


def _bc7_keep_opaque(data: bytes, padded: np.ndarray) -> bytes:
    """Make every block whose 16 source texels are opaque decode alpha 255 (module doc)."""
    texels = _as_blocks(padded)
    opaque = (texels[..., 3] == 255).all(axis=1)
    if not opaque.any():
        return data
    blocks = np.frombuffer(data, np.uint8).reshape(-1, 16).copy()
    modes = _bc7_modes(blocks)
    lo, hi = _u64_halves(blocks)
    # A0 = A1 = 127 and both p-bits set: the block already decodes alpha 255, as etcpak
    # made it; only the others need a candidate search.
    already = ((lo >> np.uint64(49)) == np.uint64(0x7FFF)) & ((hi & np.uint64(1)) == 1)
    six = np.flatnonzero(opaque & (modes == 6) & ~already)
    if six.size:
        # Mode 6 layout (LSB first): 7 mode bits, R0 R1 G0 G1 B0 B1 A0 A1 of 7 bits each
        # (bits 7-62), P0 at bit 63, P1 at bit 64, then 63 index bits. A0/A1: bits 49-62.
        fixed = blocks[six].copy()
        lo = fixed[:, :8].copy().view("<u8")[:, 0]
        lo |= np.uint64(0x7FFF) << np.uint64(49)  # A0 = A1 = 127, P0 = 1
        fixed[:, :8] = lo.view(np.uint8).reshape(-1, 8)
        fixed[:, 8] |= 1  # P1 = 1
        src = texels[six, :, :3].astype(np.int32)
        candidates = [fixed, _bc7_mode6_refit(blocks[six], texels[six]), _bc7_mode1(texels[six])]
        errors = np.stack([((_bc7_decode_blocks(c)[..., :3] - src) ** 2).sum(axis=(1, 2))
                           for c in candidates])
        best = errors.argmin(axis=0)
        blocks[six] = np.choose(best[:, None], candidates)
    rest = np.flatnonzero(opaque & np.isin(modes, (4, 5, 7, 8)))  # 8: reserved block
    if rest.size:
        bad = rest[(_bc7_decode_blocks(blocks[rest])[..., 3] < 255).any(axis=1)]
        if bad.size:
            blocks[bad] = _bc7_mode1(texels[bad])
    return blocks.tobytes()


def _u64_halves(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 16) uint8 blocks -> their low and high 64 bits (little-endian), as copies."""
    halves = np.ascontiguousarray(blocks).view("<u8").reshape(-1, 2)
    return halves[:, 0].copy(), halves[:, 1].copy()


def force_opaque_bc7(data: bytes) -> bytes:
    """BC7 blocks of an image *declared* opaque (a Basis file without alpha transcoded to
    BC7, say) rewritten so every texel decodes alpha 255, for transcoders that, like
    etcpak, leave 254 through the p-bits.

    Alpha is set in the block's own bits where that leaves colour alone: mode 6 (A0 = A1 =
    127 with both p-bits 1; each colour endpoint moves one 8-bit step), modes 4 and 5 without
    channel rotation (alpha endpoints all ones: colour untouched). Blocks of the other alpha
    modes (7, rotated 4/5) that still decode alpha below 255 are re-encoded by etcpak in the
    RGB-only mode 1 from their own decoded colour (as are reserved blocks, which decode to
    transparent black).
    """
    blocks = np.frombuffer(data, np.uint8).reshape(-1, 16).copy()
    if not blocks.size:
        return data
    modes = _bc7_modes(blocks)
    lo, hi = _u64_halves(blocks)
    one = np.uint64(1)
    six = modes == 6
    lo[six] |= np.uint64(0x7FFF) << np.uint64(49)  # A0, A1 = 127; P0 = 1 (bit 63)
    hi[six] |= one  # P1 (bit 64)
    four = (modes == 4) & (((lo >> np.uint64(5)) & np.uint64(3)) == 0)
    lo[four] |= np.uint64(0xFFF) << np.uint64(38)  # A0, A1: 6 bits each at 38-49
    five = (modes == 5) & (((lo >> np.uint64(6)) & np.uint64(3)) == 0)
    lo[five] |= np.uint64(0xFFFF) << np.uint64(48) & ~np.uint64(0x3) << np.uint64(48)  # 50-63
    hi[five] |= np.uint64(0x3)  # A1's top two bits: 64-65
    blocks = np.stack([lo, hi], axis=1).view(np.uint8).reshape(-1, 16).copy()
    # Mode 8: the reserved all-zero block (etcpak writes some under narrow mode masks),
    # which decodes (0, 0, 0, 0).
    rest = np.flatnonzero(np.isin(modes, (4, 5, 7, 8)) & ~four & ~five)
    if rest.size:
        decoded = _bc7_decode_blocks(blocks[rest])
        bad = (decoded[..., 3] < 255).any(axis=1)
        if bad.any():
            texels = decoded[bad].copy()
            texels[..., 3] = 255
            blocks[rest[bad]] = _bc7_mode1(texels)
    return blocks.tobytes()


_BC1_WEIGHT = np.array([0.0, 1.0, 1 / 3, 2 / 3], np.float32)  # weight of color1 per index


def _unpack565(c: np.ndarray) -> np.ndarray:
    return _rgb565_to_rgb(c.astype(np.int32)).astype(np.float32)


def _pack565(rgb: np.ndarray) -> np.ndarray:
    q = np.clip(np.rint(rgb * (np.array([31, 63, 31], np.float32) / 255.0)), 0,
                [31, 63, 31]).astype(np.uint32)
    return ((q[..., 0] << 11) | (q[..., 1] << 5) | q[..., 2]).astype(np.uint16)


#: index of the palette colour at 0, 1/3, 2/3 and 1 of the way from color0 to color1
_INDEX_OF_STEP = np.array([0, 2, 3, 1], np.intp)


def _nearest(c0: np.ndarray, c1: np.ndarray, texels: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Each texel's nearest colour of its block's four-colour palette, and each block's
    summed error. The palette lies on the line from color0 to color1, so the nearest colour
    is the one nearest the texel's projection on that line: one pass, no distance table."""
    a, b = _unpack565(c0)[:, None, :], _unpack565(c1)[:, None, :]
    d = b - a
    length = np.maximum((d * d).sum(-1), 1e-6)
    t = np.einsum("nkc,nkc->nk", texels - a, d) / length
    step = np.clip(np.rint(t * 3), 0, 3)
    err = texels - (a + (step / 3)[..., None] * d)
    return _INDEX_OF_STEP[step.astype(np.intp)], np.einsum("nkc,nkc->n", err, err)


def refine_colour_endpoints(colour: np.ndarray, rgba: np.ndarray) -> np.ndarray:
    """BC1/BC3 colour blocks (n, 8) with their endpoints refitted by least squares to the
    indices etcpak chose, then re-indexed; a block keeps the new endpoints only where they
    lower its error. Four-colour blocks only (BC3's colour, opaque BC1): etcpak's endpoints
    are fast, not the best for its own indices (the gain is in docs/benchmarks.md)."""
    texels = _as_blocks(pad_to_blocks(rgba))[..., :3].astype(np.float32)
    words = np.ascontiguousarray(colour).view("<u2").reshape(-1, 4)
    c0, c1 = words[:, 0], words[:, 1]
    four = c0 > c1
    bits = words[:, 2].astype(np.uint32) | (words[:, 3].astype(np.uint32) << 16)
    idx = ((bits[:, None] >> (2 * np.arange(16, dtype=np.uint32))) & 3).astype(np.intp)
    t = _BC1_WEIGHT[idx]  # each texel's place on the line from color0 to color1
    a0 = _unpack565(c0)[:, None, :]
    d = texels - (a0 + t[..., None] * (_unpack565(c1)[:, None, :] - a0))
    err = np.einsum("nkc,nkc->n", d, d)
    a, b, dd = ((1 - t) ** 2).sum(1), ((1 - t) * t).sum(1), (t * t).sum(1)
    x0 = np.einsum("nk,nkc->nc", 1 - t, texels)
    x1 = np.einsum("nk,nkc->nc", t, texels)
    det = a * dd - b * b
    solvable = det > 1e-6
    det = np.where(solvable, det, 1.0)[:, None]
    n0 = _pack565((dd[:, None] * x0 - b[:, None] * x1) / det)
    n1 = _pack565((a[:, None] * x1 - b[:, None] * x0) / det)
    n0, n1 = np.maximum(n0, n1), np.minimum(n0, n1)  # color0 > color1: four colours
    nidx, nerr = _nearest(n0, n1, texels)
    better = four & solvable & (n0 != n1) & (nerr < err)
    out = words.copy()
    out[:, 0] = np.where(better, n0, c0)
    out[:, 1] = np.where(better, n1, c1)
    nbits = (nidx.astype(np.uint32) << (2 * np.arange(16, dtype=np.uint32))).sum(
        1, dtype=np.uint32)
    out[:, 2] = np.where(better, nbits & 0xFFFF, words[:, 2])
    out[:, 3] = np.where(better, nbits >> 16, words[:, 3])
    return out.view(np.uint8).reshape(-1, 8)


def encode_refined(rgba: np.ndarray, fmt: PixelFormat | str) -> bytes:
    """`encode_image`, with BC3's and opaque BC1's colour endpoints refined
    (`refine_colour_endpoints`): for transcoding, where the source is already lossy and the
    extra decibels are worth a few times etcpak's time."""
    f = _fmt(fmt)
    data = encode_image(rgba, f)
    if f.family == "BC3":
        blocks = np.frombuffer(data, np.uint8).reshape(-1, 16).copy()
        blocks[:, 8:] = refine_colour_endpoints(blocks[:, 8:], rgba)
        return blocks.tobytes()
    if f.family == "BC1" and f.components == 3:
        return refine_colour_endpoints(np.frombuffer(data, np.uint8).reshape(-1, 8),
                                       rgba).tobytes()
    return data
