"""Uncompressed texel layouts as bit fields: what each stored bit means once sampled.

DDS describes uncompressed texels by a bit count and four channel masks; GL describes them by
a transfer format and type (GL_BGRA + GL_UNSIGNED_SHORT_1_5_5_5_REV) plus an optional swizzle.
Both are reduced here to one comparable thing, a `Sampled` layout: for each channel a shader
sees (R, G, B, A), either a bit field of the texel (shift, width) or a constant 0 / 1.

That one description serves three jobs without GL:
- matching: a file layout equal to some engine format's layout is uploaded as it is;
- expansion: any other layout is repacked, on the CPU, into the smallest format whose
  fields each hold the file's field *exactly* (an n-bit unorm fits an m-bit one exactly when
  n divides m, because 2^n - 1 then divides 2^m - 1), so no value changes on the way;
- decoding: `decode_rgba` of any of these formats is the same field arithmetic, with the
  swizzle applied the way the sampler applies it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..formats import FORMATS, PixelFormat
from ..formats import get as get_format

_GL_UNSIGNED_BYTE, _GL_UNSIGNED_SHORT = 0x1401, 0x1403
# type -> (bits per texel, field widths from the most significant bit, reversed?)
_PACKED: dict[int, tuple[int, tuple[int, ...], bool]] = {
    0x8363: (16, (5, 6, 5), False), 0x8364: (16, (5, 6, 5), True),
    0x8033: (16, (4, 4, 4, 4), False), 0x8365: (16, (4, 4, 4, 4), True),
    0x8034: (16, (5, 5, 5, 1), False), 0x8366: (16, (1, 5, 5, 5), True),
    0x8035: (32, (8, 8, 8, 8), False), 0x8367: (32, (8, 8, 8, 8), True),
    0x8036: (32, (10, 10, 10, 2), False), 0x8368: (32, (2, 10, 10, 10), True),
}
_ORDER: dict[int, str] = {0x1908: "RGBA", 0x80E1: "BGRA", 0x1907: "RGB", 0x80E0: "BGR",
                          0x1903: "R", 0x8227: "RG"}


@dataclass(frozen=True)
class Field:
    """`bits` bits starting at bit `shift` of the little-endian texel: an unsigned norm."""

    shift: int
    bits: int

    @property
    def max(self) -> int:
        return (1 << self.bits) - 1


#: One entry per sampled channel R, G, B, A: a Field, or the constant 0 or 1.
Sampled = tuple["Field | int", "Field | int", "Field | int", "Field | int"]


def stored_fields(fmt: PixelFormat) -> dict[str, Field] | None:
    """The stored channels of an integer-normalized uncompressed format, from its GL transfer
    format and type; None for compressed, float and depth formats."""
    order = _ORDER.get(fmt.gl_format or 0)
    if fmt.compressed or fmt.is_depth or order is None:
        return None
    if fmt.gl_type in (_GL_UNSIGNED_BYTE, _GL_UNSIGNED_SHORT):
        size = 8 if fmt.gl_type == _GL_UNSIGNED_BYTE else 16
        if size * len(order) != fmt.block_bytes * 8:
            return None
        return {c: Field(size * i, size) for i, c in enumerate(order)}
    packed = _PACKED.get(fmt.gl_type or 0)
    if packed is None:
        return None
    total, widths, rev = packed
    if len(widths) != len(order) or total != fmt.block_bytes * 8:
        return None
    fields, pos = {}, 0 if rev else total
    for i, c in enumerate(order):
        width = widths[len(widths) - 1 - i] if rev else widths[i]
        if rev:
            fields[c] = Field(pos, width)
            pos += width
        else:
            pos -= width
            fields[c] = Field(pos, width)
    return fields


def sampled(fmt: PixelFormat) -> Sampled | None:
    """What a shader reads from `fmt`, channel by channel (GL fills a missing colour channel
    with 0 and a missing alpha with 1; the format's swizzle is applied last)."""
    fields = stored_fields(fmt)
    if fields is None:
        return None
    plain = tuple(fields.get(c, 1 if c == "A" else 0) for c in "RGBA")
    if fmt.swizzle is None:
        return plain  # type: ignore[return-value]
    pick = {"R": plain[0], "G": plain[1], "B": plain[2], "A": plain[3], "0": 0, "1": 1}
    return tuple(pick[s] for s in fmt.swizzle)  # type: ignore[return-value]


#: Engine formats whose texels are plain bit fields (candidates to take a file's data).
INTEGER_FORMATS: tuple[PixelFormat, ...] = tuple(f for f in FORMATS if sampled(f) is not None)

#: Families a driver measured here stores wider than declared, which no ledger could count
#: exactly: the NVIDIA H200 (580.159) keeps GL_RGBA4 at 8 bits a channel (NVX fell by 2.0x
#: the 2-byte ledger for 32 sampled 2048^2 textures; every other family here by 1.000).
#: Files in these layouts are repacked (4:4:4:4 -> RGBA8, v * 17, exact) instead.
WIDENED_FAMILIES: frozenset[str] = frozenset({"RGBA4"})

#: Where a layout no format matches goes, smallest first (ties: the earlier one). Each holds
#: every field it is given exactly or is skipped for that layout.
EXPANSION_TARGETS: tuple[str, ...] = (
    "L8", "A8", "R8", "L8A8", "RG8", "B5G6R5", "B5G5R5A1", "L16", "R16",
    "RGBA8", "RG16", "R10G10B10A2", "RGBA16")


def field_of_mask(mask: int) -> Field | None:
    """The Field a channel mask describes; None if the mask is not one run of set bits."""
    if mask <= 0:
        return None
    shift = (mask & -mask).bit_length() - 1
    run = mask >> shift
    if run & (run + 1):
        return None
    return Field(shift, run.bit_length())


def direct_format(bits: int, layout: Sampled) -> PixelFormat | None:
    """The first engine format whose texels are `bits` wide and sample exactly as `layout`
    (leaving out WIDENED_FAMILIES: their storage would not be what the ledger counts)."""
    for fmt in INTEGER_FORMATS:
        if fmt.family in WIDENED_FAMILIES:
            continue
        if fmt.block_bytes * 8 == bits and not fmt.srgb and sampled(fmt) == layout:
            return fmt
    return None


@dataclass(frozen=True)
class Repack:
    """Moves every field of a `src_bits`-wide texel into the fields of `target`."""

    src_bits: int
    target: PixelFormat
    # (source field or constant, target field) for each stored field of the target
    moves: tuple[tuple[Field | int, Field], ...]

    @property
    def src_bytes(self) -> int:
        return self.src_bits // 8

    def convert(self, data: bytes) -> bytes:
        """File texels -> target texels; n-bit values scale by (2^m-1)/(2^n-1), an integer."""
        shuffle = self._byte_shuffle()
        if shuffle is not None:  # whole bytes move (24-bit BGR -> RGBA8): 0.05 s, not 0.29 s, a 2048² level
            src = np.frombuffer(data, np.uint8, len(data) // self.src_bytes * self.src_bytes)
            src = src.reshape(-1, self.src_bytes)
            out8 = np.empty((len(src), self.target.block_bytes), np.uint8)
            for j, source in enumerate(shuffle):
                out8[:, j] = src[:, source[1]] if source[0] == "byte" else source[1]
            return out8.tobytes()
        texels = read_texels(data, self.src_bytes)
        out = np.zeros(texels.shape, np.uint64)
        for src, dst in self.moves:
            if isinstance(src, Field):
                v = (texels >> np.uint64(src.shift)) & np.uint64(src.max)
                v = v * np.uint64(dst.max // src.max)
            else:
                v = np.full(texels.shape, dst.max * src, np.uint64)
            out |= v << np.uint64(dst.shift)
        return write_texels(out, self.target.block_bytes)

    def _byte_shuffle(self) -> list[tuple[str, int]] | None:
        """Per target byte: ("byte", source byte) or ("const", value), when every field is a
        whole aligned byte; None otherwise."""
        plan: dict[int, tuple[str, int]] = {}
        for src, dst in self.moves:
            if dst.bits != 8 or dst.shift % 8:
                return None
            if isinstance(src, Field):
                if src.bits != 8 or src.shift % 8:
                    return None
                plan[dst.shift // 8] = ("byte", src.shift // 8)
            else:
                plan[dst.shift // 8] = ("const", 255 * src)
        if sorted(plan) != list(range(self.target.block_bytes)):
            return None
        return [plan[i] for i in range(self.target.block_bytes)]


def plan_expansion(src_bits: int, layout: Sampled,
                   targets: Sequence[str] = EXPANSION_TARGETS) -> Repack | None:
    """The smallest target that holds `layout` exactly, as a Repack; None if none does."""
    for name in targets:
        target = get_format(name)
        fields = stored_fields(target)
        tsampled = sampled(target)
        assert fields is not None and tsampled is not None
        moves = _moves(layout, fields, tsampled)
        if moves is not None:
            return Repack(src_bits, target, moves)
    return None


def _moves(layout: Sampled, fields: dict[str, Field],
           tsampled: Sampled) -> tuple[tuple[Field | int, Field], ...] | None:
    """How to fill each stored field of a target so it samples as `layout`, or None."""
    wanted: dict[Field, Field | int] = {}
    for src, dst in zip(layout, tsampled):
        if isinstance(dst, int):
            if src != dst:  # the target samples a constant here; the file has data or another
                return None
            continue
        if isinstance(src, Field) and dst.bits % src.bits:
            return None  # not exact: 2^src - 1 does not divide 2^dst - 1
        if wanted.setdefault(dst, src) != src:
            return None  # one stored field would have to hold two different things
    # Stored fields nothing samples (alpha under an "RGB1" swizzle) are set to all ones.
    return tuple((wanted.get(f, 1), f) for f in fields.values())


def read_texels(data: bytes, nbytes: int) -> np.ndarray:
    """Little-endian texels of 1..8 bytes as uint64 (3-byte texels too)."""
    if nbytes in (1, 2, 4, 8):
        return np.frombuffer(data, f"<u{nbytes}", len(data) // nbytes).astype(np.uint64)
    raw = np.frombuffer(data, np.uint8, len(data) // nbytes * nbytes).reshape(-1, nbytes)
    out = np.zeros(len(raw), np.uint64)
    for i in range(nbytes):
        out |= raw[:, i].astype(np.uint64) << np.uint64(8 * i)
    return out


def write_texels(texels: np.ndarray, nbytes: int) -> bytes:
    if nbytes in (1, 2, 4, 8):
        return texels.astype(f"<u{nbytes}").tobytes()
    raise ValueError(f"no {nbytes}-byte texel type")


def to_unorm8(values: np.ndarray, bits: int) -> np.ndarray:
    """An n-bit unorm as the nearest 8-bit one: round(v * 255 / (2^n - 1)), what GL gives when
    it samples the texel as a float and writes it to an 8-bit target. No value lies exactly
    half way (2^n - 1 is odd), so the rounding direction never matters."""
    top = (1 << bits) - 1
    if bits == 8:
        return values.astype(np.uint8)
    return ((values * np.uint64(510) + np.uint64(top)) // np.uint64(2 * top)).astype(np.uint8)


def decode(fmt: PixelFormat, data: bytes, w: int, h: int) -> np.ndarray:
    """(h, w, 4) uint8 of what sampling `fmt` returns, as an 8-bit target would store it."""
    layout = sampled(fmt)
    if layout is None:
        raise ValueError(f"{fmt.name} is not a bit-field format")
    texels = read_texels(data[:w * h * fmt.block_bytes], fmt.block_bytes)
    out = np.empty((w * h, 4), np.uint8)
    for ch, src in enumerate(layout):
        if isinstance(src, Field):
            v = (texels >> np.uint64(src.shift)) & np.uint64(src.max)
            out[:, ch] = to_unorm8(v, src.bits)
        else:
            out[:, ch] = 255 * src
    return out.reshape(h, w, 4)
