"""Materials: texture ids from the provider plus constant factors (metal-roughness PBR)."""
from __future__ import annotations

from dataclasses import dataclass

from ..streaming.contract import NO_TEXTURE, TEXTURE_SLOTS

# Bumped by every assignment to any material's field: the scene's object arrays copy
# material rows and recompute them only when this moved (materials change rarely; checking
# one integer a frame is cheaper than watching every material).
_VERSION = [0]


def material_version() -> int:
    return _VERSION[0]


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
    #: UV transform, the two rows of a 2x3 affine matrix ((a, b, c), (d, e, f)):
    #: u' = a u + b v + c, v' = d u + e v + f. glTF's KHR_texture_transform, applied in the
    #: forward vertex shaders (identity: UVs as stored).
    uv_transform: tuple[tuple[float, float, float], tuple[float, float, float]] = (
        (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        _VERSION[0] += 1

    def texture_ids(self) -> tuple[int, ...]:
        """Ids in `TEXTURE_SLOTS` order."""
        return tuple(getattr(self, slot) for slot in TEXTURE_SLOTS)
