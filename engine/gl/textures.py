"""GPU textures whose storage the engine makes with raw GL (immutable, maybe compressed).

moderngl can neither make immutable storage nor upload compressed blocks, so these are made
with glTexStorage* and filled with gl(Compressed)TexSubImage*. A GpuTexture may hold only a
*range* of a texture's mip chain (the streamer's resident range): storage level i is chain
level `base_level + i`. Programs sample it through `use(unit)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..formats import PixelFormat
from ..memory.sizes import mip_dims


@dataclass(eq=False)
class GpuTexture:
    """A raw-GL texture made by `Device.storage_texture`. Release it through the device."""

    glo: int
    target: int
    fmt: PixelFormat
    chain_width: int  # level 0 of the full chain, even when that level is not stored
    chain_height: int
    base_level: int  # chain level held by storage level 0
    levels: int  # number of stored levels
    layers: int
    faces: int
    nbytes: int
    label: str
    category: str
    device: Any = field(repr=False, default=None)
    released: bool = False

    @property
    def width(self) -> int:
        return mip_dims(self.chain_width, self.chain_height, self.base_level)[0]

    @property
    def height(self) -> int:
        return mip_dims(self.chain_width, self.chain_height, self.base_level)[1]

    @property
    def last_level(self) -> int:
        """The coarsest chain level stored."""
        return self.base_level + self.levels - 1

    def storage_level(self, chain_level: int) -> int:
        if not self.base_level <= chain_level <= self.last_level:
            raise ValueError(f"{self.label}: chain level {chain_level} is not stored "
                             f"(holds {self.base_level}..{self.last_level})")
        return chain_level - self.base_level

    def use(self, unit: int = 0) -> None:
        """Bind for sampling on texture unit `unit` (what a sampler2D uniform points at)."""
        raw = self.device._raw
        raw.glActiveTexture(0x84C0 + unit)
        raw.glBindTexture(self.target, self.glo)

    def release(self) -> None:
        self.device.release(self)
