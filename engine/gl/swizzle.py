"""Texture swizzles: sampling a small storage format as the layout a file meant.

GL has no luminance, luminance-alpha, alpha-only or "RGB, alpha unused" sized formats in the
core profile, so those layouts are stored in R8 / RG8 / R16 / RGBA8 ... and the sampler is
told how to spread the stored channels (`PixelFormat.swizzle`, e.g. "RRR1", "RRRG", "000R",
"RGB1"). The swizzle is texture state, so it must be set on every texture made in such a
format, by whoever makes it (the device's texture factories).
"""
from __future__ import annotations

import ctypes as C

from ..errors import ContextError
from ..formats import PixelFormat
from . import constants as K

_SOURCE = {"R": K.RED, "G": K.GREEN, "B": K.BLUE, "A": K.ALPHA, "0": K.ZERO, "1": K.ONE}
_PARAMS = (K.TEXTURE_SWIZZLE_R, K.TEXTURE_SWIZZLE_G, K.TEXTURE_SWIZZLE_B, K.TEXTURE_SWIZZLE_A)
IDENTITY = "RGBA"


def swizzle_enums(swizzle: str) -> tuple[int, int, int, int]:
    """GL_TEXTURE_SWIZZLE_{R,G,B,A} values of a swizzle string of four of "RGBA01"."""
    if len(swizzle) != 4 or any(c not in _SOURCE for c in swizzle):
        raise ValueError(f"swizzle {swizzle!r}: want four characters from RGBA01")
    return tuple(_SOURCE[c] for c in swizzle)  # type: ignore[return-value]


def format_swizzle(fmt: PixelFormat) -> str | None:
    """The swizzle a texture of `fmt` needs, or None when sampling it plainly is right."""
    return fmt.swizzle if fmt.swizzle and fmt.swizzle != IDENTITY else None


def set_bound_swizzle(raw, target: int, swizzle: str) -> None:
    """Set the swizzle of the texture bound to `target` (inside a factory's guarded make(),
    whose error check then covers it). No error check, no binding change."""
    for pname, value in zip(_PARAMS, swizzle_enums(swizzle)):
        raw.glTexParameteri(target, pname, value)


def apply_swizzle(device, glo: int, swizzle: str, target: int = K.TEXTURE_2D) -> None:
    """Set GL_TEXTURE_SWIZZLE_R/G/B/A of texture `glo` (bound to `target`) to `swizzle`.

    Idempotent; leaves no texture bound on `target`. Raises GLError if GL rejects it."""
    swizzle_enums(swizzle)  # a bad string fails before any GL call
    if not device.on_render_thread:
        raise ContextError("apply_swizzle must run on the render thread (GL is single-threaded)")
    raw = device._raw
    raw.glBindTexture(target, glo)
    set_bound_swizzle(raw, target, swizzle)
    raw.glBindTexture(target, 0)
    device.check_errors(f"texture swizzle {swizzle} on texture {glo}")


def read_swizzle(device, glo: int, target: int = K.TEXTURE_2D) -> str:
    """The texture's current swizzle as a string (for tests and diagnostics)."""
    raw = device._raw
    names = {v: k for k, v in _SOURCE.items()}
    out = []
    raw.glBindTexture(target, glo)
    for pname in _PARAMS:
        v = C.c_int(0)
        raw.glGetTexParameteriv(target, pname, C.byref(v))
        out.append(names.get(v.value, "?"))
    raw.glBindTexture(target, 0)
    device.check_errors(f"texture swizzle query on texture {glo}")
    return "".join(out)
