"""Materials: texture ids from the provider plus constant factors (metal-roughness PBR)."""
from __future__ import annotations

from dataclasses import dataclass

from .frame import NO_TEXTURE, TEXTURE_SLOTS


@dataclass
class Material:
    """Textures are provider ids (NO_TEXTURE = use the factor alone). Factors multiply the
    texture values, as in glTF, so a texture-less material is just its factors."""

    name: str = "material"
    albedo: int = NO_TEXTURE  # sRGB colour texture
    normal: int = NO_TEXTURE  # tangent-space normal map (linear)
    roughness_metal: int = NO_TEXTURE  # G = roughness, B = metalness (glTF packing)
    albedo_factor: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    roughness: float = 0.6
    metalness: float = 0.0
    emissive: tuple[float, float, float] = (0.0, 0.0, 0.0)
    normal_scale: float = 1.0

    def texture_ids(self) -> tuple[int, ...]:
        """Ids in `TEXTURE_SLOTS` order."""
        return tuple(getattr(self, slot) for slot in TEXTURE_SLOTS)
