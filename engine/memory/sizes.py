"""Exact byte sizes of GL allocations, from the format formulas.

Per level: max(1, ceil(w / bw)) * max(1, ceil(h / bh)) * block_bytes, times depth, layers,
faces and samples. A 1x1 level of a block-compressed format still costs one whole block.
These numbers are what the ledger records; tests hold them against the driver's
GL_TEXTURE_COMPRESSED_IMAGE_SIZE with zero bytes of difference.
"""
from __future__ import annotations

import re
from functools import lru_cache

from ..formats import PixelFormat, get


def _fmt(fmt: PixelFormat | str) -> PixelFormat:
    return get(fmt) if isinstance(fmt, str) else fmt


def mip_count(width: int, height: int, depth: int = 1) -> int:
    """Number of levels of a full chain down to 1x1."""
    return max(int(width), int(height), int(depth), 1).bit_length()


def mip_dims(width: int, height: int, level: int) -> tuple[int, int]:
    """Dimensions of `level` of a chain whose base is width x height."""
    return max(1, int(width) >> level), max(1, int(height) >> level)


def level_bytes(fmt: PixelFormat | str, width: int, height: int, depth: int = 1) -> int:
    """Bytes of one image (one level of one layer/face) of the given dimensions."""
    f = _fmt(fmt)
    if width < 1 or height < 1 or depth < 1:
        raise ValueError(f"dimensions must be positive, got {width}x{height}x{depth}")
    bx = -(-int(width) // f.block_w)
    by = -(-int(height) // f.block_h)
    return bx * by * int(depth) * f.block_bytes


def texture_bytes(fmt: PixelFormat | str, width: int, height: int, *, levels: int = 1,
                  base_level: int = 0, layers: int = 1, faces: int = 1, samples: int = 1,
                  depth: int = 1) -> int:
    """Bytes of a texture holding `levels` levels starting at `base_level` of a chain
    whose level 0 is width x height; times layers, faces (6 for cube maps) and samples.
    Memoised: the streamer asks it for every base of every registered texture, and a
    collection's textures share a few sizes."""
    if levels < 1 or base_level < 0:
        raise ValueError(f"bad level range base={base_level} levels={levels}")
    return _texture_bytes(_fmt(fmt), int(width), int(height), int(levels), int(base_level),
                          int(layers), int(faces), int(samples), int(depth))


@lru_cache(maxsize=16384)
def _texture_bytes(fmt: PixelFormat, width: int, height: int, levels: int, base_level: int,
                   layers: int, faces: int, samples: int, depth: int) -> int:
    total = 0
    for lvl in range(base_level, base_level + levels):
        w, h = mip_dims(width, height, lvl)
        d = max(1, int(depth) >> lvl)
        total += level_bytes(fmt, w, h, d)
    return total * int(layers) * int(faces) * max(1, int(samples))


def renderbuffer_bytes(fmt: PixelFormat | str, width: int, height: int, samples: int = 1) -> int:
    """Bytes of a renderbuffer (or single-level render target) with `samples` samples."""
    return level_bytes(fmt, width, height) * max(1, int(samples))


#: The one byte-size rule (CLI, API, pytest plugin, config). IEC units are binary, SI units
#: decimal, as their standards say; the unit's case does not matter ("mib" is MiB, "gb" is
#: GB). A bare letter (512M) is refused: half the world reads it as MiB, the other half as
#: MB, and the difference is 5% of a budget. A bare number is refused too: "512" has been
#: read as bytes and as MiB by different tools. An int passed through the API is bytes.
BYTE_UNITS: dict[str, int] = {
    "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4,
}
#: What a size looks like, for messages.
SIZE_EXAMPLES = "512MiB, 2GiB (binary) or 500MB, 2GB (decimal)"
_SIZE_RE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_bytes(text: str | int) -> int:
    """Bytes from "512MiB", "1.5GB", "4096B" (an int is bytes already); ValueError naming
    what is accepted on anything else (see BYTE_UNITS for the rule)."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a byte size; accepted: {SIZE_EXAMPLES}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a byte size must not be negative, got {text}")
        return text
    raw = str(text)
    m = _SIZE_RE.fullmatch(raw)
    if not m:
        raise ValueError(f"cannot parse a byte size from {raw!r}; accepted: {SIZE_EXAMPLES}")
    number, unit = m.group(1), m.group(2).lower()
    if not unit:
        raise ValueError(f"{raw!r} needs a unit: {number}MiB, {number}MB or {number}B; "
                         f"accepted: {SIZE_EXAMPLES}")
    if unit in ("k", "m", "g", "t"):
        u = unit.upper()
        raise ValueError(f"{raw!r} is ambiguous: write {number}{u}iB (binary, "
                         f"{int(float(number) * BYTE_UNITS[unit + 'ib'])} bytes) or "
                         f"{number}{u}B (decimal, {int(float(number) * BYTE_UNITS[unit + 'b'])} "
                         f"bytes)")
    if unit not in BYTE_UNITS:
        raise ValueError(f"{raw!r}: unknown unit {m.group(2)!r}; accepted: {SIZE_EXAMPLES}")
    return int(float(number) * BYTE_UNITS[unit])


def format_exact(n: int) -> str:
    """A size with its exact byte count beside the rounded one ("15.3 MiB (16,000,000
    bytes)"): two different sizes never print alike."""
    return f"{format_bytes(n)} ({int(n):,} bytes)"


def format_bytes(n: float | None) -> str:
    """Human-readable binary size: 1.5 GiB, 512.0 MiB."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
