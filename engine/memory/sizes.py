"""Exact byte sizes of GL allocations, from the format formulas.

Per level: max(1, ceil(w / bw)) * max(1, ceil(h / bh)) * block_bytes, times depth, layers,
faces and samples. A 1x1 level of a block-compressed format still costs one whole block.
These numbers are what the ledger records; tests hold them against the driver's
GL_TEXTURE_COMPRESSED_IMAGE_SIZE with zero bytes of difference.
"""
from __future__ import annotations

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
    whose level 0 is width x height; times layers, faces (6 for cube maps) and samples."""
    if levels < 1 or base_level < 0:
        raise ValueError(f"bad level range base={base_level} levels={levels}")
    total = 0
    for lvl in range(base_level, base_level + levels):
        w, h = mip_dims(width, height, lvl)
        d = max(1, int(depth) >> lvl)
        total += level_bytes(fmt, w, h, d)
    return total * int(layers) * int(faces) * max(1, int(samples))


def renderbuffer_bytes(fmt: PixelFormat | str, width: int, height: int, samples: int = 1) -> int:
    """Bytes of a renderbuffer (or single-level render target) with `samples` samples."""
    return level_bytes(fmt, width, height) * max(1, int(samples))


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000 ** 2,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1000 ** 3, "gib": 1 << 30, "t": 1 << 40,
          "tb": 1000 ** 4, "tib": 1 << 40}


def parse_bytes(text: str | int) -> int:
    """Parse "512MiB", "1.5GB", "4096" into bytes. Raises ValueError on nonsense."""
    if isinstance(text, int):
        return text
    import re
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot parse a byte size from {text!r} (try 512MiB, 2GiB, 80%)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


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
