"""What storage the driver really chose for a texture, for checks against the ledger.

The ledger counts uncompressed textures at the bits of their internal format (RGBA4 = 2 bytes
a texel). A driver may widen a format it has no storage for (RGBA4 kept as RGBA8); the
per-channel sizes it reports for a level show that, where the byte counts cannot be read.
"""
from __future__ import annotations

from . import constants as K


def storage_component_bits(device, glo: int, target: int = K.TEXTURE_2D,
                           level: int = 0) -> tuple[int, int, int, int]:
    """GL_TEXTURE_{RED,GREEN,BLUE,ALPHA}_SIZE of one level: the bits per channel of the storage
    the driver chose."""
    raw = device._raw
    raw.glBindTexture(target, glo)
    sizes = tuple(raw.tex_level_int(target, level, p) for p in
                  (K.TEXTURE_RED_SIZE, K.TEXTURE_GREEN_SIZE, K.TEXTURE_BLUE_SIZE,
                   K.TEXTURE_ALPHA_SIZE))
    raw.glBindTexture(target, 0)
    device.check_errors(f"component size query on texture {glo}")
    return sizes  # type: ignore[return-value]
