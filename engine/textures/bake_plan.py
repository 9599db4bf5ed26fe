"""What a bake decides before it encodes: the exact pixel format for a format name, the
channels its PSNR is scored on, how finely work is cut for the encoder pool, and the piece of
rows a task carries. Shared by the whole-image bake and the strip bake, which import it (and
not each other's modules) so neither sits above the other."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..formats import get

FORMAT_CHOICES = ("bc7", "bc1", "bc3", "bc4", "bc5", "rgba8", "uastc", "etc1s")
#: Basis Universal outputs, encoded by basis_universal instead of etcpak (_bake_basis).
BASIS_CHOICES = ("uastc", "etc1s")
# Pixels per encode task: etcpak BC7 manages a few Mpx/s per core, the others hundreds, so
# BC7 work is cut finer to spread it over the pool; the rest is cut coarser to save pickling.
TASK_PIXELS = {"BC7": 1 << 19}
DEFAULT_TASK_PIXELS = 1 << 22


@dataclass(frozen=True)
class Piece:
    level: int
    row0: int
    rgba: np.ndarray
    reference: np.ndarray | None = None  # level 0 only: the input's rows at its precision
    space: str = "bytes"


def choose_format(fmt: str, srgb: bool, rgba: np.ndarray) -> str:
    """The exact pixel format for a CLI format name: bc1 becomes BC1_RGBA only when some texel
    is not opaque (BC1_RGB otherwise, so samplers return alpha 1 exactly); bc4/bc5 hold data,
    never sRGB colour; the others follow `srgb`."""
    fmt = fmt.lower()
    suffix = "_SRGB" if srgb else ""
    if fmt == "bc1":
        has_alpha = bool((rgba[..., 3] < 255).any())
        return ("BC1_RGBA" if has_alpha else "BC1_RGB") + suffix
    if fmt in ("bc3", "bc7", "rgba8"):
        return fmt.upper() + suffix
    if fmt in ("bc4", "bc5"):
        return fmt.upper()
    raise ValueError(f"unknown bake format {fmt!r}; choose from {', '.join(FORMAT_CHOICES)}")


def psnr_channels(fmt_name: str, rgba: np.ndarray) -> tuple[int, ...]:
    """Channels the format stores: R for BC4, RG for BC5, RGB when alpha carries nothing."""
    family = get(fmt_name).family
    if family == "BC4":
        return (0,)
    if family == "BC5":
        return (0, 1)
    if get(fmt_name).components == 3 or not (rgba[..., 3] < 255).any():
        return (0, 1, 2)
    return (0, 1, 2, 3)
